//! `verbs`: rdma-core's libibverbs (InfiniBand, RoCE, Soft-RoCE). Each rank
//! opens the device, a protection domain, a completion channel with
//! completion queues for sends, receives and connection requests, a shared
//! receive queue as its receive pool, and a reliable-connected queue pair
//! per peer it talks with, asked for on a datagram queue pair whose
//! address the job's bootstrap swaps. Work requests map one for one onto
//! the driver layer's [`Work`](crate::transport::Work): sends with a gather
//! list, inline sends, RDMA write, read and write with immediate.
//!
//! Built with the cargo feature `verbs`; without it the registry names the
//! transport and says how to get it.

pub mod address;
mod batch;
pub mod device;
pub mod footprint;
mod network;
mod oob;
mod options;
mod pool;
pub mod port;
mod qp;

pub use device::{Select, Sizes};
pub use network::VerbsNet;
pub use options::VerbsOptions;
pub use port::VerbsPort;

/// Gather entries per send (a header and a payload).
pub(crate) const MAX_SGE: usize = 4;

/// `verbs` in the transport registry.
pub const ENTRY: crate::transport::Entry = crate::transport::Entry {
    name: "verbs",
    about: "rdma-core verbs: RC queue pairs, shared receive queue, RDMA (needs an RDMA device)",
    built: true,
    floor: "",
};

/// What verbs can do before a port knows its device.
pub const CAPS: rmx_core::Caps = crate::transport::VERBS_CAPS;
