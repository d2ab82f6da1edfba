//! Collectives against results every rank computes itself: barrier,
//! allreduce (small and large), reduce-scatter, allgather. For any
//! transport and any number of ranks.

use rmx_core::collective::{Int, Op};
use rmx_linux::rank::Rank;

/// Runs each collective on `r` and asserts its result.
pub fn collectives(r: &mut Rank) {
    let me = r.rank() as u64;
    let n = r.size() as u64;
    r.barrier().expect("barrier");
    // Allreduce of 3 u64s: sum, and max.
    let mut v: Vec<u8> = [me, me * me, 7]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    r.allreduce(&mut v, Int::U64, Op::Sum).expect("allreduce");
    let sum: Vec<u8> = [n * (n - 1) / 2, (0..n).map(|i| i * i).sum(), 7 * n]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    assert_eq!(v, sum);
    let mut m = (me as i32 - 3).to_ne_bytes().to_vec();
    r.allreduce(&mut m, Int::I32, Op::Min)
        .expect("allreduce min");
    assert_eq!(m, (-3i32).to_ne_bytes());
    // Reduce_scatter: rank i contributes (i + j) in block j.
    let mut blocks: Vec<u8> = (0..n)
        .flat_map(|j| ((me + j) as u32).to_ne_bytes())
        .collect();
    r.reduce_scatter(&mut blocks, Int::U32, Op::Sum)
        .expect("reduce_scatter");
    let mine = &blocks[me as usize * 4..me as usize * 4 + 4];
    let want = (0..n).map(|i| (i + me) as u32).sum::<u32>();
    assert_eq!(mine, want.to_ne_bytes());
    // A large allreduce (reduce-scatter by halving, then allgather):
    // 64 KiB of u32s, element i of rank r being r·i.
    let big: Vec<u8> = (0..16384u64)
        .flat_map(|i| ((me * i) as u32).to_ne_bytes())
        .collect();
    let mut got = big.clone();
    r.allreduce(&mut got, Int::U32, Op::Sum)
        .expect("large allreduce");
    let want: Vec<u8> = (0..16384u64)
        .flat_map(|i| ((n * (n - 1) / 2 * i) as u32).to_ne_bytes())
        .collect();
    assert!(got == want, "large allreduce at rank {me}");
    // Allgather of 5-byte blocks.
    let mut all = vec![0u8; 5 * n as usize];
    all[me as usize * 5..me as usize * 5 + 5].fill(me as u8 + 1);
    r.allgather(&mut all).expect("allgather");
    let want: Vec<u8> = (0..n).flat_map(|i| [i as u8 + 1; 5]).collect();
    assert_eq!(all, want);
    r.barrier().expect("barrier");
}
