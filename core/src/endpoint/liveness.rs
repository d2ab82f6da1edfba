//! Liveness on lossy transports. Retransmission finds a dead peer only
//! while something sent to it waits for an acknowledgement; a rank that
//! only waits to hear from a peer (a receive naming it, the data of a
//! rendezvous, a credit to send what is queued for it) would wait for ever
//! on a process that died. So a peer that
//! something here waits on and that has been silent for
//! `Config::keepalive_ns` is pinged; any packet from it answers, and pings
//! unanswered `Config::retransmits_max` times in a row, backing off like
//! retransmissions, give it up as failed. Receives posted for any source
//! wait on no peer in particular and ping nobody.

use super::*;
use crate::medium::Into;

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// A request begins to wait on `peer` (a receive naming it, a transfer).
    pub(super) fn await_peer(&mut self, now: u64, peer: u16) {
        self.start_waiting(now, peer);
        let p = &mut self.peers[peer as usize];
        p.awaited = p.awaited.saturating_add(1);
    }

    /// Something is about to wait on `peer`: if nothing did, its silence
    /// counts from now, and a liveness check is armed.
    pub(super) fn start_waiting(&mut self, now: u64, peer: u16) {
        let p = &mut self.peers[peer as usize];
        if !waits_on(p) {
            p.heard = p.heard.max(now);
            p.pings = 0;
            p.ping_at = None;
        }
        if !self.cfg.reliable && self.cfg.keepalive_ns > 0 {
            let t = now.saturating_add(self.cfg.keepalive_ns);
            self.arm(t);
        }
    }

    /// Something stopped waiting on `peer`.
    pub(super) fn unawait_peer(&mut self, peer: u16) {
        let p = &mut self.peers[peer as usize];
        p.awaited = p.awaited.saturating_sub(1);
    }

    /// A posted receive left the queue (matched or cancelled).
    pub(super) fn unposted(&mut self, pr: &PostedRecv) {
        if let Some(r) = pr.source {
            self.unawait_peer(r);
        }
    }

    /// A packet came from `src`: it is alive.
    #[inline]
    pub(super) fn heard_from(&mut self, now: u64, src: usize) {
        let p = &mut self.peers[src];
        p.heard = now;
        if p.pings > 0 || p.ping_at.is_some() {
            p.pings = 0;
            p.ping_at = None;
        }
    }

    /// Pings `peer` if something waits on it and it has been silent long
    /// enough, or gives it up; the time of its next check, if any.
    pub(super) fn poll_liveness<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        peer: u16,
    ) -> Option<u64> {
        let keepalive = self.cfg.keepalive_ns;
        let p = &self.peers[peer as usize];
        // Unacknowledged packets have their own timer, which fails the peer.
        if self.cfg.reliable || keepalive == 0 || p.failed || !waits_on(p) || p.rto_at.is_some() {
            return None;
        }
        let due = p.ping_at.unwrap_or(p.heard.saturating_add(keepalive));
        if due > now {
            return Some(due);
        }
        let max = self.cfg.retransmits_max;
        if max > 0 && p.pings >= max {
            self.fail_peer(nic, peer);
            return None;
        }
        let pings = p.pings;
        if self.send_control(now, nic, peer, Kind::Ping, 0) {
            self.stats.pings_out += 1;
            let wait = self.backoff_ns(pings);
            let p = &mut self.peers[peer as usize];
            p.pings = pings + 1;
            p.ping_at = Some(now.saturating_add(wait));
        } else {
            self.peers[peer as usize].ping_at = Some(self.retry_at(now));
        }
        self.peers[peer as usize].ping_at
    }
}

/// Whether something here waits to hear from the peer: a request naming
/// it, a medium message it is filling into a receive, or sends queued for
/// its credit.
fn waits_on(p: &Peer) -> bool {
    p.awaited > 0 || p.queued > 0 || matches!(p.assembly.into, Into::Recv(_))
}
