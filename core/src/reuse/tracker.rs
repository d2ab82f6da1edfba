//! The reuse tracker: how often each send buffer has carried an eager message.
//!
//! Keyed by (address, size class). The address is hashed multiplicatively into
//! a power-of-two bucket array, as the Linux buffer cache hashes block numbers
//! (golden-ratio multiply, top bits kept); colliding entries chain inside a
//! fixed arena. Both arrays are storage the embedder provides (`[T; N]` in a
//! kernel, a `Vec` in user space), so a 2^20-bucket table never lives on a stack.

/// Multiplier of Linux's `hash_64` (`GOLDEN_RATIO_64`).
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// End of a chain / an empty bucket.
const NIL: u32 = u32::MAX;

/// The size class of a message: the smallest `k` with `2^k >= len`.
pub fn size_class(len: u32) -> u8 {
    if len <= 1 {
        0
    } else {
        (32 - (len - 1).leading_zeros()) as u8
    }
}

/// One tracked buffer. `Default` is the empty entry storage is filled with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracked {
    addr: u64,
    count: u32,
    /// Uses after which the buffer is registered (`u32::MAX`: never).
    threshold: u32,
    next: u32,
    class: u8,
    frequent: bool,
}

/// Why storage was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackerError {
    /// The bucket array must have a power-of-two length; `len` does not.
    BucketsNotPowerOfTwo { len: usize },
    /// At most `max` entries (indices are 32-bit).
    TooManyEntries { max: usize },
}

/// When the tracker stops adding buffers (the paper's adaptation), and when it
/// starts again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptation {
    /// Stop adding once fewer than this many per mille of tracked buffers are
    /// frequent *and* some bucket chains (the paper: 20% = 200).
    pub min_frequent_permille: u32,
    /// While stopped, forget everything after this many untracked sends and
    /// start counting afresh, so a program whose reuse pattern changes is seen
    /// again. Registrations survive in the cache; 0 never resumes.
    pub resume_after: u32,
}

impl Default for Adaptation {
    fn default() -> Self {
        Adaptation {
            min_frequent_permille: 200,
            resume_after: 1 << 16,
        }
    }
}

/// A snapshot of the tracker's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TrackerReport {
    /// Buffers tracked, and the arena's capacity.
    pub tracked: u32,
    pub capacity: u32,
    pub buckets: u32,
    /// Buckets holding two or more buffers, and the longest chain seen.
    pub chained_buckets: u32,
    pub longest_chain: u32,
    /// Buffers that reached their threshold, and their share of `tracked`.
    pub frequent: u32,
    pub frequent_permille: u32,
    /// Adding is stopped (adaptation), and how often it was reset since.
    pub stopped: bool,
    pub resets: u32,
    /// Sends of buffers the tracker did not take (stopped or full).
    pub untracked: u64,
}

/// What a use of a buffer found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Not tracked (stopped, arena full, or the first use of this buffer).
    Cold,
    /// Tracked, below its threshold.
    Counting,
    /// At or past its threshold: worth sending from registered memory.
    Frequent,
}

/// Reuse counters of send buffers, in caller-provided storage.
pub struct Tracker<B, E> {
    buckets: B,
    entries: E,
    bits: u32,
    used: u32,
    chained: u32,
    longest: u32,
    frequent: u32,
    adapt: Adaptation,
    stopped: bool,
    since_stop: u32,
    resets: u32,
    untracked: u64,
}

