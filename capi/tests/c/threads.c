/* Ranks as threads of this process (rmx_run): every protocol's sizes
 * delivered byte-exact, wildcards, truncation, cancel, collectives, and
 * refused arguments answered with codes, never crashes; a rank that
 * sleeps on its descriptor (rmx_rank_efd, rmx_rank_arm) until a
 * message comes. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "check.h"

static const size_t SIZES[] = {0, 1, 8, 255, 256, 257, 4096, 8191, 8192, 8193,
                               65536, 100000, 1 << 20, 4 << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static uint8_t byte_of(size_t i, size_t size, int from) {
    return (uint8_t)(i * 131 + size * 7 + (size_t)from * 29 + 1);
}

/* Every size from each rank to the next, received by the next. */
static void ring(rmx_rank_t *r) {
    int me = rmx_rank_me(r), n = rmx_rank_size(r);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t size = SIZES[k];
        uint8_t *out = malloc(size + 1), *in = malloc(size + 1);
        CHECK(out && in);
        for (size_t i = 0; i < size; i++) out[i] = byte_of(i, size, me);
        memset(in, 0xee, size + 1);
        rmx_request_t rq = RMX_REQUEST_NULL, sq = RMX_REQUEST_NULL;
        EXPECT(rmx_irecv(r, prev, (int64_t)k, in, size, &rq), 0);
        EXPECT(rmx_isend(r, next, (uint32_t)k, out, size, &sq), 0);
        CHECK(rq != RMX_REQUEST_NULL && sq != RMX_REQUEST_NULL);
        rmx_status_t st;
        EXPECT(rmx_wait(r, &rq, &st), 0);
        CHECK(rq == RMX_REQUEST_NULL);
        CHECK(st.source == prev && st.tag == k && st.len == size && st.error == 0);
        for (size_t i = 0; i < size; i++) {
            if (in[i] != byte_of(i, size, prev)) {
                fprintf(stderr, "rank %d: size %zu: byte %zu is %u\n", me, size, i, in[i]);
                exit(1);
            }
        }
        CHECK(in[size] == 0xee);
        /* Tested until it ends: 1 once, then the handle is null. */
        int t;
        while ((t = rmx_test(r, &sq, &st)) == 0) {
        }
        EXPECT(t, 1);
        CHECK(sq == RMX_REQUEST_NULL && st.len == size);
        free(out);
        free(in);
    }
}

/* Any source and any tag; a receive shorter than its message. */
static void wildcards_and_truncation(rmx_rank_t *r) {
    int me = rmx_rank_me(r), n = rmx_rank_size(r);
    rmx_status_t st;
    if (me != 0) {
        uint32_t v = 1000u + (uint32_t)me;
        rmx_request_t q;
        EXPECT(rmx_isend(r, 0, 77, &v, sizeof v, &q), 0);
        EXPECT(rmx_wait(r, &q, NULL), 0);
    } else {
        int seen = 0;
        for (int k = 1; k < n; k++) {
            uint32_t v = 0;
            rmx_request_t q;
            EXPECT(rmx_irecv(r, RMX_ANY_SOURCE, RMX_ANY_TAG, &v, sizeof v, &q), 0);
            EXPECT(rmx_wait(r, &q, &st), 0);
            CHECK(st.tag == 77 && v == 1000u + (uint32_t)st.source);
            seen |= 1 << st.source;
        }
        CHECK(seen == ((1 << n) - 2));
    }
    EXPECT(rmx_barrier(r), 0);
    /* Eight bytes into four: the first four, and the fault. */
    if (me == 1) {
        uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        rmx_request_t q;
        EXPECT(rmx_isend(r, 0, 5, v, 8, &q), 0);
        EXPECT(rmx_wait(r, &q, NULL), 0);
    } else if (me == 0) {
        uint8_t v[4] = {0};
        rmx_request_t q;
        EXPECT(rmx_irecv(r, 1, 5, v, 4, &q), 0);
        EXPECT(rmx_wait(r, &q, &st), RMX_ERR_TRUNCATED);
        CHECK(st.error == RMX_ERR_TRUNCATED && q == RMX_REQUEST_NULL);
        CHECK(v[0] == 1 && v[3] == 4);
    }
    /* A receive nothing matches, cancelled: its buffer is ours again. */
    uint8_t b[16];
    rmx_request_t q;
    EXPECT(rmx_irecv(r, RMX_ANY_SOURCE, 999, b, sizeof b, &q), 0);
    EXPECT(rmx_cancel(r, &q, &st), 0);
    CHECK(q == RMX_REQUEST_NULL && st.error == RMX_ERR_CANCELLED);
    /* The ended handle is refused, not reused. */
    rmx_request_t stale;
    EXPECT(rmx_irecv(r, RMX_ANY_SOURCE, 998, b, sizeof b, &stale), 0);
    rmx_request_t copy = stale;
    EXPECT(rmx_cancel(r, &stale, NULL), 0);
    EXPECT(rmx_test(r, &copy, NULL), RMX_ERR_REQUEST);
    CHECK(copy != RMX_REQUEST_NULL);
    EXPECT(rmx_wait(r, &(rmx_request_t){12345}, NULL), RMX_ERR_REQUEST);
    EXPECT(rmx_barrier(r), 0);
}

