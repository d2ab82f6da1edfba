//! A collective as a task: the core's [`Run`] says each exchange and
//! reduction; this posts each exchange's messages (each receive before
//! the send of the same part, so that a request table of two handles
//! still moves), collects them as they complete and reduces. A request
//! table found full while the task's own requests are out waits for one
//! of them to end, as every other rank's does.

use core::fmt;
use core::task::Poll;

use rmx_core::collective::{Buffer, Collective, Int, Op, PlanError, Post, ReduceError, Run, Step};
use rmx_core::collective::{Span, CONTEXT};
use rmx_core::{RecvError, RecvFault, SendError, Source, TagSel};

use super::Messages;

/// Why a collective did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveError {
    /// The buffer must hold `want` bytes (a whole number of elements, or
    /// of blocks).
    Length {
        want: usize,
        got: usize,
    },
    Plan(PlanError),
    Reduce(ReduceError),
    Send(SendError),
    Recv(RecvError),
    /// A peer failed during the collective, or one of its messages did.
    Failed(RecvFault),
    /// Rank `from` sent `got` bytes where the plan has `want`: the ranks
    /// disagree on the collective (its kind or length).
    Mismatch {
        from: u16,
        got: usize,
        want: usize,
    },
    /// The caller ended the task before it completed.
    Aborted,
}

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length { want, got } => write!(f, "the buffer holds {got} bytes; the collective takes {want}"),
            Self::Plan(PlanError::Rank { me, n }) => write!(f, "rank {me} is not one of a group of {n}"),
            Self::Plan(PlanError::Root { root, n }) => {
                write!(f, "root {root} is not one of a group of {n}")
            }
            Self::Plan(PlanError::TooLarge) => write!(f, "more data than one message carries (4 GiB)"),
            Self::Reduce(ReduceError::Misaligned { len, size }) => {
                write!(f, "{len} bytes are not a whole number of {size}-byte elements")
            }
            Self::Reduce(ReduceError::Lengths { acc, other }) => {
                write!(f, "reduction of {acc} bytes with {other}")
            }
            Self::Send(e) => write!(f, "a send was refused: {e:?}"),
            Self::Recv(e) => write!(f, "a receive was refused: {e:?}"),
            Self::Failed(RecvFault::PeerFailed) => write!(f, "a rank of the group failed"),
            Self::Failed(fault) => write!(f, "a message failed: {fault:?}"),
            Self::Mismatch { from, got, want } => write!(
                f,
                "rank {from} sent {got} bytes where {want} were due: the ranks called different collectives"
            ),
            Self::Aborted => write!(f, "ended before it completed"),
        }
    }
}

/// Messages an exchange posts at most (two receives, two sends).
const POSTS: usize = 4;

/// Where the task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Planned, not started.
    Planned,
    Running,
    /// Failed: its requests are being ended before the error is reported.
    Ending(CollectiveError),
    Done(Result<(), CollectiveError>),
}

/// One rank's run of one collective over a caller's buffers; `Q` is the
/// rank's request handle ([`Messages::Req`]).
pub struct CollectiveTask<Q> {
    run: Run,
    op: Option<(Op, Int)>,
    /// The caller's buffers, as addresses (the task stays `Send`).
    data: (usize, usize),
    scratch: (usize, usize),
    /// The exchange's messages not yet posted, in order, from `next`.
    queue: [Option<(bool, Post)>; POSTS],
    next: usize,
    /// Posted: each request, and for a receive the bytes it must bring.
    pending: [Option<(Q, Option<usize>)>; POSTS],
    state: State,
}

impl<Q> CollectiveTask<Q> {
    /// Rank `me`'s part of `what` among `n` ranks, the group's `seq`th
    /// collective, reducing with `op` where it reduces (every rank passes
    /// the same). Nothing is posted yet.
    pub fn new(
        what: Collective,
        n: u16,
        me: u16,
        seq: u16,
        op: Option<(Op, Int)>,
    ) -> Result<Self, CollectiveError> {
        let run = Run::new(what, n, me, seq).map_err(CollectiveError::Plan)?;
        let len = run.plan().data_len();
        if let Some((_, ty)) = op {
            if !len.is_multiple_of(ty.size()) {
                let size = ty.size();
                return Err(CollectiveError::Reduce(ReduceError::Misaligned {
                    len,
                    size,
                }));
            }
        }
        Ok(CollectiveTask {
            run,
            op,
            data: (0, 0),
            scratch: (0, 0),
            queue: [None; POSTS],
            next: POSTS,
            pending: [None, None, None, None],
            state: State::Planned,
        })
    }

    /// The bytes of data every rank gives (and gets back).
    pub fn data_len(&self) -> usize {
        self.run.plan().data_len()
    }

    /// The scratch bytes the task receives into before it reduces.
    pub fn scratch_len(&self) -> usize {
        self.run.plan().scratch_len()
    }

