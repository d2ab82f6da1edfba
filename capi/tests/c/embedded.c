/* The core as a C runtime or driver embeds it (rmx_ep_*): two endpoints
 * in memory this program provides, over a port written here that moves
 * packets and RDMA between them in memory. Every rendezvous and every
 * size arrives byte-exact; a port that loses packets is carried by the
 * core's timers, driven by the time this program passes in; bad
 * arguments and forged requests are refused with codes; destroying an
 * endpoint ends every registration it made. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>
#include "check.h"

#define MTU 4096
#define NBUF 64
#define NREG 256
#define NCQ 1024

enum { RX_FREE, RX_ARRIVED, RX_HELD };

struct reg {
    uintptr_t addr;
    size_t len;
    int used, remote;
};

/* One rank's port: its receive buffers, registrations and completions. */
struct port {
    int me;
    uint8_t rx[NBUF][MTU];
    size_t rx_len[NBUF];
    int rx_state[NBUF];
    uint32_t rx_imm[NBUF];
    int rx_is_imm[NBUF];
    uint32_t arrivals[NBUF]; /* a ring of arrived buffers, oldest first */
    unsigned head, tail;
    struct reg regs[NREG];
    rmx_completion_t cq[NCQ];
    size_t ncq;
    /* One packet in `lose_every` sent is lost, at random (0: none), and
     * how many were. */
    unsigned lose_every, sent, lost;
    uint64_t dice;
    unsigned long rdma_ops, inline_sends, busy;
};

static struct port ports[2];

static int port_reg(void *p, uintptr_t addr, size_t len, uint32_t flags, uint32_t *key) {
    struct port *me = p;
    for (uint32_t i = 0; i < NREG; i++) {
        if (!me->regs[i].used) {
            me->regs[i] = (struct reg){addr, len, 1, (flags & RMX_REG_REMOTE) != 0};
            *key = i + 1;
            return RMX_PORT_OK;
        }
    }
    return RMX_PORT_NO_RESOURCE;
}

static void port_dereg(void *p, uintptr_t addr, size_t len, uint32_t key) {
    struct port *me = p;
    CHECK(key >= 1 && key <= NREG);
    struct reg *r = &me->regs[key - 1];
    CHECK(r->used && r->addr == addr && r->len == len);
    r->used = 0;
}

/* `len` bytes at `addr` inside registration `key` of `p` (remote access
 * if `remote`): the address, or 0. */
static uint8_t *inside(struct port *p, uint32_t key, uint64_t addr, size_t len, int remote) {
    if (key < 1 || key > NREG) return NULL;
    struct reg *r = &p->regs[key - 1];
    if (!r->used || (remote && !r->remote)) return NULL;
    if (addr < r->addr || addr - r->addr > r->len || len > r->len - (addr - r->addr)) return NULL;
    return (uint8_t *)(uintptr_t)addr;
}

/* A free receive buffer of `to`, or -1. */
static int take_rx(struct port *to) {
    for (int i = 0; i < NBUF; i++)
        if (to->rx_state[i] == RX_FREE) return i;
    return -1;
}

static void arrive(struct port *to, int b, size_t len, int is_imm, uint32_t imm) {
    to->rx_state[b] = RX_ARRIVED;
    to->rx_len[b] = len;
    to->rx_is_imm[b] = is_imm;
    to->rx_imm[b] = imm;
    to->arrivals[to->tail++ % NBUF] = (uint32_t)b;
}

static void complete(struct port *me, uint64_t wr_id, int status) {
    CHECK(me->ncq < NCQ);
    me->cq[me->ncq++] = (rmx_completion_t){wr_id, status};
}

