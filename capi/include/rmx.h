/* librmx: the C API of rmx, a message transport for RDMA and Ethernet.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Generated from capi/src by cbindgen (capi/tests/header.rs checks it is
 * current): edit the Rust source, not this file.
 *
 * Conventions: every function returns an int, 0 or more on success and a
 * negative RMX_ERR_* code on failure (rmx_strerror names it,
 * rmx_last_error says what to do); a null or out-of-range argument is an
 * error, never a crash; nothing moves unless the caller calls into rmx
 * (rmx_progress, rmx_test, rmx_wait) or starts a progress thread.
 *
 * In the Linux kernel, rmx.ko exports the embedded endpoint's functions
 * (rmx_ep_*) under these names and contracts, for a module that embeds
 * rmx over its own port; the rest is userspace's. */

#ifndef RMX_H
#define RMX_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

// A collective running on an endpoint, in memory the caller provides,
// from its start until a test reports its end. Opaque.
typedef struct rmx_task_t rmx_task_t;

// A window of an embedded endpoint, from its creation to its end.
// Opaque.
typedef struct rmx_ep_win_t rmx_ep_win_t;

// Element types of a reduction.
#define RMX_UINT8 0

#define RMX_UINT16 1

#define RMX_UINT32 2

#define RMX_UINT64 3

#define RMX_INT8 4

#define RMX_INT16 5

#define RMX_INT32 6

#define RMX_INT64 7

// Reductions (a sum wraps).
#define RMX_SUM 0

#define RMX_MIN 1

#define RMX_MAX 2

#define RMX_BAND 3

#define RMX_BOR 4

#define RMX_BXOR 5

// The alignment of every block given to `rmx_ep_create` and
// `rmx_ep_task_start`: a cache line, so no two endpoints share one.
#define RMX_EP_ALIGN 64

// Success.
#define RMX_OK 0

// A null pointer, or a value out of its range.
#define RMX_ERR_ARG -1

// The header the program was built with is newer than this library.
#define RMX_ERR_VERSION -2

// Not a live request of this rank (already ended, or never one).
#define RMX_ERR_REQUEST -3

// A table is full (request handles, posted receives): complete some.
#define RMX_ERR_NO_RESOURCE -4

// The peer (or a rank of the group) failed: it stopped answering.
#define RMX_ERR_PEER_FAILED -5

// More bytes than one message carries (4 GiB).
#define RMX_ERR_TOO_LONG -6

// The message was longer than the receive's buffer, which holds its
// first bytes.
#define RMX_ERR_TRUNCATED -7

// The request was cancelled before it matched.
#define RMX_ERR_CANCELLED -8

// The transfer failed below the protocol (a memory key, the connection,
// a buffer the NIC could not read).
#define RMX_ERR_TRANSFER -9

// The transport, its network or the launcher's bootstrap could not be
// set up (rmx_last_error says what to set).
#define RMX_ERR_SETUP -10

// The ranks called different collectives, or lengths that disagree.
#define RMX_ERR_MISMATCH -11

// The call cannot be made now (a rank with requests still out cannot be
// finalized).
#define RMX_ERR_BUSY -12

// A fault inside rmx, caught at the boundary (rmx_last_error has its
// words): a bug to report.
#define RMX_ERR_INTERNAL -13

// The most ranks `rmx_run` starts as threads of one process.
#define RMX_THREADS_MAX 256

// A receive from any rank.
#define RMX_ANY_SOURCE -1

// A receive of any tag.
#define RMX_ANY_TAG -1

// A port callback's result: done.
#define RMX_PORT_OK 0

// `post`: the work was done during the call (its completion is this).
#define RMX_PORT_DONE 1

// `post`: send queue full, or (a write with immediate) the peer has no
// receive buffer; nothing was done and the core posts it again later.
#define RMX_PORT_BUSY -1

// `post`, or a completion's `status`: the connection to the peer is gone.
#define RMX_PORT_DOWN -2

// `post` or `reg`: the port does not do this (the core does without).
#define RMX_PORT_UNSUPPORTED -3

// `post`, or a completion's `status`: a memory key or bound check failed.
#define RMX_PORT_ACCESS -4

// `reg`: out of registrations or pinnable memory.
#define RMX_PORT_NO_RESOURCE -5

// `rmx_work_t.kind`: the bytes of `sges`, in order, as one packet.
#define RMX_WORK_SEND 0

// `rmx_work_t.kind`: `head` then `body` as one packet, copied during the
// call (an inline send).
#define RMX_WORK_INLINE 1

// `rmx_work_t.kind`: write `sges[0]` to the peer's `remote_addr`.
#define RMX_WORK_RDMA_WRITE 2

// `rmx_work_t.kind`: read the peer's `remote_addr` into `sges[0]`.
#define RMX_WORK_RDMA_READ 3

// `rmx_work_t.kind`: write as `RMX_WORK_RDMA_WRITE`, then take one of the
// peer's receive buffers to report `imm` there.
#define RMX_WORK_WRITE_IMM 4

// `rmx_work_t.flags` (a send): also wake a thread sleeping on the peer.
#define RMX_WORK_SOLICITED 1

// `rmx_work_t.flags` (an inline send): report this send's completion;
// without it the port may report it only with a later signalled one.
#define RMX_WORK_SIGNAL 2

// `reg`'s `flags`: application memory, for remote access too (a
// rendezvous, a window); without it, memory of rmx's own (bounce slots)
// for local access.
#define RMX_REG_REMOTE 1

// `poll_recv`'s result: a packet is in `*buf`.
#define RMX_RECV_PACKET 1

// `poll_recv`'s result: a write with immediate landed, `*imm` its value
// (`*buf` the receive buffer it took, handed back at once).
#define RMX_RECV_IMM 2

