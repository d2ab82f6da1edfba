//! Collective schedules against a reference, for random group sizes,
//! element types, operations and values: every plan's rounds are run
//! together (each send must meet exactly one receive of the same round and
//! part, of the same length), and each rank's result is compared with the
//! reduction or gathering computed directly.

use proptest::prelude::*;
use rmx_core::collective::{reduce, Collective, Int, Op, Plan, PlanError, HALVING_FROM, MAX_DATA};
use std::collections::{BTreeSet, HashMap};

/// The reductions (replace is accumulate's only: its result depends on order).
const OPS: [Op; 6] = [Op::Sum, Op::Min, Op::Max, Op::BitAnd, Op::BitOr, Op::BitXor];

fn plans(what: Collective, n: u16) -> Vec<Plan> {
    (0..n).map(|me| Plan::new(what, n, me).unwrap()).collect()
}

/// Runs every rank's rounds in lockstep over `data`.
fn execute(plans: &[Plan], data: &mut [Vec<u8>], op: Op, ty: Int) {
    let rounds = plans[0].rounds();
    assert!(plans.iter().all(|p| p.rounds() == rounds));
    let mut scratch: Vec<Vec<u8>> = plans.iter().map(|p| vec![0; p.scratch_len()]).collect();
    for (me, p) in plans.iter().enumerate() {
        if let Some((from, to)) = p.local_copy() {
            assert_eq!(from.len, to.len);
            data[me].copy_within(from.range(), to.at);
        }
    }
    for i in 0..rounds {
        let mut wire: HashMap<(u16, u16, u8), Vec<u8>> = HashMap::new();
        for (me, p) in plans.iter().enumerate() {
            let Some(r) = p.round(i) else { continue };
            assert_eq!(r.index, i);
            for s in r.sends.iter().flatten() {
                let bytes = data[me][s.span.range()].to_vec();
                let dup = wire.insert((me as u16, s.peer, s.part), bytes);
                assert!(dup.is_none(), "two sends of one part in round {i}");
            }
        }
        for (me, p) in plans.iter().enumerate() {
            let Some(r) = p.round(i) else { continue };
            for m in r.recvs.iter().flatten() {
                let bytes = wire
                    .remove(&(m.peer, me as u16, m.part))
                    .unwrap_or_else(|| panic!("rank {me} round {i}: no send from {}", m.peer));
                assert_eq!(bytes.len(), m.span.len, "lengths agree");
                let at = m.span.range();
                if r.reduce {
                    scratch[me][at.clone()].copy_from_slice(&bytes);
                    reduce(op, ty, &mut data[me][at.clone()], &scratch[me][at]).unwrap();
                } else {
                    data[me][at].copy_from_slice(&bytes);
                }
            }
        }
        assert!(
            wire.is_empty(),
            "round {i}: sends nobody received: {:?}",
            wire.keys()
        );
    }
}

fn fold(op: Op, ty: Int, parts: &[&[u8]]) -> Vec<u8> {
    let mut acc = parts[0].to_vec();
    for p in &parts[1..] {
        reduce(op, ty, &mut acc, p).unwrap();
    }
    acc
}

