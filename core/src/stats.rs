//! Counters an endpoint keeps; every dropped or refused packet is counted here.

/// Monotonic event counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_in: u64,
    pub packets_out: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    /// Packets that failed to decode or broke a protocol rule (dropped).
    pub malformed: u64,
    /// Peers given up as failed.
    pub peers_failed: u64,
    /// Packets from a failed peer (dropped).
    pub from_failed: u64,
    /// Completions whose work-request id the core never made (ignored).
    pub unknown_completions: u64,
    /// Already-delivered packets received again (dropped, re-acknowledged).
    pub duplicates: u64,
    /// Packets after a gap (dropped, gap re-requested).
    pub out_of_order: u64,
    /// In-sequence messages with neither a matching receive nor unexpected room.
    pub no_room: u64,
    pub unexpected: u64,
    pub truncated: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub nacks_in: u64,
    pub nacks_out: u64,
    pub acks_out: u64,
    /// Pings sent to silent peers something waited on.
    pub pings_out: u64,
    /// GONE notices: sent in answer to a peer given up here, received from
    /// a peer that gave this rank up (which then fails it too).
    pub gone_out: u64,
    pub gone_in: u64,
    /// Nanoseconds the endpoint was not driven past its earliest deadline:
    /// time not counted as any peer's silence.
    pub away_ns: u64,
    /// Sends that had to wait for a credit or a bounce slot.
    pub send_stalls: u64,
    /// Eager sends whose payload the NIC gathered from the user buffer.
    pub zero_copy_sends: u64,
    /// Messages that waited for a free send entry of their connection, in a
    /// queued send of their own or packed into one.
    pub backlogged: u64,
    /// Messages packed into a queued send that already held another message.
    pub coalesced: u64,
    /// Records of packed sends that carried the one-byte cached marker.
    pub cached_headers: u64,
    /// Packed packets with a malformed record (also counted in `malformed`);
    /// the records before it were delivered.
    pub malformed_packed: u64,
    /// Fragments of medium messages sent and taken in.
    pub fragments_out: u64,
    pub fragments_in: u64,
    /// Large sends and receives that went by rendezvous.
    pub rndv_sends: u64,
    pub rndv_recvs: u64,
    /// RDMA operations posted for rendezvous transfers.
    pub rdma_ops: u64,
    /// Transfers that ended with an RDMA error (both sides report it).
    pub rdma_faults: u64,
    /// Buffers the shell could not register: the transfer went by PULL.
    pub rndv_register_failures: u64,
    /// Rendezvous packets naming no live transfer of theirs (also in `malformed`).
    pub rndv_stray: u64,
    /// PULL senders that got no FIN in time and asked whether the receive ended.
    pub rndv_probes: u64,
    /// FINs sent again in answer to a probe for a receive that had ended.
    pub rndv_fin_repeats: u64,
    /// Credit requests sent (out of credit with messages waiting) and received.
    pub credit_requests_out: u64,
    pub credit_requests_in: u64,
    /// Credits lent on request beyond the initial shares.
    pub credits_lent: u64,
    /// Of those, credits lent from the reserve to a collective's message
    /// while point-to-point messages held the budget.
    pub reserve_loans: u64,
    /// Receives ended by a stall that lasted twice the peer timeout
    /// ([`RecvFault::NoBuffers`](crate::RecvFault::NoBuffers)).
    pub stalls_ended: u64,
    /// Times unexpected messages took the receive pool to its low watermark.
    pub rx_pool_low: u64,
    pub post_busy: u64,
    pub post_down: u64,
    /// Posts the NIC refused for good (a key or bound it would not take,
    /// work it cannot do): each failed its connection, or its request.
    pub post_refused: u64,
    /// Inline sends posted without a completion of their own
    /// (`Config::cq_moderation`).
    pub unsignalled: u64,
    /// Sends the NIC completed with an error: the request ends with it, and
    /// a broken connection fails the peer.
    pub send_faults: u64,
}
