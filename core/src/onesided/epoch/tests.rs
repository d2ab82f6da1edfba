//! The fence's steps in every design, counted against a recording NIC.

use super::*;
use crate::nic::{MemKey, RxBuf, SlotId};
use crate::wire::onesided::Window;

/// A NIC that records RDMA posts and answers as told.
struct Rec {
    answer: Result<Posted, PostError>,
    posts: [Option<(u16, WorkId, Option<u32>)>; 8],
    n: usize,
}

impl Rec {
    fn new(answer: Result<Posted, PostError>) -> Rec {
        Rec {
            answer,
            posts: [None; 8],
            n: 0,
        }
    }
}

impl Nic for Rec {
    fn slot_mut(&mut self, _: SlotId) -> &mut [u8] {
        &mut []
    }
    fn rx(&self, _: RxBuf) -> &[u8] {
        &[]
    }
    fn copy(&mut self, _: crate::nic::Loc, _: crate::nic::Loc, _: usize) {}
    fn post_send(&mut self, _: u16, _: SlotId, _: usize) -> Result<Posted, PostError> {
        Err(PostError::Unsupported)
    }
    fn repost(&mut self, _: RxBuf) {}
    fn post_rdma(
        &mut self,
        peer: u16,
        work: WorkId,
        _: RdmaOp,
        _: Gather,
        _: Remote,
    ) -> Result<Posted, PostError> {
        self.posts[self.n % 8] = Some((peer, work, None));
        self.n += 1;
        self.answer
    }
    fn post_write_imm(
        &mut self,
        peer: u16,
        work: WorkId,
        _: Gather,
        _: Remote,
        imm: u32,
    ) -> Result<Posted, PostError> {
        self.posts[self.n % 8] = Some((peer, work, Some(imm)));
        self.n += 1;
        self.answer
    }
}

fn targets() -> [Target; 3] {
    let d = |r: u32| Descriptor {
        window: Window {
            len: 64,
            disp_unit: 1,
            key: 100 + r,
        },
        remote: Remote {
            addr: 0x1000 * (r as u64 + 1),
            key: MemKey(r),
        },
    };
    [Target::new(d(0)), Target::new(d(1)), Target::new(d(2))]
}

fn epoch(design: Design) -> Epoch<[Target; 3]> {
    Epoch::new(7, 0, design, targets()).unwrap()
}

fn local(len: u32) -> Gather {
    Gather {
        addr: 0x9000,
        len,
        key: MemKey(9),
    }
}

fn put(e: &mut Epoch<[Target; 3]>, nic: &mut Rec, to: u16) -> Result<(), EpochError> {
    let h = e.check(to, 8, 4, RmaKind::Put)?;
    e.post(nic, to, &h, local(4))
}

fn ne(v: &[u32]) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (i, x) in v.iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&x.to_ne_bytes());
    }
    b
}

const CLEAN: Outcome = Outcome {
    failed: 0,
    disagree: false,
    false_assertion: false,
};

