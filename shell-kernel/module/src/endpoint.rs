//! In-kernel endpoints: rmx-driver's embedded endpoint (the core in
//! memory its user gives, over a port of C callbacks), exported to other
//! modules under the names and signatures librmx gives it in userspace
//! (`rmx.h`'s `rmx_ep_*`), so a driver's port and its use of rmx read
//! the same in both. Results are librmx's codes (`RMX_ERR_*`), not
//! errnos. A panic stops the calling thread with a kernel bug report, as
//! every panic of this module does; the calls check their arguments so
//! that none is reachable from a caller keeping the contracts.

use core::ffi::{c_int, c_void};

use rmx_core::onesided::RmaKind;
use rmx_driver::embed::calls;
use rmx_driver::embed::ops::rmx_port_ops_t;
use rmx_driver::embed::{
    rmx_coll_t, rmx_ep_config_t, rmx_ep_t, rmx_ep_win_config_t, rmx_ep_win_t, rmx_status_t,
    rmx_task_t, EmbedError,
};

fn code(r: Result<c_int, EmbedError>) -> c_int {
    r.unwrap_or_else(|e| e.code())
}

/// Exports each `rmx_ep_*` function as the call of `embed::calls` it is.
macro_rules! export {
    ($(fn $name:ident => $call:ident($($arg:ident: $ty:ty),*);)*) => {$(
        /// # Safety
        /// As `rmx.h` states for the function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            // SAFETY: the caller's contract is the call's.
            code(unsafe { calls::$call($($arg),*) })
        }
    )*};
}

export! {
    fn rmx_ep_size => size(config: *const rmx_ep_config_t, size: *mut usize);
    fn rmx_ep_create_version => create(
        version: u32,
        mem: *mut c_void,
        size: usize,
        config: *const rmx_ep_config_t,
        ops: *const rmx_port_ops_t,
        port: *mut c_void,
        ep: *mut *mut rmx_ep_t
    );
    fn rmx_ep_progress => progress(ep: *mut rmx_ep_t, now_ns: u64);
    fn rmx_ep_deadline => deadline(ep: *mut rmx_ep_t, deadline_ns: *mut u64);
    fn rmx_ep_isend => isend(
        ep: *mut rmx_ep_t,
        dest: c_int,
        tag: u32,
        buf: *const c_void,
        len: usize,
        req: *mut u64
    );
    fn rmx_ep_irecv => irecv(
        ep: *mut rmx_ep_t,
        src: c_int,
        tag: i64,
        buf: *mut c_void,
        len: usize,
        req: *mut u64
    );
    fn rmx_ep_test => test(ep: *mut rmx_ep_t, req: *mut u64, status: *mut rmx_status_t);
    fn rmx_ep_cancel => cancel(ep: *mut rmx_ep_t, req: *const u64);
    fn rmx_ep_destroy => destroy(ep: *mut rmx_ep_t);
    fn rmx_ep_task_size => task_size(ep: *mut rmx_ep_t, what: *const rmx_coll_t, size: *mut usize);
    fn rmx_ep_task_start => task_start(
        ep: *mut rmx_ep_t,
        what: *const rmx_coll_t,
        data: *mut c_void,
        len: usize,
        mem: *mut c_void,
        size: usize,
        task: *mut *mut rmx_task_t
    );
    fn rmx_ep_task_test => task_test(ep: *mut rmx_ep_t, task: *mut rmx_task_t);
    fn rmx_ep_task_abort => task_abort(ep: *mut rmx_ep_t, task: *mut rmx_task_t);
    fn rmx_ep_win_size => win_size(
        ep: *mut rmx_ep_t,
        len: usize,
        config: *const rmx_ep_win_config_t,
        size: *mut usize
    );
    fn rmx_ep_win_create => win_create(
        ep: *mut rmx_ep_t,
        base: *mut c_void,
        len: usize,
        config: *const rmx_ep_win_config_t,
        mem: *mut c_void,
        size: usize,
        win: *mut *mut rmx_ep_win_t
    );
    fn rmx_ep_win_test => win_test(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t);
    fn rmx_ep_fence => fence(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t, assert: u32);
    fn rmx_ep_win_free => win_free(ep: *mut rmx_ep_t, win: *mut rmx_ep_win_t);
}

/// # Safety
/// As `rmx.h` states for `rmx_ep_put`.
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
    code(unsafe { calls::rma(ep, win, target, disp, buf, len, RmaKind::Put) })
}

/// # Safety
/// As `rmx.h` states for `rmx_ep_get`.
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
    code(unsafe { calls::rma(ep, win, target, disp, buf, len, RmaKind::Get) })
}

/// # Safety
/// As `rmx.h` states for `rmx_ep_accumulate`.
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
    let kind = match calls::accumulate(ty, op) {
        Ok(k) => k,
        Err(e) => return e.code(),
    };
    // SAFETY: the caller's contract is the call's.
    code(unsafe { calls::rma(ep, win, target, disp, buf, len, kind) })
}
