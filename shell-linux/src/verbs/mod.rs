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

#[cfg(feature = "verbs")]
pub mod address;
#[cfg(feature = "verbs")]
mod batch;
#[cfg(feature = "verbs")]
mod counters;
#[cfg(feature = "verbs")]
pub mod device;
#[cfg(feature = "verbs")]
pub mod footprint;
mod info;
#[cfg(feature = "verbs")]
mod network;
#[cfg(feature = "verbs")]
mod oob;
#[cfg(feature = "verbs")]
mod options;
#[cfg(feature = "verbs")]
mod pool;
#[cfg(feature = "verbs")]
pub mod port;
#[cfg(feature = "verbs")]
mod qp;

#[cfg(feature = "verbs")]
pub use counters::VerbsCounters;
#[cfg(feature = "verbs")]
pub use device::{Select, Sizes};
#[cfg(feature = "verbs")]
pub use network::VerbsNet;
#[cfg(feature = "verbs")]
pub use options::VerbsOptions;
#[cfg(feature = "verbs")]
pub use port::VerbsPort;

/// Gather entries per send (a header and a payload).
#[cfg(feature = "verbs")]
pub(crate) const MAX_SGE: usize = 4;

/// `verbs` in the transport registry, in every build: one without the
/// feature still names it and says how to get it.
pub const ENTRY: crate::transport::Entry = crate::transport::Entry {
    name: "verbs",
    about: if cfg!(feature = "verbs") {
        "rdma-core verbs: RC queue pairs, shared receive queue, RDMA (needs an RDMA device)"
    } else {
        "rdma-core verbs RC queue pairs: not in this build (build with `--features verbs`, which needs libibverbs-dev, cmake and libclang-dev)"
    },
    built: cfg!(feature = "verbs"),
    floor: "",
    caps: CAPS,
    device: true,
    launched: Some(""),
    info: Some(info::info),
};

/// What verbs can do before a port knows its device (the limits come with
/// the port): every RDMA operation the core uses.
pub const CAPS: rmx_core::Caps = rmx_core::Caps {
    rdma_write: true,
    rdma_read: true,
    write_imm: true,
    max_transfer: 0,
    inline_max: 0,
    send_queue: 0,
    rx_buffers: 0,
    mtu: 0,
    lossy: false,
    cheap_gather: false,
};
