//! The boundary every entry point goes through: a panic inside rmx is
//! caught there and becomes `RMX_ERR_INTERNAL` with its words, and a
//! failure's words are kept for `rmx_last_error`.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::errors::{Error, RMX_ERR_INTERNAL};

/// Runs `f`: its value, or its error's code (its words kept).
pub(crate) fn guard(f: impl FnOnce() -> Result<c_int, Error>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.report(),
        Err(panic) => {
            let what = rmx_linux::say::panic_words(&*panic);
            Error::new(RMX_ERR_INTERNAL, format!("internal fault in rmx: {what}")).report()
        }
    }
}

/// `p` as a reference, or an argument error naming `what`.
///
/// # Safety
/// `p` is null or points to a valid `T` for `'a`, not used elsewhere
/// meanwhile.
pub(crate) unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }.ok_or_else(|| Error::arg(format!("{what} is null")))
}

/// `len` bytes at `buf`: null only when empty.
pub(crate) fn bytes(buf: *const c_void, len: usize) -> Result<*const u8, Error> {
    Ok(rmx_driver::embed::calls::bytes(buf, len)?)
}

/// `len` bytes at `p` (null only when empty), read.
///
/// # Safety
/// `p` is null or names `len` readable bytes.
pub(crate) unsafe fn read<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], Error> {
    let p = bytes(p, len)?;
    // SAFETY: the caller's contract (a dangling pointer when empty).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `len` bytes at `p` (null only when empty), written.
///
/// # Safety
/// `p` is null or names `len` writable bytes.
pub(crate) unsafe fn write<'a>(p: *mut c_void, len: usize) -> Result<&'a mut [u8], Error> {
    let p = bytes(p, len)?.cast_mut();
    // SAFETY: the caller's contract (a dangling pointer when empty).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}
