/* The embedded endpoint's suite (rmx_ep_*), the same in userspace
 * (embedded.c, over librmx) and in the Linux kernel (rmx_ep_test.c,
 * over rmx.ko's exports): two endpoints in memory the suite provides,
 * over a port written here that moves packets and RDMA between them in
 * memory. Every rendezvous and every size arrives byte-exact; a port
 * that loses packets is carried by the core's timers, driven by the time
 * the suite passes in; collectives run as tasks; windows take puts,
 * gets and accumulates closed by fences; bad arguments and
 * forged requests are refused with codes; destroying an endpoint ends
 * every registration it made.
 *
 * The includer defines, before including this file:
 *   SUITE_ALLOC(n), SUITE_FREE(p)  memory aligned to RMX_EP_ALIGN
 *   SUITE_SAY(...)                 a line of progress (printf-like)
 *   SUITE_FAIL(...)                a line saying what failed
 *   SUITE_WHY()                    rmx's words for the last failure
 *   SUITE_YIELD()                  let others run (a long loop)
 * Every function returns 0, or -1 once a check failed (said by
 * SUITE_FAIL); ep_suite() runs them all. */
#ifndef EP_SUITE_H
#define EP_SUITE_H

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            SUITE_FAIL("%s:%d: failed: %s (%s)", __FILE__, __LINE__, #cond, SUITE_WHY()); \
            return -1;                                                                   \
        }                                                                                \
    } while (0)

/* A call that must return `want`. */
#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        int got_ = (call);                                                                  \
        if (got_ != (want)) {                                                               \
            SUITE_FAIL("%s:%d: %s returned %d, not %d (%s)", __FILE__, __LINE__, #call, got_, \
                       (int)(want), SUITE_WHY());                                           \
            return -1;                                                                      \
        }                                                                                   \
    } while (0)

/* A suite function that must succeed. */
#define TRY(call)                  \
    do {                           \
        if ((call) != 0) return -1; \
    } while (0)

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
    /* The port's own contract, broken by rmx (a double dereg, a repost
     * of a buffer not held): counted, checked to stay 0. */
    unsigned long misuse;
};

/* Both ranks' ports (the suite's, with the memory it allocates). */
static struct port *ports;