    /// Starts the task on `data` ([`data_len`](Self::data_len) bytes) and
    /// `scratch` (at least [`scratch_len`](Self::scratch_len)): the rank
    /// watches every other while it runs. A group that already lost a rank
    /// refuses it.
    ///
    /// # Safety
    /// Both buffers stay valid, and untouched by the caller, until
    /// [`poll`](Self::poll) reports the task done (with either result).
    pub unsafe fn start<M: Messages<Req = Q>>(
        &mut self,
        m: &mut M,
        data: *mut u8,
        data_len: usize,
        scratch: *mut u8,
        scratch_len: usize,
    ) -> Result<(), CollectiveError> {
        let want = self.data_len();
        if data_len != want {
            return Err(CollectiveError::Length {
                want,
                got: data_len,
            });
        }
        let want = self.scratch_len();
        if scratch_len < want {
            return Err(CollectiveError::Length {
                want,
                got: scratch_len,
            });
        }
        if self.state != State::Planned {
            return Err(CollectiveError::Aborted);
        }
        if !m.group_intact() {
            self.state = State::Done(Err(CollectiveError::Failed(RecvFault::PeerFailed)));
            return Err(CollectiveError::Failed(RecvFault::PeerFailed));
        }
        // An empty buffer may come as a null pointer; the bytes of none
        // are read or written, but the posts still take a valid address.
        let addr = |p: *mut u8, len: usize| match len {
            0 => core::ptr::NonNull::<u8>::dangling().as_ptr() as usize,
            _ => p as usize,
        };
        self.data = (addr(data, data_len), data_len);
        self.scratch = (addr(scratch, scratch_len), scratch_len);
        m.watch_all(true);
        self.state = State::Running;
        Ok(())
    }

    /// Moves the task on as far as it goes now; ready with its result once
    /// no request of it is left. Polled again after that, the same result.
    pub fn poll<M: Messages<Req = Q>>(&mut self, m: &mut M) -> Poll<Result<(), CollectiveError>> {
        match self.state {
            State::Planned => Poll::Ready(Err(CollectiveError::Aborted)),
            State::Done(r) => Poll::Ready(r),
            State::Ending(e) => self.end(m, e),
            State::Running => match self.rounds(m) {
                Ok(false) => Poll::Pending,
                Ok(true) => {
                    m.watch_all(false);
                    self.state = State::Done(Ok(()));
                    Poll::Ready(Ok(()))
                }
                Err(e) => self.fail(m, e),
            },
        }
    }

    /// Ends the task early: its receives not yet matched are cancelled and
    /// [`poll`](Self::poll) reports [`CollectiveError::Aborted`] once the
    /// rest ended. A task done already keeps its result.
    pub fn abort<M: Messages<Req = Q>>(&mut self, m: &mut M) {
        if self.state == State::Running {
            let _ = self.fail(m, CollectiveError::Aborted);
        }
    }

    /// Requests of the task may still be out: its buffers are the
    /// network's until [`poll`](Self::poll) reports.
    pub fn holds_requests(&self) -> bool {
        matches!(self.state, State::Running | State::Ending(_))
    }

    fn fail<M: Messages<Req = Q>>(
        &mut self,
        m: &mut M,
        e: CollectiveError,
    ) -> Poll<Result<(), CollectiveError>> {
        self.next = POSTS;
        for (q, _) in self.pending.iter().flatten() {
            m.cancel(q);
        }
        self.state = State::Ending(e);
        self.end(m, e)
    }

    /// Collects the requests of a failed task; its error once none is
    /// left. Receives are always waited for (cancelled, or matched and
    /// ending); a send only while the group is whole: once it lost a rank,
    /// a live peer that left the collective never takes it.
    fn end<M: Messages<Req = Q>>(
        &mut self,
        m: &mut M,
        e: CollectiveError,
    ) -> Poll<Result<(), CollectiveError>> {
        let lost = !m.group_intact();
        for slot in &mut self.pending {
            if let Some((q, want)) = slot.take() {
                match m.test(q) {
                    Ok(_) => {}
                    Err(q) if lost && want.is_none() => m.forget(q),
                    Err(q) => *slot = Some((q, want)),
                }
            }
        }
        if self.pending.iter().any(Option::is_some) {
            return Poll::Pending;
        }
        m.watch_all(false);
        self.state = State::Done(Err(e));
        Poll::Ready(Err(e))
    }

