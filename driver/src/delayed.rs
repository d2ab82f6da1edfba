//! A test device over any [`Port`]: RDMA writes complete at the origin at
//! once but land at the target only after an adversarial delay, as on a
//! network where local completion means "the NIC took it", not "it
//! arrived". A send or a read to a peer with a write still held is refused
//! (busy) until that write has landed, so each channel (origin → target)
//! stays in order, as a reliable connection is, and the core posts it
//! again later. A message to another peer goes at once and can overtake
//! the held write: the hazard of the fence paper's Fig. 2.
//!
//! No allocation: a write's bytes are copied into an arena the caller
//! gives (registered once with the inner port), and writes land in the
//! order they were posted, so the arena is used as a ring.

use core::ops::DerefMut;

use rmx_core::{Caps, PostError, RdmaOp, RegError, Remote, WcResult};

use crate::port::{Completion, Mr, Port, Recv, Sge, Work};

/// Work-request ids of the writes this device posts for itself: no id the
/// core makes is this small ([`rmx_core::WorkId`] sets a kind in the top
/// bits), so filtering it never hides one of the core's completions.
const OWN: u64 = 1;

const _: () = assert!(rmx_core::WorkId::from_wr_id(OWN).is_none());

/// Writes held at once; another is refused (busy) until one lands.
pub const HELD: usize = 64;

/// A write the origin was told is complete, waiting to land: its bytes
/// are `len` at `at` in the arena.
#[derive(Clone, Copy, Debug)]
struct Held {
    due: u64,
    peer: u16,
    at: usize,
    len: usize,
    remote: Remote,
    imm: Option<u32>,
}

const EMPTY: Held = Held {
    due: 0,
    peer: 0,
    at: 0,
    len: 0,
    remote: Remote {
        addr: 0,
        key: rmx_core::MemKey(0),
    },
    imm: None,
};

/// `inner` with every RDMA write delayed by up to `max_delay_ns`, timed
/// by `clock` (nanoseconds, never going back).
pub struct Delayed<P: Port, C, A: DerefMut<Target = [u8]>> {
    inner: P,
    clock: C,
    arena: A,
    mr: Mr,
    /// Held writes, oldest first: `len` of them from `first`.
    held: [Held; HELD],
    first: usize,
    len: usize,
    /// Arena bytes the held writes take.
    used: usize,
    max_delay_ns: u64,
    rng: u64,
}

