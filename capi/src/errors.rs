//! Error codes, as C sees them: negative `int`s, named by
//! `rmx_strerror`, with the last failure's own words per thread in
//! `rmx_last_error`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

use rmx_core::{RecvError, SendError};
use rmx_driver::embed::{code, EmbedError};
use rmx_driver::task::CollectiveError;
use rmx_linux::job::JobError;

/// Success.
pub const RMX_OK: c_int = 0;
/// A null pointer, or a value out of its range.
pub const RMX_ERR_ARG: c_int = -1;
/// The header the program was built with is newer than this library.
pub const RMX_ERR_VERSION: c_int = -2;
/// Not a live request of this rank (already ended, or never one).
pub const RMX_ERR_REQUEST: c_int = -3;
/// A table is full (request handles, posted receives): complete some.
pub const RMX_ERR_NO_RESOURCE: c_int = -4;
/// The peer (or a rank of the group) failed: it stopped answering.
pub const RMX_ERR_PEER_FAILED: c_int = -5;
/// More bytes than one message carries (4 GiB).
pub const RMX_ERR_TOO_LONG: c_int = -6;
/// The message was longer than the receive's buffer, which holds its
/// first bytes.
pub const RMX_ERR_TRUNCATED: c_int = -7;
/// The request was cancelled before it matched.
pub const RMX_ERR_CANCELLED: c_int = -8;
/// The transfer failed below the protocol (a memory key, the connection,
/// a buffer the NIC could not read).
pub const RMX_ERR_TRANSFER: c_int = -9;
/// The transport, its network or the launcher's bootstrap could not be
/// set up (rmx_last_error says what to set).
pub const RMX_ERR_SETUP: c_int = -10;
/// The ranks called different collectives, or lengths that disagree.
pub const RMX_ERR_MISMATCH: c_int = -11;
/// The call cannot be made now (a rank with requests still out cannot be
/// finalized).
pub const RMX_ERR_BUSY: c_int = -12;
/// A fault inside rmx, caught at the boundary (rmx_last_error has its
/// words): a bug to report.
pub const RMX_ERR_INTERNAL: c_int = -13;

/// Every code with its name and meaning, for `rmx_strerror`.
const NAMES: &[(c_int, &str)] = &[
    (RMX_OK, "success\0"),
    (RMX_ERR_ARG, "invalid argument (null, or out of range)\0"),
    (RMX_ERR_VERSION, "the header is newer than the library\0"),
    (RMX_ERR_REQUEST, "not a live request of this rank\0"),
    (
        RMX_ERR_NO_RESOURCE,
        "a table is full: complete some requests\0",
    ),
    (RMX_ERR_PEER_FAILED, "a peer failed\0"),
    (RMX_ERR_TOO_LONG, "message longer than 4 GiB\0"),
    (
        RMX_ERR_TRUNCATED,
        "message truncated: longer than the receive buffer\0",
    ),
    (RMX_ERR_CANCELLED, "request cancelled\0"),
    (RMX_ERR_TRANSFER, "transfer failed below the protocol\0"),
    (
        RMX_ERR_SETUP,
        "transport, network or launcher could not be set up\0",
    ),
    (RMX_ERR_MISMATCH, "the ranks disagree on the collective\0"),
    (RMX_ERR_BUSY, "the call cannot be made now\0"),
    (RMX_ERR_INTERNAL, "internal fault in rmx\0"),
];