static int port_reg(void *p, size_t addr, size_t len, uint32_t flags, uint32_t *key) {
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

static void port_dereg(void *p, size_t addr, size_t len, uint32_t key) {
    struct port *me = p;
    struct reg *r = key >= 1 && key <= NREG ? &me->regs[key - 1] : 0;
    if (!r || !r->used || r->addr != addr || r->len != len) {
        me->misuse++;
        return;
    }
    r->used = 0;
}

/* `len` bytes at `addr` inside registration `key` of `p` (remote access
 * if `remote`): the address, or null. */
static uint8_t *port_inside(struct port *p, uint32_t key, uint64_t addr, size_t len, int remote) {
    if (key < 1 || key > NREG) return 0;
    struct reg *r = &p->regs[key - 1];
    if (!r->used || (remote && !r->remote)) return 0;
    if (addr < r->addr || addr - r->addr > r->len || len > r->len - (addr - r->addr)) return 0;
    return (uint8_t *)(uintptr_t)addr;
}

/* A free receive buffer of `to`, or -1. */
static int port_take_rx(struct port *to) {
    for (int i = 0; i < NBUF; i++)
        if (to->rx_state[i] == RX_FREE) return i;
    return -1;
}

static void port_arrive(struct port *to, int b, size_t len, int is_imm, uint32_t imm) {
    to->rx_state[b] = RX_ARRIVED;
    to->rx_len[b] = len;
    to->rx_is_imm[b] = is_imm;
    to->rx_imm[b] = imm;
    to->arrivals[to->tail++ % NBUF] = (uint32_t)b;
}

static void port_complete(struct port *me, uint64_t wr_id, int status) {
    if (me->ncq == NCQ) {
        me->misuse++;
        return;
    }
    me->cq[me->ncq++] = (rmx_completion_t){wr_id, status};
}

/* xorshift: losses at random, the same in every run. A period would
 * resonate with the core's resending and lose one packet forever, which
 * no network does. */
static int port_lose(struct port *me) {
    me->dice ^= me->dice << 13;
    me->dice ^= me->dice >> 7;
    me->dice ^= me->dice << 17;
    return me->lose_every && me->dice % me->lose_every == 0;
}

static int port_post(void *p, uint16_t peer, uint64_t wr_id, const rmx_work_t *w) {
    struct port *me = p;
    if (peer >= 2) {
        me->misuse++;
        return RMX_PORT_ACCESS;
    }
    struct port *to = &ports[peer];
    switch (w->kind) {
    case RMX_WORK_SEND:
    case RMX_WORK_INLINE: {
        int b = port_take_rx(to);
        if (b < 0) {
            me->busy++;
            return RMX_PORT_BUSY;
        }
        size_t len = 0;
        if (w->kind == RMX_WORK_SEND) {
            for (size_t i = 0; i < w->nsge; i++) {
                const rmx_sge_t *s = &w->sges[i];
                uint8_t *src = port_inside(me, s->key, s->addr, s->len, 0);
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
        if (port_lose(me))
            me->lost++; /* gone on the wire; the sender still completes */
        else
            port_arrive(to, b, len, 0, 0);
        return RMX_PORT_DONE;
    }
    case RMX_WORK_RDMA_WRITE:
    case RMX_WORK_RDMA_READ:
    case RMX_WORK_WRITE_IMM: {
        if (w->nsge != 1) {
            me->misuse++;
            return RMX_PORT_ACCESS;
        }
        const rmx_sge_t *s = &w->sges[0];
        int b = -1;
        if (w->kind == RMX_WORK_WRITE_IMM && (b = port_take_rx(to)) < 0) {
            me->busy++;
            return RMX_PORT_BUSY;
        }
        me->rdma_ops++;
        uint8_t *local = port_inside(me, s->key, s->addr, s->len, 0);
        uint8_t *remote = port_inside(to, w->remote_key, w->remote_addr, s->len, 1);
        /* As verbs does: a failed check ends the work with an error. */
        if (!local || !remote) {
            port_complete(me, wr_id, RMX_PORT_ACCESS);
            return RMX_PORT_OK;
        }
        if (w->kind == RMX_WORK_RDMA_READ)
            memcpy(local, remote, s->len);
        else
            memcpy(remote, local, s->len);
        if (w->kind == RMX_WORK_WRITE_IMM) port_arrive(to, b, 0, 1, w->imm);
        /* Reported later, by poll_cq. */
        port_complete(me, wr_id, RMX_PORT_OK);
        return RMX_PORT_OK;
    }
    }
    return RMX_PORT_UNSUPPORTED;
}

static int port_poll_recv(void *p, uint32_t *buf, uint32_t *imm) {
    struct port *me = p;
    if (me->head == me->tail) return 0;
    uint32_t b = me->arrivals[me->head++ % NBUF];
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
    if (buf >= NBUF || me->rx_state[buf] != RX_HELD) return 0;
    *len = me->rx_len[buf];
    return me->rx[buf];
}

static int port_repost(void *p, uint32_t buf) {
    struct port *me = p;
    if (buf >= NBUF || me->rx_state[buf] != RX_HELD) {
        me->misuse++;
        return 0;
    }
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

static rmx_ep_config_t ep_config(int rank, uint8_t rendezvous, int lossy, int rdma) {
    rmx_ep_config_t c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.rank = (uint16_t)rank;
    c.ranks = 2;
    c.rendezvous = rendezvous;
    c.requests = 64;
    c.slots = 16;
    c.caps.rdma_write = (uint8_t)rdma;
    c.caps.rdma_read = (uint8_t)rdma;
    c.caps.write_imm = (uint8_t)rdma;
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

static int pair_create(struct pair *pr, uint8_t rendezvous, int lossy, unsigned lose_every, int rdma) {
    memset(ports, 0, 2 * sizeof *ports);
    for (int r = 0; r < 2; r++) {
        ports[r].me = r;
        ports[r].lose_every = lose_every;
        ports[r].dice = 0x9e3779b97f4a7c15ull + (uint64_t)r;
        rmx_ep_config_t c = ep_config(r, rendezvous, lossy, rdma);
        size_t size = 0;
        EXPECT(rmx_ep_size(&c, &size), 0);
        CHECK(size > 0);
        pr->mem[r] = SUITE_ALLOC(size);
        CHECK(pr->mem[r]);
        EXPECT(rmx_ep_create(pr->mem[r], size, &c, &OPS, &ports[r], &pr->ep[r]), 0);
    }
    pr->now = 1000;
    return 0;
}

static int pair_destroy(struct pair *pr) {
    for (int r = 0; r < 2; r++) {
        EXPECT(rmx_ep_destroy(pr->ep[r]), 0);
        /* Every registration it made is ended, and the port's contract
         * was kept throughout. */
        for (int i = 0; i < NREG; i++) CHECK(!ports[r].regs[i].used);
        CHECK(ports[r].misuse == 0);
        /* A destroyed endpoint is refused, not used. */
        EXPECT(rmx_ep_progress(pr->ep[r], pr->now), RMX_ERR_ARG);
        SUITE_FREE(pr->mem[r]);
    }
    return 0;
}

/* Both endpoints moved on once, 10 µs later. */
static int pair_step(struct pair *pr) {
    pr->now += 10000;
    for (int r = 0; r < 2; r++) CHECK(rmx_ep_progress(pr->ep[r], pr->now) >= 0);
    SUITE_YIELD();
    return 0;
}

/* Steps until `*req` of endpoint `r` ends; its test's result in `*t`. */
static int pair_finish(struct pair *pr, int r, rmx_request_t *req, rmx_status_t *st, int *t) {
    for (long i = 0; i < 2000000; i++) {
        *t = rmx_ep_test(pr->ep[r], req, st);
        if (*t != 0) {
            if (*t < 0)
                for (int q = 0; q < 2; q++)
                    SUITE_SAY("port %d: sent %u lost %u busy %lu, step %ld", q, ports[q].sent,
                              ports[q].lost, ports[q].busy, i);
            CHECK(*req == RMX_REQUEST_NULL);
            return 0;
        }
        TRY(pair_step(pr));
    }
    SUITE_FAIL("a request of rank %d never ended", r);
    return -1;
}

/* Steps until `*req` of endpoint `r` ends well. */
static int pair_finish_ok(struct pair *pr, int r, rmx_request_t *req, rmx_status_t *st) {
    int t = 0;
    TRY(pair_finish(pr, r, req, st, &t));
    EXPECT(t, 1);
    return 0;
}

static uint8_t byte_of(size_t i, size_t size, int from) {
    return (uint8_t)(i * 131 + size * 7 + (size_t)from * 29 + 1);
}

static const size_t SIZES[] = {0, 1, 8, 200, 4067, 4068, 4069, 8192, 65536, 65537, 300000, 1 << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* Every size, each way, byte-exact; the receive posted before or after
 * the send. */
static int every_size(struct pair *pr, const char *name) {
    for (size_t k = 0; k < NSIZES; k++) {
        for (int from = 0; from < 2; from++) {
            size_t size = SIZES[k];
            int to = 1 - from;
            uint8_t *out = SUITE_ALLOC(size + 1), *in = SUITE_ALLOC(size + 1);
            CHECK(out && in);
            for (size_t i = 0; i < size; i++) out[i] = byte_of(i, size, from);
            memset(in, 0xee, size + 1);
            rmx_request_t rq = RMX_REQUEST_NULL, sq = RMX_REQUEST_NULL;
            int late = (int)(k + (size_t)from) % 2;
            if (!late) EXPECT(rmx_ep_irecv(pr->ep[to], from, (int64_t)k, in, size, &rq), 0);
            EXPECT(rmx_ep_isend(pr->ep[from], to, (uint32_t)k, out, size, &sq), 0);
            CHECK(sq != RMX_REQUEST_NULL);
            if (late) {
                TRY(pair_step(pr));
                EXPECT(rmx_ep_irecv(pr->ep[to], RMX_ANY_SOURCE, RMX_ANY_TAG, in, size, &rq), 0);
            }
            rmx_status_t st;
            TRY(pair_finish_ok(pr, to, &rq, &st));
            CHECK(st.source == from && st.tag == k && st.len == size && st.error == 0);
            for (size_t i = 0; i < size; i++) {
                if (in[i] != byte_of(i, size, from)) {
                    SUITE_FAIL("%s: size %zu from %d: byte %zu is %u", name, size, from, i, in[i]);
                    return -1;
                }
            }
            CHECK(in[size] == 0xee);
            TRY(pair_finish_ok(pr, from, &sq, &st));
            CHECK(st.len == size && st.error == 0);
            SUITE_FREE(out);
            SUITE_FREE(in);
        }
    }
    return 0;
}

/* Many eager messages sent before any receive: held as unexpected,
 * then taken in order. */
static int unexpected_in_order(struct pair *pr) {
    enum { N = 40 };
    uint32_t out[N], in[N];
    rmx_request_t sq[N], rq[N];
    for (int i = 0; i < N; i++) {
        out[i] = 0x1000u + (uint32_t)i;
        EXPECT(rmx_ep_isend(pr->ep[0], 1, 7, &out[i], sizeof out[i], &sq[i]), 0);
    }
    for (int i = 0; i < 5; i++) TRY(pair_step(pr));
    for (int i = 0; i < N; i++) EXPECT(rmx_ep_irecv(pr->ep[1], 0, 7, &in[i], sizeof in[i], &rq[i]), 0);
    rmx_status_t st;
    for (int i = 0; i < N; i++) {
        TRY(pair_finish_ok(pr, 1, &rq[i], &st));
        CHECK(in[i] == 0x1000u + (uint32_t)i);
        TRY(pair_finish_ok(pr, 0, &sq[i], &st));
    }
    return 0;
}

/* A task of each endpoint, started with `what[r]` on `data[r]`, moved
 * on until both ended; each one's result in `got[r]`. */
static int pair_tasks(struct pair *pr, const rmx_coll_t what[2], void *data[2], const size_t len[2], int got[2]) {
    rmx_task_t *task[2];
    void *mem[2];
    for (int r = 0; r < 2; r++) {
        size_t size = 0;
        EXPECT(rmx_ep_task_size(pr->ep[r], &what[r], &size), 0);
        mem[r] = SUITE_ALLOC(size);
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
                SUITE_FREE(mem[r]);
            }
        }
        TRY(pair_step(pr));
    }
    return 0;
}

/* Collectives as tasks: an allreduce of every size (its larger ones by
 * rendezvous), a barrier, a broadcast and an allgather, each result
 * checked element by element. */
static int collectives(struct pair *pr, const char *name) {
    static const size_t COUNTS[] = {0, 1, 3, 1000, 2048, 100000};
    int got[2];
    for (size_t k = 0; k < sizeof COUNTS / sizeof COUNTS[0]; k++) {
        size_t n = COUNTS[k];
        int32_t *v[2];
        for (int r = 0; r < 2; r++) {
            v[r] = SUITE_ALLOC(n * sizeof(int32_t) + 1);
            CHECK(v[r]);
            for (size_t i = 0; i < n; i++) v[r][i] = (int32_t)(i * (size_t)(r + 1)) - 7;
        }
        rmx_coll_t w = {.kind = RMX_COLL_ALLREDUCE, .ty = RMX_INT32, .op = RMX_SUM, .len = n * sizeof(int32_t)};
        rmx_coll_t what[2] = {w, w};
        void *data[2] = {v[0], v[1]};
        size_t len[2] = {w.len, w.len};
        TRY(pair_tasks(pr, what, data, len, got));
        for (int r = 0; r < 2; r++) {
            EXPECT(got[r], 1);
            for (size_t i = 0; i < n; i++) {
                if (v[r][i] != (int32_t)(3 * i) - 14) {
                    SUITE_FAIL("%s: allreduce of %zu: rank %d element %zu is %d", name, n, r, i, v[r][i]);
                    return -1;
                }
            }
            SUITE_FREE(v[r]);
        }
    }
    rmx_coll_t bar = {.kind = RMX_COLL_BARRIER};
    rmx_coll_t bars[2] = {bar, bar};
    void *none[2] = {0, 0};
    size_t zero[2] = {0, 0};
    TRY(pair_tasks(pr, bars, none, zero, got));
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);

    enum { B = 70000 };
    uint8_t *b[2];
    for (int r = 0; r < 2; r++) {
        b[r] = SUITE_ALLOC(2 * B);
        CHECK(b[r]);
        for (size_t i = 0; i < 2 * B; i++) b[r][i] = byte_of(i, B, r);
    }
    rmx_coll_t bc = {.kind = RMX_COLL_BCAST, .root = 1, .len = B};
    rmx_coll_t bcs[2] = {bc, bc};
    void *bd[2] = {b[0], b[1]};
    size_t bl[2] = {B, B};
    TRY(pair_tasks(pr, bcs, bd, bl, got));
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);
    for (size_t i = 0; i < B; i++) CHECK(b[0][i] == byte_of(i, B, 1) && b[1][i] == byte_of(i, B, 1));

    rmx_coll_t ag = {.kind = RMX_COLL_ALLGATHER, .len = B};
    rmx_coll_t ags[2] = {ag, ag};
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < B; i++) b[r][(size_t)r * B + i] = byte_of(i, B + 1, r);
    size_t agl[2] = {2 * B, 2 * B};
    TRY(pair_tasks(pr, ags, bd, agl, got));
    EXPECT(got[0], 1);
    EXPECT(got[1], 1);
    for (int r = 0; r < 2; r++)
        for (int from = 0; from < 2; from++)
            for (size_t i = 0; i < B; i++) CHECK(b[r][(size_t)from * B + i] == byte_of(i, B + 1, from));
    SUITE_FREE(b[0]);
    SUITE_FREE(b[1]);
    return 0;
}

/* Tasks refused, or ended early. */
static int task_refusals(struct pair *pr) {
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
    EXPECT(rmx_ep_task_size(e, 0, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_size(e, &w, &size), 0);
    void *mem = SUITE_ALLOC(size + RMX_EP_ALIGN);
    CHECK(mem);
    int32_t v[16] = {0};
    rmx_task_t *t = 0;
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v - 4, mem, size, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, mem, size - 1, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, (uint8_t *)mem + 8, size, &t), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_start(e, &w, 0, sizeof v, mem, size, &t), RMX_ERR_ARG);
    CHECK(t == 0);
    EXPECT(rmx_ep_task_test(e, (rmx_task_t *)mem), RMX_ERR_ARG);
    /* Started on one rank alone, then ended early: cancelled, and the
     * endpoint will not go while it runs. */
    EXPECT(rmx_ep_task_start(e, &w, v, sizeof v, mem, size, &t), 0);
    TRY(pair_step(pr));
    EXPECT(rmx_ep_task_test(e, t), 0);
    EXPECT(rmx_ep_destroy(e), RMX_ERR_BUSY);
    EXPECT(rmx_ep_task_abort(e, t), 0);
    int r;
    while ((r = rmx_ep_task_test(e, t)) == 0) TRY(pair_step(pr));
    EXPECT(r, RMX_ERR_CANCELLED);
    SUITE_FREE(mem);
    return 0;
}

