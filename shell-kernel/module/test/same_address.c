/*
 * Memory freed and reallocated at the same address between two sends on
 * a declared region, through brk/sbrk and malloc/free: the module must
 * send the new pages' contents, byte for byte (the stale-page bug of
 * libfabric #5662 and ucx #11467). A C program, so that nothing but the
 * test moves the heap's break between the steps. Exit 0 when every check
 * passes; run in the test VM with rmx.ko loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "rmx_uapi.h"

#define PAGE 4096
#define BIG (512 * 1024) /* within the pinned-page limit the test loads the module with */

static int fd;
static int failures;
/* Static, so that no allocation moves the break between steps. */
static unsigned char got[BIG];

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 7 + seed * 131 + (i >> 12));
}

static int declare(void *a, size_t len, uint32_t *desc)
{
	struct rmx_segment s = { (uintptr_t)a, len };
	struct rmx_declare d = { 1, 0, (uintptr_t)&s };

	if (ioctl(fd, RMX_DECLARE, &d))
		return -errno;
	*desc = d.desc;
	return 0;
}

/* Sends `len` bytes of the region (RMX_READ) and counts the bytes that
 * differ from what the process holds at `mem`; -errno on failure. */
static long stale(uint32_t desc, const unsigned char *mem, size_t len)
{
	struct rmx_copy c = { desc, 0, 0, len, (uintptr_t)got };
	long n = 0;

	if (ioctl(fd, RMX_READ, &c))
		return -errno;
	for (size_t i = 0; i < len; i++)
		n += got[i] != mem[i];
	return n;
}

static void expect(const char *what, long r)
{
	if (r != 0) {
		failures++;
		printf("FAIL %s: %ld\n", what, r);
	} else {
		printf("ok %s\n", what);
	}
}

int main(void)
{
	uint32_t desc;
	long r[8];
	unsigned char *base, *p, *q;

	fd = open("/dev/rmx", O_RDWR);
	if (fd < 0) {
		perror("/dev/rmx");
		return 2;
	}

	/* brk: grow, send, give back, grow again at the same address. */
	base = sbrk(0);
	if (sbrk(8 * PAGE) == (void *)-1)
		return 3;
	fill(base, 8 * PAGE, 1);
	r[0] = declare(base, 8 * PAGE, &desc);
	r[1] = r[0] ? r[0] : stale(desc, base, 8 * PAGE);
	sbrk(-8 * PAGE);
	if (sbrk(8 * PAGE) != base)
		return 4;
	fill(base, 8 * PAGE, 2);
	r[2] = r[0] ? r[0] : stale(desc, base, 8 * PAGE);
	sbrk(-8 * PAGE);
	expect("brk: declared", r[0]);
	expect("brk: first send", r[1]);
	expect("brk: after sbrk down and up, the new bytes", r[2]);
	ioctl(fd, RMX_UNDECLARE, &desc);

	/* malloc/free of a large block (mapped by malloc; a fixed threshold
	 * keeps the next one mapped too). */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	p = malloc(BIG);
	fill(p, BIG, 3);
	r[3] = declare(p, BIG, &desc);
	r[4] = r[3] ? r[3] : stale(desc, p, BIG);
	free(p);
	q = malloc(BIG);
	if (q != p) {
		printf("FAIL malloc: the block came back at %p, not %p\n", (void *)q, (void *)p);
		return 5;
	}
	fill(q, BIG, 4);
	r[5] = r[3] ? r[3] : stale(desc, q, BIG);
	free(q);
	expect("malloc: declared", r[3]);
	expect("malloc: first send", r[4]);
	expect("malloc: after free and malloc, the new bytes", r[5]);
	ioctl(fd, RMX_UNDECLARE, &desc);

	/* A small block in the heap, freed and taken again: same pages, new bytes. */
	p = malloc(64 * 1024);
	fill(p, 64 * 1024, 5);
	r[6] = declare(p, 64 * 1024, &desc);
	r[7] = r[6] ? r[6] : stale(desc, p, 64 * 1024);
	free(p);
	q = malloc(64 * 1024);
	fill(q, 64 * 1024, 6);
	if (q == p)
		expect("heap: after free and malloc, the new bytes", stale(desc, q, 64 * 1024));
	free(q);
	expect("heap: declared", r[6]);
	expect("heap: first send", r[7]);

	close(fd);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
