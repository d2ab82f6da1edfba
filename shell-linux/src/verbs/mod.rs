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

/// Items of a build with the feature only.
macro_rules! built {
    ($($item:item)*) => { $(#[cfg(feature = "verbs")] $item)* };
}

built! {
    pub mod address;
    mod batch;
    mod counters;
    pub mod device;
    pub mod footprint;
    mod network;
    mod oob;
    mod options;
    mod pool;
    pub mod port;
    mod qp;

    pub use counters::VerbsCounters;
    pub use device::{Select, Sizes};
    pub use network::VerbsNet;
    pub use options::VerbsOptions;
    pub use port::VerbsPort;

    /// Gather entries per send (a header and a payload).
    pub(crate) const MAX_SGE: usize = 4;
}

mod info;

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
    caps: crate::transport::RDMA,
    device: true,
    launched: Some(""),
    info: Some(info::info),
};
