//! The collective task over ranks whose messages a test matches by hand:
//! results, small request tables, and what a failure leaves posted.

extern crate std;

use std::cell::RefCell;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::task::mock::{Mock, Msg, Net};

/// Every rank's data after `what` over `inputs`, each rank with room for
/// `limit` requests; panics if the group stops moving.
fn run(
    what: Collective,
    op: Option<(Op, Int)>,
    inputs: Vec<Vec<u8>>,
    limit: usize,
) -> Vec<Vec<u8>> {
    let n = inputs.len() as u16;
    let net = RefCell::new(Net::default());
    let mut ranks: Vec<Mock> = (0..n).map(|r| Mock::new(r, &net, limit)).collect();
    let mut data = inputs;
    let mut tasks: Vec<CollectiveTask<u32>> = (0..n)
        .map(|r| CollectiveTask::new(what, n, r, 7, op).expect("plan"))
        .collect();
    let mut scratch: Vec<Vec<u8>> = tasks.iter().map(|t| vec![0; t.scratch_len()]).collect();
    for r in 0..n as usize {
        let (d, s) = (&mut data[r], &mut scratch[r]);
        // SAFETY: the buffers outlive the loop below, which runs every
        // task to its end.
        unsafe {
            tasks[r].start(
                &mut ranks[r],
                d.as_mut_ptr(),
                d.len(),
                s.as_mut_ptr(),
                s.len(),
            )
        }
        .expect("start");
    }
    let mut left = n as usize;
    let mut still = 0;
    while left > 0 {
        for r in 0..n as usize {
            if tasks[r].holds_requests() {
                if let Poll::Ready(res) = tasks[r].poll(&mut ranks[r]) {
                    assert_eq!(res, Ok(()), "rank {r}");
                    left -= 1;
                }
            }
        }
        if net.borrow_mut().deliver() == 0 {
            still += 1;
            assert!(still < 4, "the group stopped moving");
        } else {
            still = 0;
        }
    }
    for m in &ranks {
        assert_eq!((m.out, m.watching), (0, 0), "rank {}", m.me);
    }
    data
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// Allreduce, allgather and a barrier among groups of 1 to 9, with a
/// request table of two handles and of plenty: every rank ends with the
/// right data and nothing out.
#[test]
fn collectives_complete_with_two_handles_or_many() {
    for n in 1..=9u16 {
        for limit in [2, 64] {
            let sum: u32 = (0..n as u32).map(|r| r + 1).sum();
            let ins = (0..n).map(|r| words(&[r as u32 + 1; 6])).collect();
            let out = run(
                Collective::Allreduce { len: 24 },
                Some((Op::Sum, Int::U32)),
                ins,
                limit,
            );
            assert!(
                out.iter().all(|d| *d == words(&[sum; 6])),
                "{n} ranks, {limit}"
            );
            let ins = (0..n)
                .map(|r| {
                    let mut d = vec![0u8; 3 * n as usize];
                    d[3 * r as usize..3 * r as usize + 3].fill(r as u8 + 1);
                    d
                })
                .collect();
            let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 3]).collect();
            let out = run(Collective::Allgather { block: 3 }, None, ins, limit);
            assert!(out.iter().all(|d| *d == want), "{n} ranks, {limit}");
            run(Collective::Barrier, None, vec![vec![]; n as usize], limit);
        }
    }
}

/// A message of the wrong length fails the task part way; before the
/// task reports, its other receive is cancelled and every request has
/// ended, so nothing of it stays posted into the caller's buffer.
#[test]
fn a_task_that_fails_ends_every_request_before_it_reports() {
    // Rank 1 of four in an allgather; the others' messages are written by
    // hand. Its second round receives two messages (the blocks wrap).
    let net = RefCell::new(Net::default());
    let mut me = Mock::new(1, &net, 8);
    let what = Collective::Allgather { block: 4 };
    let mut t = CollectiveTask::new(what, 4, 1, 1, None).expect("plan");
    let mut data = vec![0u8; 16];
    // SAFETY: the data outlives the task's requests (checked below).
    unsafe { t.start(&mut me, data.as_mut_ptr(), 16, core::ptr::null_mut(), 0) }.expect("start");
    let posted = |net: &RefCell<Net>| -> Vec<(u16, u32, usize)> {
        net.borrow()
            .posted
            .iter()
            .map(|p| (p.src.expect("a collective names its peer"), p.tag, p.len))
            .collect()
    };
    let answer = |net: &RefCell<Net>, (src, tag, len): (u16, u32, usize), bytes: usize| {
        let m = Msg {
            from: src,
            to: 1,
            tag,
            bytes: vec![9; bytes],
        };
        assert!(len > 0);
        net.borrow_mut().msgs.push(m);
        net.borrow_mut().deliver();
    };
    let mut rounds = 0;
    while posted(&net).len() < 2 {
        assert_eq!(t.poll(&mut me), Poll::Pending);
        let p = posted(&net);
        if p.len() == 1 {
            answer(&net, p[0], p[0].2);
            rounds += 1;
        }
        assert!(rounds < 4, "no round receives two messages");
    }
    let p = posted(&net);
    answer(&net, p[0], p[0].2 - 1);
    let res = (0..100)
        .find_map(|_| match t.poll(&mut me) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        })
        .expect("the task reports once its requests ended");
    let (from, want) = (p[0].0, p[0].2);
    let got = want - 1;
    assert_eq!(res, Err(CollectiveError::Mismatch { from, got, want }));
    assert_eq!(
        net.borrow().cancelled,
        vec![1],
        "the other receive was cancelled"
    );
    assert_eq!((me.out, me.watching), (0, 0), "nothing of the task is out");
    assert!(net.borrow().posted.is_empty(), "no receive is posted");
    // Polled again: the same result, and nothing posted.
    assert_eq!(t.poll(&mut me), Poll::Ready(res));
    assert_eq!(me.out, 0);
}

