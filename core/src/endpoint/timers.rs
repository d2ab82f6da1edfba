//! Time: the endpoint's timers and `poll`, which runs what is due. One
//! table keyed by [`Timer`], as quinn-proto keeps a connection's timers:
//! `poll_timeout` is the earliest of a few entries, and what has work
//! waiting on a busy NIC backs off instead of asking to be polled at once
//! again and again.

use super::*;

/// What the endpoint waits for; each has at most one deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// A bounce slot came free while sends were queued: send them (due at
    /// once). An arrival that flushes the queue has done its work.
    Flush = 0,
    /// A post met a busy NIC: post the backlogs again.
    Retry = 1,
    /// A rendezvous transfer met a busy NIC, or a bounce slot came free
    /// while transfers were active: go on with them.
    Rndv = 2,
    /// The earliest per-peer deadline (retransmission, delayed
    /// acknowledgement, credit request, ping) and transfer timer (lossy PULL).
    Peers = 3,
    /// The transport reported a connection down: fail its peer (due at once).
    Down = 4,
}

const TIMERS: usize = 5;

/// A deadline per [`Timer`], and the earliest of them kept up to date:
/// every call into the endpoint asks for it, and timers change far less
/// often than that.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timers {
    at: [Option<u64>; TIMERS],
    earliest: Option<u64>,
    /// [`AWAY_NS`] past `earliest` (`u64::MAX` without one): a call before
    /// it cannot find the endpoint away, and every call asks.
    away_after: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            at: [None; TIMERS],
            earliest: None,
            away_after: u64::MAX,
        }
    }
}

impl Timers {
    /// Sets `t` to `at`, or earlier if it already is.
    #[inline]
    pub fn arm(&mut self, t: Timer, at: u64) {
        let e = &mut self.at[t as usize];
        // Already due as early (a per-peer timer, at most messages): then
        // so is the earliest.
        if e.is_some_and(|d| d <= at) {
            return;
        }
        *e = Some(at);
        if self.earliest.is_none_or(|d| at < d) {
            self.set_earliest(Some(at));
        }
    }

    pub fn stop(&mut self, t: Timer) {
        let was = self.at[t as usize].take();
        if was.is_some() && was == self.earliest {
            self.set_earliest(self.at.iter().flatten().copied().min());
        }
    }

    fn set_earliest(&mut self, e: Option<u64>) {
        self.earliest = e;
        self.away_after = e.map_or(u64::MAX, |d| d.saturating_add(AWAY_NS));
    }

    /// A call at `now` may find the endpoint away: it is more than
    /// [`AWAY_NS`] past the earliest deadline.
    #[inline]
    fn may_be_away(&self, now: u64) -> bool {
        now > self.away_after
    }

    pub fn is_armed(&self, t: Timer) -> bool {
        self.at[t as usize].is_some()
    }

    /// `t` is armed and due at `now`.
    pub fn expired(&self, t: Timer, now: u64) -> bool {
        self.at[t as usize].is_some_and(|d| d <= now)
    }

    /// The earliest deadline.
    #[inline]
    pub fn next_timeout(&self) -> Option<u64> {
        self.earliest
    }
}

/// A call later than this past the endpoint's earliest deadline (or its
/// last call) means the endpoint was not driven meanwhile: long beside a
/// missed wake-up or a time slice, short beside `Config::peer_timeout_ns`.
const AWAY_NS: u64 = 1_000_000;