/* A probe finds what the next receive takes, with its whole length,
 * and leaves it. */
static void probes(rmx_rank_t *r) {
    int me = rmx_rank_me(r);
    static const size_t lens[] = {10, 9000, 0};
    rmx_status_t st;
    if (me == 1) {
        for (int k = 0; k < 3; k++) {
            uint8_t *b = calloc(lens[k] + 1, 1);
            rmx_request_t q;
            EXPECT(rmx_isend(r, 0, 60 + (uint32_t)k, b, lens[k], &q), 0);
            EXPECT(rmx_wait(r, &q, NULL), 0);
            free(b);
        }
    } else if (me == 0) {
        EXPECT(rmx_probe(r, RMX_ANY_SOURCE, 61, &st), 0);
        CHECK(st.source == 1 && st.tag == 61 && st.len == 9000 && st.error == 0);
        EXPECT(rmx_iprobe(r, 1, 999, &st), 0);
        EXPECT(rmx_iprobe(r, 1, RMX_ANY_TAG, &st), 1);
        CHECK(st.tag == 60 && st.len == 10);
        for (int k = 0; k < 3; k++) {
            uint8_t b[9000];
            rmx_request_t q;
            EXPECT(rmx_irecv(r, 1, 60 + k, b, sizeof b, &q), 0);
            EXPECT(rmx_wait(r, &q, &st), 0);
            CHECK(st.len == lens[k]);
        }
        EXPECT(rmx_iprobe(r, RMX_ANY_SOURCE, RMX_ANY_TAG, NULL), 0);
        EXPECT(rmx_iprobe(r, 7, 0, NULL), RMX_ERR_ARG);
        EXPECT(rmx_probe(r, 0, -9, NULL), RMX_ERR_ARG);
    }
    EXPECT(rmx_barrier(r), 0);
}