// `rmx_ep_config_t.rendezvous`: the core picks by what the port can do
// (RGET, else RPUT, else PULL).
#define RMX_RNDV_AUTO 0

// The receiver's buffer is written by the sender (RDMA write).
#define RMX_RNDV_RPUT 1

// The sender's buffer is read by the receiver (RDMA read).
#define RMX_RNDV_RGET 2

// The receiver asks for frames, the sender sends them (no RDMA).
#define RMX_RNDV_PULL 3

// `rmx_coll_t.kind`: returns once every rank entered it.
#define RMX_COLL_BARRIER 0

// Every rank's `len` bytes become their reduction over all ranks.
#define RMX_COLL_ALLREDUCE 1

// Every rank ends with the root's `len` bytes.
#define RMX_COLL_BCAST 2

// The root ends with the reduction of every rank's `len` bytes (the
// others' are left partly reduced).
#define RMX_COLL_REDUCE 3

// Rank i gives block i (`len` bytes at i × `len`) of a buffer of n
// blocks; every rank ends with all of them.
#define RMX_COLL_ALLGATHER 4

// As allgather, but only the root ends with all blocks.
#define RMX_COLL_GATHER 5

// The root's n blocks of `len` bytes: rank i ends with block i.
#define RMX_COLL_SCATTER 6

// Every rank gives n blocks; rank i ends with the reduction of every
// rank's block i, at i × `len`.
#define RMX_COLL_REDUCE_SCATTER 7

// Rank i's n blocks (block j for rank j), then n blocks of room: it
// ends with block i of every rank j at (n + j) × `len`.
#define RMX_COLL_ALLTOALL 8

// `rmx_ep_fence`'s assertion: no operation of this rank's epoch ends
// at this fence (MPI_MODE_NOPRECEDE).
#define RMX_EP_NO_PRECEDE 1

// No operation follows this fence until the next (MPI_MODE_NOSUCCEED).
#define RMX_EP_NO_SUCCEED 2

// Changed when a function or type changes incompatibly.
#define RMX_API_MAJOR 0

// Raised when functions are added.
#define RMX_API_MINOR 2

// The version this header describes: major in the high 16 bits.
#define RMX_API_VERSION ((RMX_API_MAJOR << 16) | RMX_API_MINOR)

// How a window's fences complete its epochs (the fence paper's four
// designs): operations sent as messages inside the closing fence (every
// transport), or issued at once as RDMA and closed by finish messages
// and all-pairs flags, by finish messages and a barrier, or by counted
// writes with immediate (transports with RDMA: loop, verbs).
#define RMX_FENCE_DEFERRED 0

#define RMX_FENCE_NAIVE 1

#define RMX_FENCE_OPT 2

#define RMX_FENCE_RI 3

// What a fence may assume (MPI's `MPI_MODE_*`), or'ed: no operation of
// the epoch ends here; none follows until the next fence; the window's
// memory was not written locally; it will not be put into.
#define RMX_NO_PRECEDE 1

#define RMX_NO_SUCCEED 2

#define RMX_NO_STORE 4

#define RMX_NO_PUT 8

// Collective numbers a fence takes.
#define FenceTask_COLLECTIVES 2

// An endpoint in caller memory, from its creation to its destruction.
// Opaque.
typedef struct rmx_ep_t rmx_ep_t;

// One rank of a job: from `rmx_init` to `rmx_finalize`, or for the
// length of the `main` that `rmx_run` calls with it. Opaque.
typedef struct rmx_rank_t rmx_rank_t;

// What the port can do and its limits (0: no limit, or none).
typedef struct {
  // Non-zero: `RMX_WORK_RDMA_WRITE` works (the RPUT rendezvous).
  uint8_t rdma_write;
  // Non-zero: `RMX_WORK_RDMA_READ` works (the RGET rendezvous).
  uint8_t rdma_read;
  // Non-zero: `RMX_WORK_WRITE_IMM` works.
  uint8_t write_imm;
  // Non-zero: packets may be lost, duplicated or reordered; the core
  // then carries reliability itself (sequence numbers, acks, timers
  // that `rmx_ep_progress`'s clock drives).
  uint8_t lossy;
  // Non-zero: registering costs next to nothing and sends may gather
  // from application memory (a CPU-driven port).
  uint8_t cheap_gather;
  uint8_t reserved[3];
  // Largest RDMA operation in bytes.
  uint32_t max_transfer;
  // Largest inline send, header included (0: none).
  uint32_t inline_max;
  // Send work-queue entries per peer.
  uint32_t send_queue;
  // Receive buffers the port holds for packets.
  uint32_t rx_buffers;
  // Largest packet a send may carry: a receive buffer's size.
  uint32_t mtu;
} rmx_port_caps_t;

// What an endpoint is: its rank, its port, its protocol settings and
// its tables' sizes. A field left 0 takes its default.
typedef struct {
  // `sizeof(rmx_ep_config_t)`, so a later library knows which fields
  // a program set.
  uint32_t size;
  // This endpoint's rank, below `ranks`.
  uint16_t rank;
  // Ranks of the job: peers are named 0 … `ranks` − 1 in posts.
  uint16_t ranks;
  // Largest payload sent eagerly in one packet (default 8192, at most
  // the port's `mtu` less the core's 28-byte header).
  uint32_t eager;
  // Messages one peer may have unconsumed here (default 64).
  uint16_t credits;
  // `RMX_RNDV_*` (default `RMX_RNDV_AUTO`).
  uint8_t rendezvous;
  uint8_t reserved;
  // Requests pending at once (default 2048).
  uint32_t requests;
  // Send bounce slots, each `eager` bytes and a header (default 256).
  uint32_t slots;
  // Receives posted and not yet matched (default 1024).
  uint32_t posted;
  // Messages arrived and not yet received (default the larger of 1024
  // and the port's receive buffers).
  uint32_t unexpected;
  // What the port can do.
  rmx_port_caps_t caps;
} rmx_ep_config_t;

