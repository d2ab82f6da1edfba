//! The core for a C runtime or driver (`rmx_ep_*`): one endpoint in
//! memory the caller provides, over a port the caller implements
//! (`rmx_port_ops_t`), moved on only when the caller calls in with the
//! time. No thread, no allocation, no clock of its own. Each entry point
//! is rmx-driver's ([`calls`]), which the Linux module exports as it is,
//! here behind the boundary's guard and with its failure in words.
//!
//! Each endpoint's calls come one at a time (the caller serialises them);
//! two endpoints are independent.

use std::ffi::{c_int, c_void};

use rmx_core::onesided::RmaKind;
use rmx_driver::embed::calls;
use rmx_driver::embed::ops::rmx_port_ops_t;
use rmx_driver::embed::{
    rmx_coll_t, rmx_ep_config_t, rmx_ep_t, rmx_ep_win_config_t, rmx_ep_win_t, rmx_task_t,
};

use crate::guard::guard;
use crate::requests::rmx_request_t;
use crate::status::rmx_status_t;

/// The alignment of every block given to `rmx_ep_create` and
/// `rmx_ep_task_start`: a cache line, so no two endpoints share one.
pub const RMX_EP_ALIGN: usize = 64;
const _: () = assert!(RMX_EP_ALIGN == rmx_driver::embed::ALIGN);

/// Writes the bytes an endpoint of `*config` needs into `*size` (the
/// block given to `rmx_ep_create`, aligned to `RMX_EP_ALIGN`). 0, or
/// `RMX_ERR_ARG` with the reason in `rmx_last_error`.
///
/// Contract: `config` and `size` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_size(config: *const rmx_ep_config_t, size: *mut usize) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::size(config, size) }?))
}

/// Creates an endpoint of `*config` in the `size` bytes at `mem` (at
/// least what `rmx_ep_size` says, aligned to `RMX_EP_ALIGN`), over the
/// port `ops` with `port` as its callbacks' first argument; it in
/// `*ep`. The port's `reg` is called once here (for the bounce slots).
/// 0, or a negative code (`*ep` untouched, nothing kept). Use
/// `rmx_ep_create`, which passes `RMX_API_VERSION`.
///
/// Contract: `mem` is null or `size` writable bytes that the caller
/// neither reads, writes nor frees until `rmx_ep_destroy` returned 0;
/// `config`, `ops` and `ep` are null or valid; the callbacks keep the
/// contracts `rmx_port_ops_t` states for as long as the endpoint lives.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_create_version(
    version: u32,
    mem: *mut c_void,
    size: usize,
    config: *const rmx_ep_config_t,
    ops: *const rmx_port_ops_t,
    port: *mut c_void,
    ep: *mut *mut rmx_ep_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::create(version, mem, size, config, ops, port, ep) }?))
}

/// Moves the endpoint on at time `now_ns` (any monotonic clock in
/// nanoseconds; a time earlier than one given before counts as that one):
/// the port's arrivals and completions, then the core's timers if one is
/// due (retransmission on a lossy port, keepalives). How many packets and
/// completions it handled, or a negative code. Nothing moves but in calls.
///
/// Contract: `ep` is null or an endpoint from `rmx_ep_create`.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_progress(ep: *mut rmx_ep_t, now_ns: u64) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::progress(ep, now_ns) }?))
}

/// The time by which `rmx_ep_progress` must be called for the core's
/// timers, in `*deadline_ns`: 1, or 0 if no timer runs (only arrivals
/// move it then). For a driver that arms a timer instead of polling.
///
/// Contract: `ep` is null or an endpoint; `deadline_ns` null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_deadline(ep: *mut rmx_ep_t, deadline_ns: *mut u64) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::deadline(ep, deadline_ns) }?))
}

/// Starts a send of `len` bytes at `buf` to rank `dest` with `tag`; its
/// request in `*req`. An eager message ends during the call (its request
/// still needs `rmx_ep_test`); a larger one when the receiver has it.
/// Posts may wait in the port until the next `rmx_ep_progress` or
/// `rmx_ep_test` rings its doorbell. 0, or a negative code (nothing sent).
///
/// Contract: `ep` is null or an endpoint; `buf` null or `len` readable
/// bytes, unchanged until the request ended; `req` null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_isend(
    ep: *mut rmx_ep_t,
    dest: c_int,
    tag: u32,
    buf: *const c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::isend(ep, dest, tag, buf, len, req) }?))
}

