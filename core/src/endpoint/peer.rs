//! Per-peer state: credit flow control and the reliability window.
//!
//! Credits: a sender may send a sequenced message (eager, packed record or
//! RTS) only within the cumulative limit its peer granted, reported in every
//! header: the allowance is `limit - sent`. The receiver raises a peer's
//! limit as it consumes (matches) that peer's messages, so what a peer may
//! have unconsumed there is its window (`limit - consumed`), lent from the
//! receiver's shared receive pool ([`crate::endpoint`] decides how much).
//!
//! Reliability (unreliable transports only): go-back-N with cumulative acks.
//! Each eager packet takes the next sequence; the receiver accepts only the next
//! expected one, re-requests a gap once with a NACK, and acknowledges
//! cumulatively (piggybacked, or by an ACK after `ack_delay_ns`). The sender holds
//! each packet's bounce slot until acknowledged and re-sends everything
//! unacknowledged when the oldest one's timer expires or a NACK arrives.

/// `a` is at or before `b` in wrapping sequence space.
pub(crate) fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// One peer's connection state: credits, sequences and timers both ways,
/// and its place in the endpoint's queues. The embedder supplies one per
/// rank of the job, in storage it owns (an array, a `Vec`, a slice):
/// [`Peer::UNUSED`] fills it, the endpoint initialises what it uses.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// Next sequence to send; also the cumulative count of eager messages sent.
    pub(crate) tx_seq: u32,
    /// Oldest sequence not yet acknowledged.
    pub(crate) tx_acked: u32,
    /// The cumulative limit the peer granted: messages up to it may be sent.
    pub(crate) peer_limit: u32,
    /// Out of credit with sends waiting: a credit request went, not yet answered.
    pub(crate) asked: bool,
    /// When to ask again (lossy transports lose requests too).
    pub(crate) ask_at: Option<u64>,
    /// Credit requests sent since the limit last rose: each waits twice as
    /// long as the one before (a receiver with nothing to lend stays silent).
    pub(crate) asks: u16,
    /// The request out said a priority message waits
    /// ([`crate::wire::context::is_priority`]).
    pub(crate) asked_priority: bool,
    /// Of the sends queued for this peer, those of a priority context.
    pub(crate) priority_queued: u32,
    /// Bounce slots of unacknowledged packets, oldest first (unreliable
    /// only), linked through the slots.
    pub(crate) unacked: Fifo,
    pub(crate) rto_at: Option<u64>,
    pub(crate) rto: u64,
    /// Next sequence expected from the peer.
    pub(crate) rx_next: u32,
    /// Cumulative messages from the peer consumed here.
    pub(crate) consumed: u32,
    /// The cumulative limit granted to the peer: `limit - consumed` is its window.
    pub(crate) limit: u32,
    /// The limit the last packet to the peer carried.
    pub(crate) limit_sent: u32,
    /// Credits of the window lent on request, beyond the initial share.
    pub(crate) lent: u16,
    /// The limit the peer asked to reach (its sends plus those waiting).
    pub(crate) target: u32,
    /// Waiting in the endpoint's queue of peers owed credits.
    pub(crate) starving: bool,
    /// The peer's last credit request said a priority message waits there.
    pub(crate) wants_priority: bool,
    /// Waiting in the endpoint's queue of peers owed a reserve loan.
    pub(crate) priority_waiting: bool,
    /// When an ACK must go if no packet carries the ack and credit before.
    pub(crate) ack_at: Option<u64>,
    /// The `rx_next` a NACK was already sent for.
    pub(crate) nacked: Option<u32>,
    /// Sends waiting in the endpoint's queue for this peer (keeps per-peer order).
    pub(crate) queued: u32,
    /// Credits those sends still need: one each, a medium message one per
    /// fragment left. A credit request asks for all of them at once.
    pub(crate) need: u32,
    /// A queued send to the peer could not go in this pass over the queue:
    /// later ones wait behind it (cleared when the pass ends).
    pub(crate) blocked: bool,
    /// Posts to this peer not yet completed (send work-queue entries in use).
    pub(crate) wqes: u16,
    /// Of those, inline sends (they name no slot, so only this count can
    /// tell a true completion from a stray one).
    pub(crate) inlines: u16,
    /// Of those, the latest posted without a completion of their own
    /// (`Config::cq_moderation`): they complete only with a later
    /// signalled post, so none is waited for until one is made.
    pub(crate) quiet: u16,
    /// Filled bounce slots waiting for a send entry, oldest first, linked
    /// through the slots.
    pub(crate) backlog: Fifo,
    /// Listed in the endpoint's peers-with-backlog queue.
    pub(crate) listed: bool,
    /// Next peer on each list of peers it is on (`STARVING`, `BACKLOGGED`,
    /// `PRIORITY`).
    pub(crate) next: [u16; 3],
    /// The transport reported the connection down; failed at the next poll.
    pub(crate) down: bool,
    /// Given up on: nothing goes to it or is taken from it any more.
    pub(crate) failed: bool,
    /// The medium message arriving from the peer, if one is part way.
    pub(crate) assembly: super::medium::Assembly,
    /// Requests here that wait on the peer: receives posted naming it and
    /// rendezvous transfers with it.
    pub(crate) awaited: u16,
    /// When the last packet from the peer arrived (or waiting on it began):
    /// its silence, which `Config::peer_timeout_ns` bounds, counts from here.
    pub(crate) heard: u64,
    /// Pings sent since, unanswered; when the next one is due.
    pub(crate) pings: u16,
    pub(crate) ping_at: Option<u64>,
}