    /// The rounds, as far as they go: `true` once every one is done.
    fn rounds<M: Messages<Req = Q>>(&mut self, m: &mut M) -> Result<bool, CollectiveError> {
        loop {
            let mut moved = self.post(m)?;
            moved |= self.collect(m)?;
            let posting = self.next < POSTS;
            if posting || self.pending.iter().any(Option::is_some) {
                if moved {
                    continue;
                }
                if !m.group_intact() {
                    return Err(CollectiveError::Failed(RecvFault::PeerFailed));
                }
                return Ok(false);
            }
            match self.run.step() {
                Step::Exchange { recvs, sends } => {
                    self.queue = [None; POSTS];
                    let mut i = 0;
                    for (r, s) in recvs.into_iter().zip(sends) {
                        for p in [r.map(|p| (true, p)), s.map(|p| (false, p))]
                            .into_iter()
                            .flatten()
                        {
                            self.queue[i] = Some(p);
                            i += 1;
                        }
                    }
                    self.next = 0;
                }
                Step::Reduce { spans } => {
                    let Some((op, ty)) = self.op else { continue };
                    let bytes = spans.iter().flatten().map(|s| s.len).sum();
                    // SAFETY: `start`'s contract; no request of the task is
                    // out, so nothing else reaches the buffers.
                    let (data, scratch) = unsafe {
                        (
                            core::slice::from_raw_parts_mut(self.data.0 as *mut u8, self.data.1),
                            core::slice::from_raw_parts(
                                self.scratch.0 as *const u8,
                                self.scratch.1,
                            ),
                        )
                    };
                    Run::reduce(spans, op, ty, data, scratch).map_err(CollectiveError::Reduce)?;
                    m.reduced(bytes);
                }
                Step::Copy { from, to } => {
                    // SAFETY: as for a reduction: no request of the task
                    // is out.
                    let data = unsafe {
                        core::slice::from_raw_parts_mut(self.data.0 as *mut u8, self.data.1)
                    };
                    let (at, to) = (span_in(from, data.len())?, span_in(to, data.len())?);
                    data.copy_within(at..at + from.len, to);
                }
                Step::Done => return Ok(true),
            }
        }
    }

    /// Posts the exchange's messages in order until the request table is
    /// full while the task has requests out; whether it posted any.
    fn post<M: Messages<Req = Q>>(&mut self, m: &mut M) -> Result<bool, CollectiveError> {
        let mut moved = false;
        while let Some(&Some((recv, p))) = self.queue.get(self.next) {
            let (base, len) = match p.buffer {
                Buffer::Data => self.data,
                Buffer::Scratch => self.scratch,
            };
            let at = span_in(p.span, len)?;
            let ptr = (base + at) as *mut u8;
            let waiting = self.pending.iter().any(Option::is_some);
            // SAFETY: `start`'s contract keeps the buffers; the span lies
            // inside its buffer, and no send of an exchange reads the bytes
            // one of its receives writes (the plan's).
            let posted = unsafe {
                match recv {
                    true => {
                        let sel = TagSel::Tag(p.tag);
                        match m.irecv(Source::Rank(p.peer), sel, CONTEXT, ptr, p.span.len) {
                            Ok(q) => Ok((q, Some(p.span.len))),
                            Err(RecvError::RequestTableFull) if waiting => break,
                            Err(e) => Err(CollectiveError::Recv(e)),
                        }
                    }
                    false => match m.isend(p.peer, p.tag, CONTEXT, ptr, p.span.len) {
                        Ok(q) => Ok((q, None)),
                        Err(SendError::RequestTableFull) if waiting => break,
                        Err(e) => Err(CollectiveError::Send(e)),
                    },
                }
            }?;
            let free = self.pending.iter_mut().find(|s| s.is_none());
            *free.expect("an exchange posts at most four messages") = Some(posted);
            self.next += 1;
            moved = true;
        }
        if self.queue.get(self.next).is_none_or(Option::is_none) {
            self.next = POSTS;
        }
        Ok(moved)
    }

    /// Completes the task's requests that ended; whether any did.
    fn collect<M: Messages<Req = Q>>(&mut self, m: &mut M) -> Result<bool, CollectiveError> {
        let mut moved = false;
        for slot in &mut self.pending {
            let Some((q, want)) = slot.take() else {
                continue;
            };
            match m.test(q) {
                Err(q) => *slot = Some((q, want)),
                Ok(st) => {
                    moved = true;
                    if let Some(f) = st.fault {
                        return Err(CollectiveError::Failed(f));
                    }
                    if let Some(want) = want.filter(|&w| w != st.len as usize) {
                        let (from, got) = (st.source, st.len as usize);
                        return Err(CollectiveError::Mismatch { from, got, want });
                    }
                }
            }
        }
        Ok(moved)
    }
}

/// Where `span` starts in a buffer of `len` bytes, if it lies inside.
fn span_in(span: Span, len: usize) -> Result<usize, CollectiveError> {
    match span.at.checked_add(span.len) {
        Some(end) if end <= len => Ok(span.at),
        _ => Err(CollectiveError::Length {
            want: span.at.saturating_add(span.len),
            got: len,
        }),
    }
}

#[cfg(test)]
mod tests;