static int port_post(void *p, uint16_t peer, uint64_t wr_id, const rmx_work_t *w) {
    struct port *me = p;
    CHECK(peer < 2);
    struct port *to = &ports[peer];
    switch (w->kind) {
    case RMX_WORK_SEND:
    case RMX_WORK_INLINE: {
        int b = take_rx(to);
        if (b < 0) {
            me->busy++;
            return RMX_PORT_BUSY;
        }
        size_t len = 0;
        if (w->kind == RMX_WORK_SEND) {
            for (size_t i = 0; i < w->nsge; i++) {
                const rmx_sge_t *s = &w->sges[i];
                uint8_t *src = inside(me, s->key, s->addr, s->len, 0);
                if (!src || len + s->len > MTU) return RMX_PORT_ACCESS;
                memcpy(to->rx[b] + len, src, s->len);
                len += s->len;
            }
        } else {
            me->inline_sends++;
            if (w->head_len + w->body_len > MTU) return RMX_PORT_ACCESS;
            memcpy(to->rx[b], w->head, w->head_len);
            if (w->body_len) memcpy(to->rx[b] + w->head_len, w->body, w->body_len);
            len = w->head_len + w->body_len;
        }
        me->sent++;
        /* xorshift: losses at random, the same in every run. A period
         * would resonate with the core's resending and lose one packet
         * forever, which no network does. */
        me->dice ^= me->dice << 13;
        me->dice ^= me->dice >> 7;
        me->dice ^= me->dice << 17;
        if (me->lose_every && me->dice % me->lose_every == 0) {
            me->lost++; /* gone on the wire; the sender still completes */
        } else {
            arrive(to, b, len, 0, 0);
        }
        return RMX_PORT_DONE;
    }
    case RMX_WORK_RDMA_WRITE:
    case RMX_WORK_RDMA_READ:
    case RMX_WORK_WRITE_IMM: {
        CHECK(w->nsge == 1);
        const rmx_sge_t *s = &w->sges[0];
        int b = -1;
        if (w->kind == RMX_WORK_WRITE_IMM && (b = take_rx(to)) < 0) {
            me->busy++;
            return RMX_PORT_BUSY;
        }
        me->rdma_ops++;
        uint8_t *local = inside(me, s->key, s->addr, s->len, 0);
        uint8_t *remote = inside(to, w->remote_key, w->remote_addr, s->len, 1);
        /* As verbs does: a failed check ends the work with an error. */
        if (!local || !remote) {
            complete(me, wr_id, RMX_PORT_ACCESS);
            return RMX_PORT_OK;
        }
        if (w->kind == RMX_WORK_RDMA_READ)
            memcpy(local, remote, s->len);
        else
            memcpy(remote, local, s->len);
        if (w->kind == RMX_WORK_WRITE_IMM) arrive(to, b, 0, 1, w->imm);
        /* Reported later, by poll_cq. */
        complete(me, wr_id, RMX_PORT_OK);
        return RMX_PORT_OK;
    }
    }
    return RMX_PORT_UNSUPPORTED;
}

static int port_poll_recv(void *p, uint32_t *buf, uint32_t *imm) {
    struct port *me = p;
    if (me->head == me->tail) return 0;
    uint32_t b = me->arrivals[me->head++ % NBUF];
    CHECK(me->rx_state[b] == RX_ARRIVED);
    me->rx_state[b] = RX_HELD;
    *buf = b;
    if (me->rx_is_imm[b]) {
        *imm = me->rx_imm[b];
        return RMX_RECV_IMM;
    }
    return RMX_RECV_PACKET;
}

static const uint8_t *port_rx_bytes(void *p, uint32_t buf, size_t *len) {
    struct port *me = p;
    if (buf >= NBUF || me->rx_state[buf] != RX_HELD) return NULL;
    *len = me->rx_len[buf];
    return me->rx[buf];
}

static int port_repost(void *p, uint32_t buf) {
    struct port *me = p;
    if (buf >= NBUF || me->rx_state[buf] != RX_HELD) return 0;
    me->rx_state[buf] = RX_FREE;
    return 1;
}

static size_t port_poll_cq(void *p, rmx_completion_t *out, size_t max) {
    struct port *me = p;
    size_t n = me->ncq < max ? me->ncq : max;
    memcpy(out, me->cq, n * sizeof *out);
    memmove(me->cq, me->cq + n, (me->ncq - n) * sizeof *out);
    me->ncq -= n;
    return n;
}