static void collectives(rmx_rank_t *r) {
    int me = rmx_rank_me(r), n = rmx_rank_size(r);
    int32_t v[3] = {me, -me, 7};
    EXPECT(rmx_allreduce(r, v, 3, RMX_INT32, RMX_SUM), 0);
    CHECK(v[0] == n * (n - 1) / 2 && v[1] == -v[0] && v[2] == 7 * n);
    uint64_t m = (uint64_t)me * 10;
    EXPECT(rmx_allreduce(r, &m, 1, RMX_UINT64, RMX_MAX), 0);
    CHECK(m == (uint64_t)(n - 1) * 10);
    int8_t c[5] = {1, 1, 1, 1, (int8_t)me};
    rmx_request_t q, b;
    EXPECT(rmx_iallreduce(r, c, 5, RMX_INT8, RMX_SUM, &q), 0);
    EXPECT(rmx_ibarrier(r, &b), 0);
    EXPECT(rmx_wait(r, &q, NULL), 0);
    EXPECT(rmx_wait(r, &b, NULL), 0);
    CHECK(c[0] == n && c[4] == n * (n - 1) / 2);
    /* Rooted collectives from every root. */
    for (int root = 0; root < n; root++) {
        uint8_t b[3000];
        memset(b, me == root ? 0x40 + root : 0, sizeof b);
        EXPECT(rmx_bcast(r, b, sizeof b, root), 0);
        CHECK(b[0] == 0x40 + root && b[2999] == 0x40 + root);
        int32_t in[2] = {me + 1, -1}, out[2] = {0, 0};
        EXPECT(rmx_reduce(r, in, me == root ? out : NULL, 2, RMX_INT32, RMX_SUM, root), 0);
        CHECK(in[0] == me + 1 && in[1] == -1);
        if (me == root) CHECK(out[0] == n * (n + 1) / 2 && out[1] == -n);
        uint16_t mine[2] = {(uint16_t)(me * 100 + root), (uint16_t)root}, all[2 * 8];
        memset(all, 0, sizeof all);
        CHECK(n <= 8);
        EXPECT(rmx_gather(r, mine, sizeof mine, me == root ? all : NULL, root), 0);
        if (me == root)
            for (int k = 0; k < n; k++) CHECK(all[2 * k] == k * 100 + root && all[2 * k + 1] == root);
        uint16_t got[2] = {0, 0};
        for (int k = 0; k < 2 * n; k++) all[k] = (uint16_t)(k * 3 + root);
        EXPECT(rmx_scatter(r, me == root ? all : NULL, sizeof got, got, root), 0);
        CHECK(got[0] == 2 * me * 3 + root && got[1] == (2 * me + 1) * 3 + root);
    }
    uint32_t one = 7u * (uint32_t)me, every[8];
    EXPECT(rmx_allgather(r, &one, sizeof one, every), 0);
    for (int k = 0; k < n; k++) CHECK(every[k] == 7u * (uint32_t)k);
    uint16_t to[8], from[8];
    for (int k = 0; k < n; k++) to[k] = (uint16_t)(me * 16 + k);
    EXPECT(rmx_alltoall(r, to, sizeof to[0], from), 0);
    for (int k = 0; k < n; k++) CHECK(from[k] == k * 16 + me);
    int64_t parts[8 * 2], mine2[2] = {0, 0};
    for (int k = 0; k < 2 * n; k++) parts[k] = (int64_t)(me + 1) * (k + 1);
    EXPECT(rmx_reduce_scatter(r, parts, mine2, 2, RMX_INT64, RMX_SUM), 0);
    CHECK(mine2[0] == (int64_t)(n * (n + 1) / 2) * (2 * me + 1));
    CHECK(mine2[1] == (int64_t)(n * (n + 1) / 2) * (2 * me + 2));
    EXPECT(rmx_bcast(r, &one, sizeof one, n), RMX_ERR_ARG);
    EXPECT(rmx_bcast(r, &one, sizeof one, -1), RMX_ERR_ARG);
}

/* Every started form at once, from root 1 (0 with one rank), waited for
 * in the other order but one tested to its end; each gives what its
 * blocking form gives, and an out buffer a non-root passes is untouched. */