impl<B, E> Tracker<B, E>
where
    B: AsRef<[u32]> + AsMut<[u32]>,
    E: AsRef<[Tracked]> + AsMut<[Tracked]>,
{
    /// A tracker over `buckets` (power-of-two length; the paper uses 2^20) and
    /// `entries` (how many buffers it can count).
    pub fn new(mut buckets: B, entries: E, adapt: Adaptation) -> Result<Self, TrackerError> {
        let n = buckets.as_ref().len();
        if !n.is_power_of_two() || n > 1 << 31 {
            return Err(TrackerError::BucketsNotPowerOfTwo { len: n });
        }
        let max = (NIL - 1) as usize;
        if entries.as_ref().len() > max {
            return Err(TrackerError::TooManyEntries { max });
        }
        buckets.as_mut().fill(NIL);
        Ok(Tracker {
            buckets,
            entries,
            bits: n.trailing_zeros(),
            used: 0,
            chained: 0,
            longest: 0,
            frequent: 0,
            adapt,
            stopped: false,
            since_stop: 0,
            resets: 0,
            untracked: 0,
        })
    }

    /// The bucket of `addr`: the top `bits` of a golden-ratio multiply.
    #[inline]
    pub fn bucket(&self, addr: u64) -> usize {
        if self.bits == 0 {
            0
        } else {
            (addr.wrapping_mul(GOLDEN_RATIO_64) >> (64 - self.bits)) as usize
        }
    }

    /// Counts one eager send from `addr` of size class `class`. A buffer seen
    /// for the first time gets `threshold()` computed once and stored.
    #[inline]
    pub fn touch(&mut self, addr: u64, class: u8, threshold: impl FnOnce() -> u32) -> Use {
        let b = self.bucket(addr);
        let mut i = self.buckets.as_ref()[b];
        let mut depth = 0;
        while i != NIL {
            let e = &mut self.entries.as_mut()[i as usize];
            if e.addr == addr && e.class == class {
                e.count = e.count.saturating_add(1);
                if e.count < e.threshold {
                    return Use::Counting;
                }
                if !e.frequent {
                    e.frequent = true;
                    self.frequent += 1;
                }
                return Use::Frequent;
            }
            i = e.next;
            depth += 1;
        }
        if self.insert(b, depth, addr, class, threshold()) {
            Use::Frequent
        } else {
            Use::Cold
        }
    }

    /// Adds a buffer; `true` if it is frequent from its first use (threshold 1).
    fn insert(&mut self, b: usize, depth: u32, addr: u64, class: u8, threshold: u32) -> bool {
        if self.stopped || self.used as usize == self.entries.as_ref().len() {
            self.untracked += 1;
            if self.stopped {
                self.since_stop += 1;
                if self.adapt.resume_after != 0 && self.since_stop >= self.adapt.resume_after {
                    self.reset();
                }
            }
            return false;
        }
        let i = self.used;
        self.used += 1;
        let head = self.buckets.as_ref()[b];
        self.entries.as_mut()[i as usize] = Tracked {
            addr,
            count: 1,
            threshold: threshold.max(1),
            next: head,
            class,
            frequent: false,
        };
        self.buckets.as_mut()[b] = i;
        if depth == 1 {
            self.chained += 1;
        }
        self.longest = self.longest.max(depth + 1);
        let frequent = threshold <= 1;
        if frequent {
            self.entries.as_mut()[i as usize].frequent = true;
            self.frequent += 1;
        }
        // Adaptation: the table has started chaining and too few of its
        // buffers are frequent — stop paying for growth.
        if self.chained > 0
            && (self.frequent as u64) * 1000
                < (self.used as u64) * self.adapt.min_frequent_permille as u64
        {
            self.stopped = true;
            self.since_stop = 0;
        }
        frequent
    }

    /// Forgets every buffer and resumes adding. Costs O(tracked), not O(buckets).
    pub fn reset(&mut self) {
        for i in 0..self.used as usize {
            let addr = self.entries.as_ref()[i].addr;
            let b = self.bucket(addr);
            self.buckets.as_mut()[b] = NIL;
        }
        self.used = 0;
        self.chained = 0;
        self.longest = 0;
        self.frequent = 0;
        self.stopped = false;
        self.since_stop = 0;
        self.resets += 1;
    }

    /// How often the tracker has forgotten everything (adaptation resets).
    #[inline]
    pub fn resets(&self) -> u32 {
        self.resets
    }

    /// The tracker's occupancy, chaining and frequent fraction.
    pub fn report(&self) -> TrackerReport {
        TrackerReport {
            tracked: self.used,
            capacity: self.entries.as_ref().len() as u32,
            buckets: self.buckets.as_ref().len() as u32,
            chained_buckets: self.chained,
            longest_chain: self.longest,
            frequent: self.frequent,
            frequent_permille: (self.frequent as u64 * 1000)
                .checked_div(self.used as u64)
                .unwrap_or(0) as u32,
            stopped: self.stopped,
            resets: self.resets,
            untracked: self.untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = Tracker<[u32; 16], [Tracked; 8]>;

    fn tracker(adapt: Adaptation) -> T {
        Tracker::new([0; 16], [Tracked::default(); 8], adapt).unwrap()
    }

    #[test]
    fn size_classes_are_ceil_log2() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 0);
        assert_eq!(size_class(2), 1);
        assert_eq!(size_class(128), 7);
        assert_eq!(size_class(129), 8);
        assert_eq!(size_class(8192), 13);
        assert_eq!(size_class(u32::MAX), 32);
    }

    #[test]
    fn counts_until_the_threshold_then_reports_frequent() {
        let mut t = tracker(Adaptation::default());
        assert_eq!(t.touch(0x1000, 7, || 3), Use::Cold);
        assert_eq!(t.touch(0x1000, 7, || unreachable!()), Use::Counting);
        assert_eq!(t.touch(0x1000, 7, || unreachable!()), Use::Frequent);
        assert_eq!(t.touch(0x1000, 7, || unreachable!()), Use::Frequent);
        // Same address, other size class: a separate buffer.
        assert_eq!(t.touch(0x1000, 8, || 3), Use::Cold);
        let r = t.report();
        assert_eq!((r.tracked, r.frequent, r.frequent_permille), (2, 1, 500));
    }

    #[test]
    fn storage_is_validated() {
        assert_eq!(
            Tracker::new([0u32; 12], [Tracked::default(); 1], Adaptation::default()).err(),
            Some(TrackerError::BucketsNotPowerOfTwo { len: 12 })
        );
        assert!(Tracker::new([0u32; 1], [Tracked::default(); 1], Adaptation::default()).is_ok());
    }

    #[test]
    fn a_full_arena_stops_tracking_without_losing_counts() {
        let mut t = Tracker::new(
            [0u32; 4],
            [Tracked::default(); 2],
            Adaptation {
                min_frequent_permille: 0,
                resume_after: 0,
            },
        )
        .unwrap();
        t.touch(1 << 12, 0, || 2);
        t.touch(2 << 12, 0, || 2);
        assert_eq!(t.touch(3 << 12, 0, || 2), Use::Cold);
        assert_eq!(
            t.touch(3 << 12, 0, || 2),
            Use::Cold,
            "no room: never tracked"
        );
        assert_eq!(t.touch(1 << 12, 0, || 2), Use::Frequent);
        assert_eq!(t.report().untracked, 2);
    }

    #[test]
    fn collisions_chain_and_are_reported() {
        // One bucket: everything chains.
        let mut t = Tracker::new(
            [0u32; 1],
            [Tracked::default(); 4],
            Adaptation {
                min_frequent_permille: 0,
                resume_after: 0,
            },
        )
        .unwrap();
        for a in 1..=4u64 {
            t.touch(a << 12, 0, || 5);
        }
        let r = t.report();
        assert_eq!((r.tracked, r.chained_buckets, r.longest_chain), (4, 1, 4));
        for a in 1..=4u64 {
            assert_eq!(
                t.touch(a << 12, 0, || 5),
                Use::Counting,
                "found in the chain"
            );
        }
    }

    #[test]
    fn adaptation_stops_growth_once_chained_and_infrequent_then_resumes() {
        let mut t = Tracker::new(
            [0u32; 1],
            [Tracked::default(); 8],
            Adaptation {
                min_frequent_permille: 200,
                resume_after: 3,
            },
        )
        .unwrap();
        // First buffer alone: no chain yet, keeps growing.
        t.touch(0x1000, 0, || 100);
        assert!(!t.report().stopped);
        // Second one chains, 0% frequent: stop.
        t.touch(0x2000, 0, || 100);
        assert!(t.report().stopped);
        assert_eq!(t.touch(0x3000, 0, || 100), Use::Cold);
        assert_eq!(t.report().tracked, 2, "stopped: not added");
        // Tracked buffers are still counted while stopped.
        assert_eq!(t.touch(0x1000, 0, || 100), Use::Counting);
        t.touch(0x4000, 0, || 100);
        t.touch(0x5000, 0, || 100);
        let r = t.report();
        assert_eq!(
            (r.tracked, r.stopped, r.resets),
            (0, false, 1),
            "reset after 3"
        );
        assert_eq!(t.touch(0x1000, 0, || 100), Use::Cold, "counting afresh");
    }

    #[test]
    fn frequent_buffers_keep_the_table_growing() {
        let mut t =
            Tracker::new([0u32; 1], [Tracked::default(); 8], Adaptation::default()).unwrap();
        assert_eq!(
            t.touch(0x1000, 0, || 1),
            Use::Frequent,
            "threshold 1: at once"
        );
        t.touch(0x2000, 0, || 1);
        t.touch(0x3000, 0, || 100);
        assert!(!t.report().stopped, "2 of 3 frequent: keep adding");
    }
}