static const rmx_port_ops_t OPS = {
    .reg = port_reg,
    .dereg = port_dereg,
    .post = port_post,
    .poll_recv = port_poll_recv,
    .rx_bytes = port_rx_bytes,
    .repost = port_repost,
    .poll_cq = port_poll_cq,
};

static rmx_ep_config_t config(int rank, uint8_t rendezvous, int lossy) {
    rmx_ep_config_t c = {0};
    c.size = sizeof c;
    c.rank = (uint16_t)rank;
    c.ranks = 2;
    c.rendezvous = rendezvous;
    c.requests = 64;
    c.slots = 16;
    c.caps.rdma_write = 1;
    c.caps.rdma_read = 1;
    c.caps.write_imm = 1;
    c.caps.lossy = (uint8_t)lossy;
    c.caps.max_transfer = 64 * 1024; /* longer transfers are split */
    c.caps.inline_max = 256;
    c.caps.send_queue = 16;
    c.caps.rx_buffers = NBUF;
    c.caps.mtu = MTU;
    return c;
}

struct pair {
    rmx_ep_t *ep[2];
    void *mem[2];
    uint64_t now;
};

static void create(struct pair *pr, uint8_t rendezvous, int lossy, unsigned lose_every) {
    memset(ports, 0, sizeof ports);
    for (int r = 0; r < 2; r++) {
        ports[r].me = r;
        ports[r].lose_every = lose_every;
        ports[r].dice = 0x9e3779b97f4a7c15u + (uint64_t)r;
        rmx_ep_config_t c = config(r, rendezvous, lossy);
        size_t size = 0;
        EXPECT(rmx_ep_size(&c, &size), 0);
        CHECK(size > 0);
        pr->mem[r] = aligned_alloc(RMX_EP_ALIGN, (size + RMX_EP_ALIGN - 1) / RMX_EP_ALIGN * RMX_EP_ALIGN);
        CHECK(pr->mem[r]);
        EXPECT(rmx_ep_create(pr->mem[r], size, &c, &OPS, &ports[r], &pr->ep[r]), 0);
    }
    pr->now = 1000;
}

static void destroy(struct pair *pr) {
    for (int r = 0; r < 2; r++) {
        EXPECT(rmx_ep_destroy(pr->ep[r]), 0);
        /* Every registration it made is ended. */
        for (int i = 0; i < NREG; i++) CHECK(!ports[r].regs[i].used);
        /* A destroyed endpoint is refused, not used. */
        EXPECT(rmx_ep_progress(pr->ep[r], pr->now), RMX_ERR_ARG);
        free(pr->mem[r]);
    }
}

/* Both endpoints moved on once, 10 µs later. */
static void step(struct pair *pr) {
    pr->now += 10000;
    for (int r = 0; r < 2; r++) CHECK(rmx_ep_progress(pr->ep[r], pr->now) >= 0);
}

/* Steps until `*req` of endpoint `r` ends; its test's result. */
static int finish(struct pair *pr, int r, rmx_request_t *req, rmx_status_t *st) {
    for (long i = 0; i < 2000000; i++) {
        int t = rmx_ep_test(pr->ep[r], req, st);
        if (t != 0) {
            if (t < 0) {
                for (int q = 0; q < 2; q++) {
                    int held = 0, arrived = 0;
                    for (int b = 0; b < NBUF; b++) {
                        held += ports[q].rx_state[b] == RX_HELD;
                        arrived += ports[q].rx_state[b] == RX_ARRIVED;
                    }
                    fprintf(stderr, "port %d: sent %u lost %u busy %lu held %d arrived %d, step %ld now %llu\n", q,
                            ports[q].sent, ports[q].lost, ports[q].busy, held, arrived, i,
                            (unsigned long long)pr->now);
                }
            }
            CHECK(*req == RMX_REQUEST_NULL);
            return t;
        }
        step(pr);
    }
    fprintf(stderr, "a request of rank %d never ended\n", r);
    exit(1);
}

static uint8_t byte_of(size_t i, size_t size, int from) {
    return (uint8_t)(i * 131 + size * 7 + (size_t)from * 29 + 1);
}