fn log2_ceil(n: u16) -> u16 {
    (n as u32).next_power_of_two().trailing_zeros() as u16
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn allreduce_gives_every_rank_the_reduction(
        n in 1u16..40, elems in 0usize..9, t in 0usize..8, o in 0usize..6, seed: u64
    ) {
        let (ty, op) = (Int::ALL[t], OPS[o]);
        let len = elems * ty.size();
        let ps = plans(Collective::Allreduce { len }, n);
        prop_assert!(ps[0].rounds() <= log2_ceil(n) + 2);
        let mut data: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| (0..len as u64).map(|i| (seed ^ (r * 131 + i * 7)).wrapping_mul(0x9E37) as u8).collect())
            .collect();
        let want = fold(op, ty, &data.iter().map(Vec::as_slice).collect::<Vec<_>>());
        execute(&ps, &mut data, op, ty);
        for (me, d) in data.iter().enumerate() {
            prop_assert_eq!(d, &want, "rank {}", me);
            prop_assert_eq!(ps[me].result().len, len);
        }
    }

    /// From HALVING_FROM bytes the allreduce halves and doubles: the same
    /// result, at most 2·log₂ n + 2 rounds, and each rank sends less than
    /// 2·len bytes (whole buffers only to fold and unfold).
    #[test]
    fn a_large_allreduce_halves_then_doubles(
        n in 1u16..24, extra in 0usize..40, t in 0usize..8, o in 0usize..6, seed: u64
    ) {
        let (ty, op) = (Int::ALL[t], OPS[o]);
        let len = HALVING_FROM + extra * ty.size();
        let ps = plans(Collective::Allreduce { len }, n);
        prop_assert!(ps[0].rounds() <= 2 * log2_ceil(n) + 2);
        let mut data: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| (0..len as u64).map(|i| (seed ^ (r * 131 + i * 7)).wrapping_mul(0x9E37) as u8).collect())
            .collect();
        let want = fold(op, ty, &data.iter().map(Vec::as_slice).collect::<Vec<_>>());
        execute(&ps, &mut data, op, ty);
        for (me, d) in data.iter().enumerate() {
            prop_assert_eq!(d, &want, "rank {}", me);
        }
        let p = 1usize << (15 - n.leading_zeros());
        for pl in ps.iter().filter(|pl| pl.round(0).is_none()) {
            // A rank in the power-of-two group that folds nothing in.
            let sent: usize = (0..pl.rounds())
                .filter_map(|i| pl.round(i))
                .flat_map(|r| r.sends.into_iter().flatten())
                .map(|m| m.span.len)
                .sum();
            prop_assert!(sent <= 2 * len * (p - 1) / p + 16 * p, "sent {} of {}", sent, len);
        }
    }

    #[test]
    fn reduce_scatter_gives_each_rank_its_reduced_block(
        n in 1u16..40, elems in 0usize..5, t in 0usize..8, o in 0usize..6, seed: u64
    ) {
        let (ty, op) = (Int::ALL[t], OPS[o]);
        let block = elems * ty.size();
        let ps = plans(Collective::ReduceScatter { block }, n);
        let mut data: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| (0..(block * n as usize) as u64).map(|i| (seed ^ (r * 977 + i)).wrapping_mul(31) as u8).collect())
            .collect();
        let orig = data.clone();
        execute(&ps, &mut data, op, ty);
        for me in 0..n as usize {
            let span = ps[me].result();
            prop_assert_eq!(span.at, me * block);
            let parts: Vec<&[u8]> = orig.iter().map(|d| &d[span.range()]).collect();
            prop_assert_eq!(&data[me][span.range()], &fold(op, ty, &parts)[..], "rank {}", me);
        }
    }

    #[test]
    fn allgather_gives_every_rank_every_block(n in 1u16..70, block in 0usize..7, seed: u8) {
        let ps = plans(Collective::Allgather { block }, n);
        prop_assert_eq!(ps[0].rounds(), log2_ceil(n));
        let mine = |r: usize| -> Vec<u8> { (0..block).map(|i| (r * 7 + i) as u8 ^ seed).collect() };
        let mut data: Vec<Vec<u8>> = (0..n as usize)
            .map(|r| {
                let mut d = vec![0xEE; block * n as usize];
                d[r * block..(r + 1) * block].copy_from_slice(&mine(r));
                d
            })
            .collect();
        execute(&ps, &mut data, Op::Sum, Int::U8);
        let want: Vec<u8> = (0..n as usize).flat_map(mine).collect();
        for (me, d) in data.iter().enumerate() {
            prop_assert_eq!(d, &want, "rank {}", me);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A broadcast leaves the root's bytes on every rank, from any root.
    #[test]
    fn bcast_gives_every_rank_the_roots_bytes(n in 1u16..70, r in 0u16..70, len in 0usize..20, seed: u8) {
        let root = r % n;
        let ps = plans(Collective::Bcast { len, root }, n);
        prop_assert_eq!(ps[0].rounds(), log2_ceil(n));
        let mut data: Vec<Vec<u8>> = (0..n as usize)
            .map(|k| (0..len).map(|i| (k * 31 + i) as u8 ^ seed).collect())
            .collect();
        let want = data[root as usize].clone();
        execute(&ps, &mut data, Op::Sum, Int::U8);
        for (me, d) in data.iter().enumerate() {
            prop_assert_eq!(d, &want, "rank {}", me);
        }
    }

    /// A reduce leaves the reduction of every rank's bytes at the root.
    #[test]
    fn reduce_gives_the_root_the_reduction(
        n in 1u16..70, r in 0u16..70, elems in 0usize..6, t in 0usize..8, o in 0usize..6, seed: u64
    ) {
        let (ty, op, root) = (Int::ALL[t], OPS[o], r % n);
        let len = elems * ty.size();
        let ps = plans(Collective::Reduce { len, root }, n);
        let mut data: Vec<Vec<u8>> = (0..n as u64)
            .map(|k| (0..len as u64).map(|i| (seed ^ (k * 131 + i * 7)).wrapping_mul(0x9E37) as u8).collect())
            .collect();
        let want = fold(op, ty, &data.iter().map(Vec::as_slice).collect::<Vec<_>>());
        execute(&ps, &mut data, op, ty);
        prop_assert_eq!(&data[root as usize], &want);
    }

    /// A gather leaves every rank's block at the root, in rank order; a
    /// scatter gives each rank its block of the root's.
    #[test]
    fn gather_and_scatter_place_every_block(n in 1u16..70, r in 0u16..70, block in 0usize..6, seed: u8) {
        let root = r % n;
        let mine = |k: usize| -> Vec<u8> { (0..block).map(|i| (k * 7 + i) as u8 ^ seed).collect() };
        let all: Vec<u8> = (0..n as usize).flat_map(mine).collect();
        let ps = plans(Collective::Gather { block, root }, n);
        let mut data: Vec<Vec<u8>> = (0..n as usize)
            .map(|k| {
                let mut d = vec![0xEE; block * n as usize];
                d[k * block..(k + 1) * block].copy_from_slice(&mine(k));
                d
            })
            .collect();
        execute(&ps, &mut data, Op::Sum, Int::U8);
        prop_assert_eq!(&data[root as usize], &all);
        let ps = plans(Collective::Scatter { block, root }, n);
        let mut data: Vec<Vec<u8>> = (0..n as usize)
            .map(|k| if k == root as usize { all.clone() } else { vec![0xEE; block * n as usize] })
            .collect();
        execute(&ps, &mut data, Op::Sum, Int::U8);
        for (me, d) in data.iter().enumerate() {
            let span = ps[me].result();
            prop_assert_eq!(span.at, me * block);
            prop_assert_eq!(&d[span.range()], &mine(me)[..], "rank {}", me);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// An alltoall leaves block i of every rank j at rank i's place for j.
    #[test]
    fn alltoall_gives_each_rank_its_block_of_every_rank(n in 1u16..40, block in 0usize..6, seed: u8) {
        let ps = plans(Collective::Alltoall { block }, n);
        let n_ = n as usize;
        prop_assert_eq!(ps[0].rounds(), n - 1);
        let of = |from: usize, to: usize| -> Vec<u8> {
            (0..block).map(|i| (from * 31 + to * 7 + i) as u8 ^ seed).collect()
        };
        let mut data: Vec<Vec<u8>> = (0..n_)
            .map(|me| {
                let mut d: Vec<u8> = (0..n_).flat_map(|to| of(me, to)).collect();
                d.resize(2 * n_ * block, 0xEE);
                d
            })
            .collect();
        execute(&ps, &mut data, Op::Sum, Int::U8);
        for (me, d) in data.iter().enumerate() {
            let span = ps[me].result();
            let want: Vec<u8> = (0..n_).flat_map(|from| of(from, me)).collect();
            prop_assert_eq!(&d[span.range()], &want[..], "rank {}", me);
        }
    }
}

/// Dissemination: after the rounds every rank has heard, directly or
/// through others, from every rank, so none leaves before all arrived.
#[test]
fn a_barrier_lets_no_rank_out_before_every_rank_came_in() {
    for n in (1u16..=70).chain([128, 129, 1000, 1024]) {
        let ps = plans(Collective::Barrier, n);
        assert_eq!(ps[0].rounds(), log2_ceil(n));
        let mut know: Vec<BTreeSet<u16>> = (0..n).map(|r| BTreeSet::from([r])).collect();
        for i in 0..ps[0].rounds() {
            let before = know.clone();
            for (me, p) in ps.iter().enumerate() {
                let r = p.round(i).unwrap();
                let from = r.recvs[0].unwrap().peer as usize;
                assert_eq!(
                    ps[from].round(i).unwrap().sends[0].unwrap().peer as usize,
                    me
                );
                let heard = before[from].clone();
                know[me].extend(heard);
            }
        }
        assert!(know.iter().all(|k| k.len() == n as usize), "n = {n}");
    }
}

#[test]
fn bad_groups_are_refused() {
    assert_eq!(
        Plan::new(Collective::Barrier, 0, 0),
        Err(PlanError::Rank { me: 0, n: 0 })
    );
    assert_eq!(
        Plan::new(Collective::Barrier, 4, 4),
        Err(PlanError::Rank { me: 4, n: 4 })
    );
    assert_eq!(
        Plan::new(
            Collective::Allgather {
                block: usize::MAX / 2
            },
            3,
            0
        ),
        Err(PlanError::TooLarge)
    );
    // Every collective checks its size the same way (before, an allreduce
    // of any size was planned).
    for what in [
        Collective::Allreduce { len: usize::MAX },
        Collective::Allreduce { len: MAX_DATA + 1 },
        Collective::Allgather {
            block: MAX_DATA / 2,
        },
        Collective::ReduceScatter {
            block: MAX_DATA / 2,
        },
    ] {
        assert_eq!(Plan::new(what, 3, 0), Err(PlanError::TooLarge), "{what:?}");
    }
    assert!(Plan::new(Collective::Allreduce { len: MAX_DATA }, 3, 0).is_ok());
    for what in [
        Collective::Bcast { len: 1, root: 3 },
        Collective::Reduce { len: 1, root: 9 },
        Collective::Gather { block: 1, root: 3 },
        Collective::Scatter {
            block: 1,
            root: u16::MAX,
        },
    ] {
        let root = what.root().unwrap();
        assert_eq!(
            Plan::new(what, 3, 0),
            Err(PlanError::Root { root, n: 3 }),
            "{what:?}"
        );
    }
    assert_eq!(
        Plan::new(
            Collective::Gather {
                block: MAX_DATA / 2,
                root: 0
            },
            3,
            0
        ),
        Err(PlanError::TooLarge)
    );
    assert!(Plan::new(
        Collective::Allgather {
            block: MAX_DATA / 3
        },
        3,
        0
    )
    .is_ok());
    let p = Plan::new(Collective::Allreduce { len: 8 }, 5, 2).unwrap();
    assert_eq!(p.round(p.rounds()), None, "no round past the last");
}

/// Large groups: every schedule still pairs each send with a receive.
#[test]
fn schedules_pair_up_at_a_thousand_ranks() {
    for n in [1000u16, 1024, 1025] {
        let mut data: Vec<Vec<u8>> = (0..n).map(|r| (r as u64).to_ne_bytes().to_vec()).collect();
        execute(
            &plans(Collective::Allreduce { len: 8 }, n),
            &mut data,
            Op::Sum,
            Int::U64,
        );
        let sum = (n as u64 - 1) * n as u64 / 2;
        assert!(data.iter().all(|d| d[..] == sum.to_ne_bytes()), "n = {n}");
    }
}
