/* What the benchmark programs share: OSU-style sizes, timing, and a
 * check that every received byte is the one sent. */
#ifndef RMX_MPI_BENCH_H
#define RMX_MPI_BENCH_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (1 << 20)

/* Stops the job, saying where, if an MPI call failed or a check did. */
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "check failed at %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            MPI_Abort(MPI_COMM_WORLD, 3);                                   \
        }                                                                   \
    } while (0)

#define MPI(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

/* The byte at `i` of a message of `size` bytes from `rank` in round `r`. */
static inline char pattern(int rank, int size, int r, int i) {
    return (char)(rank * 31 + size * 7 + r * 13 + i);
}

static inline void fill(char *buf, int rank, int size, int r) {
    for (int i = 0; i < size; i++) buf[i] = pattern(rank, size, r, i);
}

static inline int same(const char *buf, int rank, int size, int r) {
    for (int i = 0; i < size; i++)
        if (buf[i] != pattern(rank, size, r, i)) return 0;
    return 1;
}

/* Iterations for a size, as OSU's programs choose them: fewer when large. */
static inline int iters(int size, int small, int large) {
    return size > 8192 ? large : small;
}

/* The largest size to measure: `-m N` as OSU's programs take it, else `max`. */
static inline int max_size(int argc, char **argv, int max) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-m") == 0) {
            int m = atoi(argv[i + 1]);
            return m > 0 && m < max ? m : max;
        }
    return max;
}

/* `n` iterations scaled by the environment's BENCH_SCALE (per cent). */
static inline int scaled(int n) {
    const char *s = getenv("BENCH_SCALE");
    if (!s) return n;
    int k = atoi(s);
    return k > 0 ? (n * k / 100 > 0 ? n * k / 100 : 1) : n;
}

#endif