/// How long the second try of a post that met a busy NIC waits; each
/// further failure in a row doubles it, up to the delayed-ack time.
const FIRST_BACKOFF_NS: u64 = 1_000;

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// A per-peer or transfer deadline at `t`.
    #[inline]
    pub(super) fn arm(&mut self, t: u64) {
        self.timers.arm(Timer::Peers, t);
    }

    /// Time moves on: the latest `now` a call brought. A call that comes
    /// long after the endpoint's earliest deadline finds it was away (see
    /// [`away`](Self::away)).
    #[inline(always)]
    pub(super) fn tick(&mut self, now: u64) {
        if self.timers.may_be_away(now) {
            self.tick_late(now);
        }
        self.now = self.now.max(now);
    }

    /// [`tick`](Self::tick) long after the earliest deadline: away, unless
    /// a call came since.
    #[inline(never)]
    fn tick_late(&mut self, now: u64) {
        if let Some(due) = self.timers.next_timeout() {
            let since = due.max(self.now);
            if now.saturating_sub(since) > AWAY_NS {
                self.away(now - since);
            }
        }
    }

    /// A post met a busy NIC: `t` goes off at once the first time, then
    /// later and later while the NIC stays busy, so a driver that sleeps
    /// until `poll_timeout` does not spin on it.
    pub(super) fn nic_busy(&mut self, t: Timer) {
        self.timers.arm(t, self.now.saturating_add(self.backoff));
        let max = self.cfg.ack_delay_ns.max(FIRST_BACKOFF_NS);
        self.backoff = self.backoff.saturating_mul(2).clamp(FIRST_BACKOFF_NS, max);
    }

    /// A post went through: the next busy NIC is retried at once.
    #[inline]
    pub(super) fn nic_ready(&mut self) {
        self.backoff = 0;
    }

    /// A bounce slot came free: queued sends and waiting transfers go on,
    /// each under its own timer, so that work done for one does not cancel
    /// the other's.
    pub(super) fn slot_freed(&mut self) {
        if !self.queued.is_empty() {
            self.timers.arm(Timer::Flush, 0);
        }
        if self.active > 0 {
            self.timers.arm(Timer::Rndv, 0);
        }
    }

    /// When to try again a control packet that found no free slot: a timer
    /// at `now` would be due again at once, and a driver that sleeps until
    /// `poll_timeout` would spin (a simulator's clock would stop).
    pub(super) fn retry_at(&self, now: u64) -> u64 {
        now.saturating_add(self.cfg.ack_delay_ns.max(1))
    }

    /// How long the `n`th repetition of an unanswered packet (a ping, a
    /// credit request) waits: the first RTO, doubled each time, capped.
    pub(super) fn backoff_ns(&self, n: u16) -> u64 {
        self.cfg
            .rto_ns
            .saturating_mul(1u64 << n.min(32))
            .min(self.cfg.rto_max_ns)
    }

    /// When the endpoint next needs [`poll`](Self::poll): `None` if no timer is armed.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.next_timeout()
    }

    /// Runs what is due: backlogs and queued sends, then (only when the
    /// earliest of them has come) the peers' retransmissions, delayed acks
    /// and credit requests, then the transfers.
    pub fn poll<N: Nic>(&mut self, now: u64, nic: &mut N) {
        self.tick(now);
        self.timers.stop(Timer::Flush);
        self.timers.stop(Timer::Down);
        self.fail_down_peers(nic);
        if self.timers.expired(Timer::Retry, now) {
            self.timers.stop(Timer::Retry);
        }
        self.drain_all(nic);
        self.flush_queued(now, nic);
        if self.timers.expired(Timer::Peers, now) {
            self.timers.stop(Timer::Peers);
            self.poll_peers(now, nic);
        }
        if let Some(t) = self.poll_stall(now) {
            self.arm(t);
        }
        if self.timers.expired(Timer::Rndv, now) {
            self.timers.stop(Timer::Rndv);
        }
        self.poll_transfers(now, nic);
    }

    /// Every peer's timers: the table is walked only when one is due.
    fn poll_peers<N: Nic>(&mut self, now: u64, nic: &mut N) {
        for i in 0..self.npeers as usize {
            if let Some(t) = self.peers[i].rto_at {
                if t <= now {
                    if self.silent_too_long(now, i as u16) {
                        self.fail_peer(nic, i as u16);
                        continue;
                    }
                    debug!("rmx: rank {} timeout to rank {}: resending", self.me, i);
                    self.peers[i].rto =
                        self.peers[i].rto.saturating_mul(2).min(self.cfg.rto_max_ns);
                    self.stats.timeouts += 1;
                    self.retransmit(now, nic, i);
                }
            }
            self.poll_credit(now, nic, i as u16);
            if let Some(t) = self.peers[i].ack_at {
                if t <= now && !self.send_control(now, nic, i as u16, Kind::Ack, 0) {
                    self.peers[i].ack_at = Some(self.retry_at(now));
                }
            }
            let alive = self.poll_liveness(now, nic, i as u16);
            let p = &self.peers[i];
            for t in [p.rto_at, p.ack_at, alive].into_iter().flatten() {
                self.arm(t);
            }
        }
    }
}

#[cfg(test)]
mod timers_tests {
    use super::*;

    const ALL: [Timer; TIMERS] = [
        Timer::Flush,
        Timer::Retry,
        Timer::Rndv,
        Timer::Peers,
        Timer::Down,
    ];

    /// The kept earliest deadline equals the minimum over every timer
    /// after any sequence of arms and stops (a small deterministic walk
    /// over deadlines that tie, rise and fall).
    #[test]
    fn earliest_follows_every_arm_and_stop() {
        let mut t = Timers::default();
        let mut x: u64 = 12345;
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let which = ALL[(x >> 33) as usize % TIMERS];
            if (x >> 40).is_multiple_of(3) {
                t.stop(which);
            } else {
                let at = match (x >> 20) % 4 {
                    0 => u64::MAX,
                    1 => 0,
                    _ => (x >> 50) % 64,
                };
                t.arm(which, at);
            }
            let want = t.at.iter().flatten().copied().min();
            assert_eq!(t.next_timeout(), want, "step {step}");
            let away = want.map_or(u64::MAX, |d| d.saturating_add(AWAY_NS));
            for now in [0, away.saturating_sub(1), away, away.saturating_add(1)] {
                assert_eq!(t.may_be_away(now), now > away, "step {step}, now {now}");
            }
        }
    }
}
