//! Liveness. On a lossy transport a peer is given up once nothing at all
//! has come from it for `Config::peer_timeout_ns` while something here
//! waits on it: failure is a time without any answer, never a count of
//! timeouts, so loss or a busy host does not make a live peer look dead.
//!
//! Retransmission probes a peer only while something sent to it waits for
//! an acknowledgement; a rank that only waits to hear from a peer (a
//! receive naming it or any source, the data of a rendezvous, a credit to
//! send what is queued for it) would wait for ever on a process that died.
//! So a peer that something here waits on and that has been silent for
//! `Config::keepalive_ns` is pinged, backing off like retransmissions; any
//! packet from it answers. Receives for any source wait on every peer this
//! rank has exchanged messages with (silence counting from when such
//! receives began to be posted), and end once no other peer is left.
//!
//! A reliable transport (verbs RC) acknowledges in the NIC, and reports a
//! connection broken only when a send on it fails: a rank that only waits
//! would never learn its peer's process died. So a silent peer waited on is
//! pinged there too, with nothing sent back (the NIC's acknowledgement is
//! the answer, and a ping to a dead process fails with the connection);
//! the gap doubles up to `Config::peer_timeout_ns`, so a peer computing for
//! minutes without polling gets a few dozen pings, not thousands. A peer
//! with sends in flight is not pinged: their completions tell.
//!
//! Silence counts only while this rank listens. A rank that nobody drove
//! for a while (a thread that turned to other work, a process descheduled
//! on a busy host, a benchmark that alternates between ranks) could not
//! have heard its peers, and they may have been away just as long: the
//! time it was away is taken off every peer's silence (see
//! [`away`](Endpoint::away)), so a peer is given up only after
//! `Config::peer_timeout_ns` of listening in vain.
//!
//! A give-up is mutual: a rank answers any packet from a peer it gave up
//! with a GONE notice, and a rank told so fails that peer in turn, so the
//! other side never waits on a peer that drops everything it sends.

