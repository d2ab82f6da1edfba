//! A collective as the steps a shell carries out, round by round, with the
//! wire-visible rules every shell must share: the context collectives'
//! messages travel in and how each is tagged. The shell posts and waits
//! with its own calls and owns the buffers; the runner says what goes
//! where, so a kernel shell and the std shell run the same schedule.

use super::plan::{Collective, Msg, Plan, PlanError, Span};
use super::reduce::{reduce, Int, Op, ReduceError};

/// The communication context of collectives' messages: they never match
/// the application's.
pub const CONTEXT: u16 = crate::wire::context::COLLECTIVE;

/// The tag of part `part` of round `round` of collective number `seq` (a
/// group's count of collectives, wrapping): the same at sender and
/// receiver, and different for every message of a collective in flight.
pub const fn tag(seq: u16, round: u16, part: u8) -> u32 {
    (seq as u32) << 16 | (round as u32) << 1 | (part & 1) as u32
}

/// Which of the caller's buffers a message's bytes are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// The collective's data: contribution in, result out.
    Data,
    /// Scratch of [`Plan::scratch_len`] bytes that reductions receive into.
    Scratch,
}

/// One message to post in [`CONTEXT`]: to or from `peer`, tagged `tag`,
/// the bytes at `span` of `buffer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Post {
    pub peer: u16,
    pub tag: u32,
    pub buffer: Buffer,
    pub span: Span,
}

/// What the shell does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Post them (each receive before the send of the same part, so that
    /// a request table of two handles still moves) and wait for all. On
    /// any error every one already posted is ended (cancelled or waited
    /// for) before the buffers go back (`rmx_driver::task`).
    Exchange {
        recvs: [Option<Post>; 2],
        sends: [Option<Post>; 2],
    },
    /// Reduce the scratch buffer into the data at these spans
    /// ([`Run::reduce`]).
    Reduce { spans: [Option<Span>; 2] },
    /// Copy the data's bytes at `from` to `to` (the same length, apart).
    Copy { from: Span, to: Span },
    /// The collective is complete.
    Done,
}

/// One rank's run of one collective.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    plan: Plan,
    seq: u16,
    /// The next round.
    round: u16,
    /// The spans the round just exchanged still have to be reduced.
    reduce: [Option<Span>; 2],
    /// The plan's local copy was given out.
    copied: bool,
}