#[test]
fn opt_waits_for_its_rdma_then_finishes_each_channel_it_used() {
    let mut e = epoch(Design::ImmOpt);
    let mut nic = Rec::new(Ok(Posted::Later));
    put(&mut e, &mut nic, 1).unwrap();
    let mut g = e.check(2, 0, 16, RmaKind::Get).unwrap();
    assert_eq!(e.number_get(&mut g), Ok(0));
    e.post(&mut nic, 2, &g, local(16)).unwrap();
    e.message(1); // an accumulate
    let work = |t| WorkId::Window {
        window: 7,
        target: t,
        epoch: 0,
        op: 0,
        imm: false,
    };
    assert_eq!(nic.posts[0], Some((1, work(1), None)));
    assert_eq!(nic.posts[1], Some((2, work(2), None)));
    e.fence(false, false).unwrap();
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::Flush);
    assert_eq!(e.in_flight(), 2);
    let other = WorkId::Window {
        window: 8,
        target: 1,
        epoch: 0,
        op: 0,
        imm: false,
    };
    assert!(!e.on_completion(other, Ok(())), "another window's");
    let stale = WorkId::Window {
        window: 7,
        target: 1,
        epoch: 9,
        op: 0,
        imm: false,
    };
    assert!(!e.on_completion(stale, Ok(())), "an epoch long over");
    assert_eq!(e.in_flight(), 2);
    assert!(e.on_completion(work(1), Ok(())));
    // A repeat of the put's completion is not the get's.
    assert!(!e.on_completion(work(1), Ok(())), "a repeat");
    assert_eq!(e.in_flight(), 1, "the get is still in flight");
    assert!(e.on_completion(work(2), Ok(())));
    assert!(!e.on_completion(work(2), Ok(())), "nothing left in flight");
    let len = Epoch::<[Target; 3]>::reduce_len(Design::ImmOpt, 3);
    assert_eq!(
        e.step(&mut c),
        Step::Reduce {
            collective: Reduction::ReduceScatter,
            len
        }
    );
    // Used, closing, asserted no operation precedes: per target.
    assert_eq!(&c[..36], &ne(&[0, 0, 0, 1, 0, 0, 1, 0, 0])[..36]);
    // Rank 0 learns one finish message comes, nobody closes.
    e.reduced(&ne(&[1, 0, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        e.step(&mut c),
        Step::SendFinish {
            to: 1,
            body: 1u32.to_le_bytes()
        }
    );
    assert_eq!(
        e.step(&mut c),
        Step::SendFinish {
            to: 2,
            body: 0u32.to_le_bytes()
        }
    );
    assert_eq!(e.step(&mut c), Step::RecvFinish);
    e.finished(2, 2u32.to_le_bytes());
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: Some(2),
            immediates: false
        }
    );
    e.arrived(2);
    assert!(!e.satisfied());
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: Some(2),
            immediates: false
        }
    );
    e.arrived(2);
    assert_eq!(e.step(&mut c), Step::Barrier);
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    assert_eq!((e.epoch(), e.issued(), e.closed()), (1, false, false));
}

/// Naive posts every flag's receive before anything else of its fence,
/// sends the flags at the opening, and cancels the receives when every
/// rank closed the window (no flag comes).
#[test]
fn naive_expects_every_flag_first_and_drops_them_when_all_close() {
    for all_close in [false, true] {
        let mut e = epoch(Design::ImmNaive);
        let mut c = [0u8; 64];
        e.fence(false, all_close).unwrap();
        assert_eq!(e.step(&mut c), Step::ExpectFlags);
        assert_eq!(e.step(&mut c), Step::Flush);
        let len = Epoch::<[Target; 3]>::reduce_len(Design::ImmNaive, 3);
        let reduce = Step::Reduce {
            collective: Reduction::ReduceScatter,
            len,
        };
        assert_eq!(e.step(&mut c), reduce);
        // Nothing was used; three closers, or none.
        let closers = if all_close { 3 } else { 0 };
        e.reduced(&ne(&[0, closers, 0, 0, 0, 0, 0, 0, 0]));
        let opening = if all_close {
            Step::DropFlags
        } else {
            Step::Flags
        };
        assert_eq!(e.step(&mut c), opening);
        assert_eq!(e.step(&mut c), Step::Done(CLEAN));
        assert_eq!(e.closed(), all_close);
    }
    // Every rank asserts no operation precedes: the counts are summed
    // (so that a rank asserting alone is found out), then no flag is
    // sent, and the receives posted for them are dropped.
    let mut e = epoch(Design::ImmNaive);
    let mut c = [0u8; 64];
    e.fence(true, false).unwrap();
    assert_eq!(e.step(&mut c), Step::ExpectFlags);
    assert_eq!(e.step(&mut c), Step::Flush);
    assert!(matches!(e.step(&mut c), Step::Reduce { .. }));
    assert_eq!(&c[..36], &ne(&[0, 0, 1, 0, 0, 1, 0, 0, 1])[..36]);
    e.reduced(&ne(&[0, 0, 3, 0, 0, 0, 0, 0, 0]));
    assert_eq!(e.step(&mut c), Step::DropFlags);
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
}

