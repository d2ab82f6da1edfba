//! A PACKET_MMAP receive ring (TPACKET_V2): the kernel writes each frame
//! into a slot of memory shared with this process and flips the slot's
//! status word, so polling an empty ring is one load instead of a system
//! call. Slots are handed back in order as soon as their frame is copied
//! out: a slot kept for long would stop the kernel at it once the ring
//! wraps, and it would drop every frame behind.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of the slot header (`tpacket2_hdr`, aligned) before the address.
const HDR: usize = 32;
/// Where the kernel puts the frame's link-layer header for a 14-byte one:
/// TPACKET_ALIGN(TPACKET2_HDRLEN + 16) − 14.
const MAC_AT: usize = 80 - 14;
/// Offset of `sll_pkttype` in the address after the header.
const PKTTYPE_AT: usize = HDR + 10;

/// The receive ring of one AF_PACKET socket.
pub struct RxRing {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    block_size: usize,
    per_block: usize,
    frames: usize,
    next: usize,
}

// SAFETY: the mapping belongs to this ring alone; the kernel is the only
// other party, and it hands slots over through their status words.
unsafe impl Send for RxRing {}

/// A frame waiting in the ring.
pub struct Slot<'a> {
    /// The frame from its Ethernet header on, as much as the slot held.
    pub bytes: &'a [u8],
    /// The frame was longer than the slot.
    pub cut: bool,
    /// `sll_pkttype`: the frame was ours on the way out, or for us.
    pub pkttype: u8,
}

impl RxRing {
    /// Sets up a ring of at least `frames` slots, each holding a frame of
    /// `frame_bytes` (Ethernet header included), on the socket `fd`.
    pub fn new(fd: RawFd, frame_bytes: usize, frames: usize) -> io::Result<RxRing> {
        let frame_size = (MAC_AT + frame_bytes).div_ceil(16) * 16;
        let block_size = (frame_size * 4).div_ceil(4096) * 4096;
        let per_block = block_size / frame_size;
        let blocks = frames.div_ceil(per_block);
        let frames = blocks * per_block;
        let version: libc::c_int = 1; // TPACKET_V2
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: frames as u32,
        };
        // SAFETY: socket options with values of the sizes given.
        unsafe {
            if libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                (&version as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            ) != 0
                || libc::setsockopt(
                    fd,
                    libc::SOL_PACKET,
                    libc::PACKET_RX_RING,
                    (&req as *const libc::tpacket_req).cast(),
                    std::mem::size_of::<libc::tpacket_req>() as u32,
                ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        let len = block_size * blocks;
        // SAFETY: maps the ring the socket just made; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            base: base.cast(),
            len,
            frame_size,
            block_size,
            per_block,
            frames,
            next: 0,
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        let off = (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size;
        // SAFETY: `off` + frame_size lies inside the mapping for i < frames.
        unsafe { self.base.add(off) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is the slot's first, 16-byte aligned u32,
        // shared with the kernel and only ever accessed atomically here.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }

    /// The next frame the kernel filled, if any; [`release`](Self::release)
    /// hands its slot back.
    pub fn peek(&self) -> Option<Slot<'_>> {
        if self.status(self.next).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let p = self.slot(self.next);
        // SAFETY: the slot is ours until released (status USER); the header
        // fields are read as the kernel wrote them, and the frame's range is
        // clamped to the slot whatever they say.
        unsafe {
            let h = &*(p as *const libc::tpacket2_hdr);
            let at = (h.tp_mac as usize).min(self.frame_size);
            let n = (h.tp_snaplen as usize).min(self.frame_size - at);
            Some(Slot {
                bytes: std::slice::from_raw_parts(p.add(at), n),
                cut: h.tp_len > h.tp_snaplen,
                pkttype: *p.add(PKTTYPE_AT),
            })
        }
    }

    /// Hands the slot [`peek`](Self::peek) showed back to the kernel.
    pub fn release(&mut self) {
        self.status(self.next)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.next = (self.next + 1) % self.frames;
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
