//! How long a waiting rank polls in vain before it sleeps on the NIC's
//! events. Sleeping costs a wake-up (an interrupt, the scheduler, and on a
//! completion channel a system call to arm it) that a ping-pong pays on
//! every message if its round trip is longer than the spin. A fixed spin
//! cannot suit both a NIC with a 2 µs round trip and an emulated one with
//! 60 µs, so the spin follows the waits this rank has seen end in work:
//! twice their smoothed length, within [`MIN_NS`] … [`MAX_NS`].

/// The shortest spin: long beside a real NIC's round trip, short beside a
/// time slice, so that an oversubscribed host hands its cores over soon.
pub(super) const MIN_NS: u64 = 50_000;
/// The longest spin: a peer that answers later than this is computing, and
/// the rank sleeps rather than burn the core.
pub(super) const MAX_NS: u64 = 1_000_000;

/// The smoothed length of the waits that ended in work.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Spin {
    gap: u64,
}

impl Spin {
    /// A wait of `ns` ended in a packet or completion. Smoothed over about
    /// eight waits, so one late answer does not set the spin alone.
    pub(super) fn ended(&mut self, ns: u64) {
        let ns = ns.min(MAX_NS);
        self.gap = self.gap - self.gap / 8 + ns / 8;
    }

    /// How long to poll in vain before sleeping.
    pub(super) fn budget(&self) -> u64 {
        self.gap.saturating_mul(2).clamp(MIN_NS, MAX_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_rank_spins_the_shortest_time() {
        assert_eq!(Spin::default().budget(), MIN_NS);
    }

    #[test]
    fn round_trips_longer_than_the_shortest_spin_are_spun_through() {
        let mut s = Spin::default();
        for _ in 0..64 {
            s.ended(60_000);
        }
        // A 60 µs wait (an emulated NIC's round trip) no longer sleeps.
        assert!(s.budget() > 60_000, "{}", s.budget());
        assert!(s.budget() <= 120_000, "{}", s.budget());
    }

    #[test]
    fn short_waits_keep_the_shortest_spin() {
        let mut s = Spin::default();
        for _ in 0..64 {
            s.ended(2_000);
        }
        assert_eq!(s.budget(), MIN_NS);
    }

    #[test]
    fn a_computing_peer_caps_the_spin() {
        let mut s = Spin::default();
        for _ in 0..64 {
            s.ended(u64::MAX);
        }
        assert_eq!(s.budget(), MAX_NS);
        // One late answer among quick ones moves the spin by an eighth.
        let mut t = Spin::default();
        for _ in 0..64 {
            t.ended(10_000);
        }
        t.ended(50_000_000);
        assert!(t.budget() < MAX_NS / 3, "{}", t.budget());
    }

    #[test]
    fn the_spin_shrinks_back_once_answers_come_quickly() {
        let mut s = Spin::default();
        for _ in 0..64 {
            s.ended(MAX_NS);
        }
        for _ in 0..64 {
            s.ended(1_000);
        }
        assert_eq!(s.budget(), MIN_NS);
    }
}
