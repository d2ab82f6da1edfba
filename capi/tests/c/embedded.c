/* The core as a C runtime or driver embeds it (rmx_ep_*), over librmx:
 * the suite of ep_suite.h, which rmx.ko's test module runs in the
 * kernel too. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define SUITE_ALLOC(n) suite_alloc(n)
#define SUITE_FREE(p) free(p)
#define SUITE_SAY(...) say(__VA_ARGS__)
#define SUITE_FAIL(...) fail(__VA_ARGS__)
#define SUITE_WHY() rmx_last_error()
#define SUITE_YIELD() ((void)0)
#include "ep_suite.h"

int main(void) {
    struct port *mem = calloc(2, sizeof(struct port));
    if (!mem || ep_suite(mem) != 0) return 1;
    free(mem);
    return 0;
}
