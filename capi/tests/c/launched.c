/* One rank per process under a launcher (rmx_init … rmx_finalize): a
 * ping-pong at every protocol's sizes checked byte by byte, an
 * allreduce, and a finalize refused while a request is live. With
 * `run` as argument the same through rmx_run instead. */
#include <stdint.h>
#include <string.h>
#include "check.h"

static int body(rmx_rank_t *r, void *arg) {
    (void)arg;
    int me = rmx_rank_me(r), n = rmx_rank_size(r);
    CHECK(n == 2 && (me == 0 || me == 1));
    static const size_t sizes[] = {0, 1, 100, 8192, 8193, 70000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t size = sizes[k];
        uint8_t *b = malloc(size + 1);
        CHECK(b);
        rmx_request_t q;
        rmx_status_t st;
        if (me == 0) {
            for (size_t i = 0; i < size; i++) b[i] = (uint8_t)(i * 7 + k);
            EXPECT(rmx_isend(r, 1, (uint32_t)k, b, size, &q), 0);
            EXPECT(rmx_wait(r, &q, NULL), 0);
            memset(b, 0, size);
            EXPECT(rmx_irecv(r, 1, (int64_t)k, b, size, &q), 0);
            EXPECT(rmx_wait(r, &q, &st), 0);
            CHECK(st.len == size);
            for (size_t i = 0; i < size; i++) CHECK(b[i] == (uint8_t)(i * 7 + k + 1));
        } else {
            EXPECT(rmx_irecv(r, 0, (int64_t)k, b, size, &q), 0);
            EXPECT(rmx_wait(r, &q, &st), 0);
            CHECK(st.len == size && st.source == 0);
            for (size_t i = 0; i < size; i++) {
                CHECK(b[i] == (uint8_t)(i * 7 + k));
                b[i]++;
            }
            EXPECT(rmx_isend(r, 0, (uint32_t)k, b, size, &q), 0);
            EXPECT(rmx_wait(r, &q, NULL), 0);
        }
        free(b);
    }
    int64_t v = me + 1;
    EXPECT(rmx_allreduce(r, &v, 1, RMX_INT64, RMX_SUM), 0);
    CHECK(v == 3);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "run") == 0) {
        EXPECT(rmx_run(7, body, NULL), 0);
        printf("rmx_run: ok\n");
        return 0;
    }
    rmx_rank_t *r = NULL;
    int e = rmx_init(&r);
    if (e != 0) {
        /* What a user sees when started wrongly. */
        printf("rmx_init: %s: %s\n", rmx_strerror(e), rmx_last_error());
        return 3;
    }
    EXPECT(body(r, NULL), 0);
    uint8_t b[8];
    rmx_request_t q;
    EXPECT(rmx_irecv(r, RMX_ANY_SOURCE, 424242, b, sizeof b, &q), 0);
    EXPECT(rmx_finalize(r), RMX_ERR_BUSY);
    EXPECT(rmx_cancel(r, &q, NULL), 0);
    int me = rmx_rank_me(r);
    EXPECT(rmx_finalize(r), 0);
    printf("rank %d: ok\n", me);
    return 0;
}
