//! The embedded endpoint's C entry points, as one body each: librmx
//! wraps them behind its panic guard and error words, the Linux module
//! exports them as they are. Every pointer is checked before it is used
//! (null, alignment, an endpoint's or a task's mark), every number
//! against its range; what a contract says the caller keeps valid is
//! trusted.

use core::ffi::{c_int, c_void};

pub use super::args::{bytes, peer, selection, ANY_SOURCE, ANY_TAG};
use super::code::OK;
use super::endpoint::{rmx_ep_config_t, rmx_ep_t, Ended, RMX_REQUEST_NULL};
use super::ops::rmx_port_ops_t;
use super::status::rmx_status_t;
use super::task::{rmx_coll_t, rmx_task_t};
use super::window::{self, rmx_ep_win_config_t, rmx_ep_win_t};
use super::{EmbedError, API_MAJOR, API_MINOR};
use rmx_core::onesided::RmaKind;

type R = Result<c_int, EmbedError>;

/// Refuses a header of another major version, or newer than this build.
pub fn version(header: u32) -> Result<(), EmbedError> {
    let (major, minor) = (header >> 16, header & 0xffff);
    match major == API_MAJOR && minor <= API_MINOR {
        true => Ok(()),
        false => Err(EmbedError::Version),
    }
}

/// `p` as a reference, or an argument error naming `what`.
///
/// # Safety
/// `p` is null or valid for `'a`, used nowhere else meanwhile.
unsafe fn out<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T, EmbedError> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }.ok_or(EmbedError::Arg(what))
}

/// `p` as a shared reference, or an argument error naming `what`.
///
/// # Safety
/// `p` is null or valid for `'a`.
unsafe fn get<'a, T>(p: *const T, what: &'static str) -> Result<&'a T, EmbedError> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }.ok_or(EmbedError::Arg(what))
}

/// `rmx_ep_size`.
///
/// # Safety
/// `config` and `size` are null or valid.
pub unsafe fn size(config: *const rmx_ep_config_t, size: *mut usize) -> R {
    // SAFETY: the caller's contract.
    let c = unsafe { get(config, "config is null") }?;
    // SAFETY: the caller's contract.
    let size = unsafe { out(size, "size is null") }?;
    *size = super::size(c)?;
    Ok(OK)
}

/// `rmx_ep_create_version`.
///
/// # Safety
/// As the C function's contract (rmx.h).
pub unsafe fn create(
    version: u32,
    mem: *mut c_void,
    size: usize,
    config: *const rmx_ep_config_t,
    ops: *const rmx_port_ops_t,
    port: *mut c_void,
    ep: *mut *mut rmx_ep_t,
) -> R {
    self::version(version)?;
    // SAFETY: the caller's contract.
    let c = unsafe { get(config, "config is null") }?;
    // SAFETY: the caller's contract.
    let ops = unsafe { get(ops, "ops is null") }?;
    // SAFETY: the caller's contract.
    let ep = unsafe { out(ep, "ep is null") }?;
    let mem = bytes(mem, size)?.cast_mut();
    // SAFETY: the caller's contract.
    *ep = unsafe { super::create(mem, size, c, ops, port) }?;
    Ok(OK)
}

/// `rmx_ep_progress`.
///
/// # Safety
/// `ep` is null or an endpoint.
pub unsafe fn progress(ep: *mut rmx_ep_t, now_ns: u64) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    Ok(e.progress(now_ns).min(c_int::MAX as usize) as c_int)
}

/// `rmx_ep_deadline`.
///
/// # Safety
/// `ep` is null or an endpoint; `deadline_ns` null or writable.
pub unsafe fn deadline(ep: *mut rmx_ep_t, deadline_ns: *mut u64) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let d = unsafe { out(deadline_ns, "deadline_ns is null") }?;
    Ok(match e.deadline() {
        Some(t) => {
            *d = t;
            1
        }
        None => 0,
    })
}

/// `rmx_ep_isend`.
///
/// # Safety
/// As the C function's contract (rmx.h).
pub unsafe fn isend(
    ep: *mut rmx_ep_t,
    dest: c_int,
    tag: u32,
    buf: *const c_void,
    len: usize,
    req: *mut u64,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let req = unsafe { out(req, "req is null") }?;
    let data = bytes(buf, len)?;
    let dest = peer(e.ranks(), dest)?;
    // SAFETY: the caller's contract keeps the bytes until the request
    // ended.
    *req = unsafe { e.isend(dest, tag, data, len) }?;
    Ok(OK)
}

/// `rmx_ep_irecv`.
///
/// # Safety
/// As the C function's contract (rmx.h).
pub unsafe fn irecv(
    ep: *mut rmx_ep_t,
    src: c_int,
    tag: i64,
    buf: *mut c_void,
    len: usize,
    req: *mut u64,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let req = unsafe { out(req, "req is null") }?;
    let data = bytes(buf, len)?.cast_mut();
    let (src, tag) = selection(e.ranks(), src, tag)?;
    // SAFETY: as for a send.
    *req = unsafe { e.irecv(src, tag, data, len) }?;
    Ok(OK)
}

/// `rmx_ep_test`.
///
/// # Safety
/// `ep` is null or an endpoint; `req` and `status` null or valid.
pub unsafe fn test(ep: *mut rmx_ep_t, req: *mut u64, status: *mut rmx_status_t) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let req = unsafe { out(req, "req is null") }?;
    // SAFETY: the caller's contract.
    let status = unsafe { status.as_mut() };
    let Some(ended) = e.test(*req)? else {
        return Ok(0);
    };
    let st = match ended {
        Ended::Null => rmx_status_t::sent(0),
        Ended::Sent(len) => rmx_status_t::sent(len),
        Ended::SendDone(st, len) => rmx_status_t::of(st, Some(len)),
        Ended::Received(st) => rmx_status_t::of(st, None),
    };
    *req = RMX_REQUEST_NULL;
    if let Some(s) = status {
        *s = st;
    }
    Ok(if st.error == 0 { 1 } else { st.error })
}