// One gather entry: `len` bytes at `addr`, registered under `key`.
typedef struct {
  size_t addr;
  size_t len;
  uint32_t key;
} rmx_sge_t;

// One work request, valid only during `post`: copy what is kept.
typedef struct {
  // `RMX_WORK_*`.
  uint32_t kind;
  // `RMX_WORK_SOLICITED`, `RMX_WORK_SIGNAL`.
  uint32_t flags;
  // A send's gather list; an RDMA operation's one local entry.
  const rmx_sge_t *sges;
  size_t nsge;
  // An inline send: `head_len` bytes at `head`, then `body_len` at `body`.
  const uint8_t *head;
  size_t head_len;
  const uint8_t *body;
  size_t body_len;
  // An RDMA operation: the peer's address and the key it registered.
  uint64_t remote_addr;
  uint32_t remote_key;
  // `RMX_WORK_WRITE_IMM`: the value the peer's receive reports.
  uint32_t imm;
} rmx_work_t;

// A finished post, as `poll_cq` reports it.
typedef struct {
  // The `wr_id` it was posted with.
  uint64_t wr_id;
  // `RMX_PORT_OK`, `RMX_PORT_ACCESS` or `RMX_PORT_DOWN`.
  int status;
} rmx_completion_t;

// The port's callbacks, each given the `port` pointer the endpoint was
// created with. rmx calls them only from inside an `rmx_ep_*` call on
// that endpoint, one at a time. Optional ones may be null.
typedef struct {
  // Registers `len` bytes at `addr` (`flags`: `RMX_REG_REMOTE`); the
  // key in `*key`. `RMX_PORT_OK`, `RMX_PORT_UNSUPPORTED` or
  // `RMX_PORT_NO_RESOURCE`.
  int (*reg)(void *port, size_t addr, size_t len, uint32_t flags, uint32_t *key);
  // Ends a registration: operations naming its key fail afterwards.
  void (*dereg)(void *port, size_t addr, size_t len, uint32_t key);
  // Posts `work` to `peer`: `RMX_PORT_DONE` (done during the call),
  // `RMX_PORT_OK` (reported later by `poll_cq` with `wr_id`), or an
  // `RMX_PORT_*` refusal (nothing done).
  int (*post)(void *port, uint16_t peer, uint64_t wr_id, const rmx_work_t *work);
  // The next received packet: 0 if none, `RMX_RECV_PACKET` (`*buf` names
  // it) or `RMX_RECV_IMM`.
  int (*poll_recv)(void *port, uint32_t *buf, uint32_t *imm);
  // The bytes of a polled buffer not yet reposted (their length in
  // `*len`), valid until it is reposted; null for any other.
  const uint8_t *(*rx_bytes)(void *port, uint32_t buf, size_t *len);
  // Hands a polled buffer back to the port: 1, or 0 if it was not held.
  int (*repost)(void *port, uint32_t buf);
  // Moves up to `max` finished posts, oldest first, into `out`: how many.
  size_t (*poll_cq)(void *port, rmx_completion_t *out, size_t max);
  // Optional: hands posts held for a batch to the network now.
  void (*doorbell)(void *port);
  // Optional: returns once no posted operation still reads or writes
  // memory (called before registrations end and the endpoint goes).
  void (*drain)(void *port);
} rmx_port_ops_t;

// A request C may hold: 0 is none.
typedef uint64_t rmx_request_t;

// How a request ended.
typedef struct {
  // The sender (a receive; what `RMX_ANY_SOURCE` matched), else -1.
  int source;
  // The message's tag (a receive; what `RMX_ANY_TAG` matched).
  uint32_t tag;
  // Bytes received into the buffer, or sent.
  size_t len;
  // 0, or the code the request ended with (`RMX_ERR_TRUNCATED`,
  // `RMX_ERR_CANCELLED`, `RMX_ERR_PEER_FAILED`, `RMX_ERR_TRANSFER`).
  int error;
} rmx_status_t;

// A collective, as every rank starts it alike.
typedef struct {
  // `RMX_COLL_*`.
  int kind;
  // A reducing collective's element type (`RMX_INT32` …).
  int ty;
  // A reducing collective's reduction (`RMX_SUM` …).
  int op;
  // A rooted collective's root.
  int root;
  // The data's bytes, or one block's (see each kind).
  size_t len;
} rmx_coll_t;

// A window's limits; a field left 0 takes its default.
typedef struct {
  // `sizeof(rmx_ep_win_config_t)`.
  uint32_t size;
  // Operations one epoch may issue (default 256).
  uint32_t max_ops;
  // Of them, gets of other ranks' windows (default `max_ops`).
  uint32_t max_gets;
  // Bytes one displacement counts (default 1).
  uint32_t disp_unit;
} rmx_ep_win_config_t;

// A rank's program, as `rmx_run` calls it: the rank (valid until it
// returns) and the caller's `arg`; what it returns (0 for success).
typedef int (*rmx_main_t)(rmx_rank_t *rank, void *arg);

// A window of a rank, as C holds it: 0 is none.
typedef uint64_t rmx_win_t;

// The handle no window has.
#define RMX_WIN_NULL 0

// The handle no request has (`RMX_REQUEST_NULL`).
#define RMX_REQUEST_NULL 0

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Returns once every rank of the job entered it: 0, or a negative code.
//
// Contract: `rank` is null or a live rank.
int rmx_barrier(rmx_rank_t *rank);

