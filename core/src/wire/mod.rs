//! Everything rmx puts on a wire, one format per file: a packet's header
//! ([`header`], re-exported here) and the bodies that follow it, then the
//! Ethernet frame that carries a packet where there is no RDMA NIC. Formats
//! are little-endian (the frame's Ethernet fields big-endian), fixed in
//! layout, and validated on decode: nothing read off a wire is trusted for
//! arithmetic.

pub mod frame;
pub mod header;
pub mod medium;
pub mod onesided;
pub mod packed;
pub mod rendezvous;

pub use header::*;