use super::medium::Into;
use super::*;

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// A request begins to wait on `peer` (a receive naming it, a transfer).
    // Every receive naming a source posts through here: no call.
    #[inline(always)]
    pub(super) fn await_peer(&mut self, now: u64, peer: u16) {
        let p = &mut self.peers[peer as usize];
        silence_from(p, now);
        p.awaited = p.awaited.saturating_add(1);
        self.arm_keepalive(now);
    }

    /// Something is about to wait on `peer`: if nothing did, its silence
    /// counts from now, and a liveness check is armed.
    pub(super) fn start_waiting(&mut self, now: u64, peer: u16) {
        silence_from(&mut self.peers[peer as usize], now);
        self.arm_keepalive(now);
    }

    /// A receive for any source is about to be posted: if none was, the
    /// silence of the peers it waits on counts from now.
    pub(super) fn start_waiting_any(&mut self, now: u64) {
        if !self.matcher.any_posted() {
            self.any_since = now;
        }
        self.arm_keepalive(now);
    }

    fn arm_keepalive(&mut self, now: u64) {
        if self.cfg.keepalive_ns > 0 {
            let t = now.saturating_add(self.cfg.keepalive_ns);
            self.arm(t);
        }
    }

    /// A collective of every rank begins to wait: each rank's liveness
    /// matters, not only that of the peers of its current round. A rank
    /// that died elsewhere in the group leaves the others waiting for
    /// rounds that never come (the peer that needed it gives up and stops
    /// sending, but stays alive); so while any such collective runs, every
    /// peer is waited on, pinged when silent and given up after the peer
    /// timeout, which the collective then reports. Paired with
    /// [`unwatch_all`](Self::unwatch_all).
    pub fn watch_all(&mut self, now: u64) {
        if self.watching == 0 {
            self.watch_since = now;
        }
        self.watching = self.watching.saturating_add(1);
        self.arm_keepalive(now);
    }

    /// A collective that [`watch_all`](Self::watch_all) began ended.
    pub fn unwatch_all(&mut self) {
        self.watching = self.watching.saturating_sub(1);
    }

    /// No rank of the job has been given up. Once one has, a collective of
    /// every rank must end (with `PeerFailed`) rather than wait: some rank
    /// that needed the failed one left it, and a round here may wait on
    /// that rank for ever.
    pub fn group_intact(&self) -> bool {
        self.stats.peers_failed == 0
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

    /// The endpoint was not driven for `ns` past its earliest deadline:
    /// that time is nobody's silence. Every silence clock moves on by it.
    pub(super) fn away(&mut self, ns: u64) {
        self.stats.away_ns = self.stats.away_ns.saturating_add(ns);
        self.any_since = self.any_since.saturating_add(ns);
        self.watch_since = self.watch_since.saturating_add(ns);
        if let Some(t) = &mut self.lender.stalled_at {
            *t = t.saturating_add(ns);
        }
        for p in self.peers.all_mut()[..self.npeers as usize].iter_mut() {
            p.heard = p.heard.saturating_add(ns);
        }
    }

    /// Since when `peer` counts as silent, if anything here waits on it.
    fn silent_since(&self, peer: u16) -> Option<u64> {
        let p = &self.peers[peer as usize];
        if waits_on(p) || p.rto_at.is_some() {
            return Some(p.heard);
        }
        if self.watching > 0 {
            return Some(p.heard.max(self.watch_since));
        }
        let talked = p.tx_seq != 0 || p.rx_next != 0 || p.consumed != 0;
        (talked && self.matcher.any_posted()).then(|| p.heard.max(self.any_since))
    }

    /// `peer` has been silent for `Config::peer_timeout_ns` while waited on.
    pub(super) fn silent_too_long(&self, now: u64, peer: u16) -> bool {
        let timeout = self.cfg.peer_timeout_ns;
        timeout > 0
            && self
                .silent_since(peer)
                .is_some_and(|t| now.saturating_sub(t) >= timeout)
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
        if keepalive == 0 || p.failed || p.rto_at.is_some() || peer == self.me {
            return None;
        }
        let since = self.silent_since(peer)?;
        let due = p.ping_at.unwrap_or(since.saturating_add(keepalive));
        if due > now {
            return Some(due);
        }
        let reliable = self.cfg.reliable;
        if !reliable && self.silent_too_long(now, peer) {
            self.fail_peer(nic, peer);
            return None;
        }
        let pings = p.pings;
        if reliable && p.wqes > p.quiet {
            // A signalled send in flight completes, or fails with the
            // connection (and with it those posted unsignalled before it);
            // the ping below is such a send.
            self.peers[peer as usize].ping_at = Some(now.saturating_add(self.probe_gap(pings)));
            return self.peers[peer as usize].ping_at;
        }
        if self.send_control(now, nic, peer, Kind::Ping, 0) {
            self.stats.pings_out += 1;
            let wait = match reliable {
                true => self.probe_gap(pings),
                false => self.backoff_ns(pings),
            };
            let p = &mut self.peers[peer as usize];
            p.pings = pings.saturating_add(1);
            p.ping_at = Some(now.saturating_add(wait));
        } else {
            self.peers[peer as usize].ping_at = Some(self.retry_at(now));
        }
        self.peers[peer as usize].ping_at
    }

    /// Reliable transports: the gap after the `n`th unanswered ping, the
    /// keepalive doubled each time, capped at the peer timeout.
    fn probe_gap(&self, n: u16) -> u64 {
        let k = self.cfg.keepalive_ns;
        k.saturating_mul(1u64 << n.min(32))
            .min(self.cfg.peer_timeout_ns.max(k))
    }

    /// A packet came from `peer`, which this rank gave up: it is told so
    /// (a GONE notice answers anything but a notice).
    pub(super) fn tell_gone<N: Nic>(&mut self, nic: &mut N, peer: u16, kind: Kind) {
        if kind == Kind::Gone {
            return;
        }
        let h = self.header(peer, Kind::Gone);
        if self.post_notice(nic, peer, h, &[], false) {
            self.stats.gone_out += 1;
        }
    }
}

/// Before `p` is waited on: if nothing waited on it, its silence counts
/// from `now`.
#[inline(always)]
fn silence_from(p: &mut Peer, now: u64) {
    if !waits_on(p) {
        p.heard = p.heard.max(now);
        p.pings = 0;
        p.ping_at = None;
    }
}

/// Whether something here waits to hear from the peer: a request naming
/// it, a medium message it is filling into a receive, or sends queued for
/// its credit.
fn waits_on(p: &Peer) -> bool {
    p.awaited > 0 || p.queued > 0 || matches!(p.assembly.into, Into::Recv(_))
}