#[test]
fn ri_counts_immediates_including_the_next_epochs_early_ones() {
    let mut e = epoch(Design::ImmRi);
    let mut nic = Rec::new(Ok(Posted::Done));
    put(&mut e, &mut nic, 2).unwrap();
    assert_eq!(nic.posts[0].unwrap().2, Some(imm(7, 0)));
    e.fence(false, false).unwrap();
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::Flush);
    let len = Epoch::<[Target; 3]>::reduce_len(Design::ImmRi, 3);
    assert_eq!(
        e.step(&mut c),
        Step::Reduce {
            collective: Reduction::Allreduce,
            len
        }
    );
    assert_eq!(&c[..16], &ne(&[0, 0, 1, 0])[..16]);
    // Three operations come to rank 0: one message, two immediates.
    e.reduced(&ne(&[3, 0, 1, 0]));
    assert!(e.on_immediate(imm(7, 0)));
    assert!(e.on_immediate(imm(7, 1)), "a peer already in epoch 1");
    assert!(!e.on_immediate(imm(8, 0)), "another window's");
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: None,
            immediates: true
        }
    );
    e.arrived(1);
    assert!(!e.satisfied());
    assert!(e.on_immediate(imm(7, 0)));
    assert!(e.satisfied());
    assert_eq!(e.step(&mut c), Step::Barrier);
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    // The early immediate counts toward epoch 1.
    e.fence(false, false).unwrap();
    e.step(&mut c);
    e.step(&mut c);
    e.reduced(&ne(&[1, 0, 0, 0]));
    assert!(e.satisfied());
}

#[test]
fn a_quiet_ri_epoch_skips_its_barrier_and_closing_by_all_closes() {
    let mut e = epoch(Design::ImmRi);
    let mut c = [0u8; 64];
    e.fence(false, true).unwrap();
    assert_eq!(e.step(&mut c), Step::Flush);
    e.step(&mut c);
    e.reduced(&ne(&[0, 0, 0, 3]));
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    assert!(e.closed());
    assert_eq!(e.check(1, 0, 1, RmaKind::Put), Err(EpochError::Assertion));
}

/// Steps a fence whose counts are `sums` (this rank's view) to its end.
fn finish(e: &mut Epoch<[Target; 3]>, sums: &[u32]) -> Outcome {
    let mut c = [0u8; 64];
    for _ in 0..8 {
        match e.step(&mut c) {
            Step::Reduce { .. } => e.reduced(&ne(sums)),
            Step::Done(o) => return o,
            _ => {}
        }
    }
    panic!("the fence did not end");
}

#[test]
fn ranks_closing_apart_disagree_and_the_window_stays_open() {
    for design in [Design::ImmNaive, Design::ImmOpt, Design::ImmRi] {
        let mut e = epoch(design);
        e.fence(false, true).unwrap();
        // Two of three ranks close: (used, closing, asserted) per target,
        // or the counts, the closers and the asserters.
        let sums: &[u32] = match design {
            Design::ImmRi => &[0, 0, 0, 2, 0],
            _ => &[0, 2, 0],
        };
        let out = finish(&mut e, sums);
        let disagree = Outcome {
            disagree: true,
            ..CLEAN
        };
        assert_eq!(out, disagree, "{design:?}");
        assert!(!e.closed());
    }
}

/// A rank asserting that no operation precedes while another does not
/// runs the same reduction as the others (before, it ran another, and
/// every rank waited for ever): every rank learns they disagree. A rank
/// asserting it falsely completes its operations like any fence.
#[test]
fn ranks_asserting_no_precede_apart_disagree_and_a_false_assertion_completes() {
    for design in Design::ALL {
        let mut e = epoch(design);
        e.fence(true, false).unwrap();
        let sums: &[u32] = match design {
            Design::Def => &[0, 2],
            Design::ImmRi => &[0, 0, 0, 0, 2],
            _ => &[0, 0, 2],
        };
        let out = finish(&mut e, sums);
        let disagree = Outcome {
            disagree: true,
            ..CLEAN
        };
        assert_eq!(out, disagree, "{design:?}");
    }
    let mut e = epoch(Design::ImmRi);
    let mut nic = Rec::new(Ok(Posted::Done));
    put(&mut e, &mut nic, 2).unwrap();
    e.fence(true, false).unwrap();
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::Flush);
    assert!(matches!(e.step(&mut c), Step::Reduce { .. }));
    assert_eq!(
        &c[..20],
        &ne(&[0, 0, 1, 0, 0])[..20],
        "counted, not asserted"
    );
    e.reduced(&ne(&[0, 0, 1, 0, 2]));
    let out = finish(&mut e, &[]);
    let falsely = Outcome {
        disagree: true,
        false_assertion: true,
        ..CLEAN
    };
    assert_eq!(out, falsely);
}