// Every rank's `count` elements of type `ty` at `data` become their
// element-wise reduction by `op` over all ranks (every rank passes the
// same `count`, `ty` and `op`): 0, or a negative code.
//
// Contract: `rank` is null or a live rank; `data` is null or names `count`
// elements.
int rmx_allreduce(rmx_rank_t *rank, void *data, size_t count, int ty, int op);

// Every rank's `len` bytes at `data` become `root`'s (every rank passes
// the same `len` and `root`): 0, or a negative code.
//
// Contract: `rank` is null or a live rank; `data` is null or names `len`
// bytes.
int rmx_bcast(rmx_rank_t *rank, void *data, size_t len, int root);

// `root`'s `out` receives the element-wise reduction by `op` of every
// rank's `count` elements of `ty` at `src`; `src` is left as it was, and
// `out` is not touched elsewhere (it may be null there).
//
// Contract: `rank` is null or a live rank; `src` is null or names `count`
// elements; at the root, `out` names `count` writable elements.
int rmx_reduce(rmx_rank_t *rank,
               const void *src,
               void *out,
               size_t count,
               int ty,
               int op,
               int root);

// `root`'s `out` receives every rank's `block` bytes at `src`, in rank
// order (`size × block` bytes); `out` is not touched elsewhere (it may
// be null there).
//
// Contract: `rank` is null or a live rank; `src` is null or names `block`
// bytes; at the root, `out` names `size × block` writable bytes.
int rmx_gather(rmx_rank_t *rank, const void *src, size_t block, void *out, int root);

// Every rank's `out` receives its own block of `block` bytes from
// `root`'s `src` (`size × block` bytes, in rank order); `src` is read at
// the root only (it may be null elsewhere).
//
// Contract: `rank` is null or a live rank; at the root, `src` names
// `size × block` bytes; `out` is null or names `block` writable bytes.
int rmx_scatter(rmx_rank_t *rank, const void *src, size_t block, void *out, int root);

// Every rank's `out` receives every rank's `block` bytes at `src`, in
// rank order (`size × block` bytes).
//
// Contract: `rank` is null or a live rank; `src` is null or names `block`
// bytes; `out` is null or names `size × block` writable bytes.
int rmx_allgather(rmx_rank_t *rank, const void *src, size_t block, void *out);

// Every rank's `out` receives, in rank order, the block for it of every
// rank's `src` (`size × block` bytes each: block j for rank j).
//
// Contract: `rank` is null or a live rank; `src` is null or names
// `size × block` bytes; `out` is null or names as many writable bytes.
int rmx_alltoall(rmx_rank_t *rank, const void *src, size_t block, void *out);

// Every rank's `out` receives the element-wise reduction by `op` over all
// ranks of their `count` elements for it: `src` holds `size × count`
// elements of `ty`, the `count` for rank j at `j × count` (MPI's
// reduce-scatter of equal blocks).
//
// Contract: `rank` is null or a live rank; `src` is null or names
// `size × count` elements; `out` is null or names `count` writable
// elements.
int rmx_reduce_scatter(rmx_rank_t *rank, const void *src, void *out, size_t count, int ty, int op);

// Writes the bytes an endpoint of `*config` needs into `*size` (the
// block given to `rmx_ep_create`, aligned to `RMX_EP_ALIGN`). 0, or
// `RMX_ERR_ARG` with the reason in `rmx_last_error`.
//
// Contract: `config` and `size` are null or valid.
int rmx_ep_size(const rmx_ep_config_t *config, size_t *size);

// Creates an endpoint of `*config` in the `size` bytes at `mem` (at
// least what `rmx_ep_size` says, aligned to `RMX_EP_ALIGN`), over the
// port `ops` with `port` as its callbacks' first argument; it in
// `*ep`. The port's `reg` is called once here (for the bounce slots).
// 0, or a negative code (`*ep` untouched, nothing kept). Use
// `rmx_ep_create`, which passes `RMX_API_VERSION`.
//
// Contract: `mem` is null or `size` writable bytes that the caller
// neither reads, writes nor frees until `rmx_ep_destroy` returned 0;
// `config`, `ops` and `ep` are null or valid; the callbacks keep the
// contracts `rmx_port_ops_t` states for as long as the endpoint lives.
int rmx_ep_create_version(uint32_t version,
                          void *mem,
                          size_t size,
                          const rmx_ep_config_t *config,
                          const rmx_port_ops_t *ops,
                          void *port,
                          rmx_ep_t **ep);

// Moves the endpoint on at time `now_ns` (any monotonic clock in
// nanoseconds; a time earlier than one given before counts as that one):
// the port's arrivals and completions, then the core's timers if one is
// due (retransmission on a lossy port, keepalives). How many packets and
// completions it handled, or a negative code. Nothing moves but in calls.
//
// Contract: `ep` is null or an endpoint from `rmx_ep_create`.
int rmx_ep_progress(rmx_ep_t *ep, uint64_t now_ns);

// The time by which `rmx_ep_progress` must be called for the core's
// timers, in `*deadline_ns`: 1, or 0 if no timer runs (only arrivals
// move it then). For a driver that arms a timer instead of polling.
//
// Contract: `ep` is null or an endpoint; `deadline_ns` null or writable.
int rmx_ep_deadline(rmx_ep_t *ep, uint64_t *deadline_ns);

// Starts a send of `len` bytes at `buf` to rank `dest` with `tag`; its
// request in `*req`. An eager message ends during the call (its request
// still needs `rmx_ep_test`); a larger one when the receiver has it.
// Posts may wait in the port until the next `rmx_ep_progress` or
// `rmx_ep_test` rings its doorbell. 0, or a negative code (nothing sent).
//
// Contract: `ep` is null or an endpoint; `buf` null or `len` readable
// bytes, unchanged until the request ended; `req` null or writable.
int rmx_ep_isend(rmx_ep_t *ep,
                 int dest,
                 uint32_t tag,
                 const void *buf,
                 size_t len,
                 rmx_request_t *req);

