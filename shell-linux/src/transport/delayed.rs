//! A test device: a transport whose RDMA writes complete at the origin at
//! once but land at the target only after an adversarial delay, as on a
//! network where local completion means "the NIC took it", not "it
//! arrived". Each channel (origin → target) stays in order, as a reliable
//! connection is: a send or a read behind a delayed write is refused
//! (busy) until the write has landed, so the core posts it again later.
//! Channels do not wait for each other, so a message on one can overtake
//! a write on another — the hazard of the fence paper's Fig. 2.

use std::collections::VecDeque;

use rmx_core::{Caps, PostError, RdmaOp, RegError, WcResult};

use super::{Completion, Counters, Events, Mr, Recv, Sge, Transport, Work};
use crate::clock::now_ns;

/// A write the origin was told is complete, waiting to land.
struct Held {
    due: u64,
    bytes: Box<[u8]>,
    mr: Mr,
    remote_addr: u64,
    rkey: u32,
    imm: Option<u32>,
}

/// Work-request ids of the writes this device posts for itself: no id the
/// core makes is this small ([`rmx_core::WorkId`] sets a kind in the top
/// bits), so filtering it never hides one of the core's completions.
const OWN: u64 = 1;

const _: () = assert!(rmx_core::WorkId::from_wr_id(OWN).is_none());

pub struct Delayed<T: Transport> {
    inner: T,
    held: Vec<VecDeque<Held>>,
    max_delay_ns: u64,
    rng: u64,
}

impl<T: Transport> Delayed<T> {
    /// Delays every write by up to `max_delay_ns` (drawn from `seed`).
    pub fn new(inner: T, ranks: u16, max_delay_ns: u64, seed: u64) -> Delayed<T> {
        Delayed {
            inner,
            held: (0..ranks).map(|_| VecDeque::new()).collect(),
            max_delay_ns,
            rng: seed | 1,
        }
    }

    fn delay(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % (self.max_delay_ns + 1)
    }

    /// Lands the writes whose time has come, each channel in order.
    fn release(&mut self) {
        let now = now_ns();
        for peer in 0..self.held.len() {
            while let Some(h) = self.held[peer].front() {
                if h.due > now {
                    break;
                }
                let local = Sge {
                    addr: h.bytes.as_ptr() as usize,
                    len: h.bytes.len(),
                    key: h.mr.key,
                };
                let remote = rmx_core::Remote {
                    addr: h.remote_addr,
                    key: rmx_core::MemKey(h.rkey),
                };
                let work = match h.imm {
                    Some(imm) => Work::WriteImm { local, remote, imm },
                    None => Work::Rdma {
                        op: RdmaOp::Write,
                        local,
                        remote,
                    },
                };
                let r = self.inner.post(peer as u16, OWN, work);
                match r {
                    Err(PostError::Busy) => break,
                    // Landed (or failed) during the call: small writes on
                    // `loop` are copied at once.
                    _ => {
                        let h = self.held[peer].pop_front().expect("front");
                        self.inner.drain();
                        self.inner.deregister(h.mr);
                    }
                }
            }
        }
    }

    fn hold(
        &mut self,
        peer: u16,
        wr_id: u64,
        local: Sge,
        remote_addr: u64,
        rkey: u32,
        imm: Option<u32>,
    ) -> Result<Option<Completion>, PostError> {
        // SAFETY: the caller registered `local`; it is read once, now.
        let bytes: Box<[u8]> =
            unsafe { std::slice::from_raw_parts(local.addr as *const u8, local.len) }.into();
        // SAFETY: `bytes` lives in `held` until deregistered after landing.
        let mr = unsafe {
            self.inner
                .register(bytes.as_ptr() as usize, bytes.len().max(1))
        }
        .map_err(|_| PostError::Busy)?;
        let last = self.held[peer as usize].back().map_or(0, |h| h.due);
        let due = (now_ns() + self.delay()).max(last);
        self.held[peer as usize].push_back(Held {
            due,
            bytes,
            mr,
            remote_addr,
            rkey,
            imm,
        });
        let ok: WcResult = Ok(());
        Ok(Some(Completion { wr_id, result: ok }))
    }

    fn in_order(&self, peer: u16) -> Result<(), PostError> {
        match self.held.get(peer as usize) {
            Some(q) if !q.is_empty() => Err(PostError::Busy),
            _ => Ok(()),
        }
    }
}

impl<T: Transport> rmx_driver::Port for Delayed<T> {
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
            } => self.hold(peer, wr_id, local, remote.addr, remote.key.0, None),
            Work::WriteImm { local, remote, imm } => {
                self.hold(peer, wr_id, local, remote.addr, remote.key.0, Some(imm))
            }
            // Sends and reads wait behind the channel's delayed writes.
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

    fn drain(&mut self) {
        while self.held.iter().any(|q| !q.is_empty()) {
            self.release();
            std::thread::yield_now();
        }
        self.inner.drain()
    }
}

impl<T: Transport> Transport for Delayed<T> {
    fn rank(&self) -> u16 {
        self.inner.rank()
    }

    fn events(&self) -> Events {
        self.inner.events()
    }

    fn busy(&self) -> bool {
        self.inner.busy() || self.held.iter().any(|q| !q.is_empty())
    }

    fn counters(&self) -> Counters {
        self.inner.counters()
    }
}
