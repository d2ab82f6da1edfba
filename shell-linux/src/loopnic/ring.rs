//! The shared receive queue of one rank: a ring of fixed-size receive buffers,
//! each headed by a completion stamp, so that a small message and its completion
//! share one cache line.
//!
//! Buffer `i` of a ring of depth `D` serves positions `i, i+D, i+2D, ...`. Its stamp
//! reads `k+1` once position `k` is filled. The receiver publishes `released`:
//! every position below it has been reposted. A sender may claim position `t`
//! (a CAS on `tail`) only while `t < released + D` (else the receiver is not
//! ready: RNR); it caches `released` and re-reads it only when the ring looks
//! full, so in steady state a send touches no line the receiver writes. It then
//! writes the data and publishes the stamp with release ordering; the receiver
//! polls the stamp at its own `head`.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

const MASK: u64 = (1 << 48) - 1;
const IMM_FLAG: u32 = 1 << 31;
/// Bytes before each buffer's data: stamp (8), length|flags (4), immediate (4).
pub const PREFIX: usize = 16;

/// A receive completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWc {
    /// Buffer index, handed back by `repost`.
    pub buf: u32,
    pub len: u32,
    pub imm: Option<u32>,
    pub src: u16,
}

pub struct RecvRing {
    mem: *mut u8,
    layout: Layout,
    depth: usize,
    /// `depth - 1`: depth is a power of two, so positions map to buffers by mask.
    mask: u64,
    stride: usize,
    buf_size: usize,
    tail: CachePadded<AtomicU64>,
    released: CachePadded<AtomicU64>,
}

// SAFETY: the buffers are shared raw memory whose ownership is handed between
// threads by the stamps (acquire/release); `tail` is atomic.
unsafe impl Send for RecvRing {}
// SAFETY: as for Send.
unsafe impl Sync for RecvRing {}

impl RecvRing {
    /// A ring of `depth` buffers (rounded up to a power of two) of
    /// `buf_size` bytes; `None` if either is 0, if buffers cannot be
    /// numbered in 32 bits, or if the ring's size passes the address space
    /// or what the allocator gives (every product is checked).
    pub fn new(depth: usize, buf_size: usize) -> Option<RecvRing> {
        if depth == 0 || buf_size == 0 {
            return None;
        }
        let depth = depth.checked_next_power_of_two()?;
        u32::try_from(depth).ok()?;
        let stride = PREFIX.checked_add(buf_size)?.div_ceil(64).checked_mul(64)?;
        let layout = Layout::from_size_align(stride.checked_mul(depth)?, 4096).ok()?;
        // SAFETY: non-zero size.
        let mem = unsafe { alloc_zeroed(layout) };
        if mem.is_null() {
            return None;
        }
        Some(RecvRing {
            mem,
            layout,
            depth,
            mask: depth as u64 - 1,
            stride,
            buf_size,
            tail: CachePadded::new(AtomicU64::new(0)),
            released: CachePadded::new(AtomicU64::new(0)),
        })
    }

    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    fn base(&self, i: usize) -> *mut u8 {
        // SAFETY: i < depth, inside the allocation.
        unsafe { self.mem.add(i * self.stride) }
    }

    fn stamp(&self, i: usize) -> &AtomicU64 {
        // SAFETY: 64-aligned, inside the allocation, only accessed atomically.
        unsafe { &*(self.base(i) as *const AtomicU64) }
    }

    /// Claims the next position if its buffer is free. `seen` is this sender's
    /// cached copy of `released`.
    pub fn claim(&self, seen: &mut u64) -> Option<u64> {
        loop {
            let t = self.tail.load(Ordering::Relaxed);
            if t >= *seen + self.depth as u64 {
                *seen = self.released.load(Ordering::Acquire);
                if t >= *seen + self.depth as u64 {
                    return None;
                }
            }
            if self
                .tail
                .compare_exchange_weak(t, t + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(t);
            }
        }
    }

    /// Data area of the buffer serving `pos`.
    pub fn data_ptr(&self, pos: u64) -> *mut u8 {
        // SAFETY: PREFIX < stride.
        unsafe { self.base((pos & self.mask) as usize).add(PREFIX) }
    }