/// Starts a receive into `len` bytes at `buf` of a message from `src`
/// (or `RMX_ANY_SOURCE`) with `tag` (or `RMX_ANY_TAG`); its request in
/// `*req`. 0, or a negative code (nothing posted).
///
/// Contract: `ep` is null or an endpoint; `buf` null or `len` writable
/// bytes, untouched by the caller until the request ended; `req` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_irecv(
    ep: *mut rmx_ep_t,
    src: c_int,
    tag: i64,
    buf: *mut c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::irecv(ep, src, tag, buf, len, req) }?))
}

/// Tests `*req` once, without moving the endpoint (`rmx_ep_progress`
/// does): 1 once it ended well, 0 while it runs, or a negative code. A
/// request that ended (either way) is freed, its buffer the caller's
/// again, and `*req` becomes `RMX_REQUEST_NULL`; `status` (may be null)
/// gets how it ended. A negative code with `*req` unchanged is a refused
/// call (`RMX_ERR_REQUEST`: not a live request). A null request is ended.
///
/// Contract: `ep` is null or an endpoint; `req` and `status` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_test(
    ep: *mut rmx_ep_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::test(ep, req, status) }?))
}

/// Cancels a receive that has not matched: 1 if cancelled (its
/// `rmx_ep_test` then ends it with `RMX_ERR_CANCELLED`), 0 if it had
/// matched or is a send (it ends as it would have), or a negative code.
/// It does not end the request: test it to its end.
///
/// Contract: `ep` is null or an endpoint; `req` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_cancel(ep: *mut rmx_ep_t, req: *const rmx_request_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::cancel(ep, req) }?))
}

/// Ends the endpoint: the port is drained (`drain`) and every
/// registration ended (`dereg`); the block is the caller's again. 0, or
/// `RMX_ERR_BUSY` while requests or tasks are pending (test them to
/// their end, or cancel receives first), or a negative code.
///
/// Contract: `ep` is null or an endpoint, used by no call after this.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_destroy(ep: *mut rmx_ep_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::destroy(ep) }?))
}

/// Writes the bytes a task of `*what` on `ep` needs into `*size` (the
/// block given to `rmx_ep_task_start`, aligned to `RMX_EP_ALIGN`): 0, or
/// a negative code.
///
/// Contract: `ep` is null or an endpoint; `what` and `size` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_size(
    ep: *mut rmx_ep_t,
    what: *const rmx_coll_t,
    size: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::task_size(ep, what, size) }?))
}

/// Starts collective `*what` on `ep` over the `len` bytes at `data`
/// (as its kind says), with its state and scratch in the `size` bytes at
/// `mem` (`rmx_ep_task_size`, aligned to `RMX_EP_ALIGN`); the task in
/// `*task`. Every rank starts the same collectives in the same order.
/// 0, or a negative code (nothing started, the memory the caller's).
///
/// Contract: `ep` is null or an endpoint; `data` null or `len` bytes and
/// `mem` null or `size` bytes, both untouched by the caller until the
/// task's test reports its end; `what` and `task` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_start(
    ep: *mut rmx_ep_t,
    what: *const rmx_coll_t,
    data: *mut c_void,
    len: usize,
    mem: *mut c_void,
    size: usize,
    task: *mut *mut rmx_task_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::task_start(ep, what, data, len, mem, size, task) }?))
}

/// Moves `task` on as far as it goes now (`rmx_ep_progress` moves the
/// endpoint): 1 once it ended well, 0 while it runs, or the negative
/// code it ended with. Once it ended (either way) its data holds the
/// result, and its memory and data are the caller's again.
///
/// Contract: `ep` is null or an endpoint; `task` null or a task of it.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_test(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::task_test(ep, task) }?))
}

/// Ends `task` early: its receives that have not matched are cancelled;
/// test it to its end (`RMX_ERR_CANCELLED`, or how it ended if it
/// already had). 0, or a negative code.
///
/// Contract: as for `rmx_ep_task_test`.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_abort(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::task_abort(ep, task) }?))
}

