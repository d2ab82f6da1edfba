//! Collectives among all ranks of a job, carried out by the driver
//! layer's task ([`CollectiveTask`]): the blocking calls start the task
//! and wait for it; the `i` forms hand the task to the rank, which moves
//! it on in every progress round (whatever the rank waits for meanwhile),
//! and back a [`CollReq`] that owns its buffer, tested by
//! [`Rank::test_collective`] and ended by [`Rank::wait_collective`]. The
//! context and tags of their messages are the core's, so they never match
//! the application's messages nor another collective's.

use rmx_core::collective::{Collective, Int, Op};
use rmx_driver::task::CollectiveTask;

use std::task::Poll;

use crate::rank::{Rank, Req};
use crate::transport::Transport;

pub use rmx_driver::task::CollectiveError;

/// A collective under way, started by [`Rank::ibarrier`],
/// [`Rank::iallreduce`], [`Rank::iallgather`], [`Rank::ireduce_scatter`],
/// [`Rank::ibcast`], [`Rank::ireduce`], [`Rank::igather`],
/// [`Rank::iscatter`] or [`Rank::ialltoall`]. It owns its data until it completes; one
/// dropped before then leaks its buffers rather than free memory the
/// network may still write (the rank carries the collective out).
#[must_use = "a collective must be completed with test_collective or wait_collective"]
pub struct CollReq {
    /// Its number among the rank's running collectives.
    id: u64,
    data: Vec<u8>,
    scratch: Vec<u8>,
    /// The rank that started it (its requests are that rank's).
    rank: u64,
    result: Option<Result<(), CollectiveError>>,
}

impl CollReq {
    /// The data, once the collective completed (the result on success).
    pub fn data(&self) -> Option<&[u8]> {
        matches!(self.result, Some(Ok(()))).then_some(&self.data[..])
    }
}

impl Drop for CollReq {
    fn drop(&mut self) {
        if self.result.is_none() {
            std::mem::forget(std::mem::take(&mut self.data));
            std::mem::forget(std::mem::take(&mut self.scratch));
        }
    }
}

