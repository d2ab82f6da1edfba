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
