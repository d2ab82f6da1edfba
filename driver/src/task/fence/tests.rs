//! The fence task over ranks whose messages a test matches by hand
//! (deferred design: every operation travels as messages): operations
//! land and gets are answered with a request table of a few handles, and
//! a fence that fails or is refused ends every request and the epoch
//! before it reports.

extern crate std;

use std::cell::RefCell;
use std::vec;
use std::vec::Vec;

use rmx_core::onesided::{Descriptor, RmaKind, Window};
use rmx_core::{MemKey, Remote};

use super::*;
use crate::task::mock::{Mock, Net};

const LEN: usize = 64;

/// One rank and its window, as the fence sees them.
struct Rank<'a> {
    m: Mock<'a>,
    epoch: Epoch<Vec<Target>>,
    mem: Vec<u8>,
    /// Operations issued: target, header, data.
    queued: Vec<(u16, OpHeader, Vec<u8>)>,
    /// What the fence sends (first message, data apart), its replies'
    /// buffers and its answers.
    out: Vec<(u16, Vec<u8>, Vec<u8>)>,
    replies: Vec<(u16, u32, Vec<u8>)>,
    answers: Vec<Vec<u8>>,
    data: Vec<u8>,
}

fn group(n: u16, net: &RefCell<Net>, limit: usize) -> Vec<Rank<'_>> {
    let desc = |r: u16| Descriptor {
        window: Window {
            len: LEN as u64,
            disp_unit: 1,
            key: 0x100 + u32::from(r),
        },
        remote: Remote {
            addr: 0,
            key: MemKey(0),
        },
    };
    let targets: Vec<Target> = (0..n).map(|r| Target::new(desc(r))).collect();
    (0..n)
        .map(|r| Rank {
            m: Mock::new(r, net, limit),
            epoch: Epoch::new(0, r, Design::Def, targets.clone()).expect("in the group"),
            mem: vec![0; LEN],
            queued: Vec::new(),
            out: Vec::new(),
            replies: Vec::new(),
            answers: Vec::new(),
            data: Vec::new(),
        })
        .collect()
}

impl Rank<'_> {
    /// Issues an operation as the deferred design does: checked, counted,
    /// queued (its get numbered).
    /// A get reads as many bytes as `data` holds, and carries none.
    fn issue(&mut self, target: u16, disp: u64, kind: RmaKind, data: &[u8]) {
        let len = data.len() as u64;
        let mut h = self.epoch.check(target, disp, len, kind).expect("valid");
        let mut data = data.to_vec();
        if kind == RmaKind::Get {
            self.epoch.number_get(&mut h).expect("numbered");
            data.clear();
        }
        self.epoch.message(target);
        self.queued.push((target, h, data));
    }
}

impl<'a> FenceHost for Rank<'a> {
    type Rank = Mock<'a>;
    type Targets = Vec<Target>;

    fn rank(&mut self) -> &mut Mock<'a> {
        &mut self.m
    }

    fn epoch(&mut self) -> &mut Epoch<Vec<Target>> {
        &mut self.epoch
    }

    fn send_queued(&mut self) {
        for (target, h, data) in core::mem::take(&mut self.queued) {
            if h.kind == RmaKind::Get {
                self.replies.push((target, h.id, vec![0; h.len as usize]));
            }
            let mut first = [0u8; FIRST];
            let (n, apart) = h.compose(&data, &mut first);
            let rest = apart.map(<[u8]>::to_vec).unwrap_or_default();
            self.out.push((target, first[..n].to_vec(), rest));
        }
    }

    fn outgoing(&mut self, i: usize) -> Option<Outgoing> {
        let (target, first, rest) = self.out.get(i)?;
        Some(Outgoing {
            target: *target,
            first: Bytes::of(first),
            rest: Bytes::of(rest),
        })
    }

    fn reply(&mut self, i: usize) -> Option<Reply> {
        let (target, id, buf) = self.replies.get_mut(i)?;
        Some(Reply::new(*target, *id, buf))
    }

    fn data(&mut self, len: usize) -> *mut u8 {
        self.data = vec![0; len];
        self.data.as_mut_ptr()
    }

    fn apply(&mut self, h: &OpHeader, range: Range<u64>, data: &[u8]) {
        let (at, end) = (range.start as usize, range.end as usize);
        match h.kind {
            RmaKind::Put => self.mem[at..end].copy_from_slice(data),
            _ => {
                let acc = &mut self.mem[at..end];
                rmx_core::collective::reduce(Op::Sum, Int::U32, acc, data).expect("whole u32s")
            }
        }
    }

    fn answer(&mut self, range: Range<u64>) -> *const u8 {
        let b = self.mem[range.start as usize..range.end as usize].to_vec();
        self.answers.push(b);
        self.answers.last().expect("pushed").as_ptr()
    }
}