/// A group that lost a rank refuses the task at its start, and one lost
/// while the task waits ends it: its receives cancelled and waited for,
/// its send to a peer that will never take it (a live rank that left the
/// collective too) forgotten rather than waited for for ever.
#[test]
fn a_lost_rank_ends_the_task() {
    let net = RefCell::new(Net::default());
    let mut me = Mock::new(0, &net, 8);
    let mut t = CollectiveTask::new(Collective::Barrier, 2, 0, 0, None).expect("plan");
    me.intact = false;
    let failed = Err(CollectiveError::Failed(RecvFault::PeerFailed));
    // SAFETY: no buffer.
    let started = unsafe { t.start(&mut me, core::ptr::null_mut(), 0, core::ptr::null_mut(), 0) };
    assert_eq!(started, failed);
    assert_eq!(me.watching, 0);
    me.intact = true;
    me.hold_sends = true;
    let mut t = CollectiveTask::new(Collective::Barrier, 2, 0, 0, None).expect("plan");
    // SAFETY: no buffer.
    unsafe { t.start(&mut me, core::ptr::null_mut(), 0, core::ptr::null_mut(), 0) }.expect("start");
    assert_eq!(t.poll(&mut me), Poll::Pending);
    assert_eq!(me.out, 2, "a receive and a send are out");
    me.intact = false;
    assert_eq!(t.poll(&mut me), Poll::Ready(failed));
    assert_eq!(net.borrow().cancelled, vec![0]);
    assert_eq!((me.out, me.forgotten, me.watching), (1, 1, 0));
    assert!(net.borrow().posted.is_empty());
}

/// The caller's wrong lengths and a second start are typed errors, and a
/// task aborted before any message came reports `Aborted` once its
/// receives ended.
#[test]
fn bad_lengths_a_second_start_and_an_abort() {
    let net = RefCell::new(Net::default());
    let mut me = Mock::new(1, &net, 8);
    let what = Collective::Allreduce { len: 8 };
    let op = Some((Op::Sum, Int::U64));
    assert_eq!(
        CollectiveTask::<u32>::new(
            Collective::Allreduce { len: 6 },
            2,
            1,
            0,
            Some((Op::Sum, Int::U32))
        )
        .err(),
        Some(CollectiveError::Reduce(ReduceError::Misaligned {
            len: 6,
            size: 4
        }))
    );
    let mut t = CollectiveTask::new(what, 2, 1, 0, op).expect("plan");
    let mut data = [0u8; 16];
    let mut scratch = vec![0u8; t.scratch_len()];
    let s = (scratch.as_mut_ptr(), scratch.len());
    // SAFETY: refused before anything is posted.
    let e = unsafe { t.start(&mut me, data.as_mut_ptr(), 16, s.0, s.1) };
    assert_eq!(e, Err(CollectiveError::Length { want: 8, got: 16 }));
    // SAFETY: the buffers outlive the task's requests (aborted and ended
    // below).
    unsafe { t.start(&mut me, data.as_mut_ptr(), 8, s.0, s.1) }.expect("start");
    // SAFETY: as above.
    let again = unsafe { t.start(&mut me, data.as_mut_ptr(), 8, s.0, s.1) };
    assert_eq!(again, Err(CollectiveError::Aborted));
    assert_eq!(t.poll(&mut me), Poll::Pending);
    t.abort(&mut me);
    assert_eq!(t.poll(&mut me), Poll::Ready(Err(CollectiveError::Aborted)));
    assert_eq!((me.out, me.watching), (0, 0));
    assert!(!t.holds_requests());
}