    /// Completes a claimed position: `len` bytes were written at `data_ptr(pos)`.
    pub fn publish(&self, pos: u64, len: u32, imm: Option<u32>, src: u16) {
        let b = self.base((pos & self.mask) as usize);
        let info = len | if imm.is_some() { IMM_FLAG } else { 0 };
        // SAFETY: this thread claimed `pos`; nobody reads the prefix before the stamp.
        unsafe {
            (b.add(8) as *mut u32).write(info);
            (b.add(12) as *mut u32).write(imm.unwrap_or(0));
        }
        let stamp = ((src as u64) << 48) | ((pos + 1) & MASK);
        self.stamp((pos & self.mask) as usize)
            .store(stamp, Ordering::Release);
    }

    /// The completion at `head`, if it has been published.
    pub fn poll(&self, head: u64) -> Option<RecvWc> {
        let i = (head & self.mask) as usize;
        let s = self.stamp(i).load(Ordering::Acquire);
        if s & MASK != (head + 1) & MASK {
            return None;
        }
        let b = self.base(i);
        // SAFETY: published (acquire above); the prefix is stable until repost.
        let (info, imm) = unsafe {
            (
                (b.add(8) as *const u32).read(),
                (b.add(12) as *const u32).read(),
            )
        };
        Some(RecvWc {
            buf: i as u32,
            len: info & !IMM_FLAG,
            imm: (info & IMM_FLAG != 0).then_some(imm),
            src: (s >> 48) as u16,
        })
    }

    /// The received bytes of buffer `buf`.
    ///
    /// # Safety
    /// `buf` must be a buffer returned by `poll` and not yet reposted.
    pub unsafe fn bytes(&self, buf: u32) -> &[u8] {
        let b = self.base(buf as usize);
        // SAFETY: the caller holds the published buffer, so nobody writes
        // it; the length is capped at the buffer's size.
        unsafe {
            let len = ((b.add(8) as *const u32).read() & !IMM_FLAG) as usize;
            std::slice::from_raw_parts(b.add(PREFIX), len.min(self.buf_size))
        }
    }

    /// Publishes that every position below `upto` has been reposted.
    pub fn release(&self, upto: u64) {
        self.released.store(upto, Ordering::Release);
    }
}

/// The receiver's side of reposting: buffers may come back in any order, but
/// `released` only advances over a contiguous run of them.
#[derive(Debug)]
pub struct Reposts {
    back: Vec<bool>,
    upto: u64,
}

impl Reposts {
    pub fn new(depth: usize) -> Reposts {
        Reposts {
            back: vec![false; depth.next_power_of_two()],
            upto: 0,
        }
    }

    /// Buffer `buf` of `ring` is free again.
    #[inline]
    pub fn repost(&mut self, ring: &RecvRing, buf: u32) {
        let m = self.back.len() as u64 - 1;
        self.back[buf as usize] = true;
        let before = self.upto;
        while self.back[(self.upto & m) as usize] {
            self.back[(self.upto & m) as usize] = false;
            self.upto += 1;
        }
        if self.upto != before {
            ring.release(self.upto);
        }
    }
}

impl Drop for RecvRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.mem, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_publish_poll_repost_cycle() {
        let r = RecvRing::new(2, 64).unwrap();
        let mut seen = 0;
        let mut back = Reposts::new(2);
        let a = r.claim(&mut seen).unwrap();
        let b = r.claim(&mut seen).unwrap();
        assert_eq!(r.claim(&mut seen), None, "ring full: receiver not ready");
        // SAFETY: position b is claimed by this thread; its buffer holds 64 bytes.
        unsafe { std::ptr::copy_nonoverlapping(b"hi".as_ptr(), r.data_ptr(b), 2) };
        r.publish(b, 2, Some(7), 3);
        assert_eq!(r.poll(a), None, "a is claimed but not published");
        r.publish(a, 0, None, 1);
        assert_eq!(r.poll(a).unwrap().src, 1);
        let wb = r.poll(b).unwrap();
        assert_eq!((wb.len, wb.imm, wb.src), (2, Some(7), 3));
        // SAFETY: polled and not reposted.
        assert_eq!(unsafe { r.bytes(wb.buf) }, b"hi");
        back.repost(&r, wb.buf);
        assert_eq!(
            r.claim(&mut seen),
            None,
            "position 2 uses buffer 0, still full"
        );
        back.repost(&r, 0);
        assert_eq!(r.claim(&mut seen), Some(2));
        assert_eq!(r.claim(&mut seen), Some(3));
        assert_eq!(
            r.poll(2),
            None,
            "a stale stamp of the previous lap is not a completion"
        );
    }
}
