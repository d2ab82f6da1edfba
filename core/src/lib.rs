//! rmx-core: the protocol core of the rmx messaging transport.
//!
//! A sans-I/O state machine in the style of smoltcp and quinn-proto: the shell
//! passes in time, received packets and completions, and carries out the copies
//! and posts the core asks for through the [`nic::Nic`] trait. No allocation, no
//! unsafe code, no floating point; the peer table is storage the embedder
//! supplies (sized from the job), the other capacities are const generics,
//! and a full table is a typed error.
#![no_std]
#![forbid(unsafe_code)]
#![deny(clippy::float_arithmetic)]

#[cfg(all(feature = "log", feature = "defmt"))]
compile_error!("features `log` and `defmt` are mutually exclusive");

pub mod collective;
pub mod completion;
pub mod config;
pub mod endpoint;
mod fifo;
pub mod handshake;
mod log;
pub mod matching;
pub mod nic;
pub mod onesided;
pub mod remote;
pub mod request;
pub mod reuse;
pub mod stats;
pub mod wire;

pub use completion::{WcResult, WorkId};
pub use config::{Coalesce, Config, ConfigError};
pub use endpoint::storage;
pub use endpoint::storage::{Sizes, Storage, Tables};
pub use endpoint::Peer;
pub use endpoint::{Endpoint, RecvError, SendError, Stall, Taken};
pub use matching::{Envelope, Pattern, Source, TagSel};
pub use nic::{
    Caps, Gather, Loc, MemKey, Nic, PostError, Posted, RdmaError, RdmaOp, RegError, Remote, RxBuf,
    SlotId, UserBuf,
};
pub use request::{RecvFault, Request, RequestError, Status};
pub use stats::Stats;
pub use wire::rendezvous::Protocol;