// Starts a receive into `len` bytes at `buf` of a message from `src`
// (or `RMX_ANY_SOURCE`) with `tag` (or `RMX_ANY_TAG`); its request in
// `*req`. 0, or a negative code (nothing posted).
//
// Contract: `ep` is null or an endpoint; `buf` null or `len` writable
// bytes, untouched by the caller until the request ended; `req` null or
// writable.
int rmx_ep_irecv(rmx_ep_t *ep, int src, int64_t tag, void *buf, size_t len, rmx_request_t *req);

// Tests `*req` once, without moving the endpoint (`rmx_ep_progress`
// does): 1 once it ended well, 0 while it runs, or a negative code. A
// request that ended (either way) is freed, its buffer the caller's
// again, and `*req` becomes `RMX_REQUEST_NULL`; `status` (may be null)
// gets how it ended. A negative code with `*req` unchanged is a refused
// call (`RMX_ERR_REQUEST`: not a live request). A null request is ended.
//
// Contract: `ep` is null or an endpoint; `req` and `status` null or valid.
int rmx_ep_test(rmx_ep_t *ep, rmx_request_t *req, rmx_status_t *status);

// Cancels a receive that has not matched: 1 if cancelled (its
// `rmx_ep_test` then ends it with `RMX_ERR_CANCELLED`), 0 if it had
// matched or is a send (it ends as it would have), or a negative code.
// It does not end the request: test it to its end.
//
// Contract: `ep` is null or an endpoint; `req` null or valid.
int rmx_ep_cancel(rmx_ep_t *ep, const rmx_request_t *req);

// Ends the endpoint: the port is drained (`drain`) and every
// registration ended (`dereg`); the block is the caller's again. 0, or
// `RMX_ERR_BUSY` while requests or tasks are pending (test them to
// their end, or cancel receives first), or a negative code.
//
// Contract: `ep` is null or an endpoint, used by no call after this.
int rmx_ep_destroy(rmx_ep_t *ep);

// Writes the bytes a task of `*what` on `ep` needs into `*size` (the
// block given to `rmx_ep_task_start`, aligned to `RMX_EP_ALIGN`): 0, or
// a negative code.
//
// Contract: `ep` is null or an endpoint; `what` and `size` null or valid.
int rmx_ep_task_size(rmx_ep_t *ep, const rmx_coll_t *what, size_t *size);

// Starts collective `*what` on `ep` over the `len` bytes at `data`
// (as its kind says), with its state and scratch in the `size` bytes at
// `mem` (`rmx_ep_task_size`, aligned to `RMX_EP_ALIGN`); the task in
// `*task`. Every rank starts the same collectives in the same order.
// 0, or a negative code (nothing started, the memory the caller's).
//
// Contract: `ep` is null or an endpoint; `data` null or `len` bytes and
// `mem` null or `size` bytes, both untouched by the caller until the
// task's test reports its end; `what` and `task` null or valid.
int rmx_ep_task_start(rmx_ep_t *ep,
                      const rmx_coll_t *what,
                      void *data,
                      size_t len,
                      void *mem,
                      size_t size,
                      rmx_task_t **task);

// Moves `task` on as far as it goes now (`rmx_ep_progress` moves the
// endpoint): 1 once it ended well, 0 while it runs, or the negative
// code it ended with. Once it ended (either way) its data holds the
// result, and its memory and data are the caller's again.
//
// Contract: `ep` is null or an endpoint; `task` null or a task of it.
int rmx_ep_task_test(rmx_ep_t *ep, rmx_task_t *task);

// Ends `task` early: its receives that have not matched are cancelled;
// test it to its end (`RMX_ERR_CANCELLED`, or how it ended if it
// already had). 0, or a negative code.
//
// Contract: as for `rmx_ep_task_test`.
int rmx_ep_task_abort(rmx_ep_t *ep, rmx_task_t *task);

// Writes the bytes a window of `len` bytes under `*config` needs on
// `ep` into `*size` (the block given to `rmx_ep_win_create`, aligned to
// `RMX_EP_ALIGN`; it holds a staging area as long as the window, where
// operations' data lands before it is applied): 0, or a negative code.
//
// Contract: `ep` is null or an endpoint; `config` and `size` null or valid.
int rmx_ep_win_size(rmx_ep_t *ep, size_t len, const rmx_ep_win_config_t *config, size_t *size);

// Starts creating a window over the `len` bytes at `base` (collective:
// every rank creates its windows in the same order), its state in the
// `size` bytes at `mem`; the window in `*win`. It opens once
// `rmx_ep_win_test` returns 1 (the ranks swap their windows'
// descriptors meanwhile). Fences follow the deferred design (operations
// queued, sent as messages in the closing fence): it runs on any port.
// 0, or a negative code (nothing started).
//
// Contract: `ep` is null or an endpoint; `base` null or `len` bytes and
// `mem` null or `size` bytes, the window's until `rmx_ep_win_free`
// returned 0 (the caller reads and writes `base` only outside fences
// and epochs that access it); `config` and `win` null or valid.
int rmx_ep_win_create(rmx_ep_t *ep,
                      void *base,
                      size_t len,
                      const rmx_ep_win_config_t *config,
                      void *mem,
                      size_t size,
                      rmx_ep_win_t **win);

