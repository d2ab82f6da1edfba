//! PULL's frame windows, one per side of a transfer: the receiver's
//! [`Arrivals`] (which frames came, how far it asked) and the sender's
//! [`Asked`] (which frames it still owes).

/// The receiver's view of a PULL: which frames arrived, within a window of
/// 64 frames above the first missing one, and how far it has asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrivals {
    /// Every frame below this arrived.
    pub base: u32,
    /// Bit `i`: frame `base + i` arrived.
    pub bits: u64,
    /// Every frame below this was asked for at least once.
    pub asked: u32,
    /// Frames in the message.
    pub frames: u32,
}

impl Arrivals {
    /// Frames a window can track beyond `base`.
    pub const SPAN: u32 = 64;

    pub const fn new(frames: u32) -> Arrivals {
        Arrivals {
            base: 0,
            bits: 0,
            asked: 0,
            frames,
        }
    }

    /// Records frame `f`; `false` if it is a duplicate or outside the window.
    pub fn arrived(&mut self, f: u32) -> bool {
        if f < self.base || f >= self.frames || f - self.base >= Self::SPAN {
            return false;
        }
        let bit = 1u64 << (f - self.base);
        if self.bits & bit != 0 {
            return false;
        }
        self.bits |= bit;
        let run = self.bits.trailing_ones();
        self.base += run;
        self.bits = if run >= 64 { 0 } else { self.bits >> run };
        true
    }

    pub fn complete(&self) -> bool {
        self.base >= self.frames
    }

    /// Frames asked for (the first time) that have not arrived.
    pub fn outstanding(&self) -> u32 {
        let span = self.asked.saturating_sub(self.base).min(Self::SPAN);
        let mask = if span >= 64 {
            u64::MAX
        } else {
            (1u64 << span) - 1
        };
        span - (self.bits & mask).count_ones()
    }

    /// The next run of frames to ask for the first time, at most `max`
    /// long, keeping every asked frame within `limit` frames of `base`.
    pub fn next_ask(&mut self, max: u32, limit: u32) -> Option<(u32, u32)> {
        let end = self
            .frames
            .min(self.base.saturating_add(limit.min(Self::SPAN)));
        if self.asked >= end {
            return None;
        }
        let n = (end - self.asked).min(max);
        let first = self.asked;
        self.asked += n;
        Some((first, n))
    }

    /// The runs of asked frames that have not arrived, for asking again
    /// after a timeout; calls `ask(first, count)` for each.
    pub fn missing(&self, mut ask: impl FnMut(u32, u32)) {
        let mut f = self.base;
        while f < self.asked {
            let i = f - self.base;
            if i >= Self::SPAN {
                break;
            }
            if self.bits & (1u64 << i) != 0 {
                f += 1;
                continue;
            }
            let start = f;
            while f < self.asked
                && f - self.base < Self::SPAN
                && self.bits & (1u64 << (f - self.base)) == 0
            {
                f += 1;
            }
            ask(start, f - start);
        }
    }
}

/// The sender's view of a PULL: frames asked for and not yet sent. Every
/// such frame lies within 64 frames above the receiver's first missing one,
/// so a 64-bit map from the lowest of them holds them all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    base: u32,
    bits: u64,
}

impl Asked {
    pub const EMPTY: Asked = Asked { base: 0, bits: 0 };

    /// Adds frame `f`; `false` if it lies 64 or more frames from the others.
    pub fn insert(&mut self, f: u32) -> bool {
        if self.bits == 0 {
            self.base = f;
            self.bits = 1;
            return true;
        }
        if f < self.base {
            let shift = self.base - f;
            if shift >= 64 || self.bits.leading_zeros() < shift {
                return false;
            }
            self.bits <<= shift;
            self.base = f;
        }
        let i = f - self.base;
        if i >= 64 {
            return false;
        }
        self.bits |= 1u64 << i;
        true
    }

    /// The lowest frame still to send, without taking it.
    pub fn first(&self) -> Option<u32> {
        (self.bits != 0).then(|| self.base + self.bits.trailing_zeros())
    }

    /// Takes the lowest frame still to send; the map then starts at the
    /// next one, so it spans only frames still asked for.
    pub fn pop(&mut self) -> Option<u32> {
        let f = self.first()?;
        self.bits &= self.bits - 1;
        if self.bits != 0 {
            let skip = self.bits.trailing_zeros();
            self.bits >>= skip;
            self.base += skip;
        }
        Some(f)
    }

    pub fn is_empty(&self) -> bool {
        self.bits == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asked_frames_come_out_lowest_first_and_far_ones_are_refused() {
        let mut a = Asked::default();
        assert!(a.insert(10));
        assert!(a.insert(12));
        assert!(a.insert(4));
        assert!(!a.insert(80), "64 or more frames above the lowest");
        assert_eq!(a.pop(), Some(4));
        assert_eq!(a.pop(), Some(10));
        assert!(a.insert(11));
        assert_eq!(a.pop(), Some(11));
        assert_eq!(a.pop(), Some(12));
        assert_eq!(a.pop(), None);
        assert!(a.is_empty());
        assert!(a.insert(1000), "an empty map starts anywhere");
        // Sent frames leave the span: 64 frames beyond the first one asked
        // fit once the frames before them went.
        let mut b = Asked::default();
        for f in 0..40 {
            assert!(b.insert(f));
        }
        for _ in 0..30 {
            b.pop();
        }
        assert!(
            b.insert(90),
            "within 64 of frame 30, the lowest still asked"
        );
        assert_eq!(b.pop(), Some(30));
    }

    #[test]
    fn arrivals_slide_in_any_order_and_refuses_duplicates() {
        let mut w = Arrivals::new(100);
        assert_eq!(w.next_ask(8, 32), Some((0, 8)));
        assert_eq!(w.next_ask(8, 32), Some((8, 8)));
        assert_eq!(w.next_ask(8, 32), Some((16, 8)));
        assert_eq!(w.next_ask(8, 32), Some((24, 8)));
        assert_eq!(w.next_ask(8, 32), None, "window full until frames arrive");
        assert!(w.arrived(1));
        assert!(!w.arrived(1), "duplicate");
        assert_eq!(w.base, 0);
        assert!(w.arrived(0));
        assert_eq!(w.base, 2);
        assert!(!w.arrived(0), "below the window");
        assert!(!w.arrived(100), "beyond the message");
        assert_eq!(w.next_ask(8, 32), Some((32, 2)));
        let mut runs = heapless::Vec::<(u32, u32), 8>::new();
        w.arrived(5);
        w.missing(|a, n| {
            let _ = runs.push((a, n));
        });
        assert_eq!(&runs[..], &[(2, 3), (6, 28)]);
        for f in 2..100 {
            w.arrived(f);
            while w.next_ask(8, 32).is_some() {}
        }
        assert!(w.complete());
    }

    #[test]
    fn outstanding_counts_frames_asked_and_not_arrived() {
        let mut w = Arrivals::new(100);
        assert_eq!(w.outstanding(), 0);
        assert_eq!(w.next_ask(8, 32), Some((0, 8)));
        assert_eq!(w.outstanding(), 8);
        assert!(w.arrived(3));
        assert!(w.arrived(0));
        assert_eq!(w.outstanding(), 6);
        // A frame never asked for (a forged one) does not count below zero.
        assert!(w.arrived(40));
        assert_eq!(w.outstanding(), 6);
        for f in 1..8 {
            w.arrived(f);
        }
        assert_eq!(w.outstanding(), 0);
    }
}