#[test]
fn a_failed_put_with_immediate_is_reported_and_not_awaited() {
    let mut e = epoch(Design::ImmRi);
    let mut nic = Rec::new(Ok(Posted::Later));
    put(&mut e, &mut nic, 1).unwrap();
    put(&mut e, &mut nic, 1).unwrap();
    nic.answer = Err(PostError::Access);
    put(&mut e, &mut nic, 2).unwrap();
    let w = nic.posts[0].unwrap().1;
    assert!(e.on_completion(w, Err(crate::nic::RdmaError::Access)));
    assert!(e.on_completion(nic.posts[1].unwrap().1, Ok(())));
    e.fence(false, false).unwrap();
    let mut c = [0u8; 64];
    e.step(&mut c);
    e.step(&mut c);
    assert_eq!(&c[..16], &ne(&[0, 1, 0, 0])[..16], "only the one landed");
    e.reduced(&ne(&[0, 1, 0, 0]));
    assert_eq!(e.step(&mut c), Step::Barrier);
    assert_eq!(
        e.step(&mut c),
        Step::Done(Outcome {
            failed: 2,
            disagree: false,
            false_assertion: false,
        })
    );
}

/// A fence that failed part way ends its epoch with RDMA still in flight:
/// the late completions are told apart and never count for the next
/// epoch's operations, which the next fence still waits for.
#[test]
fn completions_of_an_aborted_epoch_never_count_for_the_next() {
    let mut e = epoch(Design::ImmOpt);
    let mut nic = Rec::new(Ok(Posted::Later));
    put(&mut e, &mut nic, 1).unwrap();
    let late = nic.posts[0].unwrap().1;
    e.abort();
    put(&mut e, &mut nic, 1).unwrap();
    assert_eq!(e.in_flight(), 1);
    assert!(!e.on_completion(late, Ok(())), "the aborted epoch's");
    assert_eq!(e.in_flight(), 1, "the new put is still awaited");
    assert!(e.on_completion(nic.posts[1].unwrap().1, Ok(())));
    assert_eq!(e.in_flight(), 0);
}

#[test]
fn a_busy_nic_counts_nothing_but_a_retry() {
    let mut e = epoch(Design::ImmRi);
    let mut nic = Rec::new(Err(PostError::Busy));
    assert_eq!(put(&mut e, &mut nic, 1), Err(EpochError::Busy));
    assert_eq!((e.retries(), e.issued(), e.in_flight()), (1, false, 0));
    e.fence(false, false).unwrap();
    let mut c = [0u8; 64];
    e.step(&mut c);
    e.step(&mut c);
    assert_eq!(&c[..16], &ne(&[0, 0, 0, 0])[..16]);
}

#[test]
fn deferred_sends_its_queue_then_receives_what_the_counts_say() {
    let mut e = epoch(Design::Def);
    let h = e.check(1, 0, 4, RmaKind::Put).unwrap();
    let mut nic = Rec::new(Ok(Posted::Done));
    assert!(e.post(&mut nic, 1, &h, local(4)).is_err(), "no RDMA");
    e.message(1);
    e.message(1);
    e.fence(false, true).unwrap();
    assert!(
        e.closed(),
        "nothing reaches a deferred window outside its fence"
    );
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::SendQueued);
    assert!(matches!(
        e.step(&mut c),
        Step::Reduce {
            collective: Reduction::ReduceScatter,
            len: 24
        }
    ));
    // Messages, asserted no operation precedes: per target.
    assert_eq!(&c[..24], &ne(&[0, 0, 2, 0, 0, 0])[..24]);
    e.reduced(&ne(&[1, 0, 0, 0, 0, 0]));
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: None,
            immediates: false
        }
    );
    e.arrived(1);
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    // Closed: nothing is issued until the next fence reopens it.
    assert_eq!(e.check(1, 0, 4, RmaKind::Put), Err(EpochError::Assertion));
    // Every rank asserts no operation precedes: the counts are summed, nothing awaited.
    e.fence(true, false).unwrap();
    assert_eq!(e.step(&mut c), Step::SendQueued);
    assert!(matches!(e.step(&mut c), Step::Reduce { .. }));
    e.reduced(&ne(&[0, 3, 0, 0, 0, 0]));
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    assert!(e.check(1, 0, 4, RmaKind::Put).is_ok());
}