static const size_t SIZES[] = {0, 1, 8, 200, 4067, 4068, 4069, 8192, 65536, 65537, 300000, 1 << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* Every size, each way, byte-exact; the receive posted before or after
 * the send. */
static void every_size(struct pair *pr, const char *name) {
    for (size_t k = 0; k < NSIZES; k++) {
        for (int from = 0; from < 2; from++) {
            size_t size = SIZES[k];
            int to = 1 - from;
            uint8_t *out = malloc(size + 1), *in = malloc(size + 1);
            CHECK(out && in);
            for (size_t i = 0; i < size; i++) out[i] = byte_of(i, size, from);
            memset(in, 0xee, size + 1);
            rmx_request_t rq = RMX_REQUEST_NULL, sq = RMX_REQUEST_NULL;
            int late = (int)(k + (size_t)from) % 2;
            if (!late) EXPECT(rmx_ep_irecv(pr->ep[to], from, (int64_t)k, in, size, &rq), 0);
            EXPECT(rmx_ep_isend(pr->ep[from], to, (uint32_t)k, out, size, &sq), 0);
            CHECK(sq != RMX_REQUEST_NULL);
            if (late) {
                step(pr);
                EXPECT(rmx_ep_irecv(pr->ep[to], RMX_ANY_SOURCE, RMX_ANY_TAG, in, size, &rq), 0);
            }
            rmx_status_t st;
            EXPECT(finish(pr, to, &rq, &st), 1);
            CHECK(st.source == from && st.tag == k && st.len == size && st.error == 0);
            for (size_t i = 0; i < size; i++) {
                if (in[i] != byte_of(i, size, from)) {
                    fprintf(stderr, "%s: size %zu from %d: byte %zu is %u\n", name, size, from, i, in[i]);
                    exit(1);
                }
            }
            CHECK(in[size] == 0xee);
            EXPECT(finish(pr, from, &sq, &st), 1);
            CHECK(st.len == size && st.error == 0);
            free(out);
            free(in);
        }
    }
}

/* Many eager messages sent before any receive: held as unexpected,
 * then taken in order. */
static void unexpected_in_order(struct pair *pr) {
    enum { N = 40 };
    uint32_t out[N], in[N];
    rmx_request_t sq[N], rq[N];
    for (int i = 0; i < N; i++) {
        out[i] = 0x1000u + (uint32_t)i;
        EXPECT(rmx_ep_isend(pr->ep[0], 1, 7, &out[i], sizeof out[i], &sq[i]), 0);
    }
    for (int i = 0; i < 5; i++) step(pr);
    for (int i = 0; i < N; i++) EXPECT(rmx_ep_irecv(pr->ep[1], 0, 7, &in[i], sizeof in[i], &rq[i]), 0);
    rmx_status_t st;
    for (int i = 0; i < N; i++) {
        EXPECT(finish(pr, 1, &rq[i], &st), 1);
        CHECK(in[i] == 0x1000u + (uint32_t)i);
        EXPECT(finish(pr, 0, &sq[i], &st), 1);
    }
}

/* A task of each endpoint, started with `what[r]` on `data[r]`, moved
 * on until both ended; each one's result in `got[r]`. */
static void both(struct pair *pr, const rmx_coll_t what[2], void *data[2], const size_t len[2], int got[2]) {
    rmx_task_t *task[2];
    void *mem[2];
    for (int r = 0; r < 2; r++) {
        size_t size = 0;
        EXPECT(rmx_ep_task_size(pr->ep[r], &what[r], &size), 0);
        mem[r] = aligned_alloc(RMX_EP_ALIGN, (size + RMX_EP_ALIGN - 1) / RMX_EP_ALIGN * RMX_EP_ALIGN);
        CHECK(mem[r]);
        EXPECT(rmx_ep_task_start(pr->ep[r], &what[r], data[r], len[r], mem[r], size, &task[r]), 0);
    }
    int done[2] = {0, 0};
    for (long i = 0; !(done[0] && done[1]); i++) {
        CHECK(i < 2000000);
        for (int r = 0; r < 2; r++) {
            if (done[r]) continue;
            int t = rmx_ep_task_test(pr->ep[r], task[r]);
            if (t != 0) {
                got[r] = t;
                done[r] = 1;
                /* Ended: the task is gone. */
                EXPECT(rmx_ep_task_test(pr->ep[r], task[r]), RMX_ERR_ARG);
                free(mem[r]);
            }
        }
        step(pr);
    }
}

/* Collectives as tasks: an allreduce of every size (its larger ones by
 * rendezvous), a barrier, a broadcast and an allgather, each result
 * checked element by element. */
static void collectives(struct pair *pr, const char *name) {
    static const size_t COUNTS[] = {0, 1, 3, 1000, 2048, 100000};
    for (size_t k = 0; k < sizeof COUNTS / sizeof COUNTS[0]; k++) {
        size_t n = COUNTS[k];
        int32_t *v[2];
        for (int r = 0; r < 2; r++) {
            v[r] = malloc(n * sizeof(int32_t) + 1);
            for (size_t i = 0; i < n; i++) v[r][i] = (int32_t)(i * (size_t)(r + 1)) - 7;
        }
        rmx_coll_t w = {.kind = RMX_COLL_ALLREDUCE, .ty = RMX_INT32, .op = RMX_SUM, .len = n * sizeof(int32_t)};
        rmx_coll_t what[2] = {w, w};
        void *data[2] = {v[0], v[1]};
        size_t len[2] = {w.len, w.len};
        int got[2];
        both(pr, what, data, len, got);
        for (int r = 0; r < 2; r++) {
            EXPECT(got[r], 1);
            for (size_t i = 0; i < n; i++) {
                if (v[r][i] != (int32_t)(3 * i) - 14) {
                    fprintf(stderr, "%s: allreduce of %zu: rank %d element %zu is %d\n", name, n, r, i, v[r][i]);
                    exit(1);
                }
            }
            free(v[r]);
        }
    }
    rmx_coll_t bar = {.kind = RMX_COLL_BARRIER};
    rmx_coll_t what[2] = {bar, bar};
    void *none[2] = {NULL, NULL};
    size_t zero[2] = {0, 0};
    int got[2];
    both(pr, what, none, zero, got);
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);

    enum { B = 70000 };
    uint8_t *b[2];
    for (int r = 0; r < 2; r++) {
        b[r] = malloc(2 * B);
        for (size_t i = 0; i < 2 * B; i++) b[r][i] = byte_of(i, B, r);
    }
    rmx_coll_t bc = {.kind = RMX_COLL_BCAST, .root = 1, .len = B};
    rmx_coll_t bcs[2] = {bc, bc};
    void *bd[2] = {b[0], b[1]};
    size_t bl[2] = {B, B};
    both(pr, bcs, bd, bl, got);
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);
    for (size_t i = 0; i < B; i++) CHECK(b[0][i] == byte_of(i, B, 1) && b[1][i] == byte_of(i, B, 1));

    rmx_coll_t ag = {.kind = RMX_COLL_ALLGATHER, .len = B};
    rmx_coll_t ags[2] = {ag, ag};
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < B; i++) b[r][(size_t)r * B + i] = byte_of(i, B + 1, r);
    size_t agl[2] = {2 * B, 2 * B};
    both(pr, ags, bd, agl, got);
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);
    for (int r = 0; r < 2; r++)
        for (int from = 0; from < 2; from++)
            for (size_t i = 0; i < B; i++) CHECK(b[r][(size_t)from * B + i] == byte_of(i, B + 1, from));
    free(b[0]);
    free(b[1]);
}