impl<P: Port, C: FnMut() -> u64, A: DerefMut<Target = [u8]>> Delayed<P, C, A> {
    /// Delays every write of `inner` by up to `max_delay_ns` (drawn from
    /// `seed`), holding their bytes in `arena`: a write longer than it is
    /// refused as unsupported, one that does not fit beside those held as
    /// busy.
    ///
    /// # Safety
    /// `arena`'s bytes stay where they are for as long as the device
    /// lives, wherever it moves (a `Box` or `Vec`, not an array by value):
    /// the inner port reads them by address.
    pub unsafe fn new(
        mut inner: P,
        arena: A,
        max_delay_ns: u64,
        seed: u64,
        clock: C,
    ) -> Result<Delayed<P, C, A>, RegError> {
        // SAFETY: the caller keeps the bytes in place while the device
        // lives; it deregisters them when dropped.
        let mr = unsafe { inner.register(arena.as_ptr() as usize, arena.len().max(1)) }?;
        Ok(Delayed {
            inner,
            clock,
            arena,
            mr,
            held: [EMPTY; HELD],
            first: 0,
            len: 0,
            used: 0,
            max_delay_ns,
            rng: seed | 1,
        })
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Writes held, not landed yet.
    pub fn holding(&self) -> usize {
        self.len
    }

    fn delay(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % self.max_delay_ns.saturating_add(1)
    }

    fn nth(&self, i: usize) -> &Held {
        &self.held[(self.first + i) % HELD]
    }

    /// Where a write of `len` bytes goes in the arena, after the newest
    /// held one's bytes (wrapping to the start), if it fits.
    fn room(&self, len: usize) -> Option<usize> {
        let size = self.arena.len();
        if self.used == 0 {
            return (len <= size).then_some(0);
        }
        let head = self.nth(0).at;
        let last = self.nth(self.len - 1);
        let tail = last.at + last.len;
        if head < tail {
            // Used: [head, tail). Free: [tail, size), then [0, head).
            if size - tail >= len {
                Some(tail)
            } else {
                (head >= len).then_some(0)
            }
        } else {
            // Wrapped (or full): used from head on and before tail.
            (head - tail >= len).then_some(tail)
        }
    }

    /// Lands the writes whose time has come, oldest first.
    fn release(&mut self) {
        let now = (self.clock)();
        while self.len > 0 {
            let h = *self.nth(0);
            if h.due > now {
                break;
            }
            let local = Sge {
                addr: self.arena.as_ptr() as usize + h.at,
                len: h.len,
                key: self.mr.key,
            };
            let work = match h.imm {
                Some(imm) => Work::WriteImm {
                    local,
                    remote: h.remote,
                    imm,
                },
                None => Work::Rdma {
                    op: RdmaOp::Write,
                    local,
                    remote: h.remote,
                },
            };
            if let Err(PostError::Busy) = self.inner.post(h.peer, OWN, work) {
                break;
            }
            // Posted (or refused for good: lost, as the target's fault).
            // The bytes are read by the time the inner port's send
            // completes; `drain` waits for that before the arena is reused.
            self.inner.drain();
            self.first = (self.first + 1) % HELD;
            self.len -= 1;
            self.used -= h.len;
        }
    }

    fn hold(
        &mut self,
        peer: u16,
        wr_id: u64,
        local: Sge,
        remote: Remote,
        imm: Option<u32>,
    ) -> Result<Option<Completion>, PostError> {
        if local.len > self.arena.len() {
            return Err(PostError::Unsupported);
        }
        if self.len == HELD {
            return Err(PostError::Busy);
        }
        let at = self.room(local.len).ok_or(PostError::Busy)?;
        // SAFETY: the core registered `local` with this port, which keeps
        // it readable until this post completes: it is read once, now.
        let bytes = unsafe { core::slice::from_raw_parts(local.addr as *const u8, local.len) };
        self.arena[at..at + local.len].copy_from_slice(bytes);
        let last = if self.len > 0 {
            self.nth(self.len - 1).due
        } else {
            0
        };
        let due = ((self.clock)().saturating_add(self.delay())).max(last);
        self.held[(self.first + self.len) % HELD] = Held {
            due,
            peer,
            at,
            len: local.len,
            remote,
            imm,
        };
        self.len += 1;
        self.used += local.len;
        let ok: WcResult = Ok(());
        Ok(Some(Completion { wr_id, result: ok }))
    }

    /// A send or read to `peer` waits behind that channel's held writes.
    fn in_order(&self, peer: u16) -> Result<(), PostError> {
        match (0..self.len).any(|i| self.nth(i).peer == peer) {
            true => Err(PostError::Busy),
            false => Ok(()),
        }
    }
}

impl<P: Port, C, A: DerefMut<Target = [u8]>> Drop for Delayed<P, C, A> {
    fn drop(&mut self) {
        self.inner.drain();
        self.inner.deregister(self.mr);
    }
}

impl<P: Port, C: FnMut() -> u64, A: DerefMut<Target = [u8]>> Port for Delayed<P, C, A> {
    fn caps(&self) -> Caps {
        Caps {
            inline_max: 0,
            ..self.inner.caps()
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.inner.register(addr, len) }
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
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
        self.release();
        match work {
            Work::Rdma {
                op: RdmaOp::Write,
                local,
                remote,
            } => self.hold(peer, wr_id, local, remote, None),
            Work::WriteImm { local, remote, imm } => {
                self.hold(peer, wr_id, local, remote, Some(imm))
            }
            other => {
                self.in_order(peer)?;
                self.inner.post(peer, wr_id, other)
            }
        }
    }

    fn doorbell(&mut self) {
        self.inner.doorbell()
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        self.release();
        self.inner.poll_recv()
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        self.inner.rx_bytes(buf)
    }

    fn repost(&mut self, buf: u32) -> bool {
        self.inner.repost(buf)
    }

    fn rx_pool_low(&mut self, free: u32) -> u32 {
        self.inner.rx_pool_low(free)
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        self.release();
        let n = self.inner.poll_cq(out);
        // This device's own writes are nobody's completions.
        let mut kept = 0;
        for i in 0..n {
            if out[i].wr_id != OWN {
                out[kept] = out[i];
                kept += 1;
            }
        }
        kept
    }

    /// Lands every held write (waiting out their delays), then drains the
    /// inner port.
    fn drain(&mut self) {
        while self.len > 0 {
            self.release();
            core::hint::spin_loop();
        }
        self.inner.drain()
    }
}

#[cfg(test)]
mod tests;
