//! Collectives among all ranks of a job, run by the core's runner
//! ([`rmx_core::collective::Run`]): each exchange's receives are posted,
//! then its sends, all waited for, then the reduction it asks for applied.
//! The context and tags of their messages are the core's, so they never
//! match the application's messages nor another collective's.

use rmx_core::collective::{
    Buffer, Collective, Int, Op, PlanError, ReduceError, Run, Step, CONTEXT,
};
use rmx_core::{RecvError, RecvFault, SendError, Source, TagSel};

use crate::rank::{Beside, Rank, Req};
use crate::transport::Transport;

/// Why a collective did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveError {
    /// The buffer must hold `want` bytes (a whole number of elements).
    Length {
        want: usize,
        got: usize,
    },
    Plan(PlanError),
    Reduce(ReduceError),
    Send(SendError),
    Recv(RecvError),
    /// A peer failed during the collective.
    Failed(RecvFault),
}

impl<T: Transport + 'static> Rank<T> {
    /// Returns once every rank of the job has entered it.
    pub fn barrier(&mut self) -> Result<(), CollectiveError> {
        self.collective(Collective::Barrier, &mut [], None)
    }

    /// Every rank's `data` becomes the element-wise reduction of all ranks'.
    pub fn allreduce(&mut self, data: &mut [u8], ty: Int, op: Op) -> Result<(), CollectiveError> {
        let what = Collective::Allreduce { len: data.len() };
        self.collective(what, data, Some((op, ty)))
    }

    /// `data` holds one block of `data.len() / size()` bytes per rank;
    /// afterwards this rank's block (at `rank() × block`) is the reduction
    /// of every rank's block there.
    pub fn reduce_scatter(
        &mut self,
        data: &mut [u8],
        ty: Int,
        op: Op,
    ) -> Result<(), CollectiveError> {
        let block = self.block_of(data.len())?;
        self.collective(Collective::ReduceScatter { block }, data, Some((op, ty)))
    }

    /// `data` holds one block per rank, this rank's filled in; afterwards
    /// every block is filled with its rank's.
    pub fn allgather(&mut self, data: &mut [u8]) -> Result<(), CollectiveError> {
        let block = self.block_of(data.len())?;
        self.collective(Collective::Allgather { block }, data, None)
    }

    fn block_of(&self, len: usize) -> Result<usize, CollectiveError> {
        let n = self.size() as usize;
        if !len.is_multiple_of(n) {
            return Err(CollectiveError::Length {
                want: len / n * n,
                got: len,
            });
        }
        Ok(len / n)
    }

    /// [`reduce_scatter`](Self::reduce_scatter) or
    /// [`allreduce`](Self::allreduce) (`scatter` or not) of u32 sums,
    /// running `beside` whenever a wait stalls: a fence receives
    /// operations meanwhile.
    pub(crate) fn sum_beside<E: From<CollectiveError>>(
        &mut self,
        data: &mut [u8],
        scatter: bool,
        beside: Beside<'_, T, E>,
    ) -> Result<(), E> {
        let what = match scatter {
            true => Collective::ReduceScatter {
                block: self.block_of(data.len())?,
            },
            false => Collective::Allreduce { len: data.len() },
        };
        self.collective_beside(what, data, Some((Op::Sum, Int::U32)), beside)
    }

    /// Runs `what` over `data`, reducing with `op` where it reduces.
    fn collective(
        &mut self,
        what: Collective,
        data: &mut [u8],
        op: Option<(Op, Int)>,
    ) -> Result<(), CollectiveError> {
        self.collective_beside(what, data, op, &mut |_| Ok(()))
    }

    /// [`collective`](Self::collective), running `beside` whenever one of
    /// its waits stalls.
    fn collective_beside<E: From<CollectiveError>>(
        &mut self,
        what: Collective,
        data: &mut [u8],
        op: Option<(Op, Int)>,
        beside: Beside<'_, T, E>,
    ) -> Result<(), E> {
        let seq = self.collectives;
        let mut run =
            Run::new(what, self.size(), self.rank(), seq).map_err(CollectiveError::Plan)?;
        let plan = *run.plan();
        if plan.data_len() != data.len() {
            return Err(CollectiveError::Length {
                want: plan.data_len(),
                got: data.len(),
            }
            .into());
        }
        if let Some((_, ty)) = op {
            if !data.len().is_multiple_of(ty.size()) {
                return Err(CollectiveError::Reduce(ReduceError::Misaligned {
                    len: data.len(),
                    size: ty.size(),
                })
                .into());
            }
        }
        self.collectives = self.collectives.wrapping_add(1);
        // Every rank takes part: the core watches each while the rounds
        // run, and the collective ends once any has failed.
        let failed = || CollectiveError::Failed(RecvFault::PeerFailed).into();
        if !self.group_intact() {
            return Err(failed());
        }
        let mut watched = |r: &mut Rank<T>| match r.group_intact() {
            true => beside(r),
            false => Err(failed()),
        };
        self.watch_all(true);
        let done = self.rounds(&mut run, data, op, &mut watched);
        self.watch_all(false);
        done
    }

    /// The rounds of `run` over `data`.
    fn rounds<E: From<CollectiveError>>(
        &mut self,
        run: &mut Run,
        data: &mut [u8],
        op: Option<(Op, Int)>,
        beside: Beside<'_, T, E>,
    ) -> Result<(), E> {
        let plan = *run.plan();
        // Small reductions (a fence's counts) reduce on the stack.
        let mut small = [0u8; 256];
        let mut big = Vec::new();
        let scratch: &mut [u8] = match plan.scratch_len() {
            n if n <= small.len() => &mut small[..n],
            n => {
                big.resize(n, 0);
                &mut big
            }
        };
        loop {
            match run.step() {
                Step::Done => return Ok(()),
                Step::Reduce { spans } => {
                    if let Some((op, ty)) = op {
                        Run::reduce(spans, op, ty, data, scratch)
                            .map_err(CollectiveError::Reduce)?;
                    }
                }
                Step::Exchange { recvs, sends } => {
                    // At most two receives and two sends; on an error,
                    // those posted already are ended before the buffers'
                    // borrows do.
                    let mut reqs: Vec<Req> = Vec::with_capacity(4);
                    for p in recvs.iter().flatten() {
                        let into = match p.buffer {
                            Buffer::Data => &mut data[p.span.range()],
                            Buffer::Scratch => &mut scratch[p.span.range()],
                        };
                        // SAFETY: waited for (or cancelled) below, before
                        // the buffers' borrows end; no send of this
                        // exchange reads the bytes it receives into.
                        let r = unsafe {
                            self.irecv_in(
                                Source::Rank(p.peer),
                                TagSel::Tag(p.tag),
                                CONTEXT,
                                into.as_mut_ptr(),
                                into.len(),
                            )
                        };
                        match r {
                            Ok(r) => reqs.push(r),
                            Err(e) => {
                                self.abandon(reqs);
                                return Err(CollectiveError::Recv(e).into());
                            }
                        }
                    }
                    for p in sends.iter().flatten() {
                        let from = &data[p.span.range()];
                        // SAFETY: as above.
                        let r = unsafe {
                            self.isend_in(p.peer, p.tag, CONTEXT, from.as_ptr(), from.len())
                        };
                        match r {
                            Ok(r) => reqs.push(r),
                            Err(e) => {
                                self.abandon(reqs);
                                return Err(CollectiveError::Send(e).into());
                            }
                        }
                    }
                    if let Some(f) = self.wait_all_beside(reqs, beside)? {
                        return Err(CollectiveError::Failed(f).into());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopnic::{Fabric, LoopConfig};
    use crate::rank::loop_config;
    use rmx_core::collective::{tag, Plan};
    use rmx_core::Sizes;

    /// A collective whose send is refused after its receive was posted
    /// returns with the receive ended: a block that arrives afterwards
    /// never lands in the caller's buffer (before, the receive stayed
    /// posted and the block was written into memory the caller had got
    /// back).
    #[test]
    fn a_collective_that_fails_part_way_leaves_no_receive_in_the_buffer() {
        // Larger than an eager message: a send that needs a request handle.
        const BLOCK: usize = 16384;
        let fabric = Fabric::new(2, LoopConfig::default()).expect("the default sizes fit");
        let plan = Plan::new(Collective::Allgather { block: BLOCK }, 2, 1).expect("plan");
        let part = plan.round(0).expect("one round").sends[0]
            .expect("a send")
            .part;
        std::thread::scope(|s| {
            let f = &fabric;
            s.spawn(move || {
                let cfg = loop_config();
                let mut sizes = Sizes::for_job(2, &cfg);
                sizes.requests = 2;
                let mut r = Rank::with_sizes(f.port(0), 2, cfg, sizes).expect("rank");
                // Holds one of the two request handles.
                let mut idle = [0u8; 1];
                // SAFETY: cancelled and waited for below.
                let held =
                    unsafe { r.irecv_in(Source::Rank(1), TagSel::Tag(9), 0, idle.as_mut_ptr(), 1) }
                        .expect("one handle free");
                let mut data = vec![0u8; 2 * BLOCK];
                let e = r.allgather(&mut data);
                assert_eq!(e, Err(CollectiveError::Send(SendError::RequestTableFull)));
                let before = data.clone();
                r.cancel(&held);
                r.wait(held);
                r.send(1, 1, b"go").expect("go");
                let mut done = [0u8; 4];
                r.recv(Source::Rank(1), TagSel::Tag(2), &mut done)
                    .expect("done");
                for _ in 0..1000 {
                    r.progress();
                }
                let landed = data != before;
                if !landed {
                    // Lets the peer's send complete.
                    let mut scratch = vec![0u8; BLOCK];
                    let t = TagSel::Tag(tag(0, 0, part));
                    r.recv_in(Source::Rank(1), t, CONTEXT, &mut scratch)
                        .expect("the block");
                }
                assert!(!landed, "a block landed after the collective returned");
            });
            s.spawn(move || {
                let mut r = Rank::new(f.port(1), 2, loop_config()).expect("rank");
                let mut go = [0u8; 2];
                r.recv(Source::Rank(0), TagSel::Tag(1), &mut go)
                    .expect("go");
                let block = [0xABu8; BLOCK];
                // SAFETY: waited for at once.
                let q = unsafe { r.isend_in(0, tag(0, 0, part), CONTEXT, block.as_ptr(), BLOCK) }
                    .expect("block");
                r.send(0, 2, b"done").expect("done");
                r.wait(q);
            });
        });
    }
}