// Moves the window's collective step on (its opening, or a fence): 1
// once it ended well (or none runs), 0 while it runs, or the negative
// code it ended with. `rmx_ep_progress` moves the endpoint.
//
// Contract: `ep` is null or an endpoint; `win` null or a window of it.
int rmx_ep_win_test(rmx_ep_t *ep, rmx_ep_win_t *win);

// Puts `len` bytes at `buf` into rank `target`'s window at displacement
// `disp` (in its unit), in this epoch: checked now against the target's
// window, carried out by the fence that ends the epoch. 0, or a negative
// code (nothing issued).
//
// Contract: `ep` is null or an endpoint; `win` null or an open window of
// it; `buf` null or `len` bytes, unchanged until that fence has ended.
int rmx_ep_put(rmx_ep_t *ep,
               rmx_ep_win_t *win,
               int target,
               uint64_t disp,
               const void *buf,
               size_t len);

// Gets `len` bytes of rank `target`'s window at `disp` into `buf`,
// written by the fence that ends the epoch (never after it ended). 0, or
// a negative code.
//
// Contract: as for `rmx_ep_put`; `buf` writable, untouched until that
// fence has ended.
int rmx_ep_get(rmx_ep_t *ep, rmx_ep_win_t *win, int target, uint64_t disp, void *buf, size_t len);

// Combines `len` bytes of elements of type `ty` at `buf` into rank
// `target`'s window at `disp` with `op` (concurrent accumulates to one
// place combine). 0, or a negative code.
//
// Contract: as for `rmx_ep_put`.
int rmx_ep_accumulate(rmx_ep_t *ep,
                      rmx_ep_win_t *win,
                      int target,
                      uint64_t disp,
                      const void *buf,
                      size_t len,
                      int ty,
                      int op);

// Starts the fence that ends the window's epoch and opens the next
// (collective), with `assert` (`RMX_EP_NO_PRECEDE`, `RMX_EP_NO_SUCCEED`,
// or 0); `rmx_ep_win_test` says when it ended, every operation of the
// epoch then carried out at every rank. 0, or a negative code.
//
// Contract: `ep` is null or an endpoint; `win` null or a window of it.
int rmx_ep_fence(rmx_ep_t *ep, rmx_ep_win_t *win, uint32_t assert);

// Ends the window: `RMX_ERR_BUSY` while its opening or a fence runs, or
// with operations not yet fenced. The window's memory and block are the
// caller's again. 0, or a negative code.
//
// Contract: `ep` is null or an endpoint; `win` null or a window of it,
// used by no call after this returned 0.
int rmx_ep_win_free(rmx_ep_t *ep, rmx_ep_win_t *win);

// A code's meaning, as a static string; "unknown error" for a code that
// is none of rmx's.
const char *rmx_strerror(int code);

// The last failure of an rmx call on this thread, in words that say
// what to do ("" if none failed yet). Valid until this thread's next
// failing call; owned by rmx.
const char *rmx_last_error(void);

// Sets up this process's rank of a job a launcher started (the
// transport from the environment) into `*rank`: 0, or a negative code
// (`RMX_ERR_SETUP` without a launcher: `rmx_last_error` says what to
// do). Called through `rmx_init`, which passes the header's
// `RMX_API_VERSION`.
//
// Contract: `rank` is null or writable.
int rmx_init_version(uint32_t api, rmx_rank_t **rank);

// Ends a rank `rmx_init` set up, once every rank of the job got here
// (its sends delivered), and tells the launcher: 0, or a negative code.
// Refused (`RMX_ERR_BUSY`, the rank still usable) while requests of it
// are live: end them first. The pointer is invalid afterwards.
//
// Contract: `rank` is null or a rank from `rmx_init`, not finalized.
int rmx_finalize(rmx_rank_t *rank);

// Runs `main` on every rank of a job: as `threads` threads of this
// process (1 … `RMX_THREADS_MAX`), or, when a launcher started it, once,
// on this process's rank
// (`threads` is then ignored). The transport from the environment. Each
// rank's live requests are ended when its `main` returns, so no buffer
// of it is written afterwards. 0 when every `main` returned 0; else the
// first rank's non-zero return, or a negative code of rmx's.
//
// Contract: `main` is null or a function as `rmx_main_t` says.
int rmx_run_version(uint32_t api, uint16_t threads, rmx_main_t main, void *arg);

// Starts a send of `len` bytes at `buf` to rank `dest` with `tag`; its
// request in `*req`. Small messages complete once copied; larger ones
// once the receiver has the data. 0, or a negative code (nothing sent,
// `*req` untouched).
//
// Contract: `rank` is null or a live rank; `buf` is null or names `len` readable
// bytes, unchanged until the request ended; `req` is null or writable.
int rmx_isend(rmx_rank_t *rank,
              int dest,
              uint32_t tag,
              const void *buf,
              size_t len,
              rmx_request_t *req);

// Starts a receive into `len` bytes at `buf`, of a message from `src`
// (or `RMX_ANY_SOURCE`) with `tag` (0 … 2^32 − 1, or `RMX_ANY_TAG`);
// its request in `*req`. 0, or a negative code (nothing posted).
//
// Contract: `rank` is null or a live rank; `buf` is null or names `len` writable
// bytes, untouched by the caller until the request ended; `req` is null
// or writable.
int rmx_irecv(rmx_rank_t *rank, int src, int64_t tag, void *buf, size_t len, rmx_request_t *req);

// Looks once (moving the rank on first) for a message a receive of
// `src` and `tag` would take now, and leaves it for that receive: 1 if
// one is here (`status`, may be null, gets its sender, tag and whole
// length), 0 if none, or a negative code.
//
// Contract: `rank` is null or a live rank; `status` is null or writable.
int rmx_iprobe(rmx_rank_t *rank, int src, int64_t tag, rmx_status_t *status);

