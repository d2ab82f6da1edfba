//! Faults injected on receive, on any transport: packets lost, duplicated
//! or held back behind the next one, drawn from a seed, as a lossy wire
//! would treat them. A decorator, so that every transport (and the core's
//! reliability layer above it) is tested the same way, where the kernel
//! has no netem too.

use rmx_core::{Caps, PostError, RegError};

use super::{Completion, Counters, Events, Mr, Recv, Transport, Work};

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
    /// Faults from percentages (as `rmx lab` and netem take them); `Err`
    /// names the value outside 0–100.
    pub fn percent(loss: f64, dup: f64, reorder: f64, seed: u64) -> Result<Faults, String> {
        let ppm = |name: &str, p: f64| {
            if (0.0..=100.0).contains(&p) {
                Ok((p * 10_000.0).round() as u32)
            } else {
                Err(format!("--{name} {p}: give a percentage from 0 to 100"))
            }
        };
        Ok(Faults {
            loss_ppm: ppm("loss", loss)?,
            dup_ppm: ppm("dup", dup)?,
            reorder_ppm: ppm("reorder", reorder)?,
            seed,
        })
    }

    /// Whether any fault is asked for.
    pub fn any(&self) -> bool {
        self.loss_ppm > 0 || self.dup_ppm > 0 || self.reorder_ppm > 0
    }
}

/// Buffer numbers of the copies this decorator makes: above any the inner
/// transport hands out.
const COPY: u32 = 1 << 31;

/// Copies of duplicated packets held at once; a duplicate drawn while all
/// are in use is not made.
const COPIES: usize = 64;

/// `inner` with [`Faults`] on what it receives.
pub struct Faulty<T: Transport> {
    inner: T,
    faults: Faults,
    rng: u64,
    /// A packet held back, delivered after the next one (or when none comes).
    late: Option<Recv>,
    /// The next packets to deliver before polling `inner` again.
    ready: std::collections::VecDeque<Recv>,
    /// Duplicates' bytes, by copy number, and whether the core holds each.
    copies: Vec<(Vec<u8>, bool)>,
    dropped: u64,
}

impl<T: Transport> Faulty<T> {
    pub fn new(inner: T, faults: Faults) -> Faulty<T> {
        Faulty {
            inner,
            faults,
            rng: faults.seed | 1,
            late: None,
            ready: std::collections::VecDeque::new(),
            copies: Vec::new(),
            dropped: 0,
        }
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The next draw below one million (xorshift).
    fn draw(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 1_000_000) as u32
    }

    /// A copy of packet `r` in a free copy buffer, if one is free.
    fn copy(&mut self, r: Recv) -> Option<Recv> {
        let bytes = self.inner.rx_bytes(r.buf)?;
        let i = match self.copies.iter().position(|c| !c.1) {
            Some(i) => i,
            None if self.copies.len() < COPIES => {
                self.copies.push((Vec::new(), false));
                self.copies.len() - 1
            }
            None => return None,
        };
        let c = &mut self.copies[i];
        c.0.clear();
        c.0.extend_from_slice(bytes);
        c.1 = true;
        Some(Recv {
            buf: COPY | i as u32,
            imm: None,
        })
    }
}

impl<T: Transport> rmx_driver::Port for Faulty<T> {
    fn caps(&self) -> Caps {
        let c = self.inner.caps();
        Caps {
            lossy: c.lossy || self.faults.any(),
            ..c
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the inner transport's.
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
        if let Some(r) = self.ready.pop_front() {
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
                if let Some(c) = self.copy(r) {
                    self.ready.push_back(c);
                }
            }
            if self.late.is_none() && self.draw() < self.faults.reorder_ppm {
                self.late = Some(r);
                continue;
            }
            if let Some(l) = self.late.take() {
                self.ready.push_back(l);
            }
            return Some(r);
        }
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        if buf & COPY == 0 {
            return self.inner.rx_bytes(buf);
        }
        match self.copies.get((buf & !COPY) as usize)? {
            (b, true) => Some(b),
            _ => None,
        }
    }