type Task = FenceTask<u32, Vec<Option<u32>>>;

/// Starts the fence of every rank, over memory and slots it returns.
fn start_all(ranks: &mut [Rank<'_>]) -> (Vec<Task>, Vec<Vec<u8>>) {
    let mut mems = Vec::new();
    let mut tasks = Vec::new();
    for r in ranks.iter_mut() {
        r.epoch.fence(false, false).expect("fencing");
        let (me, n) = (r.epoch.me(), r.epoch.group());
        let layout = FenceLayout::new(Design::Def, n, me);
        let mut mem = vec![0u8; layout.bytes()];
        let slots = vec![None; Task::slots_len(n, r.epoch.gets(), 0)];
        // SAFETY: the memory is kept (returned) until the test polled the
        // task to its end.
        let t = unsafe { Task::start(r, layout, mem.as_mut_ptr(), mem.len(), slots, 3) };
        tasks.push(t);
        mems.push(mem);
    }
    (tasks, mems)
}

/// Starts and polls every fence until each reports; their results.
fn run(ranks: &mut [Rank<'_>], net: &RefCell<Net>) -> Vec<Result<Fenced, CollectiveError>> {
    let (mut tasks, _mems) = start_all(ranks);
    poll_all(ranks, net, &mut tasks)
}

/// Polls every started fence until each reports; their results.
fn poll_all(
    ranks: &mut [Rank<'_>],
    net: &RefCell<Net>,
    tasks: &mut [Task],
) -> Vec<Result<Fenced, CollectiveError>> {
    let mut res: Vec<Option<Result<Fenced, CollectiveError>>> = vec![None; ranks.len()];
    let mut still = 0;
    while res.iter().any(Option::is_none) {
        for (i, (t, r)) in tasks.iter_mut().zip(ranks.iter_mut()).enumerate() {
            if res[i].is_none() {
                if let Poll::Ready(x) = t.poll(r) {
                    res[i] = Some(x);
                }
            }
        }
        if net.borrow_mut().deliver() == 0 {
            still += 1;
            if still == 8 {
                let n = net.borrow();
                let posted: Vec<_> = n.posted.iter().map(|p| (p.rank, p.src, p.tag)).collect();
                let msgs: Vec<_> = n.msgs.iter().map(|m| (m.from, m.to, m.tag)).collect();
                let out: Vec<_> = ranks.iter().map(|r| r.m.out).collect();
                panic!("the group stopped moving: posted {posted:x?}, messages {msgs:x?}, out {out:?}, results {res:?}");
            }
        } else {
            still = 0;
        }
    }
    res.into_iter().map(|r| r.expect("reported")).collect()
}

/// Four ranks each put, add and get around a ring, with data inline and
/// sent apart, over request tables of a handful of handles and of plenty:
/// every operation lands once, every get is answered with the bytes from
/// before the epoch's puts landed... or after; only what no put touches is
/// checked. Nothing is left out afterwards.
#[test]
fn operations_land_and_gets_are_answered_with_few_handles_or_many() {
    for limit in [6, 64] {
        let net = RefCell::new(Net::default());
        let mut ranks = group(4, &net, limit);
        for r in ranks.iter_mut() {
            let me = r.epoch.me();
            let next = (me + 1) % 4;
            r.mem[48..52].copy_from_slice(&[me as u8; 4]);
            r.issue(next, 0, RmaKind::Put, &[me as u8 + 1; 4]);
            r.issue(next, 8, RmaKind::Put, &[me as u8 + 1; 40]);
            let one = 1u32.to_ne_bytes();
            r.issue(next, 4, RmaKind::Accumulate(Op::Sum, Int::U32), &one);
            r.issue(next, 4, RmaKind::Accumulate(Op::Sum, Int::U32), &one);
            r.issue(next, 48, RmaKind::Get, &[0; 4]);
        }
        let res = run(&mut ranks, &net);
        for (me, (r, res)) in ranks.iter().zip(res).enumerate() {
            let prev = (me + 3) % 4;
            let outcome = Outcome {
                failed: 0,
                disagree: false,
                false_assertion: false,
            };
            let fault = None;
            assert_eq!(res, Ok(Fenced { outcome, fault }), "limit {limit}");
            assert_eq!(&r.mem[..4], &[prev as u8 + 1; 4]);
            assert_eq!(&r.mem[4..8], &2u32.to_ne_bytes());
            assert_eq!(&r.mem[8..48], &[prev as u8 + 1; 40][..]);
            let next = (me + 1) % 4;
            assert_eq!(r.replies[0].2, vec![next as u8; 4], "the get's answer");
            assert_eq!((r.m.out, r.m.watching), (0, 0), "rank {me}");
            assert_eq!(r.epoch.epoch(), 1, "the next epoch is open");
        }
        assert!(net.borrow().posted.is_empty(), "no receive is left posted");
    }
}

/// A rank whose group loses a rank mid-fence ends every request (its
/// receives cancelled and waited for, a send nobody will take forgotten)
/// and the epoch before it reports the failure.
#[test]
fn a_fence_whose_group_fails_ends_its_requests_and_its_epoch() {
    let net = RefCell::new(Net::default());
    let mut ranks = group(3, &net, 16);
    ranks[0].m.hold_sends = true;
    ranks[0].issue(1, 0, RmaKind::Put, &[7; 4]);
    ranks[0].issue(2, 0, RmaKind::Get, &[0; 4]);
    let (mut tasks, _mems) = start_all(&mut ranks[..1]);
    // Ranks 1 and 2 never fence: rank 0 waits in its sum.
    for _ in 0..3 {
        assert_eq!(tasks[0].poll(&mut ranks[0]), Poll::Pending);
        net.borrow_mut().deliver();
    }
    assert!(ranks[0].m.out > 0, "the fence has requests out");
    ranks[0].m.intact = false;
    let lost = Err(CollectiveError::Failed(RecvFault::PeerFailed));
    assert_eq!(tasks[0].poll(&mut ranks[0]), Poll::Ready(lost));
    let r = &ranks[0];
    assert_eq!(r.m.out, r.m.forgotten, "only sends nobody takes are left");
    assert!(r.m.forgotten > 0, "the operation's send was forgotten");
    assert_eq!(r.m.watching, 0);
    let me = 0;
    assert!(
        net.borrow().posted.iter().all(|p| p.rank != me),
        "no receive of it stays posted"
    );
    assert_eq!(r.epoch.epoch(), 1, "the epoch was ended");
    assert!(!tasks[0].holds_requests());
    assert!(tasks[0].slots_mut().is_some());
}

/// Memory or slots shorter than the fence takes, and a group that already
/// lost a rank, are refused at the start: nothing is posted, the epoch
/// ends, and the first poll reports it.
#[test]
fn short_memory_short_slots_and_a_lost_group_are_refused_at_the_start() {
    let net = RefCell::new(Net::default());
    let mut ranks = group(2, &net, 16);
    let r = &mut ranks[0];
    let layout = FenceLayout::new(Design::Def, 2, 0);
    let want = layout.bytes();
    let slots = Task::slots_len(2, 0, 0);
    for (mem_len, slot_len, intact) in [
        (want - 1, slots, true),
        (want, slots - 1, true),
        (want, slots, false),
    ] {
        r.m.intact = intact;
        let before = r.epoch.epoch();
        r.epoch.fence(false, false).expect("fencing");
        let mut mem = vec![0u8; want];
        let slots = vec![None; slot_len];
        // SAFETY: nothing is posted into the memory (checked below).
        let mut t = unsafe { Task::start(r, layout, mem.as_mut_ptr(), mem_len, slots, 0) };
        let Poll::Ready(Err(e)) = t.poll(r) else {
            panic!("refused at the start");
        };
        match intact {
            true => assert!(matches!(e, CollectiveError::Length { .. }), "{e:?}"),
            false => assert_eq!(e, CollectiveError::Failed(RecvFault::PeerFailed)),
        }
        assert_eq!((r.m.out, r.m.watching), (0, 0));
        assert_eq!(r.epoch.epoch(), before.wrapping_add(1), "the epoch ended");
    }
    // Another window's layout, with the memory it asks for, is not taken
    // on trust: the fence works out its own and finds the memory short.
    r.m.intact = true;
    r.epoch.fence(false, false).expect("fencing");
    let small = FenceLayout::new(Design::Def, 1, 0);
    let mut mem = vec![0u8; small.bytes()];
    // SAFETY: nothing is posted into the memory (the start refuses it).
    let mut t = unsafe { Task::start(r, small, mem.as_mut_ptr(), mem.len(), vec![None; slots], 0) };
    let Poll::Ready(Err(CollectiveError::Length { want: w, got })) = t.poll(r) else {
        panic!("a layout of another group is refused with short memory");
    };
    assert_eq!((w, got), (want, small.bytes()));
    assert_eq!((r.m.out, r.m.watching), (0, 0));
}

/// A window's fences may reuse one task: restarted in place once it
/// reported, it runs each later epoch whole (every put and add of it
/// landed once, nothing left out), as a task started afresh does.
#[test]
fn a_task_restarted_in_place_runs_each_later_epoch_whole() {
    let net = RefCell::new(Net::default());
    let mut ranks = group(3, &net, 16);
    let (mut tasks, mut mems) = (Vec::new(), Vec::new());
    for round in 0..4u8 {
        for r in ranks.iter_mut() {
            let me = r.epoch.me();
            let next = (me + 1) % 3;
            r.out.clear();
            r.issue(next, 0, RmaKind::Put, &[round * 10 + me as u8; 4]);
            let one = 1u32.to_ne_bytes();
            r.issue(next, 4, RmaKind::Accumulate(Op::Sum, Int::U32), &one);
        }
        match round {
            0 => (tasks, mems) = start_all(&mut ranks),
            _ => {
                for ((r, t), mem) in ranks.iter_mut().zip(tasks.iter_mut()).zip(mems.iter_mut()) {
                    r.epoch.fence(false, false).expect("fencing");
                    let (me, n) = (r.epoch.me(), r.epoch.group());
                    let layout = FenceLayout::new(Design::Def, n, me);
                    // SAFETY: the memory is kept until the task reported.
                    unsafe { t.restart(r, layout, mem.as_mut_ptr(), mem.len(), 3) };
                }
            }
        }
        for (me, res) in poll_all(&mut ranks, &net, &mut tasks)
            .into_iter()
            .enumerate()
        {
            let prev = (me + 2) % 3;
            let r = &ranks[me];
            assert_eq!(res.map(|f| f.outcome.failed), Ok(0), "round {round}");
            assert_eq!(&r.mem[..4], &[round * 10 + prev as u8; 4], "round {round}");
            let adds = u32::from(round) + 1;
            assert_eq!(&r.mem[4..8], &adds.to_ne_bytes(), "round {round}");
            assert_eq!((r.m.out, r.m.watching), (0, 0), "round {round}");
            assert_eq!(r.epoch.epoch(), u16::from(round) + 1);
        }
        assert!(net.borrow().posted.is_empty(), "no receive is left posted");
    }
}

/// A fence still under way is not restarted: its requests would be lost.
#[test]
#[should_panic(expected = "restarted only once it reported")]
fn a_task_under_way_is_not_restarted() {
    let net = RefCell::new(Net::default());
    let mut ranks = group(2, &net, 16);
    let (mut tasks, mut mems) = start_all(&mut ranks[..1]);
    // Rank 1 never fences: rank 0 waits in its sum, its receive posted.
    assert_eq!(tasks[0].poll(&mut ranks[0]), Poll::Pending);
    assert!(tasks[0].holds_requests());
    let layout = FenceLayout::new(Design::Def, 2, 0);
    let mem = &mut mems[0];
    // SAFETY: refused before anything is posted into the memory.
    unsafe { tasks[0].restart(&mut ranks[0], layout, mem.as_mut_ptr(), mem.len(), 5) };
}
