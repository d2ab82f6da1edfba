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

/// The communication contexts of the header's `context` field that rmx
/// uses itself, in one place so that none is taken twice: messages match
/// only within their context.
pub mod context {
    /// The application's point-to-point messages.
    pub const USER: u16 = 0;
    /// Collectives' messages ([`crate::collective::Run`]).
    pub const COLLECTIVE: u16 = 0xC011;
    /// One-sided operations' messages ([`crate::wire::onesided`]).
    pub const ONESIDED: u16 = 0xC012;

    /// Messages of a context every rank of the job is about to receive:
    /// a collective's. A rank waits in a collective only for the others'
    /// rounds, so they must not queue behind point-to-point messages it
    /// has not received yet (MPI orders messages only within a context):
    /// they go first to their peer, and a receiver whose budget is spent
    /// lends them a credit from its reserve.
    pub const fn is_priority(context: u16) -> bool {
        context == COLLECTIVE
    }
}
