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
 * (rmx_progress, rmx_test, rmx_wait) or starts a progress thread. */

#ifndef RMX_H
#define RMX_H

#include <stddef.h>
#include <stdint.h>

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

// Changed when a function or type changes incompatibly.
#define RMX_API_MAJOR 0

// Raised when functions are added.
#define RMX_API_MINOR 1

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

// One rank of a job: from `rmx_init` to `rmx_finalize`, or for the
// length of the `main` that `rmx_run` calls with it. Opaque.
typedef struct rmx_rank_t rmx_rank_t;

// A rank's program, as `rmx_run` calls it: the rank (valid until it
// returns) and the caller's `arg`; what it returns (0 for success).
typedef int (*rmx_main_t)(rmx_rank_t *rank, void *arg);

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
#endif /* RMX_H_INLINE */
