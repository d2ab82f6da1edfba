//! Errors as MPI reports them: an error class with words, handed to the
//! error handler of the object the call was about. The default handler
//! (`MPI_ERRORS_ARE_FATAL`) prints the words and ends the job; under
//! `MPI_ERRORS_RETURN` the class is returned.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::*;

/// A failed call: its class and what to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub class: c_int,
    pub what: String,
}

/// A call's outcome.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(class: c_int, what: impl Into<String>) -> Error {
        Error {
            class,
            what: what.into(),
        }
    }

    pub fn arg(what: impl Into<String>) -> Error {
        Error::new(MPI_ERR_ARG, what)
    }

    /// A function of the standard ABI that rmx does not implement.
    pub fn unsupported(name: &str) -> Error {
        Error::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("{name} is not supported by rmx's MPI library"),
        )
    }
}

/// What a call's error does: the handler of the object it was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    Fatal,
    Return,
}

impl Handler {
    pub fn of(h: Handle) -> Option<Handler> {
        match h {
            MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => Some(Handler::Fatal),
            MPI_ERRORS_RETURN => Some(Handler::Return),
            _ => None,
        }
    }

    pub fn handle(self) -> Handle {
        match self {
            Handler::Fatal => MPI_ERRORS_ARE_FATAL,
            Handler::Return => MPI_ERRORS_RETURN,
        }
    }
}

/// Runs the body of MPI function `name`: its code, an error handled by
/// the handler `handler` gives (asked only on failure), or a panic caught
/// and treated as an internal error: no panic crosses into C.
pub fn call(
    name: &str,
    handler: impl FnOnce() -> Handler,
    f: impl FnOnce() -> Result<()>,
) -> c_int {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return MPI_SUCCESS,
        Ok(Err(e)) => e,
        Err(panic) => {
            let what = rmx_linux::say::panic_words(&*panic);
            Error::new(MPI_ERR_INTERN, format!("internal fault in rmx: {what}"))
        }
    };
    let h = catch_unwind(AssertUnwindSafe(handler)).unwrap_or(Handler::Fatal);
    crate::words::keep(e.class, &e.what);
    match h {
        Handler::Return => e.class,
        Handler::Fatal => fatal(name, &e),
    }
}

/// Ends the process as MPI's default handler does, saying why; a launcher
/// ends the other ranks when one exits with a failure.
pub fn fatal(name: &str, e: &Error) -> ! {
    // One write: a launcher ending the job may keep only a line's first piece.
    let line = format!(
        "rmx MPI: {name}: {} (error class {}); the job ends \
         (MPI_ERRORS_RETURN on the communicator returns errors instead)\n",
        e.what, e.class
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    std::process::exit(e.class.clamp(1, 255))
}