impl Run {
    /// Rank `me`'s run of `what` among `n` ranks, the group's `seq`th.
    pub fn new(what: Collective, n: u16, me: u16, seq: u16) -> Result<Run, PlanError> {
        Ok(Run {
            plan: Plan::new(what, n, me)?,
            seq,
            round: 0,
            reduce: [None; 2],
            copied: false,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The next step, once the previous one was carried out.
    pub fn step(&mut self) -> Step {
        if !self.copied {
            self.copied = true;
            if let Some((from, to)) = self.plan.local_copy() {
                return Step::Copy { from, to };
            }
        }
        if self.reduce.iter().any(Option::is_some) {
            let spans = core::mem::take(&mut self.reduce);
            return Step::Reduce { spans };
        }
        while self.round < self.plan.rounds() {
            let index = self.round;
            self.round += 1;
            let Some(r) = self.plan.round(index) else {
                continue;
            };
            let post = |m: Option<Msg>, buffer| {
                m.map(|m| Post {
                    peer: m.peer,
                    tag: tag(self.seq, index, m.part),
                    buffer,
                    span: m.span,
                })
            };
            let into = if r.reduce {
                Buffer::Scratch
            } else {
                Buffer::Data
            };
            if r.reduce {
                self.reduce = r.recvs.map(|m| m.map(|m| m.span));
            }
            return Step::Exchange {
                recvs: r.recvs.map(|m| post(m, into)),
                sends: r.sends.map(|m| post(m, Buffer::Data)),
            };
        }
        Step::Done
    }

    /// Carries out a [`Step::Reduce`]: `data` at each span becomes its
    /// element-wise `op` with `scratch` there.
    pub fn reduce(
        spans: [Option<Span>; 2],
        op: Op,
        ty: Int,
        data: &mut [u8],
        scratch: &[u8],
    ) -> Result<(), ReduceError> {
        for s in spans.into_iter().flatten() {
            let (Some(d), Some(o)) = (data.get_mut(s.range()), scratch.get(s.range())) else {
                return Err(ReduceError::Lengths {
                    acc: data.len(),
                    other: scratch.len(),
                });
            };
            reduce(op, ty, d, o)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank's run of one collective, carried out in memory: a rank's
    /// exchange posts its sends (their bytes copied into the receiver's
    /// mailbox) and completes once a send with each receive's tag has come
    /// from its peer. Returns every rank's data.
    fn simulate<const N: usize>(
        what: Collective,
        mut data: [[u8; 64]; N],
        op: Op,
    ) -> [[u8; 64]; N] {
        let mut runs: [Run; N] =
            core::array::from_fn(|me| Run::new(what, N as u16, me as u16, 7).unwrap());
        let len = runs[0].plan().data_len();
        let mut scratch = [[0u8; 64]; N];
        let mut steps: [Step; N] = core::array::from_fn(|me| runs[me].step());
        let mut posted = [false; N];
        // (from, to, tag, bytes at, length), at most 64 in flight.
        let mut mail = heapless::Vec::<(usize, usize, u32, [u8; 64], usize), 64>::new();
        loop {
            let mut moved = false;
            for me in 0..N {
                match steps[me] {
                    Step::Done => continue,
                    Step::Copy { from, to } => {
                        data[me].copy_within(from.range(), to.at);
                    }
                    Step::Reduce { spans } => {
                        Run::reduce(
                            spans,
                            op,
                            Int::U8,
                            &mut data[me][..len],
                            &scratch[me][..len],
                        )
                        .unwrap();
                    }
                    Step::Exchange { recvs, sends } => {
                        if !posted[me] {
                            for q in sends.into_iter().flatten() {
                                assert_eq!(q.buffer, Buffer::Data);
                                assert_eq!(q.tag >> 16, 7, "the collective's number is in the tag");
                                let mut b = [0u8; 64];
                                b[..q.span.len].copy_from_slice(&data[me][q.span.range()]);
                                mail.push((me, q.peer as usize, q.tag, b, q.span.len))
                                    .unwrap();
                            }
                            posted[me] = true;
                            moved = true;
                        }
                        let here = |mail: &[(usize, usize, u32, [u8; 64], usize)], p: &Post| {
                            mail.iter()
                                .position(|m| m.0 == p.peer as usize && m.1 == me && m.2 == p.tag)
                        };
                        if !recvs.iter().flatten().all(|p| here(&mail, p).is_some()) {
                            continue;
                        }
                        for p in recvs.into_iter().flatten() {
                            let m = mail.swap_remove(here(&mail, &p).unwrap());
                            assert_eq!(m.4, p.span.len);
                            let to = match p.buffer {
                                Buffer::Data => &mut data[me][p.span.range()],
                                Buffer::Scratch => &mut scratch[me][p.span.range()],
                            };
                            to.copy_from_slice(&m.3[..m.4]);
                        }
                    }
                }
                steps[me] = runs[me].step();
                posted[me] = false;
                moved = true;
            }
            if steps.iter().all(|s| *s == Step::Done) {
                assert!(mail.is_empty(), "every message was received");
                return data;
            }
            assert!(moved, "no rank can go on: {steps:?}");
        }
    }

    #[test]
    fn an_allreduce_run_by_its_steps_sums_every_rank() {
        for what in [
            Collective::Allreduce { len: 16 },
            Collective::Allreduce { len: 64 },
        ] {
            let data = core::array::from_fn::<_, 5, _>(|r| [r as u8 + 1; 64]);
            let out = simulate(what, data, Op::Sum);
            let len = match what {
                Collective::Allreduce { len } => len,
                _ => unreachable!(),
            };
            for d in out {
                assert!(
                    d[..len].iter().all(|&b| b == 15),
                    "{what:?}: {:?}",
                    &d[..len]
                );
            }
        }
    }

    #[test]
    fn an_allgather_run_by_its_steps_fills_every_block() {
        let data = core::array::from_fn::<_, 4, _>(|r| {
            let mut d = [0u8; 64];
            d[r * 16..(r + 1) * 16].fill(r as u8 + 1);
            d
        });
        for d in simulate(Collective::Allgather { block: 16 }, data, Op::Sum) {
            for r in 0..4 {
                assert!(d[r * 16..(r + 1) * 16].iter().all(|&b| b == r as u8 + 1));
            }
        }
    }

    #[test]
    fn a_reduce_scatter_and_a_barrier_run_by_their_steps_end_everywhere() {
        let data = core::array::from_fn::<_, 4, _>(|r| [r as u8 + 1; 64]);
        let out = simulate(Collective::ReduceScatter { block: 16 }, data, Op::Max);
        for (r, d) in out.iter().enumerate() {
            assert!(d[r * 16..(r + 1) * 16].iter().all(|&b| b == 4), "rank {r}");
        }
        let untouched = core::array::from_fn::<_, 7, _>(|r| [r as u8; 64]);
        assert_eq!(simulate(Collective::Barrier, untouched, Op::Sum), untouched);
    }

    #[test]
    fn tags_keep_collectives_rounds_and_parts_apart() {
        assert_eq!(tag(1, 0, 0), 0x1_0000);
        assert_eq!(tag(0, 3, 1), 7);
        assert_ne!(tag(0, 1, 0), tag(0, 0, 1));
        assert_ne!(tag(2, 0, 0), tag(1, 0, 0));
        let mut r = Run::new(Collective::Barrier, 1, 0, 0).unwrap();
        assert_eq!(r.step(), Step::Done, "one rank has nothing to do");
        assert!(Run::new(Collective::Barrier, 2, 2, 0).is_err());
        assert_eq!(
            Run::reduce(
                [Some(Span { at: 60, len: 8 }), None],
                Op::Sum,
                Int::U8,
                &mut [0; 64],
                &[0; 64]
            ),
            Err(ReduceError::Lengths { acc: 64, other: 64 })
        );
        // A span whose end passes the address space: refused, no overflow.
        assert_eq!(
            Run::reduce(
                [
                    Some(Span {
                        at: usize::MAX,
                        len: 2
                    }),
                    None
                ],
                Op::Sum,
                Int::U8,
                &mut [0; 64],
                &[0; 64]
            ),
            Err(ReduceError::Lengths { acc: 64, other: 64 })
        );
    }
}
