//! Faults injected on receive, over any [`Port`]: packets lost, duplicated
//! or held back behind the next one, drawn from a seed, as a lossy wire
//! would treat them. A decorator, so that every transport (and the core's
//! reliability layer above it) is tested the same way, in any shell: a
//! kernel has no netem either.
//!
//! No copy is made: a duplicate is the same receive buffer handed out a
//! second time under an id of its own, and the port gets the buffer back
//! only when both have been returned.

use rmx_core::{Caps, PostError, RegError};

use crate::port::{Completion, Mr, Port, Recv, Work};

/// Faults in parts per million of received packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub loss_ppm: u32,
    pub dup_ppm: u32,
    /// A packet held back and delivered after the next one.
    pub reorder_ppm: u32,
    pub seed: u64,
}

impl Faults {
    /// Whether any fault is asked for.
    pub fn any(&self) -> bool {
        self.loss_ppm > 0 || self.dup_ppm > 0 || self.reorder_ppm > 0
    }
}

/// Receive ids of duplicates: this bit and the duplicate's slot. A port
/// whose own ids have it set gets no duplicates.
const DUP: u32 = 1 << 31;

/// Duplicates outstanding at once; one drawn while all are out is not made.
const DUPS: usize = 64;

/// A buffer handed out twice: the port's id and which of the two
/// hand-outs are still held (neither: the slot is free).
#[derive(Clone, Copy, Debug, Default)]
struct Dup {
    buf: u32,
    original: bool,
    copy: bool,
}

impl Dup {
    fn free(&self) -> bool {
        !self.original && !self.copy
    }
}

/// `inner` with [`Faults`] on what it receives.
pub struct Faulty<P> {
    inner: P,
    faults: Faults,
    rng: u64,
    /// A packet held back, delivered after the next one (or when none comes).
    late: Option<Recv>,
    /// Packets to deliver before polling `inner` again, oldest first: at
    /// most a duplicate and a packet held back.
    ready: [Option<Recv>; 2],
    dups: [Dup; DUPS],
    /// Slots of `dups` in use: while none is, a repost goes straight on.
    dups_out: usize,
    dropped: u64,
}

impl<P: Port> Faulty<P> {
    pub fn new(inner: P, faults: Faults) -> Faulty<P> {
        Faulty {
            inner,
            faults,
            rng: faults.seed | 1,
            late: None,
            ready: [None; 2],
            dups: [Dup::default(); DUPS],
            dups_out: 0,
            dropped: 0,
        }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Packets dropped on purpose so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The next draw below one million (xorshift).
    fn draw(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 1_000_000) as u32
    }

    /// Queues `r` for the next poll. At most a duplicate and a packet held
    /// back wait at once (a packet is held back only while none waits), so
    /// there is always room: a full queue would lose a buffer.
    fn push_ready(&mut self, r: Recv) {
        let free = self.ready.iter_mut().find(|e| e.is_none());
        debug_assert!(free.is_some(), "a third packet queued");
        if let Some(e) = free {
            *e = Some(r);
        }
    }

    fn pop_ready(&mut self) -> Option<Recv> {
        let r = self.ready[0].take()?;
        self.ready[0] = self.ready[1].take();
        Some(r)
    }

    /// Packet `r` handed out a second time, if a slot is free.
    fn duplicate(&mut self, r: Recv) -> Option<Recv> {
        if r.buf & DUP != 0 || self.inner.rx_bytes(r.buf).is_none() {
            return None;
        }
        let i = self.dups.iter().position(Dup::free)?;
        self.dups[i] = Dup {
            buf: r.buf,
            original: true,
            copy: true,
        };
        self.dups_out += 1;
        Some(Recv {
            buf: DUP | i as u32,
            imm: None,
        })
    }

    /// One hand-out of slot `i` came back (the copy, or the original):
    /// the buffer goes back to the port with the last. `false` for a
    /// hand-out not held (given back twice).
    fn release(&mut self, i: usize, copy: bool) -> bool {
        let d = &mut self.dups[i];
        let held = if copy { &mut d.copy } else { &mut d.original };
        if !*held {
            return false;
        }
        *held = false;
        if !d.free() {
            return true;
        }
        self.dups_out -= 1;
        self.inner.repost(d.buf)
    }
}

impl<P: Port> Port for Faulty<P> {
    fn caps(&self) -> Caps {
        let c = self.inner.caps();
        Caps {
            lossy: c.lossy || self.faults.any(),
            ..c
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the inner port's.
        unsafe { self.inner.register(addr, len) }
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: as above.
        unsafe { self.inner.register_user(addr, len) }
    }

    fn deregister(&mut self, mr: Mr) {
        self.inner.deregister(mr)
    }

    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        self.inner.post(peer, wr_id, work)
    }

    fn doorbell(&mut self) {
        self.inner.doorbell()
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        if let Some(r) = self.pop_ready() {
            return Some(r);
        }
        loop {
            let Some(r) = self.inner.poll_recv() else {
                // Nothing behind a held packet: it goes now.
                return self.late.take();
            };
            if r.imm.is_some() {
                // An RDMA notification is no packet on a wire.
                return Some(r);
            }
            if self.draw() < self.faults.loss_ppm {
                self.dropped += 1;
                self.inner.repost(r.buf);
                continue;
            }
            if self.draw() < self.faults.dup_ppm {
                if let Some(c) = self.duplicate(r) {
                    self.push_ready(c);
                }
            }
            if self.late.is_none()
                && self.ready[0].is_none()
                && self.draw() < self.faults.reorder_ppm
            {
                self.late = Some(r);
                continue;
            }
            if let Some(l) = self.late.take() {
                self.push_ready(l);
            }
            return Some(r);
        }
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        if buf & DUP == 0 {
            return self.inner.rx_bytes(buf);
        }
        match self.dups.get((buf & !DUP) as usize)? {
            d if d.copy => self.inner.rx_bytes(d.buf),
            _ => None,
        }
    }

    fn repost(&mut self, buf: u32) -> bool {
        if buf & DUP != 0 {
            let i = (buf & !DUP) as usize;
            return i < DUPS && self.release(i, true);
        }
        if self.dups_out > 0 {
            // The original of a duplicate still held: given back at most
            // once, and to the port only after the duplicate.
            if let Some(i) = self.dups.iter().position(|d| !d.free() && d.buf == buf) {
                return self.release(i, false);
            }
        }
        self.inner.repost(buf)
    }

    fn rx_pool_low(&mut self, free: u32) -> u32 {
        self.inner.rx_pool_low(free)
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        self.inner.poll_cq(out)
    }

    fn drain(&mut self) {
        self.inner.drain()
    }
}

#[cfg(test)]
mod tests;
