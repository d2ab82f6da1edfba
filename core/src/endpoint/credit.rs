//! Flow control that scales with peers: credits are receive buffers of the
//! shared pool, lent to peers rather than reserved for each.
//!
//! A receiver's budget is its pool less a reserve (and no more than its
//! unexpected-message capacity). Every peer starts with an equal share of at
//! most half the budget, `min(credits, budget / (2 × (ranks − 1)))` (its
//! own included in the accounting, in case a rank sends to itself), which
//! both sides compute from the job's configuration: no packet is needed to
//! start. The other half, and whatever the shares leave, is lent on demand.
//! A sender out of credit with messages waiting sends a CREDIT request
//! naming the cumulative limit that would let all of them go (what it sent
//! plus what waits): a repeated or stale request asks for nothing more. The
//! receiver lends what the budget has towards that limit and queues the
//! peer for the rest. A window may so grow past `credits`: a receiver
//! waiting for a later message of a peer whose earlier ones it has not
//! received still gets it, while the budget lasts. A loan is used at once
//! (it covers messages already waiting) and returns to the budget when the
//! message it carried is consumed, so no credit idles at a peer that
//! stopped sending, and peers waiting get it in turn. So unexpected
//! messages never hold more than the budget, and a peer costs its share.
//! Initial shares are not reclaimed from idle peers: together they are at
//! most half the budget, so the half lent on demand is always there for
//! the active ones, and taking a share back would cost a packet each way
//! for credit the peer may use next. In large jobs the share is 0 and
//! every credit is a loan.
//!
//! Nothing accepted is lost: a sender without credit waits (its request is
//! pending) and asks; a lossy transport repeats the request.
//!
//! Traffic a rank waits on must not queue behind traffic it has not
//! received. A collective's messages ([`crate::wire::context::is_priority`])
//! are the case a correct program hits: a rank floods a peer with sends the
//! peer receives only after a barrier, and the barrier's message would wait
//! for credit the flood holds. So a sender sends its queued priority
//! messages before the point-to-point ones queued ahead of them (MPI orders
//! messages only within a context), and says in its credit request that
//! one waits; a receiver whose budget is spent lends such a peer one credit
//! from its reserve (an overdraft, at most half the reserve at once, within
//! the unexpected-message capacity), repaid by the next lent credit that
//! comes back. The reserve, not a context's own budget, because a
//! collective's rounds are few per rank and received at once: a share per
//! context would idle in every peer's window.
//!
//! The one state no credit scheme with bounded memory can leave: the
//! budget is held entirely by unexpected messages nobody receives while
//! peers wait for credit. [`Endpoint::stall`] reports it instead of letting
//! a rank hang.

use super::peer::{PRIORITY, STARVING};
use super::*;
use crate::wire::context;

/// The credit budget and the peers waiting for a share of it.
pub(super) struct Lender {
    /// Credits that may be outstanding at once: pool less reserve.
    pub budget: u32,
    /// Credits of the budget not granted to any peer.
    pub free: u32,
    /// Peers owed credits, oldest request first (each listed once).
    pub starving: Fifo,
    /// Free buffers are at or below the low watermark (reported once).
    pub low: bool,
    /// The most the budget may grow to: unexpected messages that can be kept.
    pub cap: u32,
    /// Reserve credits lent to priority messages and not yet repaid.
    pub overdraft: u32,
    /// Peers with a priority message waiting for a reserve credit.
    pub priority: Fifo,
    /// Since when the budget has been held while peers wait, with nothing
    /// received here.
    pub stalled_at: Option<u64>,
}

impl Lender {
    /// The budget of a pool of `cfg.rx_buffers` (at most `unexpected`
    /// messages kept) and every peer's initial share of it.
    pub fn new(cfg: &Config, npeers: u16, unexpected: usize) -> (Self, u16) {
        let cap = unexpected.min(u32::MAX as usize) as u32;
        let budget = (cfg.rx_buffers - cfg.rx_reserve).min(cap);
        // Shared among the other ranks; this one's own share is accounted
        // too (a rank may send to itself): n / (2 (n - 1)) <= 1 for n >= 2.
        let ranks = npeers as u32;
        let share = (budget / (2 * (ranks - 1).max(1))).min(cfg.credits as u32);
        let lender = Lender {
            budget,
            free: budget.saturating_sub(share * ranks),
            starving: Fifo::EMPTY,
            low: false,
            cap,
            overdraft: 0,
            priority: Fifo::EMPTY,
            stalled_at: None,
        };
        (lender, share as u16)
    }

