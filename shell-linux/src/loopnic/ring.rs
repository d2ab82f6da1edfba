//! The shared receive queue of one rank: a ring of `D` slots, each holding one
//! of `D` fixed-size receive buffers, every buffer headed by a completion
//! stamp, so that a small message and its completion share one cache line.
//!
//! Slot `i` serves positions `i, i+D, i+2D, ...`; the buffer in it reads
//! stamp `k+1` once position `k` is filled. The receiver refills slots in
//! position order with whichever buffers come back ([`Reposts`]), as a
//! verbs SRQ takes buffers reposted in any order: a buffer the receiver
//! keeps (an unexpected message nobody has received yet) blocks none of
//! the others. It publishes `released`: every position below it has been
//! polled and its slot refilled. A sender may claim position `t` (a CAS on
//! `tail`) only while `t < released + D` (else the receiver is not ready:
//! RNR); it caches `released` and re-reads it only when the ring looks full,
//! so in steady state a send touches no line the receiver writes. It then
//! writes the data into the slot's buffer and publishes the stamp with
//! release ordering; the receiver polls the stamp at its own `head`.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
    /// The buffer in each slot. Written by the receiver before `released`
    /// passes the slot's last position (so a sender that saw that
    /// `released` reads the new buffer); read by senders and the receiver.
    slots: Box<[AtomicU32]>,
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
            slots: (0..depth as u32).map(AtomicU32::new).collect(),
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
        // SAFETY: the start of buffer `i`.
        unsafe { stamp_at(self.base(i)) }
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

    /// The buffer in the slot serving `pos` (a claimed or published one).
    fn buf_at(&self, pos: u64) -> usize {
        // Ordered by `released` (see `slots`): relaxed suffices.
        self.slots[(pos & self.mask) as usize].load(Ordering::Relaxed) as usize
    }

    /// Data area of the buffer serving `pos`.
    pub fn data_ptr(&self, pos: u64) -> *mut u8 {
        // SAFETY: PREFIX < stride.
        unsafe { self.base(self.buf_at(pos)).add(PREFIX) }
    }

    /// Completes a claimed position: `len` bytes were written at `data_ptr(pos)`.
    pub fn publish(&self, pos: u64, len: u32, imm: Option<u32>, src: u16) {
        // SAFETY: the data area of the buffer serving `pos`, as the caller
        // claimed it.
        unsafe { self.publish_at(self.data_ptr(pos), pos, len, imm, src) }
    }

    /// [`publish`](Self::publish) for a caller that still has the buffer's
    /// data area at hand, so the slot is not looked up again.
    ///
    /// # Safety
    /// `data` is what `data_ptr(pos)` returned for a position `pos` this
    /// thread claimed and has not published.
    #[inline]
    pub unsafe fn publish_at(&self, data: *mut u8, pos: u64, len: u32, imm: Option<u32>, src: u16) {
        let info = len | if imm.is_some() { IMM_FLAG } else { 0 };
        let stamp = ((src as u64) << 48) | ((pos + 1) & MASK);
        // SAFETY: the caller's contract: `data` is PREFIX bytes into a
        // 64-aligned buffer of the ring that this thread claimed; nobody
        // reads the prefix before the stamp, which is read only atomically.
        unsafe {
            let b = data.sub(PREFIX);
            (b.add(8) as *mut u32).write(info);
            (b.add(12) as *mut u32).write(imm.unwrap_or(0));
            stamp_at(b).store(stamp, Ordering::Release);
        }
    }

    /// The completion at `head`, if it has been published.
    pub fn poll(&self, head: u64) -> Option<RecvWc> {
        let i = self.buf_at(head);
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

/// The completion stamp heading the buffer that starts at `b`.
///
/// # Safety
/// `b` is the start of one of a ring's buffers (64-aligned, inside its
/// allocation); the stamp is only ever accessed atomically.
unsafe fn stamp_at<'a>(b: *mut u8) -> &'a AtomicU64 {
    // SAFETY: the caller's contract.
    unsafe { &*(b as *const AtomicU64) }
}

/// The receiver's side of reposting: buffers come back in any order and
/// refill the slots of the positions polled, oldest first. Each buffer
/// comes back once per poll of it, so a repost always finds a polled
/// position left to refill.
#[derive(Debug, Default)]
pub struct Reposts {
    /// Positions below this are polled and their slots refilled.
    upto: u64,
}

impl Reposts {
    /// Buffer `buf` of `ring` is free again; `polled` positions have been
    /// polled.
    #[inline]
    pub fn repost(&mut self, ring: &RecvRing, buf: u32, polled: u64) {
        // More reposts than polls would hand a sender a buffer the
        // receiver still reads: the buffer is kept out instead.
        if self.upto >= polled {
            debug_assert!(false, "buffer {buf} reposted with no polled position left");
            return;
        }
        // Buffers reposted in order refill their own slots: the line
        // senders read stays unwritten.
        let slot = &ring.slots[(self.upto & ring.mask) as usize];
        if slot.load(Ordering::Relaxed) != buf {
            slot.store(buf, Ordering::Relaxed);
        }
        self.upto += 1;
        ring.release(self.upto);
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
        let mut back = Reposts::default();
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
        // Buffer 0 (position a) is kept; buffer 1 comes back and serves
        // position 2 in slot 0: a kept buffer blocks no other.
        back.repost(&r, wb.buf, 2);
        assert_eq!(r.claim(&mut seen), Some(2));
        assert_eq!(r.claim(&mut seen), None, "one buffer kept: one free");
        assert_eq!(
            r.poll(2),
            None,
            "a stale stamp of the previous lap is not a completion"
        );
        // Published through the data area just written, as an inline send
        // does: the stamp lands on the buffer now in the slot, not buffer 0.
        let at = r.data_ptr(2);
        // SAFETY: position 2 is claimed by this thread and `at` is its data area.
        unsafe {
            std::ptr::copy_nonoverlapping(b"yo".as_ptr(), at, 2);
            r.publish_at(at, 2, 2, None, 4);
        }
        let w2 = r.poll(2).unwrap();
        assert_eq!((w2.buf, w2.src), (wb.buf, 4));
        // SAFETY: polled and not reposted.
        assert_eq!(unsafe { r.bytes(w2.buf) }, b"yo");
        // SAFETY: buffer 0 is still kept, untouched by position 2.
        assert_eq!(unsafe { r.bytes(0) }.len(), 0);
        back.repost(&r, 0, 3);
        assert_eq!(r.claim(&mut seen), Some(3));
    }

    /// Buffers reposted in any order refill the oldest polled positions,
    /// each in turn, and only as many positions as came back open to
    /// senders: the one still kept holds back none of the others.
    #[test]
    fn buffers_reposted_in_any_order_refill_the_oldest_positions() {
        let r = RecvRing::new(4, 64).unwrap();
        let (mut seen, mut back) = (0, Reposts::default());
        for pos in 0..4 {
            assert_eq!(r.claim(&mut seen), Some(pos));
            r.publish(pos, 0, None, 0);
            assert_eq!(r.poll(pos).unwrap().buf, pos as u32);
        }
        // Buffer 1 stays kept; the others come back out of order.
        for buf in [2, 0, 3] {
            back.repost(&r, buf, 4);
        }
        for (pos, buf) in [(4, 2), (5, 0), (6, 3)] {
            assert_eq!(r.claim(&mut seen), Some(pos));
            r.publish(pos, 0, None, 0);
            assert_eq!(r.poll(pos).unwrap().buf, buf, "position {pos}");
        }
        assert_eq!(r.claim(&mut seen), None, "buffer 1 is still kept");
        back.repost(&r, 1, 7);
        assert_eq!(r.claim(&mut seen), Some(7));
    }
}
