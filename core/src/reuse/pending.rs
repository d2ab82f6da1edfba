//! Invalidations waiting for the endpoint.
//!
//! Memory changes are noticed on another thread (a userfaultfd handler) or in
//! another context (an MMU notifier), which must not wait for the endpoint.
//! They are queued here, in fixed storage, and applied before the next send
//! looks anything up. If the queue overflows, a range is lost — so the whole
//! cache is flushed instead: correctness first.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// What the endpoint must forget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// The memory of `[start, start+len)` changed.
    Range { start: u64, len: u64 },
    /// Ranges were lost: forget every registration.
    All,
}

/// One place of the queue. `turn` says whose it is: the producer of
/// position `pos` may fill it when `turn + index == pos`, the consumer may
/// take it when `turn + index == pos + 1` (stored relative to the index, so
/// that every place starts at zero in a `const` initialiser).
struct Slot {
    turn: AtomicUsize,
    start: AtomicU64,
    len: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            turn: AtomicUsize::new(0),
            start: AtomicU64::new(0),
            len: AtomicU64::new(0),
        }
    }
}

/// A fixed queue of up to `N` ranges, shared between the notifiers and the
/// endpoint, without a lock: a push claims a place with one atomic
/// compare-and-swap and never waits for another thread (it retries only
/// when another push took the place first), never sleeps and never
/// allocates, so it may run in an MMU notifier, with interrupts off, or
/// on any number of CPUs at once. A full queue loses the range and flags
/// the loss (the next drain flushes everything). One endpoint drains it.
pub struct Pending<const N: usize> {
    slots: [Slot; N],
    /// The next position to fill, and to take.
    tail: AtomicUsize,
    head: AtomicUsize,
    flagged: AtomicBool,
    overflowed: AtomicBool,
}

impl<const N: usize> Default for Pending<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Pending<N> {
    pub const fn new() -> Self {
        Pending {
            slots: [const { Slot::new() }; N],
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            flagged: AtomicBool::new(false),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Queues a changed range; lock-free, never allocates.
    pub fn push(&self, start: u64, len: u64) {
        if !self.try_push(start, len) {
            self.overflowed.store(true, Ordering::Release);
        }
        self.flagged.store(true, Ordering::Release);
    }

    /// Claims the next free place and fills it; `false` if the queue is full.
    fn try_push(&self, start: u64, len: u64) -> bool {
        if N == 0 {
            return false;
        }
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let i = pos % N;
            let slot = &self.slots[i];
            let turn = slot.turn.load(Ordering::Acquire).wrapping_add(i);
            if turn == pos {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        slot.start.store(start, Ordering::Relaxed);
                        slot.len.store(len, Ordering::Relaxed);
                        // Hands the place to the consumer, with its range.
                        slot.turn
                            .store(pos.wrapping_add(1).wrapping_sub(i), Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if (turn.wrapping_sub(pos) as isize) < 0 {
                // The place still holds a range from a lap ago: full.
                return false;
            } else {
                // Another push filled it: try the next.
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest range, if a push finished filling it.
    fn pop(&self) -> Option<(u64, u64)> {
        if N == 0 {
            return None;
        }
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let i = pos % N;
            let slot = &self.slots[i];
            let turn = slot.turn.load(Ordering::Acquire).wrapping_add(i);
            if turn == pos.wrapping_add(1) {
                match self.head.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let r = (
                            slot.start.load(Ordering::Relaxed),
                            slot.len.load(Ordering::Relaxed),
                        );
                        // Free for the push a lap later.
                        slot.turn
                            .store(pos.wrapping_add(N).wrapping_sub(i), Ordering::Release);
                        return Some(r);
                    }
                    Err(now) => pos = now,
                }
            } else if (turn.wrapping_sub(pos.wrapping_add(1)) as isize) < 0 {
                // Empty, or a push claimed it and is still filling it: it
                // flagged the queue, so the next drain takes it.
                return None;
            } else {
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Ranges were lost before they could be queued: the next drain flushes all.
    pub fn push_lost(&self) {
        self.overflowed.store(true, Ordering::Release);
        self.flagged.store(true, Ordering::Release);
    }

    /// Nothing queued: one load, for the send path.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.flagged.load(Ordering::Acquire)
    }

    /// Hands every queued invalidation to `f`, oldest first. A push racing
    /// with the drain never waits for whatever `f` does.
    pub fn drain(&self, mut f: impl FnMut(Invalidation)) {
        // Cleared before the queue is read: a push racing with the drain
        // flags again and is seen next time.
        self.flagged.store(false, Ordering::Release);
        // The ranges are taken before the loss is read: a push that lost
        // its range after this drain's take flags the queue for the next.
        let mut taken = heapless::Vec::<(u64, u64), N>::new();
        while let Some(r) = self.pop() {
            if taken.push(r).is_err() {
                // More than fit (pushes racing with the drain): flush all.
                self.overflowed.store(true, Ordering::Release);
                break;
            }
        }
        if self.overflowed.swap(false, Ordering::AcqRel) {
            // Whatever is still queued is covered by the flush.
            while self.pop().is_some() {}
            f(Invalidation::All);
            return;
        }
        for &(start, len) in taken.iter() {
            f(Invalidation::Range { start, len });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_drain_in_order_and_overflow_becomes_a_flush() {
        let p: Pending<2> = Pending::new();
        assert!(p.is_empty());
        p.push(0x1000, 10);
        p.push(0x2000, 20);
        assert!(!p.is_empty());
        let mut seen = heapless::Vec::<Invalidation, 4>::new();
        p.drain(|i| seen.push(i).unwrap());
        assert_eq!(
            seen.as_slice(),
            [
                Invalidation::Range {
                    start: 0x1000,
                    len: 10
                },
                Invalidation::Range {
                    start: 0x2000,
                    len: 20
                }
            ]
        );
        assert!(p.is_empty());
        for k in 0..3 {
            p.push(k << 12, 1);
        }
        seen.clear();
        p.drain(|i| seen.push(i).unwrap());
        assert_eq!(
            seen.as_slice(),
            [Invalidation::All],
            "a lost range flushes all"
        );
        seen.clear();
        p.drain(|i| seen.push(i).unwrap());
        assert!(seen.is_empty());
        p.push_lost();
        assert!(!p.is_empty());
        p.drain(|i| seen.push(i).unwrap());
        assert_eq!(
            seen.as_slice(),
            [Invalidation::All],
            "lost before queueing: flush"
        );
    }
}