static void started_collectives(rmx_rank_t *r) {
    int me = rmx_rank_me(r), n = rmx_rank_size(r), root = n > 1;
    rmx_request_t q[7];
    uint8_t b[20000];
    memset(b, me == root ? 0x33 : 0, sizeof b);
    EXPECT(rmx_ibcast(r, b, sizeof b, root, &q[0]), 0);
    int32_t in[2] = {me + 1, 5}, red[2] = {-1, -1};
    EXPECT(rmx_ireduce(r, in, red, 2, RMX_INT32, RMX_SUM, root, &q[1]), 0);
    uint16_t mine = (uint16_t)(me * 9), all[8];
    memset(all, 0xff, sizeof all);
    CHECK(n <= 8);
    EXPECT(rmx_igather(r, &mine, sizeof mine, all, root, &q[2]), 0);
    uint16_t src[8], got = 0;
    for (int k = 0; k < n; k++) src[k] = (uint16_t)(k + 500);
    EXPECT(rmx_iscatter(r, me == root ? src : NULL, sizeof got, &got, root, &q[3]), 0);
    uint32_t one = 3u * (uint32_t)me + 1, every[8];
    EXPECT(rmx_iallgather(r, &one, sizeof one, every, &q[4]), 0);
    uint16_t to[8], from[8];
    for (int k = 0; k < n; k++) to[k] = (uint16_t)(me * 16 + k);
    EXPECT(rmx_ialltoall(r, to, sizeof to[0], from, &q[5]), 0);
    int64_t parts[8], part = 0;
    for (int k = 0; k < n; k++) parts[k] = (int64_t)(me + 1) * (k + 1);
    EXPECT(rmx_ireduce_scatter(r, parts, &part, 1, RMX_INT64, RMX_SUM, &q[6]), 0);
    int t;
    while ((t = rmx_test(r, &q[6], NULL)) == 0) {
    }
    EXPECT(t, 1);
    CHECK(q[6] == RMX_REQUEST_NULL);
    for (int k = 5; k >= 0; k--) EXPECT(rmx_wait(r, &q[k], NULL), 0);
    CHECK(b[0] == 0x33 && b[sizeof b - 1] == 0x33);
    if (me == root) {
        CHECK(red[0] == n * (n + 1) / 2 && red[1] == 5 * n);
        for (int k = 0; k < n; k++) CHECK(all[k] == k * 9);
    } else {
        CHECK(red[0] == -1 && red[1] == -1);
        CHECK(all[0] == 0xffff);
    }
    CHECK(got == me + 500);
    for (int k = 0; k < n; k++) CHECK(every[k] == 3u * (uint32_t)k + 1);
    for (int k = 0; k < n; k++) CHECK(from[k] == k * 16 + me);
    CHECK(part == (int64_t)(n * (n + 1) / 2) * (me + 1));
    rmx_request_t bad;
    EXPECT(rmx_ibcast(r, b, sizeof b, n, &bad), RMX_ERR_ARG);
    EXPECT(rmx_igather(r, &mine, sizeof mine, all, -1, &bad), RMX_ERR_ARG);
    EXPECT(rmx_ialltoall(r, to, sizeof to[0], from, NULL), RMX_ERR_ARG);
    EXPECT(rmx_barrier(r), 0);
}

/* Rank 1 sleeps in poll(2) on its descriptor, armed, until rank 0's
 * message (sent 20 ms later) turns it readable. */
static void sleeps(rmx_rank_t *r) {
    int me = rmx_rank_me(r);
    int fd = -1, fd2 = -1, t = 0;
    EXPECT(rmx_rank_efd(r, &fd), 0);
    EXPECT(rmx_rank_efd(r, &fd2), 0);
    CHECK(fd >= 0 && fd == fd2);
    if (me == 0) {
        EXPECT(rmx_barrier(r), 0);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        uint32_t v = 0xfeed;
        rmx_request_t q;
        EXPECT(rmx_isend(r, 1, 31, &v, sizeof v, &q), 0);
        EXPECT(rmx_wait(r, &q, NULL), 0);
    } else if (me == 1) {
        uint32_t v = 0;
        rmx_request_t q;
        EXPECT(rmx_irecv(r, 0, 31, &v, sizeof v, &q), 0);
        EXPECT(rmx_barrier(r), 0);
        int woke = 0, done;
        while ((done = rmx_test(r, &q, NULL)) == 0) {
            int a = rmx_rank_arm(r, &t);
            if (a == RMX_ERR_BUSY) continue;
            EXPECT(a, 0);
            CHECK(t >= -1);
            struct pollfd p = {fd, POLLIN, 0};
            woke |= poll(&p, 1, t < 0 || t > 10000 ? 10000 : t) == 1;
        }
        EXPECT(done, 1);
        CHECK(v == 0xfeed && woke);
    } else {
        EXPECT(rmx_barrier(r), 0);
    }
    EXPECT(rmx_rank_efd(r, NULL), RMX_ERR_ARG);
    EXPECT(rmx_rank_arm(NULL, &t), RMX_ERR_ARG);
    EXPECT(rmx_rank_arm(r, NULL), RMX_ERR_ARG);
    EXPECT(rmx_barrier(r), 0);
}

