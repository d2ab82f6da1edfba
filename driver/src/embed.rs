//! The core for a C runtime or a kernel driver: one endpoint in memory
//! the embedder provides, over a port it implements as a table of C
//! callbacks ([`ops::rmx_port_ops_t`]), moved on only when the embedder
//! calls in with the time. No thread, no allocation, no clock of its own:
//! what librmx's `rmx_ep_*` and the Linux module's in-kernel endpoints
//! wrap alike.
//!
//! Each endpoint's calls come one at a time (the embedder serialises
//! them); two endpoints are independent.
#![allow(non_camel_case_types)]

mod args;
pub mod calls;
mod carve;
pub mod code;
pub mod endpoint;
mod messages;
pub mod ops;
mod request;
mod status;
pub mod task;
pub mod window;

pub use carve::ALIGN;
pub use endpoint::{create, destroy, live, rmx_ep_config_t, rmx_ep_t, size, Ended};
pub use request::EpReq;
pub use status::rmx_status_t;
pub use task::{rmx_coll_t, rmx_task_t};
pub use window::{rmx_ep_win_config_t, rmx_ep_win_t};

use rmx_core::{ConfigError, RecvError, RecvFault, SendError};

use crate::adapter::AdapterError;
use crate::task::CollectiveError;

/// The API's version: changed when a function or type changes
/// incompatibly (major), raised when functions are added (minor).
pub const API_MAJOR: u32 = 0;
pub const API_MINOR: u32 = 2;

/// Why an embedded endpoint refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedError {
    /// An argument out of range: which, and why.
    Arg(&'static str),
    /// The caller was built against a newer API than this one.
    Version,
    /// A required callback of the port is null.
    MissingCallback(&'static str),
    /// The configuration does not hold.
    Config(ConfigError),
    /// The port refused to register the bounce slots.
    Adapter(AdapterError),
    Send(SendError),
    Recv(RecvError),
    Collective(CollectiveError),
    /// Every request row is in use: test some to their end.
    Full,
    /// Not a live request of this endpoint.
    Stale,
    /// Requests, tasks or windows still pending (how many).
    Busy(usize),
    /// The window's opening or a fence runs (or, to free it, an epoch's
    /// operations wait for a fence).
    WindowBusy,
    /// A fence ended with a fault among its operations' messages.
    Fault(RecvFault),
}