/// A code's meaning, as a static string; "unknown error" for a code that
/// is none of rmx's.
#[no_mangle]
pub extern "C" fn rmx_strerror(code: c_int) -> *const c_char {
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("unknown error\0", |(_, s)| s)
        .as_ptr()
        .cast()
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// The last failure of an rmx call on this thread, in words that say
/// what to do ("" if none failed yet). Valid until this thread's next
/// failing call; owned by rmx.
#[no_mangle]
pub extern "C" fn rmx_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// A failure: its code, and its words for `rmx_last_error`.
#[derive(Debug)]
pub(crate) struct Error {
    pub code: c_int,
    pub words: String,
}

impl Error {
    pub(crate) fn new(code: c_int, words: impl Into<String>) -> Error {
        Error {
            code,
            words: words.into(),
        }
    }

    /// An argument refused: `words` say which and why.
    pub(crate) fn arg(words: impl Into<String>) -> Error {
        Error::new(RMX_ERR_ARG, words)
    }

    /// Keeps the words for `rmx_last_error`; the code.
    pub(crate) fn report(self) -> c_int {
        let words = CString::new(self.words.replace('\0', " ")).unwrap_or_default();
        LAST.with(|l| *l.borrow_mut() = words);
        self.code
    }
}

impl From<SendError> for Error {
    fn from(e: SendError) -> Error {
        Error::new(code::send(e), format!("send refused: {e:?}"))
    }
}

impl From<RecvError> for Error {
    fn from(e: RecvError) -> Error {
        Error::new(code::recv(e), format!("receive refused: {e:?}"))
    }
}

impl From<CollectiveError> for Error {
    fn from(e: CollectiveError) -> Error {
        Error::new(code::collective(e), format!("collective: {e}"))
    }
}

impl From<EmbedError> for Error {
    fn from(e: EmbedError) -> Error {
        let words = match e {
            EmbedError::Arg(why) => why.to_string(),
            EmbedError::MissingCallback(name) => format!("ops.{name} is null: it is required"),
            EmbedError::Config(c) => format!("the configuration does not hold: {c:?}"),
            EmbedError::Version => format!(
                "the program was built with an rmx.h newer than this librmx ({}.{}): rebuild it against this library's header or load a newer librmx",
                rmx_driver::embed::API_MAJOR,
                rmx_driver::embed::API_MINOR
            ),
            EmbedError::Adapter(a) => {
                format!("the port refused to register the bounce slots: {a:?}")
            }
            EmbedError::Send(s) => return s.into(),
            EmbedError::Recv(r) => return r.into(),
            EmbedError::Collective(c) => return c.into(),
            EmbedError::Full => "every request row is in use: test some to their end".into(),
            EmbedError::Stale => "not a live request of this endpoint".into(),
            EmbedError::Fault(f) => format!("a fence's operation failed: {f:?}"),
            EmbedError::WindowBusy => {
                "the window's opening or a fence runs (test it to its end), or operations wait for a fence".into()
            }
            EmbedError::Busy(n) => {
                format!("{n} requests, tasks or windows are live: end them first")
            }
        };
        Error::new(e.code(), words)
    }
}

impl From<JobError> for Error {
    fn from(e: JobError) -> Error {
        let code = match e {
            JobError::PeerFailed { .. } => RMX_ERR_PEER_FAILED,
            _ => RMX_ERR_SETUP,
        };
        Error::new(code, e.to_string())
    }
}

// The codes are rmx-driver's, which the Linux module's endpoints return
// too; written out above so that the header carries them.
const _: () = {
    assert!(RMX_OK == code::OK);
    assert!(RMX_ERR_ARG == code::ARG);
    assert!(RMX_ERR_VERSION == code::VERSION);
    assert!(RMX_ERR_REQUEST == code::REQUEST);
    assert!(RMX_ERR_NO_RESOURCE == code::NO_RESOURCE);
    assert!(RMX_ERR_PEER_FAILED == code::PEER_FAILED);
    assert!(RMX_ERR_TOO_LONG == code::TOO_LONG);
    assert!(RMX_ERR_TRUNCATED == code::TRUNCATED);
    assert!(RMX_ERR_CANCELLED == code::CANCELLED);
    assert!(RMX_ERR_TRANSFER == code::TRANSFER);
    assert!(RMX_ERR_SETUP == code::SETUP);
    assert!(RMX_ERR_MISMATCH == code::MISMATCH);
    assert!(RMX_ERR_BUSY == code::BUSY);
    assert!(RMX_ERR_INTERNAL == code::INTERNAL);
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// Every code has its own words, and a stranger is "unknown".
    #[test]
    fn every_code_is_named_once() {
        let mut seen = std::collections::HashSet::new();
        for code in RMX_ERR_INTERNAL..=RMX_OK {
            // SAFETY: static, nul-terminated strings.
            let s = unsafe { CStr::from_ptr(rmx_strerror(code)) }
                .to_str()
                .unwrap();
            assert!(s != "unknown error" && seen.insert(s), "{code}: {s}");
        }
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(rmx_strerror(-1000)) };
        assert_eq!(s.to_str(), Ok("unknown error"));
    }
}