/* Refusals: each a code, nothing changed. */
static int refusals(void) {
    rmx_ep_config_t c = ep_config(0, RMX_RNDV_AUTO, 0, 1);
    size_t size = 0;
    EXPECT(rmx_ep_size(0, &size), RMX_ERR_ARG);
    EXPECT(rmx_ep_size(&c, 0), RMX_ERR_ARG);
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

    struct port *spare = &ports[0];
    memset(spare->regs, 0, sizeof spare->regs);
    rmx_ep_t *ep = 0;
    void *mem = SUITE_ALLOC(size + RMX_EP_ALIGN);
    CHECK(mem);
    /* Too few bytes, a block off its alignment, a missing callback, a
     * newer header: refused before anything is registered. */
    EXPECT(rmx_ep_create(mem, size - 1, &c, &OPS, spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create((uint8_t *)mem + 8, size, &c, &OPS, spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create(0, size, &c, &OPS, spare, &ep), RMX_ERR_ARG);
    rmx_port_ops_t partial = OPS;
    partial.poll_cq = 0;
    EXPECT(rmx_ep_create(mem, size, &c, &partial, spare, &ep), RMX_ERR_ARG);
    EXPECT(rmx_ep_create_version(RMX_API_VERSION + 1, mem, size, &c, &OPS, spare, &ep), RMX_ERR_VERSION);
    CHECK(ep == 0);
    for (int i = 0; i < NREG; i++) CHECK(!spare->regs[i].used);
    SUITE_FREE(mem);
    return 0;
}

/* Calls on a live pair refused, cancelled, or asked what they hold. */
static int live_refusals(struct pair *pr) {
    rmx_ep_t *e = pr->ep[0];
    uint8_t b[16] = {0};
    rmx_request_t rq = RMX_REQUEST_NULL;
    EXPECT(rmx_ep_isend(e, 2, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, -1, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, 1, 0, 0, 4, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(e, 1, 0, b, sizeof b, 0), RMX_ERR_ARG);
    EXPECT(rmx_ep_irecv(e, 5, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_irecv(e, 1, -7, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_isend(0, 1, 0, b, sizeof b, &rq), RMX_ERR_ARG);
    EXPECT(rmx_ep_progress((rmx_ep_t *)(void *)b, 0), RMX_ERR_ARG);
#ifdef SUITE_SHORT
    /* Forgeries with nothing readable past their first RMX_EP_ALIGN bytes
     * (where the including program can make such memory): a check reads
     * an object's first bytes only. */
    EXPECT(rmx_ep_progress((rmx_ep_t *)SUITE_SHORT(), 0), RMX_ERR_ARG);
    EXPECT(rmx_ep_task_test(e, (rmx_task_t *)SUITE_SHORT()), RMX_ERR_ARG);
    EXPECT(rmx_ep_win_test(e, (rmx_ep_win_t *)SUITE_SHORT()), RMX_ERR_ARG);
#endif
    CHECK(rq == RMX_REQUEST_NULL);
    /* Forged requests: refused, nothing ended. */
    rmx_request_t forged = 0x12345;
    EXPECT(rmx_ep_test(e, &forged, 0), RMX_ERR_REQUEST);
    CHECK(forged == 0x12345);
    forged = (uint64_t)1 << 40;
    EXPECT(rmx_ep_test(e, &forged, 0), RMX_ERR_REQUEST);
    EXPECT(rmx_ep_cancel(e, &forged), RMX_ERR_REQUEST);
    /* A null request is ended; a test of it says so. */
    rmx_request_t none = RMX_REQUEST_NULL;
    EXPECT(rmx_ep_test(e, &none, 0), 1);

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
    EXPECT(rmx_ep_test(e, &old, 0), RMX_ERR_REQUEST);

    /* The deadline: 1 with a time while a timer runs, 0 when none does. */
    uint64_t at = 0;
    int d = rmx_ep_deadline(e, &at);
    CHECK(d == 0 || d == 1);
    EXPECT(rmx_ep_deadline(e, 0), RMX_ERR_ARG);
    return 0;
}

/* Both windows' steps (opening, or a fence) moved on until both ended
 * well. */
static int win_steps(struct pair *pr, rmx_ep_win_t *w[2]) {
    int done[2] = {0, 0};
    for (long i = 0; !(done[0] && done[1]); i++) {
        CHECK(i < 2000000);
        for (int r = 0; r < 2; r++) {
            if (done[r]) continue;
            int t = rmx_ep_win_test(pr->ep[r], w[r]);
            CHECK(t >= 0);
            done[r] = t == 1;
        }
        TRY(pair_step(pr));
    }
    return 0;
}

/* A window of each rank, fenced in the deferred design: puts (small and
 * large, to the peer and to itself), accumulates of both ranks into one
 * place, and gets, each checked byte by byte after the fence; a second
 * epoch; refusals. */
static int windows(struct pair *pr) {
    enum { W = 8192, BIG = 3000, ACC = 16 };
    rmx_ep_win_config_t c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.max_ops = 16;
    uint8_t *base[2];
    void *mem[2];
    rmx_ep_win_t *w[2];
    for (int r = 0; r < 2; r++) {
        size_t size = 0;
        EXPECT(rmx_ep_win_size(pr->ep[r], W, &c, &size), 0);
        base[r] = SUITE_ALLOC(W);
        mem[r] = SUITE_ALLOC(size);
        CHECK(base[r] && mem[r]);
        for (size_t i = 0; i < W; i++) base[r][i] = byte_of(i, W, r);
        memset(base[r] + 4096, 0, ACC * sizeof(int32_t)); /* the accumulates' place */
        EXPECT(rmx_ep_win_create(pr->ep[r], base[r], W, &c, mem[r], size, &w[r]), 0);
    }
    /* The origins' buffers, off the stack (a kernel's is small). */
    struct bufs {
        uint8_t small[2][100], big[2][BIG], got[2][200];
        int32_t acc[2][ACC];
    } *b = SUITE_ALLOC(sizeof *b);
    CHECK(b);
    uint8_t(*small)[100] = b->small, (*big)[BIG] = b->big, (*got)[200] = b->got;
    int32_t(*acc)[ACC] = b->acc;
    TRY(win_steps(pr, w));
    for (int r = 0; r < 2; r++) {
        int peer = 1 - r;
        for (int i = 0; i < 100; i++) small[r][i] = (uint8_t)(0xa0 + r + i);
        for (int i = 0; i < BIG; i++) big[r][i] = byte_of((size_t)i, BIG, r + 7);
        for (int i = 0; i < ACC; i++) acc[r][i] = (i + 1) * (r + 1);
        memset(got[r], 0, sizeof got[r]);
        /* Into the peer: 100 bytes at 100·r, 3000 (apart from the header) at 1000. */
        EXPECT(rmx_ep_put(pr->ep[r], w[r], peer, 100 * (uint64_t)r, small[r], sizeof small[r]), 0);
        EXPECT(rmx_ep_put(pr->ep[r], w[r], peer, 1000, big[r], BIG), 0);
        /* Both ranks add into rank 0's accumulate place (rank 0 into its own). */
        EXPECT(rmx_ep_accumulate(pr->ep[r], w[r], 0, 4096, acc[r], sizeof acc[r], RMX_INT32, RMX_SUM), 0);
        /* Read the peer's bytes no one writes this epoch. */
        EXPECT(rmx_ep_get(pr->ep[r], w[r], peer, 6000, got[r], sizeof got[r]), 0);
        /* Its own window: a put applied at once. */
        EXPECT(rmx_ep_put(pr->ep[r], w[r], r, 7000, small[r], 10), 0);
    }
    /* Refused: outside the window, no such rank, a misaligned accumulate. */
    EXPECT(rmx_ep_put(pr->ep[0], w[0], 1, W - 10, small[0], 11), RMX_ERR_ARG);
    EXPECT(rmx_ep_put(pr->ep[0], w[0], 2, 0, small[0], 1), RMX_ERR_ARG);
    EXPECT(rmx_ep_accumulate(pr->ep[0], w[0], 1, 4097, acc[0], 8, RMX_INT32, RMX_SUM), RMX_ERR_ARG);
    EXPECT(rmx_ep_accumulate(pr->ep[0], w[0], 1, 4096, acc[0], 8, 99, RMX_SUM), RMX_ERR_ARG);
    EXPECT(rmx_ep_fence(pr->ep[0], w[0], 4), RMX_ERR_ARG);
    /* Another endpoint's window. */
    EXPECT(rmx_ep_put(pr->ep[1], w[0], 0, 0, small[0], 1), RMX_ERR_ARG);
    for (int r = 0; r < 2; r++) EXPECT(rmx_ep_fence(pr->ep[r], w[r], 0), 0);
    /* Under way: the window and its endpoint will not go. */
    EXPECT(rmx_ep_win_free(pr->ep[0], w[0]), RMX_ERR_BUSY);
    EXPECT(rmx_ep_put(pr->ep[0], w[0], 1, 0, small[0], 1), RMX_ERR_BUSY);
    EXPECT(rmx_ep_destroy(pr->ep[0]), RMX_ERR_BUSY);
    TRY(win_steps(pr, w));
    for (int r = 0; r < 2; r++) {
        int peer = 1 - r;
        for (int i = 0; i < 100; i++) CHECK(base[r][100 * peer + i] == small[peer][i]);
        for (int i = 0; i < BIG; i++) CHECK(base[r][1000 + i] == big[peer][i]);
        for (int i = 0; i < 10; i++) CHECK(base[r][7000 + i] == small[r][i]);
        for (int i = 0; i < 200; i++) CHECK(got[r][i] == byte_of(6000 + (size_t)i, W, peer));
    }
    int32_t sum[ACC];
    memcpy(sum, base[0] + 4096, sizeof sum);
    for (int i = 0; i < ACC; i++) CHECK(sum[i] == 3 * (i + 1));
    /* Rank 1's accumulate place was left alone. */
    for (int i = 0; i < ACC * 4; i++) CHECK(base[1][4096 + i] == 0);

    /* A second epoch, closed asserting that none follows. */
    for (int r = 0; r < 2; r++) {
        EXPECT(rmx_ep_put(pr->ep[r], w[r], 1 - r, 7500, small[r], 50), 0);
        EXPECT(rmx_ep_fence(pr->ep[r], w[r], RMX_EP_NO_SUCCEED), 0);
    }
    TRY(win_steps(pr, w));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 50; i++) CHECK(base[r][7500 + i] == small[1 - r][i]);
    /* None may follow that fence. */
    EXPECT(rmx_ep_put(pr->ep[0], w[0], 1, 0, small[0], 1), RMX_ERR_ARG);
    for (int r = 0; r < 2; r++) {
        EXPECT(rmx_ep_win_free(pr->ep[r], w[r]), 0);
        EXPECT(rmx_ep_win_test(pr->ep[r], w[r]), RMX_ERR_ARG);
        SUITE_FREE(mem[r]);
        SUITE_FREE(base[r]);
    }
    SUITE_FREE(b);
    return 0;
}

/* Every part, on ports in `mem` (2 * sizeof(struct port) bytes). */
static int ep_suite(struct port *mem) {
    static const struct {
        uint8_t rndv;
        const char *name;
    } RNDV[] = {{RMX_RNDV_AUTO, "auto"}, {RMX_RNDV_RPUT, "rput"}, {RMX_RNDV_RGET, "rget"}, {RMX_RNDV_PULL, "pull"}};
    struct pair pr;
    ports = mem;
    for (size_t i = 0; i < sizeof RNDV / sizeof RNDV[0]; i++) {
        TRY(pair_create(&pr, RNDV[i].rndv, 0, 0, 1));
        TRY(every_size(&pr, RNDV[i].name));
        TRY(unexpected_in_order(&pr));
        TRY(collectives(&pr, RNDV[i].name));
        TRY(windows(&pr));
        unsigned long rdma = ports[0].rdma_ops + ports[1].rdma_ops;
        /* RDMA carries the rendezvous that use it; PULL sends packets. */
        if (RNDV[i].rndv == RMX_RNDV_PULL)
            CHECK(rdma == 0);
        else
            CHECK(rdma > 0);
        CHECK(ports[0].inline_sends > 0);
        TRY(pair_destroy(&pr));
        SUITE_SAY("embedded: %s ok (%lu RDMA operations)", RNDV[i].name, rdma);
    }

    /* A port that loses one packet in 5: the core resends, timed by the
     * clock the suite passes in. */
    TRY(pair_create(&pr, RMX_RNDV_AUTO, 1, 5, 1));
    TRY(every_size(&pr, "lossy"));
    TRY(unexpected_in_order(&pr));
    TRY(collectives(&pr, "lossy"));
    TRY(windows(&pr));
    CHECK(ports[0].lost > 0 && ports[1].lost > 0);
    unsigned lost0 = ports[0].lost, lost1 = ports[1].lost;
    TRY(pair_destroy(&pr));
    SUITE_SAY("embedded: lossy ok (%u and %u packets lost)", lost0, lost1);

    /* A port without RDMA: messages up to the medium size go eagerly as
     * fragments of a packet each, larger ones by PULL. */
    TRY(pair_create(&pr, RMX_RNDV_AUTO, 0, 0, 0));
    TRY(every_size(&pr, "no-rdma"));
    TRY(collectives(&pr, "no-rdma"));
    TRY(windows(&pr));
    CHECK(ports[0].rdma_ops + ports[1].rdma_ops == 0);
    TRY(pair_destroy(&pr));
    SUITE_SAY("embedded: no-rdma ok");

    TRY(pair_create(&pr, RMX_RNDV_AUTO, 0, 0, 1));
    TRY(live_refusals(&pr));
    TRY(task_refusals(&pr));
    TRY(pair_destroy(&pr));
    TRY(refusals());
    SUITE_SAY("embedded: ok");
    return 0;
}
#endif