/// Writes the bytes a window of `len` bytes under `*config` needs on
/// `ep` into `*size` (the block given to `rmx_ep_win_create`, aligned to
/// `RMX_EP_ALIGN`; it holds a staging area as long as the window, where
/// operations' data lands before it is applied): 0, or a negative code.
///
/// Contract: `ep` is null or an endpoint; `config` and `size` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_win_size(
    ep: *mut rmx_ep_t,
    len: usize,
    config: *const rmx_ep_win_config_t,
    size: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::win_size(ep, len, config, size) }?))
}

/// Starts creating a window over the `len` bytes at `base` (collective:
/// every rank creates its windows in the same order), its state in the
/// `size` bytes at `mem`; the window in `*win`. It opens once
/// `rmx_ep_win_test` returns 1 (the ranks swap their windows'
/// descriptors meanwhile). Fences follow the deferred design (operations
/// queued, sent as messages in the closing fence): it runs on any port.
/// 0, or a negative code (nothing started).
///
/// Contract: `ep` is null or an endpoint; `base` null or `len` bytes and
/// `mem` null or `size` bytes, the window's until `rmx_ep_win_free`
/// returned 0 (the caller reads and writes `base` only outside fences
/// and epochs that access it); `config` and `win` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_win_create(
    ep: *mut rmx_ep_t,
    base: *mut c_void,
    len: usize,
    config: *const rmx_ep_win_config_t,
    mem: *mut c_void,
    size: usize,
    win: *mut *mut rmx_ep_win_t,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::win_create(ep, base, len, config, mem, size, win) }?))
}

/// Moves the window's collective step on (its opening, or a fence): 1
/// once it ended well (or none runs), 0 while it runs, or the negative
/// code it ended with. `rmx_ep_progress` moves the endpoint.
///
/// Contract: `ep` is null or an endpoint; `win` null or a window of it.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_win_test(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::win_test(ep, win) }?))
}

/// Puts `len` bytes at `buf` into rank `target`'s window at displacement
/// `disp` (in its unit), in this epoch: checked now against the target's
/// window, carried out by the fence that ends the epoch. 0, or a negative
/// code (nothing issued).
///
/// Contract: `ep` is null or an endpoint; `win` null or an open window of
/// it; `buf` null or `len` bytes, unchanged until that fence has ended.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_put(
    ep: *mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    target: c_int,
    disp: u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::rma(ep, win, target, disp, buf, len, RmaKind::Put) }?))
}

/// Gets `len` bytes of rank `target`'s window at `disp` into `buf`,
/// written by the fence that ends the epoch (never after it ended). 0, or
/// a negative code.
///
/// Contract: as for `rmx_ep_put`; `buf` writable, untouched until that
/// fence has ended.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_get(
    ep: *mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    target: c_int,
    disp: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::rma(ep, win, target, disp, buf, len, RmaKind::Get) }?))
}

/// Combines `len` bytes of elements of type `ty` at `buf` into rank
/// `target`'s window at `disp` with `op` (concurrent accumulates to one
/// place combine). 0, or a negative code.
///
/// Contract: as for `rmx_ep_put`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rmx_ep_accumulate(
    ep: *mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    target: c_int,
    disp: u64,
    buf: *const c_void,
    len: usize,
    ty: c_int,
    op: c_int,
) -> c_int {
    guard(|| {
        let kind = calls::accumulate(ty, op)?;
        // SAFETY: the caller's contract is the call's.
        Ok(unsafe { calls::rma(ep, win, target, disp, buf, len, kind) }?)
    })
}

/// Starts the fence that ends the window's epoch and opens the next
/// (collective), with `assert` (`RMX_EP_NO_PRECEDE`, `RMX_EP_NO_SUCCEED`,
/// or 0); `rmx_ep_win_test` says when it ended, every operation of the
/// epoch then carried out at every rank. 0, or a negative code.
///
/// Contract: `ep` is null or an endpoint; `win` null or a window of it.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_fence(
    ep: *mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    assert: u32,
) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::fence(ep, win, assert) }?))
}

/// Ends the window: `RMX_ERR_BUSY` while its opening or a fence runs, or
/// with operations not yet fenced. The window's memory and block are the
/// caller's again. 0, or a negative code.
///
/// Contract: `ep` is null or an endpoint; `win` null or a window of it,
/// used by no call after this returned 0.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_win_free(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t) -> c_int {
    // SAFETY: the caller's contract is the call's.
    guard(|| Ok(unsafe { calls::win_free(ep, win) }?))
}