#[test]
fn assertions_and_fences_under_way_refuse_operations() {
    let mut e = epoch(Design::ImmOpt);
    e.local();
    e.fence(false, false).unwrap();
    assert_eq!(e.check(1, 0, 4, RmaKind::Put), Err(EpochError::Fencing));
    assert_eq!(e.fence(false, false), Err(EpochError::Fencing));
    assert_eq!(
        e.check(0, 0, 4, RmaKind::Put).err(),
        Some(EpochError::Fencing)
    );
}

#[test]
fn the_origin_checks_target_range_alignment_and_get_numbers() {
    use crate::collective::{Int, Op};
    let mut e = epoch(Design::Def);
    assert_eq!(
        e.check(3, 0, 1, RmaKind::Put),
        Err(EpochError::Rma(RmaError::Target))
    );
    assert!(matches!(
        e.check(1, 60, 8, RmaKind::Put),
        Err(EpochError::Rma(RmaError::OutOfBounds { .. }))
    ));
    assert!(matches!(
        e.check(1, u64::MAX, 8, RmaKind::Put),
        Err(EpochError::Rma(RmaError::OutOfBounds { .. }))
    ));
    assert_eq!(
        e.check(1, 2, 8, RmaKind::Accumulate(Op::Sum, Int::U32)),
        Err(EpochError::Rma(RmaError::Misaligned))
    );
    assert_eq!(
        e.check(1, 0, 1 << 32, RmaKind::Put),
        Err(EpochError::TooLong)
    );
    let h = e.check(2, 4, 8, RmaKind::Put).unwrap();
    assert_eq!((h.key, h.offset, h.window, h.epoch), (102, 4, 7, 0));
    let mut g = e.check(1, 0, 1, RmaKind::Get).unwrap();
    for i in 0..MAX_GETS {
        assert_eq!(e.number_get(&mut g), Ok(i));
    }
    assert_eq!(e.number_get(&mut g), Err(EpochError::TooManyGets));
}

#[test]
fn the_target_admits_only_its_own_epoch_key_and_lengths() {
    let mut e = epoch(Design::Def);
    let good = OpHeader {
        kind: RmaKind::Put,
        last: false,
        window: 7,
        epoch: 0,
        key: 100,
        len: 4,
        offset: 8,
        id: 0,
    };
    let msg = |h: OpHeader, data: usize| {
        let mut b = [0u8; HEADER + INLINE];
        b[..HEADER].copy_from_slice(&h.encode());
        (b, HEADER + data)
    };
    let (b, n) = msg(good, 4);
    let a = e.admit(&b[..n]);
    assert_eq!(a.admitted, Ok((good, 8..12)));
    assert_eq!(a.data, Data::Inline(4));
    for bad in [
        OpHeader { epoch: 1, ..good },
        OpHeader { window: 8, ..good },
        OpHeader { key: 101, ..good },
        OpHeader { offset: 62, ..good },
    ] {
        let (b, n) = msg(bad, 4);
        assert!(e.admit(&b[..n]).admitted.is_err(), "{bad:?}");
    }
    let (b, n) = msg(good, 3);
    assert_eq!(e.admit(&b[..n]).admitted, Err(RmaError::Malformed));
    let big = OpHeader {
        len: 1000,
        offset: 0,
        ..good
    };
    let (b, _) = msg(big, 0);
    let a = e.admit(&b[..HEADER]);
    assert_eq!(a.data, Data::Apart(1000));
    assert!(a.admitted.is_err(), "past the window's 64 bytes");
    assert!(e.admit(&b[..5]).admitted.is_err(), "short");
    assert_eq!(e.refused(), 7);
}

/// Operations that arrive while the counts are summed (the shell receives
/// them during any wait) count for the fence: the deferred design awaits
/// only the rest, and a fence they satisfy awaits nothing.
#[test]
fn deferred_counts_operations_received_while_the_counts_are_summed() {
    let mut e = epoch(Design::Def);
    // One before the fence began (its origin's fence was under way).
    e.arrived(1);
    e.fence(false, false).unwrap();
    assert!(e.awaiting());
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::SendQueued);
    assert!(matches!(e.step(&mut c), Step::Reduce { .. }));
    e.arrived(2);
    e.reduced(&ne(&[3, 0, 0]));
    assert!(e.awaiting(), "one more to come");
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: None,
            immediates: false
        }
    );
    e.arrived(2);
    assert!(!e.awaiting());
    // One more (a faulty origin's) counts for nothing, in this epoch or
    // the next.
    e.arrived(1);
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
    e.fence(false, false).unwrap();
    e.step(&mut c);
    e.step(&mut c);
    e.arrived(1);
    e.reduced(&ne(&[2, 0, 0]));
    assert!(e.awaiting(), "one of two so far");
    e.arrived(1);
    assert!(!e.awaiting());
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
}

