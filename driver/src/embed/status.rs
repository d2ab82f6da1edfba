//! How a request ended, as C reads it.

use core::ffi::c_int;

use rmx_core::Status;

/// How a request ended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmx_status_t {
    /// The sender (a receive; what `RMX_ANY_SOURCE` matched), else -1.
    pub source: c_int,
    /// The message's tag (a receive; what `RMX_ANY_TAG` matched).
    pub tag: u32,
    /// Bytes received into the buffer, or sent.
    pub len: usize,
    /// 0, or the code the request ended with (`RMX_ERR_TRUNCATED`,
    /// `RMX_ERR_CANCELLED`, `RMX_ERR_PEER_FAILED`, `RMX_ERR_TRANSFER`).
    pub error: c_int,
}

impl rmx_status_t {
    /// How a receive (`sent` `None`) or a send of `sent` bytes ended.
    pub fn of(st: Status, sent: Option<usize>) -> rmx_status_t {
        rmx_status_t {
            source: sent.map_or(c_int::from(st.source), |_| -1),
            tag: st.tag,
            len: sent.unwrap_or(st.len as usize),
            error: st.fault.map_or(0, super::code::fault),
        }
    }

    /// A send of `len` bytes that ended well.
    pub fn sent(len: usize) -> rmx_status_t {
        rmx_status_t {
            source: -1,
            tag: 0,
            len,
            error: 0,
        }
    }
}
