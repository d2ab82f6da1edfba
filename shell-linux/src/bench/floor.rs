//! The physical floor of an eager copy between two cores: the sender writes the
//! payload into a shared buffer and raises a flag in the same cache line; the
//! receiver spins on the flag and copies the payload out. No protocol at all.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// One direction: a flag followed by the payload, cache-line aligned.
pub struct Channel {
    mem: *mut u8,
    layout: Layout,
    cap: usize,
}

// SAFETY: the flag (release/acquire) hands the payload between the two threads.
unsafe impl Send for Channel {}
unsafe impl Sync for Channel {}

impl Channel {
    pub fn new(cap: usize) -> Channel {
        let layout = Layout::from_size_align(64 + cap, 64).expect("layout");
        // SAFETY: non-zero size.
        let mem = unsafe { alloc_zeroed(layout) };
        assert!(!mem.is_null());
        Channel { mem, layout, cap }
    }

    fn flag(&self) -> &AtomicU64 {
        // SAFETY: aligned, inside the allocation, accessed only atomically.
        unsafe { &*(self.mem as *const AtomicU64) }
    }

    /// Writes `data` and raises the flag to `seq`.
    pub fn put(&self, seq: u64, data: &[u8]) {
        assert!(data.len() <= self.cap);
        // SAFETY: the peer reads only after seeing `seq`, and has finished with
        // the previous payload before it answered.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.mem.add(8), data.len()) };
        self.flag().store(seq, Ordering::Release);
    }

    /// Spins until the flag reads `seq`, then copies the payload into `out`.
    pub fn get(&self, seq: u64, out: &mut [u8]) {
        while self.flag().load(Ordering::Acquire) != seq {
            std::hint::spin_loop();
        }
        // SAFETY: published by `put` with release ordering.
        unsafe { std::ptr::copy_nonoverlapping(self.mem.add(8), out.as_mut_ptr(), out.len()) };
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.mem, self.layout) }
    }
}

/// Both directions of a floor ping-pong.
pub struct Floor {
    pub ping: Channel,
    pub pong: Channel,
}

impl Floor {
    pub fn new(cap: usize) -> Floor {
        Floor {
            ping: Channel::new(cap),
            pong: Channel::new(cap),
        }
    }

    /// One side of `rounds` round trips of `size` bytes, starting at sequence
    /// `base + 1`. Side 0 pings first. Returns elapsed nanoseconds on side 0.
    pub fn run(&self, side: u16, base: u64, rounds: u64, size: usize, buf: &mut [u8]) -> u64 {
        let (data, out) = buf.split_at_mut(buf.len() / 2);
        let (data, out) = (&data[..size], &mut out[..size]);
        let t0 = crate::clock::now_ns();
        for i in base + 1..=base + rounds {
            if side == 0 {
                self.ping.put(i, data);
                self.pong.get(i, out);
            } else {
                self.ping.get(i, out);
                self.pong.put(i, data);
            }
        }
        crate::clock::now_ns() - t0
    }
}