/// Scratch bytes a blocking collective keeps on the stack (a fence's
/// counts); larger ones take a vector.
const SMALL: usize = 256;

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

    /// Every rank's `data` becomes `root`'s (every rank passes as many
    /// bytes).
    pub fn bcast(&mut self, data: &mut [u8], root: u16) -> Result<(), CollectiveError> {
        let what = Collective::Bcast {
            len: data.len(),
            root,
        };
        self.collective(what, data, None)
    }

    /// `root`'s `data` becomes the element-wise reduction of every rank's;
    /// the others' is left partly reduced.
    pub fn reduce(
        &mut self,
        data: &mut [u8],
        ty: Int,
        op: Op,
        root: u16,
    ) -> Result<(), CollectiveError> {
        let what = Collective::Reduce {
            len: data.len(),
            root,
        };
        self.collective(what, data, Some((op, ty)))
    }

    /// `data` holds one block per rank, this rank's filled in; afterwards
    /// `root`'s holds every rank's (the others' some, in passing).
    pub fn gather(&mut self, data: &mut [u8], root: u16) -> Result<(), CollectiveError> {
        let block = self.block_of(data.len())?;
        self.collective(Collective::Gather { block, root }, data, None)
    }

    /// `root`'s `data` holds one block per rank; afterwards each rank's
    /// block (at `rank() × block`) is `root`'s.
    pub fn scatter(&mut self, data: &mut [u8], root: u16) -> Result<(), CollectiveError> {
        let block = self.block_of(data.len())?;
        self.collective(Collective::Scatter { block, root }, data, None)
    }

    /// `send` holds one block per rank (block j for rank j); afterwards
    /// `recv` (as long) holds every rank's block for this one, in rank
    /// order.
    pub fn alltoall(&mut self, send: &[u8], recv: &mut [u8]) -> Result<(), CollectiveError> {
        let block = self.block_of(send.len())?;
        if recv.len() != send.len() {
            return Err(CollectiveError::Length {
                want: send.len(),
                got: recv.len(),
            });
        }
        let mut data = Vec::with_capacity(2 * send.len());
        data.extend_from_slice(send);
        data.resize(2 * send.len(), 0);
        self.collective(Collective::Alltoall { block }, &mut data, None)?;
        recv.copy_from_slice(&data[send.len()..]);
        Ok(())
    }

    /// [`barrier`](Self::barrier), started: every rank has entered it once
    /// the request completes.
    pub fn ibarrier(&mut self) -> Result<CollReq, CollectiveError> {
        self.icollective(Collective::Barrier, Vec::new(), None)
    }

    /// [`allreduce`](Self::allreduce), started over `data`.
    pub fn iallreduce(
        &mut self,
        data: Vec<u8>,
        ty: Int,
        op: Op,
    ) -> Result<CollReq, CollectiveError> {
        let what = Collective::Allreduce { len: data.len() };
        self.icollective(what, data, Some((op, ty)))
    }

    /// [`reduce_scatter`](Self::reduce_scatter), started over `data`.
    pub fn ireduce_scatter(
        &mut self,
        data: Vec<u8>,
        ty: Int,
        op: Op,
    ) -> Result<CollReq, CollectiveError> {
        let block = self.block_of(data.len())?;
        self.icollective(Collective::ReduceScatter { block }, data, Some((op, ty)))
    }

    /// [`bcast`](Self::bcast), started over `data`.
    pub fn ibcast(&mut self, data: Vec<u8>, root: u16) -> Result<CollReq, CollectiveError> {
        let what = Collective::Bcast {
            len: data.len(),
            root,
        };
        self.icollective(what, data, None)
    }

    /// [`reduce`](Self::reduce), started over `data`.
    pub fn ireduce(
        &mut self,
        data: Vec<u8>,
        ty: Int,
        op: Op,
        root: u16,
    ) -> Result<CollReq, CollectiveError> {
        let what = Collective::Reduce {
            len: data.len(),
            root,
        };
        self.icollective(what, data, Some((op, ty)))
    }

    /// [`gather`](Self::gather), started over `data`.
    pub fn igather(&mut self, data: Vec<u8>, root: u16) -> Result<CollReq, CollectiveError> {
        let block = self.block_of(data.len())?;
        self.icollective(Collective::Gather { block, root }, data, None)
    }

    /// [`scatter`](Self::scatter), started over `data`.
    pub fn iscatter(&mut self, data: Vec<u8>, root: u16) -> Result<CollReq, CollectiveError> {
        let block = self.block_of(data.len())?;
        self.icollective(Collective::Scatter { block, root }, data, None)
    }

    /// [`alltoall`](Self::alltoall), started with `send`: the request's
    /// data is `send` followed by the received blocks, in rank order.
    pub fn ialltoall(&mut self, send: &[u8]) -> Result<CollReq, CollectiveError> {
        let block = self.block_of(send.len())?;
        let mut data = Vec::with_capacity(2 * send.len());
        data.extend_from_slice(send);
        data.resize(2 * send.len(), 0);
        self.icollective(Collective::Alltoall { block }, data, None)
    }

    /// [`allgather`](Self::allgather), started over `data`.
    pub fn iallgather(&mut self, data: Vec<u8>) -> Result<CollReq, CollectiveError> {
        let block = self.block_of(data.len())?;
        self.icollective(Collective::Allgather { block }, data, None)
    }

    /// Polls the NIC once and moves `c` on: its result once it completed
    /// (then [`CollReq::data`] holds the data), `None` while it runs.
    ///
    /// # Panics
    /// If `c` was started by another rank.
    pub fn test_collective(&mut self, c: &mut CollReq) -> Option<Result<(), CollectiveError>> {
        assert_eq!(
            c.rank,
            self.id(),
            "a collective is tested on the rank that started it"
        );
        if c.result.is_none() {
            c.result = self.with(|d| {
                d.progress();
                d.poll_running();
                d.take_result(c.id)
            });
        }
        c.result
    }

    /// Waits for `c` to complete; its data.
    ///
    /// # Panics
    /// If `c` was started by another rank.
    pub fn wait_collective(&mut self, mut c: CollReq) -> Result<Vec<u8>, CollectiveError> {
        assert_eq!(
            c.rank,
            self.id(),
            "a collective is waited for on the rank that started it"
        );
        if c.result.is_none() {
            let id = c.id;
            self.drive(|d| match d.finished(id) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            });
            c.result = Some(
                self.with(|d| d.take_result(id))
                    .expect("a finished collective's result"),
            );
        }
        c.result.expect("set above")?;
        Ok(std::mem::take(&mut c.data))
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

    /// The group's next collective, planned for `len` bytes of data: its
    /// number is taken only once the plan fits.
    fn plan(
        &mut self,
        what: Collective,
        len: usize,
        op: Option<(Op, Int)>,
    ) -> Result<CollectiveTask<Req>, CollectiveError> {
        let task = CollectiveTask::new(what, self.size(), self.rank(), self.collectives, op)?;
        if task.data_len() != len {
            let want = task.data_len();
            return Err(CollectiveError::Length { want, got: len });
        }
        self.collectives = self.collectives.wrapping_add(1);
        Ok(task)
    }

    /// Runs `what` over `data`, reducing with `op` where it reduces.
    fn collective(
        &mut self,
        what: Collective,
        data: &mut [u8],
        op: Option<(Op, Int)>,
    ) -> Result<(), CollectiveError> {
        let mut task = self.plan(what, data.len(), op)?;
        let mut small = [0u8; SMALL];
        let mut big = Vec::new();
        let scratch: &mut [u8] = match task.scratch_len() {
            n if n <= SMALL => &mut small[..n],
            n => {
                big.resize(n, 0);
                &mut big
            }
        };
        let (d, s) = (
            (data.as_mut_ptr(), data.len()),
            (scratch.as_mut_ptr(), scratch.len()),
        );
        // SAFETY: the task is driven until it reports, when it holds no
        // request: the buffers outlive every one.
        self.with(|dr| unsafe { task.start(dr, d.0, d.1, s.0, s.1) })?;
        self.drive(|d| task.poll(d))
    }

    /// Starts `what` over `data`, owned by the request.
    fn icollective(
        &mut self,
        what: Collective,
        mut data: Vec<u8>,
        op: Option<(Op, Int)>,
    ) -> Result<CollReq, CollectiveError> {
        let mut task = self.plan(what, data.len(), op)?;
        let mut scratch = vec![0u8; task.scratch_len()];
        let (d, s) = (
            (data.as_mut_ptr(), data.len()),
            (scratch.as_mut_ptr(), scratch.len()),
        );
        let id = self.with(|dr| {
            // SAFETY: the request owns both vectors (their heap bytes never
            // move) and leaks them if dropped before the task finished.
            unsafe { task.start(dr, d.0, d.1, s.0, s.1) }?;
            Ok::<u64, CollectiveError>(dr.run_collective(task))
        })?;
        Ok(CollReq {
            id,
            data,
            scratch,
            rank: self.id(),
            result: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{self, Net};
    use crate::loopnic::{Fabric, LoopConfig};
    use crate::rank::loop_config;
    use rmx_core::{RecvFault, Sizes};

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// Four ranks whose request tables hold two handles run allgathers of
    /// blocks past the eager threshold (each a request that holds its
    /// handle), an allreduce and a barrier. Before, an exchange posted all
    /// its receives before its sends, and a round of two receives and two
    /// sends was refused (`RequestTableFull`).
    #[test]
    fn collectives_run_with_a_request_table_of_two_handles() {
        const BLOCK: usize = 16384;
        let fabric = Fabric::new(4, LoopConfig::default()).expect("the default sizes fit");
        let out: Vec<_> = std::thread::scope(|s| {
            let ranks: Vec<_> = (0..4u16)
                .map(|me| {
                    let f = &fabric;
                    s.spawn(move || {
                        let cfg = loop_config();
                        let mut sizes = Sizes::for_job(4, &cfg);
                        sizes.requests = 2;
                        let mut r = Rank::with_sizes(f.port(me), 4, cfg, sizes).expect("rank");
                        let mut data = vec![0u8; 4 * BLOCK];
                        data[me as usize * BLOCK..][..BLOCK].fill(me as u8 + 1);
                        r.allgather(&mut data).expect("allgather");
                        let mut sum = words(&[me as u64 + 1; 4096]);
                        r.allreduce(&mut sum, Int::U64, Op::Sum).expect("allreduce");
                        r.barrier().expect("barrier");
                        (data, sum)
                    })
                })
                .collect();
            ranks.into_iter().map(|h| h.join().expect("rank")).collect()
        });
        for (me, (data, sum)) in out.iter().enumerate() {
            for (b, block) in data.chunks(BLOCK).enumerate() {
                assert!(
                    block.iter().all(|&x| x == b as u8 + 1),
                    "rank {me}: block {b}"
                );
            }
            assert_eq!(sum, &words(&[10; 4096]), "rank {me}");
        }
    }

    /// Bcast, reduce, gather and scatter from every root of five ranks, an
    /// alltoall,
    /// past the eager threshold too; a root outside the group is refused.
    #[test]
    fn rooted_collectives_reach_and_leave_every_root() {
        let out = job::run(5, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let (me, n) = (r.rank(), r.size());
            for root in 0..n {
                for len in [8usize, 40_000] {
                    let mut b = vec![me as u8; len];
                    r.bcast(&mut b, root).unwrap();
                    assert!(b.iter().all(|&x| x == root as u8), "bcast from {root}");
                    let mut v = words(&vec![me as u64 + 1; len / 8]);
                    r.reduce(&mut v, Int::U64, Op::Sum, root).unwrap();
                    if me == root {
                        assert_eq!(v, words(&vec![15; len / 8]), "reduce to {root}");
                    }
                    let block = len / 8;
                    let mut g = vec![0u8; block * n as usize];
                    g[me as usize * block..][..block].fill(me as u8 + 10);
                    r.gather(&mut g, root).unwrap();
                    if me == root {
                        for (k, c) in g.chunks(block).enumerate() {
                            assert!(c.iter().all(|&x| x == k as u8 + 10), "gather to {root}");
                        }
                    }
                    let mut sc = vec![0u8; block * n as usize];
                    if me == root {
                        for (k, c) in sc.chunks_mut(block).enumerate() {
                            c.fill(k as u8 + 20 + root as u8);
                        }
                    }
                    r.scatter(&mut sc, root).unwrap();
                    let mine = &sc[me as usize * block..][..block];
                    assert!(mine.iter().all(|&x| x == me as u8 + 20 + root as u8));
                }
            }
            let send: Vec<u8> = (0..n).flat_map(|to| [me as u8, to as u8]).collect();
            let mut recv = vec![0u8; send.len()];
            r.alltoall(&send, &mut recv).unwrap();
            let want: Vec<u8> = (0..n).flat_map(|from| [from as u8, me as u8]).collect();
            assert_eq!(recv, want, "alltoall");
            assert!(matches!(
                r.bcast(&mut [0u8; 4], n),
                Err(CollectiveError::Plan(
                    rmx_core::collective::PlanError::Root { .. }
                ))
            ));
            r.barrier().unwrap();
        });
        assert_eq!(out.len(), 5);
    }

    /// Ranks that call collectives of different lengths get typed errors
    /// (a short message where the plan has more, or one truncated), and
    /// the group goes on: the next barrier and allreduce complete.
    #[test]
    fn ranks_that_disagree_on_a_collective_get_typed_errors_and_go_on() {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let len = 16 - 8 * r.rank() as usize;
            let mut data = vec![1u8; len];
            let first = r.allreduce(&mut data, Int::U8, Op::Sum);
            let barrier = r.barrier();
            let mut data = words(&[3, 4]);
            let next = r.allreduce(&mut data, Int::U64, Op::Sum);
            (first, barrier, next, data)
        });
        let (first, barrier, next, data) = &out[0];
        let mismatch = CollectiveError::Mismatch {
            from: 1,
            got: 8,
            want: 16,
        };
        assert_eq!(*first, Err(mismatch));
        assert_eq!((barrier, next), (&Ok(()), &Ok(())));
        assert_eq!(data, &words(&[6, 8]));
        let truncated = RecvFault::Truncated {
            len: 16,
            capacity: 8,
        };
        assert_eq!(out[1].0, Err(CollectiveError::Failed(truncated)));
        assert_eq!((&out[1].1, &out[1].2), (&Ok(()), &Ok(())));
    }

    /// Collectives started and left running while the rank does other
    /// work: two at once (a barrier and an allreduce, waited for in the
    /// other order), tested until done, then a blocking one after them.
    #[test]
    fn started_collectives_complete_in_any_order() {
        let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let me = r.rank() as u64;
            let bar = r.ibarrier().expect("ibarrier");
            let mut sum = r
                .iallreduce(words(&[me, 1]), Int::U64, Op::Sum)
                .expect("iallreduce");
            let tested = loop {
                if let Some(res) = r.test_collective(&mut sum) {
                    break res;
                }
            };
            let got = sum.data().map(<[u8]>::to_vec);
            let barrier = r.wait_collective(bar);
            let gathered = r.iallgather(vec![me as u8 + 1; 3]).expect("iallgather");
            let gathered = r.wait_collective(gathered);
            (tested, got, barrier, gathered)
        });
        for (tested, got, barrier, gathered) in out {
            assert_eq!(tested, Ok(()));
            assert_eq!(got, Some(words(&[3, 3])));
            assert_eq!(barrier, Ok(Vec::new()));
            assert_eq!(gathered, Ok(vec![1, 2, 3]));
        }
    }

    /// Rooted collectives and an alltoall started together, past the eager
    /// threshold too, and waited for in the other order: each gives what
    /// its blocking form gives.
    #[test]
    fn started_rooted_collectives_and_an_alltoall_complete_together() {
        let out = job::run(4, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let (me, n, root) = (r.rank(), r.size() as usize, 2u16);
            let block = 3;
            let b = r.ibcast(vec![me as u8; 40_000], root).expect("ibcast");
            let red = r
                .ireduce(words(&[me as u64 + 1, 2]), Int::U64, Op::Sum, root)
                .expect("ireduce");
            let mut g = vec![0u8; block * n];
            g[me as usize * block..][..block].fill(me as u8 + 10);
            let ga = r.igather(g, root).expect("igather");
            let mut sc = vec![0u8; block * n];
            if me == root {
                for (k, c) in sc.chunks_mut(block).enumerate() {
                    c.fill(k as u8 + 20);
                }
            }
            let sca = r.iscatter(sc, root).expect("iscatter");
            let send: Vec<u8> = (0..n).flat_map(|to| [me as u8, to as u8]).collect();
            let a2a = r.ialltoall(&send).expect("ialltoall");
            let a2a = r.wait_collective(a2a).expect("alltoall");
            let sca = r.wait_collective(sca).expect("scatter");
            let ga = r.wait_collective(ga).expect("gather");
            let red = r.wait_collective(red).expect("reduce");
            let b = r.wait_collective(b).expect("bcast");
            (me as usize, b, red, ga, sca, a2a)
        });
        for (me, b, red, ga, sca, a2a) in out {
            assert!(b.iter().all(|&x| x == 2), "root's bytes");
            if me == 2 {
                assert_eq!(red, words(&[10, 8]), "reduced at the root");
                let want: Vec<u8> = (0..4).flat_map(|k| [k as u8 + 10; 3]).collect();
                assert_eq!(ga, want, "gathered at the root");
            }
            assert_eq!(sca[me * 3..][..3], [me as u8 + 20; 3], "scattered");
            let want: Vec<u8> = (0..4).flat_map(|from| [from as u8, me as u8]).collect();
            assert_eq!(a2a[8..], want[..], "alltoall");
        }
    }

    /// With a progress thread driving the ranks (it, not the waiter, may
    /// take the messages that end a collective), blocking and started
    /// collectives still complete, many in a row.
    #[test]
    fn collectives_complete_beside_a_progress_thread() {
        let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            r.set_progress_thread(true);
            let me = r.rank() as u64;
            let mut sums = Vec::new();
            for i in 0..200u64 {
                let mut d = words(&[me + i]);
                r.allreduce(&mut d, Int::U64, Op::Sum).expect("allreduce");
                sums.push(u64::from_ne_bytes(d[..8].try_into().unwrap()));
                r.barrier().expect("barrier");
            }
            let mut mine = vec![9u8; 6];
            mine[2 * me as usize..][..2].fill(me as u8);
            let c = r.iallgather(mine).expect("iallgather");
            let gathered = r.wait_collective(c);
            r.set_progress_thread(false);
            (sums, gathered)
        });
        for (sums, gathered) in out {
            for (i, s) in sums.into_iter().enumerate() {
                assert_eq!(s, 3 + 3 * i as u64);
            }
            assert_eq!(gathered, Ok(vec![0, 0, 1, 1, 2, 2]));
        }
    }

    /// A rank that starts collectives and then waits for a message its
    /// peer sends only once those collectives are done still takes part in
    /// them: every progress round moves a started collective on, as MPI's
    /// progress rule asks. Before, one moved only when tested: rank 0's
    /// second round never left, and every rank ran into the deadline.
    #[test]
    fn a_started_collective_moves_on_while_its_rank_waits_for_something_else() {
        use rmx_core::{Source, TagSel};
        use std::time::{Duration, Instant};
        let out = job::run(4, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let me = r.rank();
            let sum = r
                .iallreduce(words(&[u64::from(me) + 1]), Int::U64, Op::Sum)
                .expect("iallreduce");
            let bar = r.ibarrier().expect("ibarrier");
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut b = [0u8; 1];
            if me == 0 {
                // SAFETY: `b` outlives the request, tested to its end.
                let mut q =
                    unsafe { r.irecv_raw(Source::Rank(1), TagSel::Tag(7), b.as_mut_ptr(), 1) }
                        .expect("irecv");
                loop {
                    r.progress();
                    match r.test(q) {
                        Ok(_) => break,
                        Err(again) => q = again,
                    }
                    assert!(Instant::now() < deadline, "rank 1's message never came");
                    std::thread::yield_now();
                }
            }
            // Tested to a deadline, so that a collective that cannot end
            // fails the test rather than hang it.
            let mut done = |mut c: CollReq| loop {
                if let Some(res) = r.test_collective(&mut c) {
                    res.expect("the collective");
                    return c.data().expect("done").to_vec();
                }
                assert!(Instant::now() < deadline, "a collective never ended");
                std::thread::yield_now();
            };
            let sum = done(sum);
            done(bar);
            if me == 1 {
                r.send(0, 7, &[1]).expect("send");
            }
            (u64::from_ne_bytes(sum[..8].try_into().unwrap()), b[0])
        });
        for (me, (sum, b)) in out.into_iter().enumerate() {
            assert_eq!(sum, 1 + 2 + 3 + 4);
            assert_eq!(b, u8::from(me == 0));
        }
    }

    /// A started collective tested on a rank other than its own panics
    /// instead of completing that rank's requests.
    #[test]
    #[should_panic(expected = "on the rank that started it")]
    fn a_collective_tested_on_another_rank_panics() {
        let fabric = Fabric::new(2, LoopConfig::default()).expect("the default sizes fit");
        let mut a = Rank::new(fabric.port(0), 2, loop_config()).expect("rank");
        let mut b = Rank::new(fabric.port(1), 2, loop_config()).expect("rank");
        let mut c = a.ibarrier().expect("ibarrier");
        b.test_collective(&mut c);
    }

    /// Lengths no plan takes are refused before anything is posted, and
    /// take no collective number: the next collective still matches.
    #[test]
    fn bad_lengths_are_refused_before_anything_is_posted() {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let odd = r.allgather(&mut [0u8; 3]);
            let misaligned = r.iallreduce(vec![0u8; 6], Int::U32, Op::Sum).err();
            let ok = r.barrier();
            (odd, misaligned, ok)
        });
        for (odd, misaligned, ok) in out {
            assert_eq!(odd, Err(CollectiveError::Length { want: 2, got: 3 }));
            assert!(matches!(misaligned, Some(CollectiveError::Reduce(_))));
            assert_eq!(ok, Ok(()));
        }
    }
}
