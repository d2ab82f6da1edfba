/* Windows from C, ranks as threads (rmx_run): in every fence design,
 * puts, gets and accumulates land byte-exact once the fence that ends
 * their epoch returned (blocking, or started and waited or tested);
 * a window under a started fence refuses other calls; bad windows,
 * ranges, designs and assertions are codes, never crashes. */
#include <stdint.h>
#include <string.h>
#include "check.h"

#define LEN 256

static uint8_t byte_of(int rank, int design, int i) {
    return (uint8_t)(rank * 41 + design * 7 + i * 3 + 1);
}

/* Ends the epoch: blocking for two designs, started for the others
 * (waited, or tested until it ends). */
static void fence(rmx_rank_t *r, rmx_win_t w, int design, int k) {
    if (design < 2) {
        EXPECT(rmx_win_fence(r, w, 0), 0);
        return;
    }
    rmx_request_t q;
    EXPECT(rmx_win_ifence(r, w, 0, &q), 0);
    CHECK(q != RMX_REQUEST_NULL);
    /* Held by its fence: the window refuses every other call. */
    uint8_t b[4] = {0};
    EXPECT(rmx_put(r, w, b, 4, 0, 0), RMX_ERR_BUSY);
    EXPECT(rmx_win_read(r, w, 0, b, 4), RMX_ERR_BUSY);
    rmx_win_t held = w;
    EXPECT(rmx_win_free(r, &held), RMX_ERR_BUSY);
    CHECK(held == w);
    if (k % 2) {
        EXPECT(rmx_wait(r, &q, NULL), 0);
    } else {
        int t;
        rmx_status_t st;
        while ((t = rmx_test(r, &q, &st)) == 0) {
        }
        EXPECT(t, 1);
        CHECK(st.error == 0);
    }
    CHECK(q == RMX_REQUEST_NULL);
}

static void epochs(rmx_rank_t *r, int design) {
    int me = rmx_rank_me(r), n = rmx_rank_size(r);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    rmx_win_t w = RMX_WIN_NULL;
    EXPECT(rmx_win_create(r, LEN, 1, design, &w), 0);
    CHECK(w != RMX_WIN_NULL);
    uint8_t mine[8];
    for (int i = 0; i < 8; i++) mine[i] = byte_of(me, design, i);
    EXPECT(rmx_win_write(r, w, 0, mine, 8), 0);
    fence(r, w, design, 0);
    for (int k = 1; k <= 3; k++) {
        uint8_t put[8], got[8];
        for (int i = 0; i < 8; i++) put[i] = byte_of(me, design, i + k);
        memset(got, 0xee, sizeof got);
        EXPECT(rmx_put(r, w, put, 8, (uint16_t)next, 16), 0);
        memset(put, 0, sizeof put); /* copied when issued */
        int32_t add[2] = {me + 1, k};
        EXPECT(rmx_accumulate(r, w, add, 2, RMX_INT32, RMX_SUM, 0, 64), 0);
        EXPECT(rmx_get(r, w, got, 8, (uint16_t)prev, 0), 0);
        fence(r, w, design, k);
        for (int i = 0; i < 8; i++) CHECK(got[i] == byte_of(prev, design, i));
        uint8_t landed[8];
        EXPECT(rmx_win_read(r, w, 16, landed, 8), 0);
        for (int i = 0; i < 8; i++) CHECK(landed[i] == byte_of(prev, design, i + k));
        if (me == 0) {
            int32_t sum[2];
            EXPECT(rmx_win_read(r, w, 64, sum, sizeof sum), 0);
            CHECK(sum[0] == k * n * (n + 1) / 2 && sum[1] == n * k * (k + 1) / 2);
        }
        fence(r, w, design, k + 1);
    }
    /* Refused at the origin, nothing issued. */
    uint8_t b[8] = {0};
    EXPECT(rmx_put(r, w, b, 8, (uint16_t)next, LEN - 4), RMX_ERR_ARG);
    EXPECT(rmx_put(r, w, b, 8, (uint16_t)n, 0), RMX_ERR_ARG);
    EXPECT(rmx_put(r, w, NULL, 8, 0, 0), RMX_ERR_ARG);
    EXPECT(rmx_get(r, w, b, 8, 0, (uint64_t)-1), RMX_ERR_ARG);
    EXPECT(rmx_accumulate(r, w, b, 2, 99, RMX_SUM, 0, 0), RMX_ERR_ARG);
    EXPECT(rmx_win_read(r, w, LEN, b, 1), RMX_ERR_ARG);
    EXPECT(rmx_win_fence(r, w, 0x100), RMX_ERR_ARG);
    rmx_win_t made_up = w ^ ((uint64_t)1 << 40);
    EXPECT(rmx_put(r, made_up, b, 1, 0, 0), RMX_ERR_ARG);
    /* A get of an epoch the free closes lands before the free returns. */
    uint8_t last[8];
    memset(last, 0, sizeof last);
    EXPECT(rmx_get(r, w, last, 8, (uint16_t)prev, 0), 0);
    rmx_win_t stale = w;
    EXPECT(rmx_win_free(r, &w), 0);
    for (int i = 0; i < 8; i++) CHECK(last[i] == byte_of(prev, design, i));
    CHECK(w == RMX_WIN_NULL);
    EXPECT(rmx_put(r, stale, b, 1, 0, 0), RMX_ERR_ARG);
    EXPECT(rmx_win_free(r, &stale), RMX_ERR_ARG);
}

static int rank_main(rmx_rank_t *r, void *arg) {
    (void)arg;
    for (int d = RMX_FENCE_DEFERRED; d <= RMX_FENCE_RI; d++) epochs(r, d);
    rmx_win_t w;
    EXPECT(rmx_win_create(r, LEN, 1, 9, &w), RMX_ERR_ARG);
    EXPECT(rmx_win_create(r, LEN, 1, RMX_FENCE_DEFERRED, NULL), RMX_ERR_ARG);
    EXPECT(rmx_win_create(r, LEN, 0, RMX_FENCE_DEFERRED, &w), RMX_ERR_ARG);
    /* A window left when main returns, under a started fence: rmx_run
     * ends the fence, then the window. */
    EXPECT(rmx_win_create(r, LEN, 1, RMX_FENCE_OPT, &w), 0);
    rmx_request_t q;
    EXPECT(rmx_win_ifence(r, w, 0, &q), 0);
    return 0;
}

int main(void) {
    EXPECT(rmx_run(3, rank_main, NULL), 0);
    printf("windows: ok\n");
    return 0;
}