// Waits until a message a receive of `src` and `tag` would take is
// here, as `rmx_iprobe` finds it: 0, or a negative code
// (`RMX_ERR_PEER_FAILED` if `src` failed with none left).
//
// Contract: as for `rmx_iprobe`.
int rmx_probe(rmx_rank_t *rank, int src, int64_t tag, rmx_status_t *status);

// Tests `*req` once (moving the rank on first): 1 once it ended well,
// 0 while it runs, or a negative code. A request that ended (either
// way) is freed and `*req` becomes `RMX_REQUEST_NULL`; a negative code
// with `*req` unchanged is a refused call (`RMX_ERR_REQUEST`: not a
// live request). `status` (may be null) gets how it ended. A null
// request is ended.
//
// Contract: `rank` is null or a live rank; `req` and `status` are null or valid.
int rmx_test(rmx_rank_t *rank, rmx_request_t *req, rmx_status_t *status);

// Waits for `*req` to end: 0 if it ended well, else the code it ended
// with (`*req` is then `RMX_REQUEST_NULL`), or a refused call's code
// (`*req` unchanged). `status` as for `rmx_test`.
//
// Contract: as for `rmx_test`.
int rmx_wait(rmx_rank_t *rank, rmx_request_t *req, rmx_status_t *status);

// Cancels `*req` and waits for its end, so that its buffer is the
// caller's again when this returns: 0, with `status->error`
// `RMX_ERR_CANCELLED` if it had not matched (a receive), or how it ended
// if it completed anyway (a send, or a receive that had matched);
// `*req` becomes `RMX_REQUEST_NULL`. A refused call's code otherwise.
//
// Contract: as for `rmx_test`.
int rmx_cancel(rmx_rank_t *rank, rmx_request_t *req, rmx_status_t *status);

// This rank's number in its job (0 … size − 1), or a negative code.
//
// Contract: `rank` is null or a live rank.
int rmx_rank_me(const rmx_rank_t *rank);

// The number of ranks of the job, or a negative code.
//
// Contract: `rank` is null or a live rank.
int rmx_rank_size(const rmx_rank_t *rank);

// Moves the rank's communication on once (packets in, completions,
// timers): the number of events handled (0 if none), or a negative code.
// Nothing moves between calls unless a progress thread runs.
//
// Contract: `rank` is null or a live rank.
int rmx_progress(rmx_rank_t *rank);

// Starts (`on` non-zero) or stops a thread that moves the rank's
// communication on while the caller computes (off by default). Calls
// stay allowed from any thread; each then shares the rank with it.
//
// Contract: `rank` is null or a live rank.
int rmx_set_progress_thread(rmx_rank_t *rank, int on);

// A file descriptor that turns readable when the rank has work after
// `rmx_rank_arm` (as `ucp_worker_get_efd`): for `poll(2)` or an `epoll`
// set of the caller's. Owned by the rank: valid until it ends, never
// closed by the caller. The same descriptor every call.
//
// Contract: `rank` is null or a live rank; `fd` is null or writable.
int rmx_rank_efd(rmx_rank_t *rank, int *fd);

// Prepares a sleep on `rmx_rank_efd`'s descriptor (as `ucp_worker_arm`):
// 0 when the caller may sleep on it, at most `*timeout_ms` milliseconds
// (-1: until it turns readable), then call `rmx_progress`;
// `RMX_ERR_BUSY` when work came meanwhile (it was taken: test requests,
// arm again). A progress thread, if on, takes events too.
//
// Contract: `rank` is null or a live rank; `timeout_ms` is null or writable.
int rmx_rank_arm(rmx_rank_t *rank, int *timeout_ms);

// `rmx_barrier`, started: its request in `*req`.
//
// Contract: `rank` is null or a live rank; `req` is null or writable.
int rmx_ibarrier(rmx_rank_t *rank, rmx_request_t *req);

// `rmx_allreduce`, started: its request in `*req`; the result is in
// `data` once the request ended well.
//
// Contract: as for `rmx_allreduce`, and `data` stays valid, untouched by the
// caller, until the request ended; `req` is null or writable.
int rmx_iallreduce(rmx_rank_t *rank, void *data, size_t count, int ty, int op, rmx_request_t *req);

// `rmx_bcast`, started: its request in `*req`; `data` holds `root`'s
// bytes once the request ended well.
//
// Contract: as for `rmx_bcast`, and `data` stays valid, untouched by the
// caller, until the request ended; `req` is null or writable.
int rmx_ibcast(rmx_rank_t *rank, void *data, size_t len, int root, rmx_request_t *req);

// `rmx_reduce`, started: its request in `*req`; `root`'s `out` holds the
// reduction once the request ended well.
//
// Contract: as for `rmx_reduce`, and `out` stays valid, untouched by the
// caller, until the request ended; `req` is null or writable.
int rmx_ireduce(rmx_rank_t *rank,
                const void *src,
                void *out,
                size_t count,
                int ty,
                int op,
                int root,
                rmx_request_t *req);

// `rmx_gather`, started: its request in `*req`; `root`'s `out` holds
// every rank's block once the request ended well.
//
// Contract: as for `rmx_gather`, and `out` stays valid, untouched by the
// caller, until the request ended; `req` is null or writable.
int rmx_igather(rmx_rank_t *rank,
                const void *src,
                size_t block,
                void *out,
                int root,
                rmx_request_t *req);

// `rmx_scatter`, started: its request in `*req`; `out` holds this rank's
// block once the request ended well.
//
// Contract: as for `rmx_scatter`, and `out` stays valid, untouched by the
// caller, until the request ended; `req` is null or writable.
int rmx_iscatter(rmx_rank_t *rank,
                 const void *src,
                 size_t block,
                 void *out,
                 int root,
                 rmx_request_t *req);