static void refusals(rmx_rank_t *r) {
    int n = rmx_rank_size(r);
    uint8_t b[4];
    rmx_request_t q = RMX_REQUEST_NULL;
    EXPECT(rmx_isend(NULL, 0, 0, b, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_isend(r, n, 0, b, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_isend(r, -5, 0, b, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_isend(r, 0, 0, NULL, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_isend(r, 0, 0, b, 4, NULL), RMX_ERR_ARG);
    EXPECT(rmx_isend(r, 0, 0, b, SIZE_MAX, &q), RMX_ERR_ARG);
    EXPECT(rmx_irecv(r, 0, (int64_t)1 << 40, b, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_irecv(r, 0, -7, b, 4, &q), RMX_ERR_ARG);
    EXPECT(rmx_irecv(r, -2, 0, b, 4, &q), RMX_ERR_ARG);
    CHECK(q == RMX_REQUEST_NULL);
    CHECK(rmx_last_error()[0] != 0);
    EXPECT(rmx_allreduce(r, b, 1, 99, RMX_SUM), RMX_ERR_ARG);
    EXPECT(rmx_allreduce(r, b, 1, RMX_INT8, -1), RMX_ERR_ARG);
    EXPECT(rmx_allreduce(r, NULL, 3, RMX_INT8, RMX_SUM), RMX_ERR_ARG);
    EXPECT(rmx_allreduce(r, b, SIZE_MAX / 2, RMX_INT32, RMX_SUM), RMX_ERR_ARG);
    EXPECT(rmx_rank_me(NULL), RMX_ERR_ARG);
    EXPECT(rmx_test(r, NULL, NULL), RMX_ERR_ARG);
    /* A null request is ended already. */
    q = RMX_REQUEST_NULL;
    EXPECT(rmx_test(r, &q, NULL), 1);
    EXPECT(rmx_wait(r, &q, NULL), 0);
    /* A rank from rmx_run is not finalized by the caller. */
    EXPECT(rmx_finalize(r), RMX_ERR_ARG);
}

/* A receive left out when main returns is ended by rmx_run. */
static int leaves_a_receive(rmx_rank_t *r, void *arg) {
    static uint8_t b[64];
    rmx_request_t q;
    (void)arg;
    return rmx_irecv(r, RMX_ANY_SOURCE, 1, b, sizeof b, &q);
}

static int rank_main(rmx_rank_t *r, void *arg) {
    CHECK(*(int *)arg == 42);
    ring(r);
    /* Again with a progress thread moving the rank between calls. */
    EXPECT(rmx_set_progress_thread(r, 1), 0);
    ring(r);
    EXPECT(rmx_set_progress_thread(r, 0), 0);
    EXPECT(rmx_set_progress_thread(NULL, 1), RMX_ERR_ARG);
    wildcards_and_truncation(r);
    probes(r);
    collectives(r);
    started_collectives(r);
    sleeps(r);
    refusals(r);
    EXPECT(rmx_barrier(r), 0);
    return rmx_rank_me(r) == 2 ? 5 : 0;
}

int main(void) {
    int arg = 42;
    CHECK(rmx_api_version() == RMX_API_VERSION);
    EXPECT(rmx_run_version(RMX_API_VERSION + 1, 2, rank_main, &arg), RMX_ERR_VERSION);
    EXPECT(rmx_run(2, NULL, &arg), RMX_ERR_ARG);
    EXPECT(rmx_run(0, rank_main, &arg), RMX_ERR_ARG);
    EXPECT(rmx_run(RMX_THREADS_MAX + 1, rank_main, &arg), RMX_ERR_ARG);
    EXPECT(rmx_run(UINT16_MAX, rank_main, &arg), RMX_ERR_ARG);
    rmx_rank_t *lone = NULL;
    EXPECT(rmx_init(&lone), RMX_ERR_SETUP);
    CHECK(lone == NULL && strstr(rmx_last_error(), "launcher") != NULL);
    EXPECT(rmx_init(NULL), RMX_ERR_ARG);
    EXPECT(rmx_finalize(NULL), RMX_ERR_ARG);
    /* Three ranks: main's first non-zero return (rank 2's) comes back. */
    EXPECT(rmx_run(3, rank_main, &arg), 5);
    EXPECT(rmx_run(2, leaves_a_receive, NULL), 0);
    printf("threads: ok\n");
    return 0;
}
