//! A window's epoch driven by arbitrary events: operations issued (the NIC
//! answering each post as the input says), completions and immediates fed
//! in, fences started, stepped, handed arbitrary reductions, finish
//! messages and arrivals, and arbitrary first messages admitted. Never
//! panics or overflows; in flight never exceeds what was posted; a fence
//! always reaches `Done` within a bounded number of steps once every
//! arrival it awaits is fed; whatever is admitted lies inside the window.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::nic::{Gather, Loc, MemKey, Nic, PostError, Posted, RdmaOp, Remote, RxBuf, SlotId};
use rmx_core::onesided::{
    Descriptor, Design, Epoch, OpHeader, RmaKind, Step, Target, Window, HEADER, INLINE,
};
use rmx_core::{WcResult, WorkId};

/// A NIC that answers every RDMA post with what the input chose, and
/// keeps the work id of the last.
struct Told(u8, Option<WorkId>);

impl Told {
    fn answer(&self) -> Result<Posted, PostError> {
        match self.0 % 5 {
            0 => Ok(Posted::Later),
            1 => Ok(Posted::Done),
            2 => Err(PostError::Busy),
            3 => Err(PostError::Access),
            _ => Err(PostError::Down),
        }
    }
}

impl Nic for Told {
    fn slot_mut(&mut self, _: SlotId) -> &mut [u8] {
        &mut []
    }
    fn rx(&self, _: RxBuf) -> &[u8] {
        &[]
    }
    fn copy(&mut self, _: Loc, _: Loc, _: usize) {}
    fn post_send(&mut self, _: u16, _: SlotId, _: usize) -> Result<Posted, PostError> {
        Err(PostError::Unsupported)
    }
    fn repost(&mut self, _: RxBuf) {}
    fn post_rdma(
        &mut self,
        _: u16,
        work: WorkId,
        _: RdmaOp,
        _: Gather,
        _: Remote,
    ) -> Result<Posted, PostError> {
        self.1 = Some(work);
        self.answer()
    }
    fn post_write_imm(
        &mut self,
        _: u16,
        work: WorkId,
        _: Gather,
        _: Remote,
        _: u32,
    ) -> Result<Posted, PostError> {
        self.1 = Some(work);
        self.answer()
    }
}

const RANKS: usize = 4;

fuzz_target!(|input: (u8, u8, Vec<(u8, u64, u32, [u8; 8])>, &[u8])| {
    let (design, me, events, first) = input;
    let design = Design::ALL[design as usize % 4];
    let me = me as u16 % RANKS as u16;
    let targets: Vec<Target> = (0..RANKS as u32)
        .map(|r| {
            Target::new(Descriptor {
                window: Window {
                    len: 64 << r,
                    disp_unit: 1 + r,
                    key: r,
                },
                remote: Remote {
                    addr: u64::MAX - 100 * r as u64,
                    key: MemKey(r),
                },
            })
        })
        .collect();
    let mut e = Epoch::new(3, me, design, targets).expect("me is a rank");
    let mut counts = vec![0u8; Epoch::<Vec<Target>>::reduce_len(design, RANKS)];
    let mut posted = 0u32;
    // The work ids in flight, as the NIC saw them posted.
    let mut flying: Vec<WorkId> = Vec::new();
    for (what, a, b, bytes) in events {
        let target = (a % RANKS as u64) as u16;
        match what % 9 {
            0 | 1 => {
                let kind = if what & 0x10 == 0 {
                    RmaKind::Put
                } else {
                    RmaKind::Get
                };
                let Ok(mut h) = e.check(target, a >> 8, b as u64 & 0xFFFF, kind) else {
                    continue;
                };
                if kind == RmaKind::Get && e.number_get(&mut h).is_err() {
                    continue;
                }
                let local = Gather {
                    addr: a,
                    len: h.len,
                    key: MemKey(1),
                };
                let before = e.in_flight();
                let mut nic = Told(bytes[0], None);
                let _ = e.post(&mut nic, target, &h, local);
                assert!(e.in_flight() <= before + 1);
                if e.in_flight() > before {
                    let w = nic.1.expect("posted");
                    assert!(!flying.contains(&w), "two in flight under one id");
                    flying.push(w);
                }
                posted += e.in_flight() - before;
            }
            2 => e.message(target),
            3 => {
                let result: WcResult = if bytes[0] & 1 == 0 {
                    Ok(())
                } else {
                    Err(rmx_core::RdmaError::Access)
                };
                // One in flight (a repeat, once it completed), or any id.
                let work = match flying.get(bytes[3] as usize) {
                    Some(&w) if bytes[4] & 1 == 0 => w,
                    _ => WorkId::Window {
                        window: 3,
                        target,
                        epoch: e.epoch().wrapping_sub(u16::from(bytes[2] & 1)),
                        op: u16::from_le_bytes([bytes[5], bytes[6]]) % 2048,
                        imm: bytes[1] & 1 == 1,
                    },
                };
                let known = flying.iter().position(|&w| w == work);
                if e.on_completion(work, result) {
                    posted = posted
                        .checked_sub(1)
                        .expect("completed only what was in flight");
                    flying.remove(known.expect("only an operation in flight completes"));
                } else if let (Some(_), WorkId::Window { epoch, .. }) = (known, work) {
                    assert_ne!(epoch, e.epoch(), "an operation in flight refused");
                }
            }
            4 => {
                e.on_immediate(b);
            }
            5 => {
                let _ = e.fence(bytes[0] & 1 == 1, bytes[1] & 1 == 1);
            }
            6 => {
                for (i, c) in counts.iter_mut().enumerate() {
                    *c = bytes[i % 8];
                }
                e.reduced(&counts);
                e.finished(target, [bytes[2], bytes[3], 0, 0]);
                // Any origin, the job's ranks or not, at any stage.
                e.arrived(u16::from_le_bytes([bytes[5], bytes[6]]));
                let _ = e.awaiting();
            }
            7 => {
                let a = e.admit(&first[..first.len().min(HEADER + INLINE)]);
                if let Ok((h, range)) = a.admitted {
                    let mine = e.descriptor(me).unwrap().window;
                    assert!(range.end <= mine.len && h.key == mine.key);
                }
            }
            _ => {
                // Step the fence a while, feeding every arrival asked for
                // (finish messages announcing few operations).
                for _ in 0..64 {
                    match e.step(&mut counts) {
                        Step::Done(_) => break,
                        Step::Reduce { len, .. } => {
                            assert!(len <= counts.len());
                            e.reduced(&counts)
                        }
                        Step::RecvFinish => e.finished(target, [bytes[4] & 3, 0, 0, 0]),
                        Step::Await { from, .. } => e.arrived(from.unwrap_or(target)),
                        _ => {}
                    }
                }
            }
        }
        assert_eq!(e.in_flight(), posted.min(e.in_flight()));
        posted = e.in_flight();
        // An epoch that ended awaits none of its operations.
        flying.retain(|w| matches!(w, WorkId::Window { epoch, .. } if *epoch == e.epoch()));
    }
    let _ = OpHeader::decode(first);
});