// `rmx_allgather`, started: its request in `*req`; `out` holds every
// rank's block once the request ended well.
//
// Contract: as for `rmx_allgather`, and `out` stays valid, untouched by
// the caller, until the request ended; `req` is null or writable.
int rmx_iallgather(rmx_rank_t *rank, const void *src, size_t block, void *out, rmx_request_t *req);

// `rmx_alltoall`, started: its request in `*req`; `out` holds the
// blocks for this rank once the request ended well.
//
// Contract: as for `rmx_alltoall`, and `out` stays valid, untouched by
// the caller, until the request ended; `req` is null or writable.
int rmx_ialltoall(rmx_rank_t *rank, const void *src, size_t block, void *out, rmx_request_t *req);

// `rmx_reduce_scatter`, started: its request in `*req`; `out` holds this
// rank's reduced block once the request ended well.
//
// Contract: as for `rmx_reduce_scatter`, and `out` stays valid,
// untouched by the caller, until the request ended; `req` is null or
// writable.
int rmx_ireduce_scatter(rmx_rank_t *rank,
                        const void *src,
                        void *out,
                        size_t count,
                        int ty,
                        int op,
                        rmx_request_t *req);

// The library's API version (as `RMX_API_VERSION`).
uint32_t rmx_api_version(void);

// Creates a window of `len` bytes (zeroed) on every rank, whose
// displacements count in `disp_unit` bytes, fenced by `design`; its
// handle in `*win`. Collective: every rank calls it, in the same order
// as its other window creations, with the same design.
//
// Contract: `rank` is null or a live rank; `win` is null or writable.
int rmx_win_create(rmx_rank_t *rank, size_t len, uint32_t disp_unit, int design, rmx_win_t *win);

// Frees a window: collective; an epoch still open is closed first (its
// operations complete, its gets land). `*win` becomes `RMX_WIN_NULL`.
//
// Contract: `rank` is null or a live rank; `win` is null or names a handle.
int rmx_win_free(rmx_rank_t *rank, rmx_win_t *win);

// Copies `len` bytes of `data` to displacement `disp` of rank `target`'s
// window; they are there once the fence that ends this epoch returned.
// `data` is free again when this returns.
//
// Contract: `rank` is null or a live rank; `data` is null or names `len`
// bytes.
int rmx_put(rmx_rank_t *rank,
            rmx_win_t win,
            const void *data,
            size_t len,
            uint16_t target,
            uint64_t disp);

// Reads `len` bytes at displacement `disp` of rank `target`'s window
// into `buf`, which receives them when the fence that ends this epoch
// ends (and is not written after).
//
// Contract: `rank` is null or a live rank; `buf` is null or names `len`
// writable bytes, left alone by the caller until that fence ended.
int rmx_get(rmx_rank_t *rank, rmx_win_t win, void *buf, size_t len, uint16_t target, uint64_t disp);

// Combines `count` elements of type `ty` (`RMX_UINT8` …) at `data` into
// rank `target`'s window at displacement `disp` by `op` (`RMX_SUM` …),
// element by element; done once the fence that ends this epoch
// returned. `data` is free again when this returns.
//
// Contract: `rank` is null or a live rank; `data` is null or names
// `count` elements.
int rmx_accumulate(rmx_rank_t *rank,
                   rmx_win_t win,
                   const void *data,
                   size_t count,
                   int ty,
                   int op,
                   uint16_t target,
                   uint64_t disp);

// Copies `len` bytes at offset `at` of this rank's own window memory to
// `buf` (`rmx_win_write`: from `data` into it). Between fences, as MPI
// allows local access.
//
// Contract: `rank` is null or a live rank; `buf` is null or names `len`
// writable bytes.
int rmx_win_read(rmx_rank_t *rank, rmx_win_t win, size_t at, void *buf, size_t len);

// See `rmx_win_read`.
//
// Contract: `rank` is null or a live rank; `data` is null or names `len`
// bytes.
int rmx_win_write(rmx_rank_t *rank, rmx_win_t win, size_t at, const void *data, size_t len);

// Ends the epoch and opens the next: every operation this rank issued,
// and every one aimed at it, is done, and the epoch's gets have landed,
// when this returns. `assert`: `RMX_NO_*` or'ed, the same on every rank.
// Collective.
//
// Contract: `rank` is null or a live rank.
int rmx_win_fence(rmx_rank_t *rank, rmx_win_t win, unsigned int assert);

// `rmx_win_fence`, started: its request in `*req`, ended by `rmx_test`
// or `rmx_wait` (the gets land then); the window refuses other calls
// until it ended.
//
// Contract: `rank` is null or a live rank; `req` is null or writable.
int rmx_win_ifence(rmx_rank_t *rank, rmx_win_t win, unsigned int assert, rmx_request_t *req);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* RMX_H */

#ifndef RMX_H_INLINE
#define RMX_H_INLINE
/* The API version this header describes, passed to the library, which
 * refuses a header newer than itself (as ucp_init passes UCP_API_VERSION). */
static inline int rmx_init(rmx_rank_t **rank) {
    return rmx_init_version(RMX_API_VERSION, rank);
}

static inline int rmx_run(uint16_t threads, rmx_main_t main, void *arg) {
    return rmx_run_version(RMX_API_VERSION, threads, main, arg);
}

static inline int rmx_ep_create(void *mem, size_t size, const rmx_ep_config_t *config,
                                const rmx_port_ops_t *ops, void *port, rmx_ep_t **ep) {
    return rmx_ep_create_version(RMX_API_VERSION, mem, size, config, ops, port, ep);
}
#endif /* RMX_H_INLINE */
