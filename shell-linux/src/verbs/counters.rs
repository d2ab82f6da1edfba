//! What a verbs port counts beyond the drops every transport reports:
//! connections, the device's events, and how sends were batched and
//! signalled. Tests and reports read it from the port itself.

use crate::transport::Counters;

/// A verbs port's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerbsCounters {
    /// What every transport counts (the rank's `transport_counters`).
    pub link: Counters,
    /// Connections made: queue pairs, one per peer talked with.
    pub connections: u64,
    /// Times the shared receive queue fell below its limit.
    pub srq_limit: u64,
    /// Connections or devices the device reported broken by an
    /// asynchronous event.
    pub async_errors: u64,
    /// Sends held behind a queue pair's outstanding work and posted at a
    /// doorbell, and the lists that carried them (one `ibv_post_send` per
    /// queue pair and doorbell).
    pub batched: u64,
    pub doorbells: u64,
    /// Sends posted without a completion entry of their own, reported done
    /// with a later one (selective signalling).
    pub unsignalled: u64,
    /// Send completions naming no post outstanding.
    pub stray_completions: u64,
}
