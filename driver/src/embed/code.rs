//! The codes an embedded endpoint's C entry points return, in userspace
//! (librmx, whose header names them `RMX_ERR_*`) and in the kernel alike:
//! negative `int`s, each for what the caller should do about it.

use core::ffi::c_int;

use rmx_core::{RecvError, RecvFault, SendError};

use super::EmbedError;
use crate::task::CollectiveError;

pub const OK: c_int = 0;
pub const ARG: c_int = -1;
pub const VERSION: c_int = -2;
pub const REQUEST: c_int = -3;
pub const NO_RESOURCE: c_int = -4;
pub const PEER_FAILED: c_int = -5;
pub const TOO_LONG: c_int = -6;
pub const TRUNCATED: c_int = -7;
pub const CANCELLED: c_int = -8;
pub const TRANSFER: c_int = -9;
pub const SETUP: c_int = -10;
pub const MISMATCH: c_int = -11;
pub const BUSY: c_int = -12;
pub const INTERNAL: c_int = -13;

/// A refused send's code.
pub fn send(e: SendError) -> c_int {
    match e {
        SendError::BadRank => ARG,
        SendError::RequestTableFull => NO_RESOURCE,
        SendError::PeerFailed => PEER_FAILED,
        SendError::TooLong => TOO_LONG,
        SendError::Refused(_) => TRANSFER,
    }
}

/// A refused receive's code.
pub fn recv(e: RecvError) -> c_int {
    match e {
        RecvError::BadRank => ARG,
        RecvError::PostedQueueFull | RecvError::RequestTableFull => NO_RESOURCE,
        RecvError::PeerFailed => PEER_FAILED,
    }
}

/// The code a request that ended with `fault` reports.
pub fn fault(f: RecvFault) -> c_int {
    match f {
        RecvFault::Truncated { .. } => TRUNCATED,
        RecvFault::Cancelled => CANCELLED,
        RecvFault::PeerFailed => PEER_FAILED,
        _ => TRANSFER,
    }
}

/// A collective's failure's code.
pub fn collective(e: CollectiveError) -> c_int {
    match e {
        CollectiveError::Length { .. } | CollectiveError::Plan(_) => ARG,
        CollectiveError::Reduce(_) => ARG,
        CollectiveError::Send(s) => send(s),
        CollectiveError::Recv(r) => recv(r),
        CollectiveError::Failed(f) => fault(f),
        CollectiveError::Mismatch { .. } => MISMATCH,
        CollectiveError::Aborted => CANCELLED,
    }
}

impl EmbedError {
    /// The code a C caller gets for it.
    pub fn code(&self) -> c_int {
        match *self {
            EmbedError::Arg(_) | EmbedError::MissingCallback(_) | EmbedError::Config(_) => ARG,
            EmbedError::Version => VERSION,
            EmbedError::Adapter(_) | EmbedError::Full => NO_RESOURCE,
            EmbedError::Send(s) => send(s),
            EmbedError::Recv(r) => recv(r),
            EmbedError::Collective(c) => collective(c),
            EmbedError::Stale => REQUEST,
            EmbedError::Busy(_) | EmbedError::WindowBusy => BUSY,
            EmbedError::Fault(f) => fault(f),
        }
    }
}
