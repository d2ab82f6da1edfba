//! The one-sided reference model: random sequences of put, get and
//! accumulate across several epochs, applied by every rank from the same
//! seed to a model of every window's memory and checked against it, for
//! any transport and design.

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::Design;
use rmx_core::Config;
use rmx_linux::job::{self, Net};
use rmx_linux::rank::loop_config;
use rmx_linux::window::Assert;

pub const N: u16 = 3;
pub const LEN: usize = 256;
const PUTS: usize = 0; // each origin o writes [o*32, o*32+32)
const ACCS: usize = 96; // u32 sums in [96, 160)
const READS: usize = 160; // never written: gets read [160, 256)
const EPOCHS: u16 = 4;

#[derive(Clone, Debug)]
enum Rma {
    Put { to: u16, at: usize, data: Vec<u8> },
    Acc { to: u16, at: usize, add: u32 },
    Get { to: u16, at: usize, len: usize },
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Rank `me`'s operations in `epoch`: the same at every rank.
fn ops(seed: u64, me: u16, epoch: u16) -> Vec<Rma> {
    let mut g = Rng(seed ^ (me as u64) << 32 ^ (epoch as u64) << 48);
    (0..g.below(7))
        .map(|_| {
            let to = g.below(N as u64) as u16;
            match g.below(3) {
                0 => {
                    let len = 1 + g.below(8) as usize;
                    let at = PUTS + me as usize * 32 + g.below((32 - len) as u64 + 1) as usize;
                    let data = (0..len).map(|_| g.below(256) as u8).collect();
                    Rma::Put { to, at, data }
                }
                1 => Rma::Acc {
                    to,
                    at: ACCS + 4 * g.below(16) as usize,
                    add: g.below(1000) as u32,
                },
                _ => {
                    let len = 1 + g.below(16) as usize;
                    Rma::Get {
                        to,
                        at: READS + g.below((LEN - READS - len) as u64 + 1) as usize,
                        len,
                    }
                }
            }
        })
        .collect()
}

fn initial(rank: u16) -> Vec<u8> {
    (0..LEN)
        .map(|i| {
            if i >= READS {
                (rank as usize * 31 + i) as u8
            } else {
                0
            }
        })
        .collect()
}

pub fn random_operations(net: &Net, design: Design, seeds: std::ops::Range<u64>) {
    random_operations_with(net, loop_config(), design, seeds)
}

pub fn random_operations_with(net: &Net, cfg: Config, design: Design, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let out = job::run(N, cfg, net, |r| {
            let me = r.rank();
            let mut w = r.win_create_with(LEN, 1, design).expect("window");
            w.write(0, &initial(me)).unwrap();
            w.fence(r).expect("opening fence");
            let mut model: Vec<Vec<u8>> = (0..N).map(initial).collect();
            for epoch in 0..EPOCHS {
                let mut gets = Vec::new();
                for op in ops(seed, me, epoch) {
                    match op {
                        Rma::Put { to, at, data } => w.put(r, to, at as u64, &data).unwrap(),
                        Rma::Acc { to, at, add } => w
                            .accumulate(r, to, at as u64, &add.to_ne_bytes(), Op::Sum, Int::U32)
                            .unwrap(),
                        Rma::Get { to, at, len } => {
                            let g = w.get(r, to, at as u64, len).unwrap();
                            gets.push((g, model[to as usize][at..at + len].to_vec()));
                        }
                    }
                }
                // Closed to every rank while this one checks its memory
                // (in an immediate design the next epoch's puts land as
                // soon as their origins leave the fence).
                w.fence_with(r, Assert::NO_SUCCEED).expect("fence");
                // Every rank's operations of this epoch, applied to the model.
                for origin in 0..N {
                    for op in ops(seed, origin, epoch) {
                        match op {
                            Rma::Put { to, at, data } => {
                                model[to as usize][at..at + data.len()].copy_from_slice(&data)
                            }
                            Rma::Acc { to, at, add } => {
                                let m = &mut model[to as usize][at..at + 4];
                                let v = u32::from_ne_bytes(m.try_into().unwrap()).wrapping_add(add);
                                m.copy_from_slice(&v.to_ne_bytes());
                            }
                            Rma::Get { .. } => {}
                        }
                    }
                }
                let ctx = format!("{design:?} seed {seed} epoch {epoch}");
                assert_eq!(w.to_vec(), model[me as usize], "{ctx}");
                for (g, want) in gets {
                    assert_eq!(w.take(g), Some(want), "{ctx}");
                    assert_eq!(w.take(g), None, "taken once");
                }
                w.fence_with(r, Assert::NO_PRECEDE).expect("opening fence");
            }
            w.refused()
        });
        assert!(
            out.iter().all(|&refused| refused == 0),
            "{design:?} seed {seed}"
        );
    }
}
