/* The core as a C runtime or driver embeds it (rmx_ep_*), over librmx:
 * the suite of ep_suite.h, which rmx.ko's test module runs in the
 * kernel too. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rmx.h"

static void *suite_alloc(size_t n) {
    return aligned_alloc(RMX_EP_ALIGN, (n + RMX_EP_ALIGN - 1) / RMX_EP_ALIGN * RMX_EP_ALIGN);
}

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

/* RMX_EP_ALIGN bytes, aligned as an endpoint, with a guard page right
 * after them: what the suite forges endpoints, tasks and windows from, so
 * that a check reading past an object's first bytes faults. */
static void *short_bytes(void) {
    static uint8_t *at;
    if (!at) {
        long page = sysconf(_SC_PAGESIZE);
        uint8_t *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m + page, (size_t)page, PROT_NONE) != 0) abort();
        at = m + page - RMX_EP_ALIGN;
    }
    memset(at, 0xab, RMX_EP_ALIGN);
    return at;
}

#define SUITE_ALLOC(n) suite_alloc(n)
#define SUITE_FREE(p) free(p)
#define SUITE_SAY(...) say(__VA_ARGS__)
#define SUITE_FAIL(...) fail(__VA_ARGS__)
#define SUITE_WHY() rmx_last_error()
#define SUITE_YIELD() ((void)0)
#define SUITE_SHORT() short_bytes()
#include "ep_suite.h"

int main(void) {
    struct port *mem = calloc(2, sizeof(struct port));
    if (!mem || ep_suite(mem) != 0) return 1;
    free(mem);
    return 0;
}