/* Tasks refused, or ended early. */
static void task_refusals(struct pair *pr) {
    rmx_ep_t *e = pr->ep[0];
    size_t size = 0;
    rmx_coll_t w = {.kind = RMX_COLL_ALLREDUCE, .ty = RMX_INT32, .op = RMX_SUM, .len = 64};
    rmx_coll_t bad = w;
    bad.kind = 42;
    EXPECT(rmx_ep_task_size(e, &bad, &size), RMX_ERR_ARG);
    bad = w;
    bad.ty = 99;
    EXPECT(rmx_ep_task_size(e, &bad, &size), RMX_ERR_ARG);
    bad = w;
    bad.len = 6; /* not a whole number of int32 */
    EXPECT(rmx_ep_task_size(e, &bad, &size), RMX_ERR_ARG);
    bad = (rmx_coll_t){.kind = RMX_COLL_BCAST, .root = 2, .len = 8};
    EXPECT(rmx_ep_task_size(e, &bad, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_size(e, NULL, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_size(e, &w, &size), 0);
    void *mem = aligned_alloc(RMX_EP_ALIGN, (size + 2 * RMX_EP_ALIGN) / RMX_EP_ALIGN * RMX_EP_ALIGN);
    int32_t v[16] = {0};
    rmx_task_t *t = NULL;
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v - 4, mem, size, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, mem, size - 1, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, (uint8_t *)mem + 8, size, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, NULL, sizeof v, mem, size, &t), RMX_ERR_ARG);
    CHECK(t == NULL);
    EXPECT(rmx_ep_task_test(e, (rmx_task_t *)mem), RMX_ERR_ARG);
    /* Started on one rank alone, then ended early: cancelled, and the
     * endpoint will not go while it runs. */
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, mem, size, &t), 0);
    step(pr);
    EXPECT(rmx_ep_task_test(e, t), 0);
    EXPECT(rmx_ep_destroy(e), RMX_ERR_BUSY);
    EXPECT(rmx_ep_task_abort(e, t), 0);
    int r;
    while ((r = rmx_ep_task_test(e, t)) == 0) step(pr);
    EXPECT(r, RMX_ERR_CANCELLED);
    free(mem);
}

