//! Per-peer state: credit flow control and the reliability window.
//!
//! Credits: a sender may have at most `credits` eager messages at a peer that the
//! peer has not yet consumed (matched). The peer reports a cumulative count of
//! consumed messages in every header, so the sender's allowance is
//! `credits - (sent - consumed_by_peer)`.
//!
//! Reliability (unreliable transports only): go-back-N with cumulative acks.
//! Each eager packet takes the next sequence; the receiver accepts only the next
//! expected one, re-requests a gap once with a NACK, and acknowledges
//! cumulatively (piggybacked, or by an ACK after `ack_delay_ns`). The sender holds
//! each packet's bounce slot until acknowledged and re-sends everything
//! unacknowledged when the oldest one's timer expires or a NACK arrives.

use heapless::Deque;

/// `a` is at or before `b` in wrapping sequence space.
pub(crate) fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

#[derive(Debug)]
pub(crate) struct Peer<const W: usize> {
    /// Next sequence to send; also the cumulative count of eager messages sent.
    pub tx_seq: u32,
    /// Oldest sequence not yet acknowledged.
    pub tx_acked: u32,
    /// Cumulative messages the peer reports having consumed.
    pub peer_consumed: u32,
    /// Bounce slots of unacknowledged packets, oldest first (unreliable only).
    pub unacked: Deque<u16, W>,
    pub rto_at: Option<u64>,
    pub rto: u64,
    /// Next sequence expected from the peer.
    pub rx_next: u32,
    /// Cumulative messages from the peer consumed here (the credit we grant).
    pub consumed: u32,
    /// The cumulative credit the last packet to the peer carried.
    pub consumed_sent: u32,
    /// When an ACK must go if no packet carries the ack and credit before.
    pub ack_at: Option<u64>,
    /// The `rx_next` a NACK was already sent for.
    pub nacked: Option<u32>,
    /// Sends waiting in the endpoint's queue for this peer (keeps per-peer order).
    pub queued: u32,
    /// Posts to this peer not yet completed (send work-queue entries in use).
    pub wqes: u16,
    /// Filled bounce slots waiting for a send entry, oldest first: a list
    /// linked through the slots (`NO_SLOT`: empty).
    pub backlog_head: u16,
    pub backlog_tail: u16,
    /// Listed in the endpoint's peers-with-backlog queue.
    pub listed: bool,
}

/// End of a backlog list.
pub(crate) const NO_SLOT: u16 = u16::MAX;

impl<const W: usize> Peer<W> {
    pub const fn new(rto: u64) -> Self {
        Peer {
            tx_seq: 0,
            tx_acked: 0,
            peer_consumed: 0,
            unacked: Deque::new(),
            rto_at: None,
            rto,
            rx_next: 0,
            consumed: 0,
            consumed_sent: 0,
            ack_at: None,
            nacked: None,
            queued: 0,
            wqes: 0,
            backlog_head: NO_SLOT,
            backlog_tail: NO_SLOT,
            listed: false,
        }
    }

    /// Credits left to send eager messages to this peer.
    pub fn credits_left(&self, credits: u16) -> u32 {
        (credits as u32).saturating_sub(self.tx_seq.wrapping_sub(self.peer_consumed))
    }

    /// Applies a cumulative credit report; `false` if it claims more than was sent.
    pub fn take_credit(&mut self, credit: u32) -> bool {
        if !seq_le(credit, self.tx_seq) {
            return false;
        }
        if seq_le(self.peer_consumed, credit) {
            self.peer_consumed = credit;
        }
        true
    }

    /// A packet to the peer carried the current ack and `credit`: nothing is
    /// owed until more arrives, so the delayed-ACK timer stops.
    pub fn carried(&mut self, credit: u32) {
        self.consumed_sent = credit;
        self.ack_at = None;
    }

    /// Credits owed back to the peer that no packet has carried yet.
    pub fn credit_owed(&self) -> u32 {
        self.consumed.wrapping_sub(self.consumed_sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_order_survives_wraparound() {
        assert!(seq_le(u32::MAX, 0));
        assert!(seq_le(u32::MAX - 5, 3));
        assert!(!seq_le(3, u32::MAX - 5));
        assert!(seq_le(7, 7));
    }

    #[test]
    fn credits_count_across_the_wrap() {
        let mut p: Peer<8> = Peer::new(0);
        p.tx_seq = u32::MAX - 1;
        p.peer_consumed = u32::MAX - 1;
        assert_eq!(p.credits_left(4), 4);
        p.tx_seq = p.tx_seq.wrapping_add(4); // four sent, across the wrap
        assert_eq!(p.credits_left(4), 0);
        assert!(p.take_credit(u32::MAX), "one consumed, before the wrap");
        assert_eq!(p.credits_left(4), 1);
        let older = u32::MAX - 1;
        assert!(
            p.take_credit(older),
            "an older report is ignored, not an error"
        );
        assert_eq!(p.credits_left(4), 1);
        assert!(p.take_credit(1), "cumulative credit past the wrap");
        assert_eq!(p.credits_left(4), 3);
        assert!(!p.take_credit(5), "more than was sent is rejected");
    }
}
