//! What `MPI_Error_string` says: the class's meaning, and the words of
//! the last error of that class this process saw (which name the call's
//! own cause, e.g. the function rmx does not support).

use std::ffi::c_int;
use std::sync::Mutex;

use crate::abi::*;

static LAST: Mutex<Option<(c_int, String)>> = Mutex::new(None);

/// Keeps `what` as the words of the last error of `class`.
pub fn keep(class: c_int, what: &str) {
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some((class, what.to_string()));
}

/// The meaning of an error class.
pub fn meaning(class: c_int) -> &'static str {
    match class {
        MPI_SUCCESS => "no error",
        MPI_ERR_BUFFER => "invalid buffer",
        MPI_ERR_COUNT => "invalid count",
        MPI_ERR_TYPE => "invalid datatype",
        MPI_ERR_TAG => "invalid tag",
        MPI_ERR_COMM => "invalid communicator",
        MPI_ERR_RANK => "invalid rank",
        MPI_ERR_REQUEST => "invalid request",
        MPI_ERR_ROOT => "invalid root",
        MPI_ERR_OP => "invalid reduction",
        MPI_ERR_ARG => "invalid argument",
        MPI_ERR_TRUNCATE => "message truncated",
        MPI_ERR_OTHER => "other error",
        MPI_ERR_INTERN => "internal error",
        MPI_ERR_IN_STATUS => "error in a status",
        MPI_ERR_ASSERT => "invalid assertion",
        MPI_ERR_DISP => "invalid displacement",
        MPI_ERR_NO_MEM => "out of memory",
        MPI_ERR_RMA_RANGE => "access outside the window",
        MPI_ERR_RMA_SYNC => "window operation outside an epoch",
        MPI_ERR_SIZE => "invalid size",
        MPI_ERR_UNSUPPORTED_OPERATION => "operation not supported",
        MPI_ERR_WIN => "invalid window",
        MPI_ERR_PROC_ABORTED => "a peer process failed",
        MPI_ERR_ERRHANDLER => "invalid error handler",
        c if (0..=MPI_ERR_LASTCODE).contains(&c) => "error",
        _ => "unknown error code",
    }
}

/// The string for `code`: its meaning, and the last words kept for it.
pub fn string(code: c_int) -> String {
    let last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    match &*last {
        Some((c, w)) if *c == code => format!("{}: {w}", meaning(code)),
        _ => meaning(code).to_string(),
    }
}