/// `rmx_ep_cancel`.
///
/// # Safety
/// `ep` is null or an endpoint; `req` null or valid.
pub unsafe fn cancel(ep: *mut rmx_ep_t, req: *const u64) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let h = *unsafe { get(req, "req is null") }?;
    Ok(c_int::from(e.cancel(h)?))
}

/// `rmx_ep_destroy`.
///
/// # Safety
/// `ep` is null or an endpoint, used by no call after this succeeded.
pub unsafe fn destroy(ep: *mut rmx_ep_t) -> R {
    // SAFETY: the caller's contract.
    unsafe { super::destroy(ep) }?;
    Ok(OK)
}

/// `rmx_ep_task_size`.
///
/// # Safety
/// `ep` is null or an endpoint; `what` and `size` null or valid.
pub unsafe fn task_size(ep: *mut rmx_ep_t, what: *const rmx_coll_t, size: *mut usize) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let c = unsafe { get(what, "what is null") }?;
    // SAFETY: the caller's contract.
    let size = unsafe { out(size, "size is null") }?;
    *size = super::task::size(e, c)?;
    Ok(OK)
}

/// `rmx_ep_task_start`.
///
/// # Safety
/// As the C function's contract (rmx.h).
pub unsafe fn task_start(
    ep: *mut rmx_ep_t,
    what: *const rmx_coll_t,
    data: *mut c_void,
    len: usize,
    mem: *mut c_void,
    size: usize,
    task: *mut *mut rmx_task_t,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let c = unsafe { get(what, "what is null") }?;
    // SAFETY: the caller's contract.
    let task = unsafe { out(task, "task is null") }?;
    let data = bytes(data, len)?.cast_mut();
    let mem = bytes(mem, size)?.cast_mut();
    // SAFETY: the caller's contract.
    *task = unsafe { super::task::start(e, c, data, len, mem, size) }?;
    Ok(OK)
}

/// `rmx_ep_task_test`.
///
/// # Safety
/// `ep` is null or an endpoint; `task` null or a task of it.
pub unsafe fn task_test(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    Ok(c_int::from(unsafe { super::task::test(e, task) }?))
}

/// `rmx_ep_task_abort`.
///
/// # Safety
/// As for [`task_test`].
pub unsafe fn task_abort(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    unsafe { super::task::abort(e, task) }?;
    Ok(OK)
}

/// `rmx_ep_win_size`.
///
/// # Safety
/// `ep` is null or an endpoint; `config` and `size` null or valid.
pub unsafe fn win_size(
    ep: *mut rmx_ep_t,
    len: usize,
    config: *const rmx_ep_win_config_t,
    size: *mut usize,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let c = unsafe { get(config, "config is null") }?;
    // SAFETY: the caller's contract.
    let size = unsafe { out(size, "size is null") }?;
    *size = window::size(e, len, c)?;
    Ok(OK)
}

/// `rmx_ep_win_create`.
///
/// # Safety
/// As the C function's contract (rmx.h).
pub unsafe fn win_create(
    ep: *mut rmx_ep_t,
    base: *mut c_void,
    len: usize,
    config: *const rmx_ep_win_config_t,
    mem: *mut c_void,
    size: usize,
    win: *mut *mut rmx_ep_win_t,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    let c = unsafe { get(config, "config is null") }?;
    // SAFETY: the caller's contract.
    let win = unsafe { out(win, "win is null") }?;
    let base = bytes(base, len)?.cast_mut();
    let mem = bytes(mem, size)?.cast_mut();
    // SAFETY: the caller's contract.
    *win = unsafe { window::create(e, base, len, c, mem, size) }?;
    Ok(OK)
}

/// `rmx_ep_win_test`.
///
/// # Safety
/// `ep` is null or an endpoint; `win` null or a window of it.
pub unsafe fn win_test(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    Ok(c_int::from(unsafe { window::test(e, win) }?))
}

/// `rmx_ep_put`, `rmx_ep_get` and `rmx_ep_accumulate`: `kind` on `len`
/// bytes at `buf`.
///
/// # Safety
/// As the C functions' contract (rmx.h).
pub unsafe fn rma(
    ep: *mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    target: c_int,
    disp: u64,
    buf: *const c_void,
    len: usize,
    kind: RmaKind,
) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    let buf = bytes(buf, len)?.cast_mut();
    // SAFETY: the caller's contract.
    unsafe { window::issue(e, win, target, disp, buf, len, kind) }?;
    Ok(OK)
}

/// An accumulate's kind for C's element type and reduction.
pub fn accumulate(ty: c_int, op: c_int) -> Result<RmaKind, EmbedError> {
    window::accumulate(ty, op)
}

/// `rmx_ep_fence`.
///
/// # Safety
/// `ep` is null or an endpoint; `win` null or a window of it.
pub unsafe fn fence(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t, assert: u32) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    unsafe { window::fence(e, win, assert) }?;
    Ok(OK)
}

/// `rmx_ep_win_free`.
///
/// # Safety
/// `ep` is null or an endpoint; `win` null or a window of it, used by no
/// call after this succeeded.
pub unsafe fn win_free(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t) -> R {
    // SAFETY: the caller's contract.
    let e = unsafe { super::live(ep) }?;
    // SAFETY: the caller's contract.
    unsafe { window::free(e, win) }?;
    Ok(OK)
}
