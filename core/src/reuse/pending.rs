//! Invalidations waiting for the endpoint.
//!
//! Memory changes are noticed on another thread (a userfaultfd handler) or in
//! another context (an MMU notifier), which must not wait for the endpoint.
//! They are queued here, in fixed storage, and applied before the next send
//! looks anything up. If the queue overflows, a range is lost — so the whole
//! cache is flushed instead: correctness first.

use core::sync::atomic::{AtomicBool, Ordering};

use heapless::Deque;
use spin::Mutex;

/// What the endpoint must forget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// The memory of `[start, start+len)` changed.
    Range { start: u64, len: u64 },
    /// Ranges were lost: forget every registration.
    All,
}

/// A fixed queue of up to `N` ranges, shared between the notifier and the endpoint.
pub struct Pending<const N: usize> {
    queue: Mutex<Deque<(u64, u64), N>>,
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
            queue: Mutex::new(Deque::new()),
            flagged: AtomicBool::new(false),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Queues a changed range; never blocks for long, never allocates.
    pub fn push(&self, start: u64, len: u64) {
        if self.queue.lock().push_back((start, len)).is_err() {
            self.overflowed.store(true, Ordering::Release);
        }
        self.flagged.store(true, Ordering::Release);
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

    /// Hands every queued invalidation to `f`, oldest first. `f` runs after
    /// the queue's lock is released: a notifier pushing meanwhile never waits
    /// for whatever `f` does.
    pub fn drain(&self, mut f: impl FnMut(Invalidation)) {
        // Cleared before the queue is read: a push racing with the drain
        // flags again and is seen next time.
        self.flagged.store(false, Ordering::Release);
        let taken = {
            let mut q = self.queue.lock();
            core::mem::take(&mut *q)
        };
        if self.overflowed.swap(false, Ordering::AcqRel) {
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