/// With finish messages, operations received before a rank's finish
/// message are taken off what it announces, per rank: one from rank 1
/// that arrives while rank 2's are awaited counts for rank 1 only.
#[test]
fn finish_messages_await_only_what_did_not_arrive_early() {
    let mut e = epoch(Design::ImmOpt);
    // Accumulates come during the epoch.
    e.arrived(2);
    e.fence(false, false).unwrap();
    let mut c = [0u8; 64];
    assert_eq!(e.step(&mut c), Step::Flush);
    assert!(matches!(e.step(&mut c), Step::Reduce { .. }));
    // Finish messages from ranks 1 and 2.
    e.reduced(&ne(&[2, 0, 0, 0, 0, 0]));
    assert_eq!(e.step(&mut c), Step::RecvFinish);
    e.finished(2, 2u32.to_le_bytes());
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: Some(2),
            immediates: false
        }
    );
    e.arrived(1);
    assert_eq!(
        e.step(&mut c),
        Step::Await {
            from: Some(2),
            immediates: false
        }
    );
    e.arrived(2);
    assert_eq!(e.step(&mut c), Step::RecvFinish);
    assert!(e.awaiting());
    e.finished(1, 1u32.to_le_bytes());
    assert_eq!(e.step(&mut c), Step::Barrier);
    assert!(!e.awaiting());
    assert_eq!(e.step(&mut c), Step::Done(CLEAN));
}

/// Each operation to a target has its own number in its work id: a
/// completion reported twice ends nothing else, and an operation whose
/// number is still in flight ([`IN_FLIGHT`] posts back) waits.
#[test]
fn a_repeated_completion_ends_no_other_operation() {
    let mut e = epoch(Design::ImmNaive);
    let mut nic = Rec::new(Ok(Posted::Later));
    for _ in 0..3 {
        put(&mut e, &mut nic, 1).unwrap();
    }
    let ids = [0, 1, 2].map(|i| nic.posts[i].unwrap().1);
    let op = |w: WorkId| match w {
        WorkId::Window { op, .. } => op,
        _ => unreachable!(),
    };
    assert_eq!(ids.map(op), [0, 1, 2]);
    // The operation named otherwise than it was posted (an immediate
    // it did not carry) is no operation of this epoch's.
    let WorkId::Window {
        window,
        target,
        epoch: ep,
        op,
        imm,
    } = ids[1]
    else {
        unreachable!()
    };
    let other = WorkId::Window {
        window,
        target,
        epoch: ep,
        op,
        imm: !imm,
    };
    assert!(!e.on_completion(other, Ok(())), "misnamed");
    assert!(e.on_completion(ids[1], Ok(())));
    assert!(!e.on_completion(ids[1], Ok(())), "a repeat");
    let failed = Err(crate::nic::RdmaError::Access);
    assert!(!e.on_completion(ids[1], failed), "a repeat");
    assert_eq!(e.in_flight(), 2);
    assert!(e.on_completion(ids[0], Ok(())));
    assert!(e.on_completion(ids[2], Ok(())));
    assert_eq!(e.in_flight(), 0);
    // At most IN_FLIGHT in flight to one target: the next waits.
    let mut f = epoch(Design::ImmNaive);
    let mut nic = Rec::new(Ok(Posted::Later));
    put(&mut f, &mut nic, 1).unwrap();
    let first = nic.posts[0].unwrap().1;
    for _ in 1..IN_FLIGHT {
        put(&mut f, &mut nic, 1).unwrap();
    }
    assert_eq!(put(&mut f, &mut nic, 1), Err(EpochError::Busy));
    put(&mut f, &mut nic, 2).unwrap();
    assert!(f.on_completion(first, Ok(())));
    put(&mut f, &mut nic, 1).unwrap();
    // The new operation took the first one's bit: the old id is not it.
    assert!(
        !f.on_completion(first, Ok(())),
        "a repeat of a long-done one"
    );
    assert_eq!(f.in_flight(), IN_FLIGHT as u32 + 1);
}