use crate::fifo::{Fifo, Node, NIL};

impl Default for Peer {
    fn default() -> Self {
        Peer::UNUSED
    }
}

impl Peer {
    /// Storage not yet given to an endpoint.
    pub const UNUSED: Peer = Peer::new(0, 0);

    /// A peer granted `share` credits, both ways, before any packet.
    pub(crate) const fn new(rto: u64, share: u16) -> Self {
        Peer {
            tx_seq: 0,
            tx_acked: 0,
            peer_limit: share as u32,
            asked: false,
            ask_at: None,
            asks: 0,
            asked_priority: false,
            priority_queued: 0,
            unacked: Fifo::EMPTY,
            rto_at: None,
            rto,
            rx_next: 0,
            consumed: 0,
            limit: share as u32,
            limit_sent: share as u32,
            lent: 0,
            target: share as u32,
            starving: false,
            wants_priority: false,
            priority_waiting: false,
            ack_at: None,
            nacked: None,
            queued: 0,
            need: 0,
            blocked: false,
            wqes: 0,
            inlines: 0,
            quiet: 0,
            backlog: Fifo::EMPTY,
            listed: false,
            next: [NIL; 3],
            down: false,
            failed: false,
            assembly: super::medium::Assembly::IDLE,
            awaited: 0,
            heard: 0,
            pings: 0,
            ping_at: None,
        }
    }

    /// Credits left to send sequenced messages to this peer.
    pub(crate) fn credits_left(&self) -> u32 {
        if seq_le(self.tx_seq, self.peer_limit) {
            self.peer_limit.wrapping_sub(self.tx_seq)
        } else {
            0
        }
    }

    /// Applies a cumulative limit; `false` if it reaches more than `window`
    /// messages past what was sent (no receiver grants that). An older
    /// report is ignored.
    pub(crate) fn take_credit(&mut self, limit: u32, window: u16) -> bool {
        let ahead = limit.wrapping_sub(self.tx_seq) as i32;
        if ahead > window as i32 {
            return false;
        }
        if seq_le(self.peer_limit, limit) && limit != self.peer_limit {
            self.peer_limit = limit;
            self.asked = false;
            self.asked_priority = false;
            self.ask_at = None;
            self.asks = 0;
        }
        true
    }

    /// A sequenced packet carrying `limit` left for the peer.
    #[inline]
    pub(crate) fn sent(&mut self, limit: u32) {
        self.tx_seq = self.tx_seq.wrapping_add(1);
        self.carried(limit);
    }

    /// A packet to the peer carried the current ack and `limit`: nothing is
    /// owed until more arrives, so the delayed-ACK timer stops.
    pub(crate) fn carried(&mut self, limit: u32) {
        self.limit_sent = limit;
        self.ack_at = None;
    }

    /// A packet came from the peer at `now`: it is alive.
    #[inline]
    pub(crate) fn heard_at(&mut self, now: u64) {
        self.heard = now;
        if self.pings > 0 || self.ping_at.is_some() {
            self.pings = 0;
            self.ping_at = None;
        }
    }

    /// Something is owed to the peer: an acknowledgement goes `delay`
    /// after `now` unless a packet carries it first. The deadline to arm,
    /// if none was set.
    #[inline]
    pub(crate) fn delay_ack(&mut self, now: u64, delay: u64) -> Option<u64> {
        if self.ack_at.is_some() {
            return None;
        }
        let t = now.saturating_add(delay);
        self.ack_at = Some(t);
        Some(t)
    }

    /// Credits granted to the peer that no packet has carried yet.
    pub(crate) fn credit_owed(&self) -> u32 {
        self.limit.wrapping_sub(self.limit_sent)
    }

    /// The peer's window here: messages it may have unconsumed.
    pub(crate) fn window(&self) -> u32 {
        self.limit.wrapping_sub(self.consumed)
    }
}

/// The lists a peer can be on, as indices of its links.
pub(crate) const STARVING: usize = 0;
pub(crate) const BACKLOGGED: usize = 1;
pub(crate) const PRIORITY: usize = 2;

impl Node for Peer {
    fn next(&self, list: usize) -> u16 {
        self.next[list]
    }
    fn set_next(&mut self, list: usize, next: u16) {
        self.next[list] = next;
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
        let mut p: Peer = Peer::new(0, 0);
        p.tx_seq = u32::MAX - 1;
        p.peer_limit = u32::MAX - 1;
        assert_eq!(p.credits_left(), 0);
        assert!(p.take_credit(2, 4), "four granted, across the wrap");
        assert_eq!(p.credits_left(), 4);
        p.tx_seq = p.tx_seq.wrapping_add(3);
        assert_eq!(p.credits_left(), 1);
        assert!(
            p.take_credit(u32::MAX, 4),
            "an older limit is ignored, not an error"
        );
        assert_eq!(p.credits_left(), 1);
        assert!(
            !p.take_credit(7, 4),
            "more than a window past what was sent"
        );
        assert!(p.take_credit(5, 4));
        assert_eq!(p.credits_left(), 4);
        p.tx_seq = p.tx_seq.wrapping_add(6);
        assert_eq!(
            p.credits_left(),
            0,
            "sent past the limit: none left, no wrap"
        );
    }
}