/* Refusals: each a code, nothing changed. */
static void refusals(struct pair *pr) {
    rmx_ep_config_t c = config(0, RMX_RNDV_AUTO, 0);
    size_t size = 0;
    EXPECT(rmx_ep_size(NULL, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_size(&c, NULL), RMX_ERR_ARG);
    rmx_ep_config_t bad = c;
    bad.size = 0;
    EXPECT(rmx_ep_size(&bad, &size), RMX_ERR_ARG);
    bad = c;
    bad.rank = 2;
    EXPECT(rmx_ep_size(&bad, &size), RMX_ERR_ARG);
    bad = c;
    bad.rendezvous = 9;
    EXPECT(rmx_ep_size(&bad, &size), RMX_ERR_ARG);
    bad = c;
    bad.requests = 70000;
    EXPECT(rmx_ep_size(&bad, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_size(&c, &size), 0);

    static struct port spare;
    rmx_ep_t *ep = NULL;
    void *mem = aligned_alloc(RMX_EP_ALIGN, (size + 2 * RMX_EP_ALIGN) / RMX_EP_ALIGN * RMX_EP_ALIGN);
    CHECK(mem);
    /* Too few bytes, a block off its alignment, a missing callback, a
     * newer header: refused before anything is registered. */
    EXPECT(rmx_ep_create(mem, size - 1, &c, &OPS, &spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create((uint8_t *)mem + 8, size, &c, &OPS, &spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create(NULL, size, &c, &OPS, &spare, &ep), RMX_ERR_ARG);
    rmx_port_ops_t partial = OPS;
    partial.poll_cq = NULL;
    EXPECT(rmx_ep_create(mem, size, &c, &partial, &spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create_version(RMX_API_VERSION + 1, mem, size, &c, &OPS, &spare, &ep), RMX_ERR_VERSION);
    CHECK(ep == NULL);
    for (int i = 0; i < NREG; i++) CHECK(!spare.regs[i].used);
    free(mem);

    /* Calls on a live pair. */
    rmx_ep_t *e = pr->ep[0];
    uint8_t b[16] = {0};
    rmx_request_t rq = RMX_REQUEST_NULL;
    EXPECT(rmx_ep_isend(e, 2, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, -1, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, 1, 0, NULL, 4, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, 1, 0, b, sizeof b, NULL), RMX_ERR_ARG);
    EXPECT(rmx_ep_irecv(e, 5, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_irecv(e, 1, -7, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(NULL, 1, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_progress((rmx_ep_t *)(void *)b, 0), RMX_ERR_ARG);
    CHECK(rq == RMX_REQUEST_NULL);
    /* Forged requests: refused, nothing ended. */
    rmx_request_t forged = 0x12345;
    EXPECT(rmx_ep_test(e, &forged, NULL), RMX_ERR_REQUEST);
    CHECK(forged == 0x12345);
    forged = (uint64_t)1 << 40;
    EXPECT(rmx_ep_test(e, &forged, NULL), RMX_ERR_REQUEST);
    EXPECT(rmx_ep_cancel(e, &forged), RMX_ERR_REQUEST);
    /* A null request is ended; a test of it says so. */
    rmx_request_t none = RMX_REQUEST_NULL;
    EXPECT(rmx_ep_test(e, &none, NULL), 1);

    /* Cancel: a receive that has not matched ends cancelled, and an
     * endpoint with a pending request will not be destroyed. */
    EXPECT(rmx_ep_irecv(e, 1, 99, b, sizeof b, &rq), 0);
    EXPECT(rmx_ep_destroy(e), RMX_ERR_BUSY);
    rmx_request_t old = rq;
    EXPECT(rmx_ep_cancel(e, &rq), 1);
    rmx_status_t st;
    EXPECT(rmx_ep_test(e, &rq, &st), RMX_ERR_CANCELLED);
    CHECK(rq == RMX_REQUEST_NULL && st.error == RMX_ERR_CANCELLED);
    /* Its old handle now names nothing. */
    EXPECT(rmx_ep_test(e, &old, NULL), RMX_ERR_REQUEST);

    /* The deadline: a timer runs while a send is unanswered (lossy) or
     * none does; either way the call answers 0 or 1. */
    uint64_t at = 0;
    int d = rmx_ep_deadline(e, &at);
    CHECK(d == 0 || d == 1);
    EXPECT(rmx_ep_deadline(e, NULL), RMX_ERR_ARG);
}

int main(void) {
    static const struct {
        uint8_t rndv;
        const char *name;
    } RNDV[] = {{RMX_RNDV_AUTO, "auto"}, {RMX_RNDV_RPUT, "rput"}, {RMX_RNDV_RGET, "rget"}, {RMX_RNDV_PULL, "pull"}};
    struct pair pr;
    for (size_t i = 0; i < sizeof RNDV / sizeof RNDV[0]; i++) {
        create(&pr, RNDV[i].rndv, 0, 0);
        every_size(&pr, RNDV[i].name);
        unexpected_in_order(&pr);
        collectives(&pr, RNDV[i].name);
        unsigned long rdma = ports[0].rdma_ops + ports[1].rdma_ops;
        /* RDMA carries the rendezvous that use it; PULL sends packets. */
        if (RNDV[i].rndv == RMX_RNDV_PULL)
            CHECK(rdma == 0);
        else
            CHECK(rdma > 0);
        CHECK(ports[0].inline_sends > 0);
        destroy(&pr);
        printf("embedded: %s ok (%lu RDMA operations)\n", RNDV[i].name, rdma);
    }

    /* A port that loses one packet in 5: the core resends, timed by the
     * clock this program passes in. */
    create(&pr, RMX_RNDV_AUTO, 1, 5);
    every_size(&pr, "lossy");
    unexpected_in_order(&pr);
    collectives(&pr, "lossy");
    CHECK(ports[0].lost > 0 && ports[1].lost > 0);
    uint64_t at = 0;
    (void)rmx_ep_deadline(pr.ep[0], &at);
    destroy(&pr);
    printf("embedded: lossy ok (%u and %u packets lost)\n", ports[0].lost, ports[1].lost);

    create(&pr, RMX_RNDV_AUTO, 0, 0);
    refusals(&pr);
    task_refusals(&pr);
    destroy(&pr);
    printf("embedded: ok\n");
    return 0;
}
