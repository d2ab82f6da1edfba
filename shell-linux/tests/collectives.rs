//! Collectives among ranks that are threads over `loop`: barrier,
//! allreduce, reduce_scatter and allgather for group sizes that are and are
//! not powers of two, against results computed directly; bad buffers are
//! refused with typed errors; collectives never match the application's
//! messages sent around them.

use rmx_core::collective::{Int, Op};
use rmx_core::{Source, TagSel};
use rmx_linux::collective::CollectiveError;
use rmx_linux::job::{self, Net};
use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::loop_config;

fn net() -> Net {
    Net::Loop(LoopConfig::default())
}

#[test]
fn collectives_give_every_rank_the_reference_result() {
    for n in [1u16, 2, 3, 5, 8] {
        let out = job::run(n, loop_config(), &net(), |r| {
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
            true
        });
        assert!(out.iter().all(|&ok| ok), "n = {n}");
    }
}

#[test]
fn bad_buffers_are_refused_and_user_messages_never_match_collectives() {
    let out = job::run(3, loop_config(), &net(), |r| {
        let me = r.rank();
        // Not a whole number of blocks, or of elements.
        assert_eq!(
            r.allgather(&mut [0u8; 4]),
            Err(CollectiveError::Length { want: 3, got: 4 })
        );
        assert!(matches!(
            r.allreduce(&mut [0u8; 6], Int::U32, Op::Sum),
            Err(CollectiveError::Reduce(_))
        ));
        // An application message with every tag posted around a barrier:
        // the collective's messages do not land in it.
        let mut got = [0u8; 8];
        let next = (me + 1) % 3;
        let prev = (me + 2) % 3;
        // SAFETY: waited for below while `got` lives.
        let q = unsafe {
            r.irecv_raw(Source::Rank(prev), TagSel::Any, got.as_mut_ptr(), got.len())
                .unwrap()
        };
        r.barrier().expect("barrier");
        r.send(next, 42, &(me as u64).to_ne_bytes()).unwrap();
        let st = r.wait(q);
        assert_eq!((st.tag, st.len), (42, 8));
        assert_eq!(got, (prev as u64).to_ne_bytes());
        true
    });
    assert!(out.iter().all(|&ok| ok));
}