    /// Reserve credits that may be lent at once: half the reserve (the
    /// rest stays for packets handled at once), and only as many as the
    /// unexpected-message table has room for beyond the budget.
    fn overdraft_max(&self, cfg: &Config) -> u32 {
        (cfg.rx_reserve / 2).min(self.cap.saturating_sub(self.budget))
    }
}

/// Peers wait for credit, the budget has none left, and unexpected
/// messages hold buffers here: none can come back until a message held
/// here is received (or one in flight is matched by a posted receive). A
/// budget lent out with nothing held here is no stall: the credits are
/// on the wire (the grants or the messages they pay for), however slow
/// the transport. A rank that waits for a message of a waiting peer while
/// nothing else is in flight would hang: its wait loop should report this
/// (MPI lets a bounded implementation fail here; it cannot buffer without end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Unexpected messages held.
    pub unexpected: u32,
    /// Peers waiting for credit.
    pub waiting_peers: u16,
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// `Some` while peers wait for credit the budget cannot give because
    /// unexpected messages hold it.
    pub fn stall(&self) -> Option<Stall> {
        let l = &self.lender;
        let unexpected = self.matcher.lens().1 as u32;
        (l.free == 0 && !l.starving.is_empty() && unexpected > 0).then_some(Stall {
            unexpected,
            waiting_peers: l.starving.len() as u16,
        })
    }

    /// How long a stall may last: twice the peer timeout, so that a peer
    /// that died holding buffers (a medium message part way) is given up,
    /// and what it held freed, first.
    fn stall_timeout(&self) -> u64 {
        self.cfg.peer_timeout_ns.saturating_mul(2)
    }

    /// Ends what a stall would leave waiting for ever. Once peers have
    /// waited for credit for twice the peer timeout while unexpected messages
    /// held the whole budget and nothing was received here, the receives
    /// naming a waiting peer, and those for any source, end with
    /// [`RecvFault::NoBuffers`]: what they wait for is queued behind
    /// messages nobody receives. Returns when to look again.
    pub(super) fn poll_stall(&mut self, now: u64) -> Option<u64> {
        // A failed peer stays listed until served, and waits for nothing.
        let live = |s: &Self| {
            let mut waiting = s.lender.starving.iter(s.peers.all(), STARVING);
            waiting.any(|q| !s.peers[q as usize].failed)
        };
        if self.stall().is_none() || !live(self) {
            self.lender.stalled_at = None;
            return None;
        }
        let since = *self.lender.stalled_at.get_or_insert(now);
        let due = since.saturating_add(self.stall_timeout());
        if now < due {
            return Some(due);
        }
        self.lender.stalled_at = None;
        let status = |source| Status {
            source,
            tag: 0,
            len: 0,
            fault: Some(RecvFault::NoBuffers),
        };
        let mut at = self.lender.starving.head();
        while let Some(q) = at {
            while let Some(pr) = self.matcher.remove_posted_from(q) {
                self.unposted(&pr);
                self.reqs.set(pr.req, State::Done(status(q)));
                self.stats.stalls_ended += 1;
            }
            let next = self.peers[q as usize].next[STARVING];
            at = (next != NIL).then_some(next);
        }
        // An any-source receive names the peer that waited longest.
        let first = self.lender.starving.head().unwrap_or(self.me);
        while let Some(pr) = self.matcher.remove_posted_any() {
            self.reqs.set(pr.req, State::Done(status(first)));
            self.stats.stalls_ended += 1;
        }
        None
    }

    /// A message from `src` was consumed: its credit is granted again to
    /// `src` if it was of its share, or goes back to the budget if lent.
    /// While a medium message of `src` that matched a receive is part way
    /// in, a lent credit its fragment frees also goes straight back to
    /// `src`: the rest of a message somebody receives must never wait
    /// behind unexpected messages that took the budget (they can be
    /// received only after it).
    #[inline(always)]
    pub(super) fn consumed<N: Nic>(&mut self, now: u64, nic: &mut N, src: u16) {
        self.lender.stalled_at = None;
        let p = &mut self.peers[src as usize];
        p.consumed = p.consumed.wrapping_add(1);
        let matched_part_way = matches!(p.assembly.into, super::medium::Into::Recv(_));
        let p = if p.lent > 0 && !matched_part_way {
            p.lent -= 1;
            if self.lender.overdraft > 0 {
                self.lender.overdraft -= 1;
                self.serve_priority(now, nic);
            } else {
                self.lender.free += 1;
                self.serve_starving(now, nic);
            }
            &mut self.peers[src as usize]
        } else {
            // Its own credit, the common case: the peer is still at hand.
            p.limit = p.limit.wrapping_add(1);
            p
        };
        if p.credit_owed() >= self.cfg.credit_return as u32 {
            self.send_control(now, nic, src, Kind::Ack, 0);
        } else if let Some(t) = p.delay_ack(now, self.cfg.ack_delay_ns) {
            self.arm(t);
        }
    }

    /// A peer out of credit asks for its limit to reach `target`;
    /// `priority`: a priority message waits there.
    pub(super) fn on_credit_request<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        src: u16,
        target: u32,
        priority: bool,
    ) {
        self.stats.credit_requests_in += 1;
        let p = &mut self.peers[src as usize];
        if seq_le(p.target, target) {
            p.target = target;
        }
        p.wants_priority = priority;
        // A loan goes out with its own acknowledgement. Without one, answer
        // anyway: a lossy network may have lost the one that carried the
        // last grant.
        if self.lend(now, nic, src) > 0 {
            return;
        }
        if priority && self.lender.free == 0 {
            if self.overdraw(now, nic, src) {
                return;
            }
            let p = &mut self.peers[src as usize];
            if !p.priority_waiting {
                p.priority_waiting = true;
                self.lender
                    .priority
                    .push_back(self.peers.all_mut(), PRIORITY, src);
            }
        }
        if self.peers[src as usize].window() > 0 {
            self.send_control(now, nic, src, Kind::Ack, 0);
        }
    }

    /// Lends `peer` one credit from the reserve for its priority message,
    /// if the overdraft has room and the peer asked for more than it has.
    fn overdraw<N: Nic>(&mut self, now: u64, nic: &mut N, peer: u16) -> bool {
        let p = &self.peers[peer as usize];
        let asks_more = seq_le(p.limit, p.target) && p.limit != p.target;
        if !asks_more || p.failed || p.lent == u16::MAX {
            return false;
        }
        if self.lender.overdraft >= self.lender.overdraft_max(&self.cfg) {
            return false;
        }
        self.lender.overdraft += 1;
        let p = &mut self.peers[peer as usize];
        p.limit = p.limit.wrapping_add(1);
        p.lent += 1;
        self.stats.credits_lent += 1;
        self.stats.reserve_loans += 1;
        self.arm_ack(now, peer as usize);
        self.send_control(now, nic, peer, Kind::Ack, 0);
        true
    }

    /// A reserve credit came back: the oldest peer still waiting with a
    /// priority message gets it.
    fn serve_priority<N: Nic>(&mut self, now: u64, nic: &mut N) {
        while let Some(q) = self.lender.priority.pop_front(self.peers.all(), PRIORITY) {
            self.peers[q as usize].priority_waiting = false;
            if self.peers[q as usize].wants_priority && self.overdraw(now, nic, q) {
                return;
            }
        }
    }

    /// Lends `peer` what the budget has towards its target, sending the new
    /// limit; queues it for the rest. A target behind the limit asks for
    /// nothing. Returns the credits lent.
    fn lend<N: Nic>(&mut self, now: u64, nic: &mut N, peer: u16) -> u32 {
        let p = &mut self.peers[peer as usize];
        let need = if seq_le(p.limit, p.target) {
            p.target.wrapping_sub(p.limit).min(self.lender.budget)
        } else {
            0
        };
        let g = need
            .min(self.lender.free)
            .min(u16::MAX as u32 - p.lent as u32);
        p.limit = p.limit.wrapping_add(g);
        p.lent += g as u16;
        self.lender.free -= g;
        self.stats.credits_lent += g as u64;
        let rest = need - g;
        if rest > 0 && !p.starving {
            p.starving = true;
            self.lender
                .starving
                .push_back(self.peers.all_mut(), STARVING, peer);
        }
        if rest > 0 && self.lender.stalled_at.is_none() && self.stall().is_some() {
            // A stall begins: `poll_stall` bounds it.
            self.lender.stalled_at = Some(now);
            self.arm(now.saturating_add(self.stall_timeout()));
        }
        if g > 0 {
            self.arm_ack(now, peer as usize);
            self.send_control(now, nic, peer, Kind::Ack, 0);
        }
        g
    }

    /// Lends what the budget has to the peers waiting, oldest first.
    fn serve_starving<N: Nic>(&mut self, now: u64, nic: &mut N) {
        while self.lender.free > 0 {
            let Some(q) = self.lender.starving.pop_front(self.peers.all(), STARVING) else {
                return;
            };
            self.peers[q as usize].starving = false;
            if !self.peers[q as usize].failed {
                let _ = self.lend(now, nic, q);
            }
        }
    }

    /// Out of credit to `dest` with messages waiting: asks once per grant
    /// (again on a lossy transport, backing off like retransmissions) for
    /// the limit that lets every waiting message go. A peer that died never
    /// answers: liveness (the queued sends wait on it) gives it up.
    pub(super) fn ask_credit<N: Nic>(&mut self, now: u64, nic: &mut N, dest: u16) {
        let p = &self.peers[dest as usize];
        let priority = p.priority_queued > 0;
        // A priority message queued since the last request asks again.
        let asked = p.asked && (p.asked_priority || !priority);
        if asked || p.queued == 0 || p.credits_left() > 0 {
            return;
        }
        let target = p.tx_seq.wrapping_add(p.need);
        let h = Header {
            tag: target,
            context: if priority { context::COLLECTIVE } else { 0 },
            ..self.header(dest, Kind::Credit)
        };
        if !self.post_control(nic, dest, h, &[], false) {
            self.arm(self.retry_at(now));
            return;
        }
        self.stats.credit_requests_out += 1;
        let wait = self.backoff_ns(self.peers[dest as usize].asks);
        let p = &mut self.peers[dest as usize];
        p.asked = true;
        p.asked_priority = priority;
        if !self.cfg.reliable {
            p.asks = p.asks.saturating_add(1);
            let t = now.saturating_add(wait);
            p.ask_at = Some(t);
            self.arm(t);
        }
    }

    /// Asks again where a request may have been lost (lossy transports).
    pub(super) fn poll_credit<N: Nic>(&mut self, now: u64, nic: &mut N, peer: u16) {
        let p = &mut self.peers[peer as usize];
        match p.ask_at {
            Some(t) if t <= now => {
                p.ask_at = None;
                p.asked = false;
                if p.queued > 0 && p.credits_left() == 0 {
                    self.ask_credit(now, nic, peer);
                }
            }
            Some(t) => self.arm(t),
            None => {}
        }
    }

    /// Unexpected messages now hold `held` buffers: tells the shell once
    /// when the free ones reach the low watermark; buffers it adds to the
    /// pool are lent as credits.
    pub(super) fn check_pool<N: Nic>(&mut self, nic: &mut N) {
        let held = self.holds.len() as u32;
        let free = self.cfg.rx_buffers.saturating_sub(held);
        if free > self.cfg.rx_low_water {
            self.lender.low = false;
            return;
        }
        if self.lender.low {
            return;
        }
        self.lender.low = true;
        self.stats.rx_pool_low += 1;
        let added = nic.rx_pool_low(free);
        let room = self.lender.cap.saturating_sub(self.lender.budget);
        let added = added.min(room);
        self.cfg.rx_buffers = self.cfg.rx_buffers.saturating_add(added);
        self.lender.budget += added;
        self.lender.free += added;
    }
}
