//! Both sides of every rendezvous, over an RDMA-capable test NIC, with the
//! fuzzer in the middle: it picks the protocol and the transport's
//! reliability, starts large sends and receives of any size, carries out or
//! fails RDMA operations, advances time, and delivers, drops, duplicates or
//! rewrites the packets the two endpoints exchange (so bodies carry any
//! address, length, key and id). Neither side may panic or overflow (the
//! target runs with overflow checks), and every receive buffer is reposted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::{Config, Endpoint, Protocol, Request, Source, TagSel};
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::{execute_rdma, MemNic};

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(2, 8, 16, 16, 16);
const EAGER: usize = 64;

struct Side {
    ep: Ep,
    nic: MemNic,
    reqs: Vec<Request>,
}

/// The fuzzer's input, read a piece at a time (zeros once it runs out).
struct Input<'a> {
    b: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }

    fn byte(&mut self) -> u8 {
        let v = self.b.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        v
    }

    fn word(&mut self) -> u64 {
        u64::from_le_bytes(core::array::from_fn(|_| self.byte()))
    }

    /// A value for a rewritten field: often one at an edge (ends of the
    /// address and length ranges), else any.
    fn edge(&mut self) -> u64 {
        match self.byte() % 5 {
            0 => u64::MAX - self.byte() as u64 * 64,
            1 => u32::MAX as u64 - self.byte() as u64,
            2 => 0,
            3 => self.byte() as u64,
            _ => self.word(),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let reliable = mode & 1 == 0;
    let mut cfg = if reliable {
        Config::reliable(EAGER as u32, 4)
    } else {
        Config::unreliable(EAGER as u32, 4)
    };
    cfg.rendezvous = match (mode >> 1) & 3 {
        1 if reliable => Some(Protocol::Rput),
        2 if reliable => Some(Protocol::Rget),
        3 => Some(Protocol::Pull),
        _ => None,
    };
    cfg.pull_frames = 2;
    cfg.pull_requests = 2;
    let mut sides: Vec<Side> = (0..2)
        .map(|me| {
            let mut nic = MemNic::new(16, 28 + EAGER).with_rdma(100 + mode as u32);
            nic.later = mode & 16 != 0;
            Side {
                ep: Ep::new(cfg, me, 2, Tables::new(&SIZES)).unwrap(),
                nic,
                reqs: Vec::new(),
            }
        })
        .collect();
    let mut now = 0u64;
    let mut inp = Input { b: rest, at: 0 };
    while !inp.done() {
        let op = inp.byte();
        let who = (op >> 7) as usize;
        let s = &mut sides[who];
        match op & 0x7f {
            // A large send of 65..=4160 bytes to the other side.
            0 => {
                let len = EAGER + 1 + (inp.word() % 4096) as usize;
                let b = s.nic.user_buf(vec![op; len]);
                let to = 1 - who as u16;
                if let Ok(r) = s.ep.isend(now, &mut s.nic, to, 3, 0, b, len as u32) {
                    s.reqs.push(r);
                }
            }
            // A receive of 0..=4095 bytes.
            1 => {
                let cap = (inp.word() % 4096) as usize;
                let b = s.nic.user_buf(vec![0; cap]);
                let any = (Source::Any, TagSel::Any);
                if let Ok(r) = s.ep.irecv(now, &mut s.nic, any.0, any.1, 0, b, cap as u32) {
                    s.reqs.push(r);
                }
            }
            2 => {
                now = now.saturating_add(inp.word() % 10_000_000);
                s.ep.poll(now, &mut s.nic);
            }
            // Complete a send the NIC holds.
            3 => {
                if !s.nic.owed.is_empty() {
                    let w = s.nic.owed.remove(0);
                    s.ep.on_completion(&mut s.nic, w.wr_id(), Ok(()));
                }
            }
            // Carry out (or fail) this side's oldest RDMA operation.
            4 | 5 => {
                if !sides[who].nic.rdma_out.is_empty() {
                    let post = sides[who].nic.rdma_out.remove(0);
                    let (a, b) = sides.split_at_mut(1);
                    let (me, peer) = if who == 0 {
                        (&mut a[0], &mut b[0])
                    } else {
                        (&mut b[0], &mut a[0])
                    };
                    let r = if op & 0x7f == 4 {
                        execute_rdma(&mut me.nic, &mut peer.nic, &post)
                    } else {
                        Err(rmx_core::RdmaError::Access)
                    };
                    let wr_id = post.work.wr_id();
                    me.ep.on_completion(&mut me.nic, wr_id, r);
                }
            }
            // Test the requests.
            6 => s.reqs.retain(|&r| matches!(s.ep.test(r), Ok(None))),
            // Deliver, drop, duplicate or rewrite this side's oldest packet.
            n => {
                if sides[who].nic.outbox.is_empty() {
                    continue;
                }
                let (_, mut p) = sides[who].nic.outbox.remove(0);
                match n % 4 {
                    0 => continue,
                    1 => sides[who].nic.outbox.push((0, p.clone())),
                    2 => {
                        // A field of 1, 4 or 8 bytes at any offset (the
                        // bodies' addresses, lengths, keys and ids sit at
                        // 4-byte boundaries after the 28-byte header).
                        let at = inp.byte() as usize % 64;
                        let width = [1, 4, 8][inp.byte() as usize % 3];
                        let v = inp.edge().to_le_bytes();
                        for (k, b) in v.iter().take(width).enumerate() {
                            if let Some(x) = p.get_mut(at + k) {
                                *x = *b;
                            }
                        }
                    }
                    _ => {}
                }
                let to = &mut sides[1 - who];
                let held = to.ep.held_buffers();
                let b = to.nic.deliver(p);
                to.ep.on_receive(now, &mut to.nic, b);
                // Reposted, or kept for an unexpected (rewritten) message.
                let kept = to.nic.rx[b.0 as usize].is_some();
                assert_eq!(to.ep.held_buffers(), held + kept as usize);
            }
        }
    }
});
