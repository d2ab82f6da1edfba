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

#[path = "common/reference.rs"]
mod reference;

fn net() -> Net {
    Net::Loop(LoopConfig::default())
}

#[test]
fn collectives_give_every_rank_the_reference_result() {
    for n in [1u16, 2, 3, 5, 8] {
        let out = job::run(n, loop_config(), &net(), |r| {
            reference::collectives(r);
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

/// Every rank but `to` sends it `count` messages it does not receive yet;
/// all call a barrier and an allgather; then `to` receives them all
/// (wildcard sources when `any`), in each sender's order. Before a
/// collective's messages went ahead of the flood, the barrier never
/// ended: the flood held the receiver's whole credit budget.
fn flood_then_collective(n: u16, to: u16, count: u32, any: bool) {
    let out = job::run(n, loop_config(), &net(), |r| {
        let me = r.rank();
        let bodies: Vec<[u8; 8]> = (0..count)
            .map(|k| ((me as u64) << 32 | k as u64).to_ne_bytes())
            .collect();
        let mut sends = Vec::new();
        if me != to {
            for (k, b) in bodies.iter().enumerate() {
                // SAFETY: `bodies` lives, unmoved, until every send is waited for.
                let q = unsafe { r.isend_raw(to, k as u32, b.as_ptr(), b.len()) };
                sends.push(q.expect("flood send"));
            }
        }
        r.barrier().expect("barrier");
        let mut all = vec![0u8; 4 * n as usize];
        all[4 * me as usize..][..4].copy_from_slice(&u32::from(me).to_ne_bytes());
        r.allgather(&mut all).expect("allgather");
        if me == to {
            let mut next = vec![0u64; n as usize];
            for _ in 0..count * (n as u32 - 1) {
                let mut got = [0u8; 8];
                // Named: each sender's messages in turn.
                let left = (0..n).find(|&o| o != to && next[o as usize] < count as u64);
                let src = match any {
                    true => Source::Any,
                    false => Source::Rank(left.expect("a sender with messages left")),
                };
                let st = r.recv(src, TagSel::Any, &mut got).expect("flood receive");
                let o = st.source as usize;
                assert_eq!(u64::from_ne_bytes(got), (o as u64) << 32 | next[o]);
                assert_eq!(st.tag as u64, next[o], "in the sender's order");
                next[o] += 1;
            }
        }
        for q in sends {
            assert_eq!(r.wait(q).fault, None);
        }
        (0..n).all(|k| all[4 * k as usize..][..4] == u32::from(k).to_ne_bytes())
    });
    assert!(
        out.iter().all(|&ok| ok),
        "{n} ranks, {count} each into {to}"
    );
}

#[test]
fn collectives_after_a_flood_end_before_it_is_received() {
    for any in [false, true] {
        flood_then_collective(2, 1, 300, any);
        flood_then_collective(2, 1, 1000, any);
        flood_then_collective(4, 0, 100, any);
        flood_then_collective(8, 0, 50, any);
    }
}