    fn repost(&mut self, buf: u32) -> bool {
        if buf & COPY == 0 {
            return self.inner.repost(buf);
        }
        match self.copies.get_mut((buf & !COPY) as usize) {
            Some(c @ (_, true)) => {
                c.1 = false;
                true
            }
            _ => false,
        }
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

impl<T: Transport> Transport for Faulty<T> {
    fn rank(&self) -> u16 {
        self.inner.rank()
    }

    fn events(&self) -> Events {
        self.inner.events()
    }

    fn busy(&self) -> bool {
        self.inner.busy()
    }

    fn counters(&self) -> Counters {
        let mut c = self.inner.counters();
        c.injected_drops += self.dropped;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopnic::{Fabric, LoopConfig};
    use crate::rank::Rank;
    use rmx_core::{Config, Source, TagSel};
    use std::sync::atomic::{AtomicBool, Ordering};

    fn pattern(seed: u32, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u32 * 7 + seed * 13) as u8).collect()
    }

    /// The decorator on `loop`, which loses nothing by itself: with 10%
    /// of packets lost, 10% duplicated and 10% held back, every message of
    /// every size path (eager, medium, PULL) arrives once, in order and
    /// whole, through the core's reliability layer; and the faults did
    /// happen.
    #[test]
    fn messages_cross_a_faulty_loop_once_in_order_and_whole() {
        const N: u32 = 120;
        let size = |i: u32| (i as usize * 997) % 40_000;
        let fabric = Fabric::new(2, LoopConfig::default()).expect("the default sizes fit");
        let faults = Faults::percent(10.0, 10.0, 10.0, 42).unwrap();
        let cfg = Config::unreliable(8192, 64);
        // Each side keeps answering until the other is done too (a last
        // acknowledgement or FIN may be lost and asked for again), as the
        // job runner's finish does.
        let done = [AtomicBool::new(false), AtomicBool::new(false)];
        let finish = |r: &mut Rank<Faulty<crate::loopnic::Port>>, me: usize| {
            done[me].store(true, Ordering::Release);
            while !done[1 - me].load(Ordering::Acquire) {
                r.progress();
            }
        };
        std::thread::scope(|s| {
            let (f, finish) = (&fabric, &finish);
            s.spawn(move || {
                let mut r = Rank::new(Faulty::new(f.port(0), faults), 2, cfg).unwrap();
                for i in 0..N {
                    r.send(1, i, &pattern(i, size(i))).unwrap();
                }
                finish(&mut r, 0);
            });
            let receiver = s.spawn(move || {
                let mut r = Rank::new(Faulty::new(f.port(1), faults), 2, cfg).unwrap();
                for i in 0..N {
                    let mut b = vec![0u8; size(i)];
                    let st = r.recv(Source::Rank(0), TagSel::Any, &mut b).unwrap();
                    assert_eq!((st.tag, st.len as usize), (i, size(i)), "in order, whole");
                    assert!(b == pattern(i, size(i)), "message {i}'s bytes");
                }
                finish(&mut r, 1);
                (r.transport_counters(), r.stats())
            });
            let (c, st) = receiver.join().unwrap();
            assert!(c.injected_drops > 0, "{c:?}");
            assert!(st.duplicates > 0 && st.out_of_order > 0, "{st:?}");
        });
    }

    #[test]
    fn percentages_outside_0_to_100_are_named() {
        assert_eq!(
            Faults::percent(1.0, 0.0, 101.0, 0),
            Err("--reorder 101: give a percentage from 0 to 100".into())
        );
        assert!(!Faults::percent(0.0, 0.0, 0.0, 0).unwrap().any());
        assert_eq!(Faults::percent(0.5, 0.0, 0.0, 0).unwrap().loss_ppm, 5000);
    }
}
