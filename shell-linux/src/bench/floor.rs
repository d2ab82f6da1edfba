//! The physical floor of an eager copy between two cores: the sender writes the
//! payload into a shared buffer and raises a flag in the same cache line; the
//! receiver spins on the flag and copies the payload out. No protocol at all.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One direction: a flag followed by the payload, cache-line aligned. Only
/// a [`Side`] of a [`MemoryFloor`] uses it, which keeps writer and reader apart.
struct Channel {
    mem: *mut u8,
    layout: Layout,
    cap: usize,
}

// SAFETY: the flag (release/acquire) hands the payload between the two
// threads; `Side` lets one thread write and the other read each direction.
unsafe impl Send for Channel {}
// SAFETY: as for Send.
unsafe impl Sync for Channel {}

impl Channel {
    fn new(cap: usize) -> Channel {
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

    /// Writes `data` and raises the flag to `seq`. Only the direction's
    /// writer calls this, after the reader answered the previous payload.
    fn put(&self, seq: u64, data: &[u8]) {
        assert!(
            data.len() <= self.cap,
            "{} bytes into {}",
            data.len(),
            self.cap
        );
        // SAFETY: inside the allocation (checked); the reader reads only
        // after seeing `seq`, and finished the previous payload before it
        // answered, which the writer waited for.
        unsafe { crate::copy::copy_bytes(self.mem.add(8), data.as_ptr(), data.len()) };
        self.flag().store(seq, Ordering::Release);
    }

    /// Spins until the flag reads `seq`, then copies the payload into `out`.
    fn get(&self, seq: u64, out: &mut [u8]) {
        assert!(
            out.len() <= self.cap,
            "{} bytes out of {}",
            out.len(),
            self.cap
        );
        while self.flag().load(Ordering::Acquire) != seq {
            std::hint::spin_loop();
        }
        // SAFETY: inside the allocation (checked); published by `put` with
        // release ordering, and not written again until this side answers.
        unsafe { crate::copy::copy_bytes(out.as_mut_ptr(), self.mem.add(8), out.len()) };
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.mem, self.layout) }
    }
}

/// Both directions of a floor ping-pong.
pub struct MemoryFloor {
    ping: Channel,
    pong: Channel,
    taken: [AtomicBool; 2],
}

/// One end of a [`MemoryFloor`]: side 0 writes pings and reads pongs, side 1 the
/// reverse. At most one handle per side exists at a time, so each payload
/// has one writer and one reader.
pub struct Side<'a> {
    floor: &'a MemoryFloor,
    side: u16,
}

impl MemoryFloor {
    pub fn new(cap: usize) -> MemoryFloor {
        MemoryFloor {
            ping: Channel::new(cap),
            pong: Channel::new(cap),
            taken: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }

    /// Side `side` (0 or 1), if nobody holds it.
    pub fn side(&self, side: u16) -> Option<Side<'_>> {
        let t = self.taken.get(side as usize)?;
        (!t.swap(true, Ordering::AcqRel)).then_some(Side { floor: self, side })
    }
}

impl Drop for Side<'_> {
    fn drop(&mut self) {
        self.floor.taken[self.side as usize].store(false, Ordering::Release);
    }
}

impl Side<'_> {
    /// `rounds` round trips of `size` bytes, starting at sequence
    /// `base + 1`. Side 0 pings first. Returns elapsed nanoseconds.
    pub fn run(&mut self, base: u64, rounds: u64, size: usize, buf: &mut [u8]) -> u64 {
        let f = self.floor;
        let (data, out) = buf.split_at_mut(buf.len() / 2);
        let (data, out) = (&data[..size], &mut out[..size]);
        let t0 = crate::clock::now_ns();
        for i in base + 1..=base + rounds {
            if self.side == 0 {
                f.ping.put(i, data);
                f.pong.get(i, out);
            } else {
                f.ping.get(i, out);
                f.pong.put(i, data);
            }
        }
        crate::clock::now_ns() - t0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_has_one_holder_and_payloads_are_bounded() {
        let f = MemoryFloor::new(16);
        let a = f.side(0).unwrap();
        assert!(f.side(0).is_none(), "a side has one holder");
        assert!(f.side(2).is_none());
        drop(a);
        assert!(f.side(0).is_some(), "free again once dropped");
        let r = std::panic::catch_unwind(|| f.pong.get(0, &mut [0u8; 17]));
        assert!(r.is_err(), "reading past the payload is refused");
    }
}
