//! A fence as a task: the core's [`Epoch`] says each step (what to send,
//! sum, receive and wait for, in the window's design); this carries the
//! steps out with the rank's messages and a [`CollectiveTask`] for its sums
//! and barriers. Whenever the epoch awaits operations aimed at this rank,
//! every poll receives those that came, whatever step the fence waits on
//! ([`Inbox`]): unreceived, they would hold the receive pool, their
//! origins would run out of credit, and the messages the fence waits for
//! would queue behind them for good.
//!
//! The host ([`FenceHost`]) keeps the window: the epoch, its memory, the
//! operations the deferred design queued and the bytes of answers and
//! replies. The task's own bytes (the summed counts, finish bodies, flags,
//! an operation's first message) are lent at [`FenceTask::start`], and its
//! requests are kept in slots the host gives (`R`), so nothing here
//! allocates.

use core::ops::Range;
use core::task::Poll;

use rmx_core::collective::{Collective, Int, Op};
use rmx_core::onesided::channel::{DATA, FINISH, FLAG, HEADERS};
use rmx_core::onesided::{
    tag, Design, Epoch, OpHeader, Outcome, Reduction, Step, Target, CONTEXT, FIRST,
};
use rmx_core::{RecvFault, SendError, Source, TagSel};

use super::{CollectiveError, CollectiveTask, Inbox, Messages};

/// Bytes that stay in place until the fence reports (the host's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes {
    pub ptr: *const u8,
    pub len: usize,
}

impl Bytes {
    /// The place of `b`'s bytes (which the host keeps in place).
    pub fn of(b: &[u8]) -> Bytes {
        Bytes {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }
}

/// An operation of the deferred design ready to leave: its target and its
/// messages as the core composes them ([`OpHeader::compose`]), the data's
/// own message empty when the data fits in the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub target: u16,
    pub first: Bytes,
    pub rest: Bytes,
}

/// A get of the deferred design, answered by `target` into `len` bytes at
/// `into` (the host's until the fence reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub target: u16,
    pub id: u32,
    pub into: *mut u8,
    pub len: usize,
}

impl Reply {
    /// The answer from `target` to get `id`, received into `buf` (which
    /// the host keeps in place).
    pub fn new(target: u16, id: u32, buf: &mut [u8]) -> Reply {
        Reply {
            target,
            id,
            into: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }
}

/// A window as its fence sees it: the rank's messages, the epoch, and the
/// bytes operations carry. The std shell implements it over its rank and
/// window, a simulator over its simulated rank, a kernel module over its
/// endpoint.
pub trait FenceHost {
    /// The rank's messages.
    type Rank: Messages;
    type Targets: AsRef<[Target]> + AsMut<[Target]>;

    /// The rank the window is of.
    fn rank(&mut self) -> &mut Self::Rank;

    /// The window's epoch: the host keeps it, so that its progress hands
    /// it the epoch's RDMA completions and immediates.
    fn epoch(&mut self) -> &mut Epoch<Self::Targets>;

    /// The deferred design's step that sends the queued operations begins:
    /// those aimed at this rank's own window are applied (its own gets
    /// read), and the rest named by [`outgoing`](Self::outgoing) and
    /// [`reply`](Self::reply) from now until the fence reports.
    fn send_queued(&mut self);

    /// The `i`th queued operation to send, in order; `None` past the last.
    fn outgoing(&mut self, i: usize) -> Option<Outgoing>;

    /// The `i`th get whose answer this rank receives; `None` past the last.
    fn reply(&mut self, i: usize) -> Option<Reply>;

    /// Where an operation's data sent apart lands: `len` bytes that stay in
    /// place until the next call or the fence's report.
    fn data(&mut self, len: usize) -> *mut u8;

    /// Applies an admitted operation (not a get) to the window's `range`.
    fn apply(&mut self, h: &OpHeader, range: Range<u64>, data: &[u8]);

    /// The answer to an admitted get: the window's bytes at `range`,
    /// copied where they stay until the fence reports.
    fn answer(&mut self, range: Range<u64>) -> *const u8;

    /// The immediate designs' flush is done (the epoch's RDMA completed):
    /// the first fault of an accumulate the host waited for before the
    /// fence (the fence waits for the rest).
    fn flushed(&mut self) -> Option<RecvFault> {
        None
    }
}

/// How a fence ended on this rank: the core's outcome and the first fault
/// among the requests it waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fenced {
    pub outcome: Outcome,
    pub fault: Option<RecvFault>,
}

/// Slots for sends a fence takes past those of sends already out.
pub const SENDS: usize = 64;

/// Request handles, and send slots, that the fence's own sends leave free:
/// what the rank receives meanwhile (an operation's first message and its
/// data) needs handles, and the answer to a get a slot. Answers complete
/// without their origin receiving anything (its receives are posted
/// first), so ranks whose sends wait on each other still drain.
const HEADROOM: usize = 4;

/// Sends out before the free request handles are counted.
const PACE_FROM: usize = 16;

/// What the fence waits for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Nothing: ask the core for the next step.
    Step,
    /// The queued operations' sends (deferred), from this one and part.
    Sending { next: usize, rest: bool },
    /// The epoch's RDMA (immediate designs).
    Flush,
    /// The sum (its length), or a barrier.
    Collective(Option<usize>),
    /// A finish message.
    Finish,
    /// An operation (of any rank), unless immediates satisfy the core.
    Await,
    /// Sends out, before the flags or the barrier that opens the next epoch.
    Opening(Opening),
    /// The flags' sends, from this rank on.
    Flagging(u16),
    /// The flags' sends and receives.
    Flags,
    /// The operation receive ended at the close, then every send and reply.
    Closing(Outcome),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opening {
    Flags,
    Barrier,
}

/// What the last step brought back: handed to the core with the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    Nothing,
    Reduced(usize),
    Finished(u16, [u8; 4]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Failed: its requests are being ended before the error is reported.
    Ending(CollectiveError),
    Done(Result<Fenced, CollectiveError>),
}

/// Where a fence's lent bytes lie, for one window's design and group:
/// worked out once per window (it plans the fence's sum) and handed to
/// every [`FenceTask::start`], which checks it is the window's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceLayout {
    design: Design,
    n: u16,
    me: u16,
    parts: Layout,
}

impl FenceLayout {
    /// The layout of rank `me`'s fences among `n` ranks under `design`.
    pub fn new(design: Design, n: u16, me: u16) -> FenceLayout {
        FenceLayout {
            design,
            n,
            me,
            parts: Layout::of(design, n, me),
        }
    }

    /// The bytes a fence is lent.
    pub fn bytes(&self) -> usize {
        self.parts.len
    }
}

/// Where the fence's lent bytes lie (offsets from the start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    counts: usize,
    scratch: usize,
    bodies: usize,
    flags: usize,
    first: usize,
    len: usize,
}

impl Layout {
    fn of(design: Design, n: u16, me: u16) -> Layout {
        let counts = Epoch::<[Target; 0]>::reduce_len(design, n as usize);
        let scratch_of =
            |what| CollectiveTask::<()>::new(what, n, me, 0, None).map_or(0, |c| c.scratch_len());
        let block = counts / (n as usize).max(1);
        let scratch = scratch_of(Collective::Allreduce { len: counts })
            .max(scratch_of(Collective::ReduceScatter { block }));
        let n = n as usize;
        let bodies = counts + scratch;
        // The finish receive's body, then one a rank sent to.
        let flags = bodies + 4 * (n + 1);
        // One byte a rank received, and the one every flag sent carries.
        let first = flags + n + 1;
        Layout {
            counts: 0,
            scratch: counts,
            bodies,
            flags,
            first,
            len: first + FIRST,
        }
    }
}

/// One rank's fence of one window; `Q` is the rank's request handle
/// ([`Messages::Req`]), `R` the slots its requests are kept in.
pub struct FenceTask<Q, R> {
    window: u16,
    epoch: u16,
    me: u16,
    n: u16,
    /// The lent bytes' address, and where each part lies.
    mem: usize,
    layout: Layout,
    /// The requests: sends first, then one flag receive a rank, then one
    /// reply receive a get.
    slots: R,
    /// The number of the fence's sum (its barrier's is the next).
    seq: u16,
    gets: usize,
    coll: Option<CollectiveTask<Q>>,
    finish: Option<Q>,
    /// Where the epoch's operations aimed at this rank are received.
    inbox: Inbox<Q>,
    /// Sends out (in the first slots).
    out: usize,
    /// The core's last step came: the epoch moved on.
    ended: bool,
    bodies: usize,
    input: Input,
    wait: Wait,
    fault: Option<RecvFault>,
    state: State,
}

// SAFETY: the task's addresses name bytes its starter lent until it
// reports; it is touched only by whoever polls it.
unsafe impl<Q: Send, R: Send> Send for FenceTask<Q, R> {}

impl<Q, R: AsMut<[Option<Q>]>> FenceTask<Q, R> {
    /// Collective numbers a fence takes.
    pub const COLLECTIVES: u16 = 2;

    /// Slots [`start`](Self::start) takes for a fence among `n` ranks of an
    /// epoch with `gets` gets and `sent` sends already out.
    pub fn slots_len(n: u16, gets: u32, sent: usize) -> usize {
        sent + SENDS + n as usize + gets as usize
    }

    /// Starts the fence the host's epoch is in ([`Epoch::fence`] called):
    /// the rank watches every other while it runs. Its sum and barrier are
    /// collectives of the group numbered `seq` and the next
    /// ([`COLLECTIVES`](Self::COLLECTIVES) in all, whether they run or
    /// not), so that collectives started while it runs keep one order on
    /// every rank. `mem` holds at least [`FenceLayout::bytes`], and `slots`
    /// at least
    /// [`slots_len`](Self::slots_len) entries: requests of the epoch's
    /// sends already out (an immediate design's accumulates) come first,
    /// the rest `None`; the fence waits for them as for its own. A group
    /// that already lost a rank fails the fence at its first poll.
    ///
    /// # Safety
    /// `mem` names `mem_len` bytes that stay valid,
    /// untouched by anyone else, until [`poll`](Self::poll) reports, as
    /// does every byte the host names; the host keeps the epoch in its
    /// fence meanwhile. `slots` hold nothing past the first empty one (a
    /// request there would be overwritten, and its bytes given back while
    /// the network still reads them).
    pub unsafe fn start<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        host: &mut H,
        layout: FenceLayout,
        mem: *mut u8,
        mem_len: usize,
        slots: R,
        seq: u16,
    ) -> Self {
        let mut task = FenceTask {
            window: 0,
            epoch: 0,
            me: 0,
            n: 0,
            mem: 0,
            layout: layout.parts,
            slots,
            seq,
            gets: 0,
            coll: None,
            finish: None,
            // SAFETY: holds no request until `restart` gave it its bytes.
            inbox: unsafe { Inbox::new(0, 0, core::ptr::null_mut()) },
            out: 0,
            ended: false,
            bodies: 0,
            input: Input::Nothing,
            wait: Wait::Step,
            fault: None,
            state: State::Done(Err(CollectiveError::Aborted)),
        };
        // SAFETY: the caller's contract, which is restart's.
        unsafe { task.restart(host, layout, mem, mem_len, seq) };
        task
    }

    /// Starts the next fence in this one's place, once it reported, as
    /// [`start`](Self::start) does, over its own slots
    /// ([`slots_mut`](Self::slots_mut)), which the caller may have
    /// resized and given the sends already out: a window's fences then
    /// reuse one task, with no copy of it per fence.
    ///
    /// # Safety
    /// As for [`start`](Self::start).
    ///
    /// # Panics
    /// If this fence has not reported (its requests would be lost).
    pub unsafe fn restart<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        layout: FenceLayout,
        mem: *mut u8,
        mem_len: usize,
        seq: u16,
    ) {
        assert!(
            !self.holds_requests(),
            "a fence is restarted only once it reported"
        );
        let e = host.epoch();
        let (window, epoch, design, gets) = (e.window(), e.epoch(), e.design(), e.gets());
        let (n, me) = (e.group(), e.me());
        // Another window's layout is worked out afresh.
        let layout = match (layout.design, layout.n, layout.me) == (design, n, me) {
            true => layout.parts,
            false => Layout::of(design, n, me),
        };
        (self.window, self.epoch, self.me, self.n) = (window, epoch, me, n);
        (self.mem, self.layout, self.seq, self.gets) = (mem as usize, layout, seq, gets as usize);
        (self.coll, self.finish) = (None, None);
        // SAFETY: the lent bytes (the caller's contract), the inbox's
        // alone.
        self.inbox = unsafe { Inbox::new(window, epoch, (mem as usize + layout.first) as *mut u8) };
        (self.ended, self.bodies, self.input) = (false, 0, Input::Nothing);
        (self.wait, self.fault, self.state) = (Wait::Step, None, State::Running);
        let slots = self.slots.as_mut().len();
        let sends = slots.saturating_sub(n as usize + gets as usize);
        // The sends already out, given in front (where the fence keeps
        // its own), the rest empty (the caller's contract).
        let region = &self.slots.as_mut()[..sends];
        self.out = region.iter().take_while(|s| s.is_some()).count();
        debug_assert!(self.slots.as_mut()[self.out..].iter().all(Option::is_none));
        let refused = if mem_len < layout.len {
            Some(CollectiveError::Length {
                want: layout.len,
                got: mem_len,
            })
        } else if slots < Self::slots_len(n, gets, self.out) {
            Some(CollectiveError::Length {
                want: Self::slots_len(n, gets, self.out),
                got: slots,
            })
        } else if !host.rank().group_intact() {
            Some(lost())
        } else {
            None
        };
        match refused {
            Some(e) => {
                host.epoch().abort();
                self.state = State::Done(Err(e));
            }
            None => host.rank().watch_all(true),
        }
    }

    /// Moves the fence on as far as it goes now; ready with its result
    /// once no request of it is left. Polled again after that, the same.
    pub fn poll<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Poll<Result<Fenced, CollectiveError>> {
        match self.state {
            State::Done(r) => Poll::Ready(r),
            State::Ending(e) => self.end(host, e),
            State::Running => match self.steps(host) {
                Ok(Some(f)) => {
                    host.rank().watch_all(false);
                    self.state = State::Done(Ok(f));
                    Poll::Ready(Ok(f))
                }
                Ok(None) => Poll::Pending,
                Err(e) => self.fail(host, e),
            },
        }
    }

    /// The slots, for the next fence, once it reported (none is in use);
    /// `None` before.
    pub fn slots_mut(&mut self) -> Option<&mut R> {
        (!self.holds_requests()).then_some(&mut self.slots)
    }

    /// Requests of the fence may still be out: the bytes it was lent are
    /// the network's until [`poll`](Self::poll) reports.
    pub fn holds_requests(&self) -> bool {
        !matches!(self.state, State::Done(_))
    }

    fn sends_len(&mut self) -> usize {
        self.slots.as_mut().len() - self.n as usize - self.gets
    }

    fn at(&self, off: usize) -> *mut u8 {
        (self.mem + off) as *mut u8
    }

    /// Carries out the core's steps as far as they go now.
    fn steps<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Result<Option<Fenced>, CollectiveError> {
        if !host.rank().group_intact() {
            return Err(lost());
        }
        loop {
            // Operations aimed here are received whatever the fence waits for.
            let arrived = self.drain(host)?;
            match self.wait {
                Wait::Step => {}
                Wait::Sending { next, rest } => {
                    if !self.send_queued(host, next, rest)? {
                        return Ok(None);
                    }
                }
                // The accumulates' sends are not waited for here: the
                // target counts them as they arrive, and a rank that held
                // its sum back until each left would keep ranks whose
                // credit it waits for from summing.
                Wait::Flush => {
                    if host.epoch().in_flight() > 0 {
                        return Ok(None);
                    }
                    self.fault = self.fault.or(host.flushed());
                }
                Wait::Collective(len) => {
                    let c = self.coll.as_mut().expect("a collective under way");
                    match c.poll(host.rank()) {
                        Poll::Pending => return Ok(None),
                        Poll::Ready(r) => {
                            self.coll = None;
                            r?;
                        }
                    }
                    if let Some(len) = len {
                        self.input = Input::Reduced(len);
                    }
                }
                Wait::Finish => {
                    let q = self.finish.take().expect("a finish receive posted");
                    match host.rank().test(q) {
                        Err(q) => {
                            self.finish = Some(q);
                            return Ok(None);
                        }
                        Ok(st) => {
                            if let Some(f) = st.fault {
                                return Err(CollectiveError::Failed(f));
                            }
                            let mut body = [0u8; 4];
                            // SAFETY: the receive completed into the lent
                            // bytes.
                            let b = unsafe { slice(self.at(self.layout.bodies), 4) };
                            body.copy_from_slice(b);
                            self.input = Input::Finished(st.source, body);
                        }
                    }
                }
                Wait::Await => {
                    if !arrived && host.epoch().awaiting() {
                        return Ok(None);
                    }
                }
                Wait::Opening(o) => {
                    self.collect_sends(host);
                    if self.out > 0 {
                        return Ok(None);
                    }
                    self.wait = match o {
                        Opening::Flags => Wait::Flagging(0),
                        Opening::Barrier => self.collective(host, Collective::Barrier, None)?,
                    };
                    continue;
                }
                Wait::Flagging(from) => match self.send_flags(host, from)? {
                    Some(next) => {
                        self.wait = Wait::Flagging(next);
                        return Ok(None);
                    }
                    None => {
                        self.wait = Wait::Flags;
                        continue;
                    }
                },
                Wait::Flags => {
                    self.collect_sends(host);
                    self.collect_flags(host);
                    if self.out > 0 || self.flags_out() {
                        return Ok(None);
                    }
                }
                Wait::Closing(outcome) => {
                    // An operation that came after all was announced by
                    // nobody: the core, its epoch moved on, refuses it.
                    if self.inbox.close(host, false)?.is_pending() {
                        return Ok(None);
                    }
                    self.collect_sends(host);
                    self.collect_replies(host);
                    if self.out > 0 || self.replies_out() {
                        return Ok(None);
                    }
                    let fault = self.fault;
                    return Ok(Some(Fenced { outcome, fault }));
                }
            }
            self.wait = Wait::Step;
            let step = {
                let counts = self.at(self.layout.counts);
                let len = self.layout.scratch;
                // SAFETY: the lent bytes; no request of the fence names
                // the counts between its sums.
                let counts = unsafe { core::slice::from_raw_parts_mut(counts, len) };
                let e = host.epoch();
                match core::mem::replace(&mut self.input, Input::Nothing) {
                    Input::Nothing => {}
                    Input::Reduced(len) => e.reduced(&counts[..len]),
                    Input::Finished(src, body) => e.finished(src, body),
                }
                e.step(counts)
            };
            self.wait = self.begin(host, step)?;
        }
    }

    /// Starts carrying out `step`: what the fence then waits for.
    fn begin<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        step: Step,
    ) -> Result<Wait, CollectiveError> {
        let (w, epoch) = (self.window, self.epoch);
        Ok(match step {
            Step::ExpectFlags => {
                self.expect_flags(host)?;
                Wait::Step
            }
            Step::SendQueued => {
                host.send_queued();
                self.expect_replies(host)?;
                Wait::Sending {
                    next: 0,
                    rest: false,
                }
            }
            Step::Flush => Wait::Flush,
            Step::Reduce { collective, len } => {
                let n = self.n as usize;
                let what = match collective {
                    Reduction::ReduceScatter => Collective::ReduceScatter { block: len / n },
                    Reduction::Allreduce => Collective::Allreduce { len },
                };
                self.collective(host, what, Some(len))?
            }
            Step::SendFinish { to, body } => {
                let at = self.bodies;
                assert!(at < self.n as usize, "one finish per rank");
                self.bodies += 1;
                let b = self.at(self.layout.bodies + 4 * (at + 1));
                // SAFETY: the lent bytes; the body's place is this send's
                // alone (one per rank, after the receive's).
                unsafe { slice_mut(b, 4) }.copy_from_slice(&body);
                // SAFETY: as above, until the send completes.
                let q = unsafe { host.rank().isend(to, tag(w, epoch, FINISH), CONTEXT, b, 4) };
                self.keep_send(q.map_err(CollectiveError::Send)?);
                Wait::Step
            }
            Step::RecvFinish => {
                let sel = TagSel::Tag(tag(w, epoch, FINISH));
                let b = self.at(self.layout.bodies);
                // SAFETY: the lent bytes, the finish receive's alone.
                let q = unsafe { host.rank().irecv(Source::Any, sel, CONTEXT, b, 4) };
                self.finish = Some(q.map_err(CollectiveError::Recv)?);
                Wait::Finish
            }
            Step::Await { .. } => Wait::Await,
            Step::Flags => Wait::Opening(Opening::Flags),
            Step::DropFlags => {
                let flags = self.flag_range();
                let slots = self.slots.as_mut();
                for q in slots[flags].iter().flatten() {
                    host.rank().cancel(q);
                }
                // Cancelled, or (a rank that did not close after all) a
                // flag that came: either ends them.
                Wait::Flags
            }
            Step::Barrier => Wait::Opening(Opening::Barrier),
            Step::Done(outcome) => {
                self.ended = true;
                self.inbox.cancel(host);
                Wait::Closing(outcome)
            }
        })
    }

    /// Starts the fence's sum (`len`: the counts' bytes) or barrier.
    fn collective<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        what: Collective,
        len: Option<usize>,
    ) -> Result<Wait, CollectiveError> {
        let seq = match what {
            Collective::Barrier => self.seq.wrapping_add(1),
            _ => self.seq,
        };
        let op = Some((Op::Sum, Int::U32));
        let mut c = CollectiveTask::new(what, self.n, self.me, seq, op)?;
        let (d, dlen) = (self.at(self.layout.counts), c.data_len());
        let (s, slen) = (
            self.at(self.layout.scratch),
            self.layout.bodies - self.layout.scratch,
        );
        if dlen > self.layout.scratch {
            return Err(CollectiveError::Length {
                want: dlen,
                got: self.layout.scratch,
            });
        }
        // SAFETY: the lent bytes: the counts and the scratch after them,
        // named by no other request of the fence while the collective runs.
        unsafe { c.start(host.rank(), d, dlen, s, slen) }?;
        self.coll = Some(c);
        Ok(Wait::Collective(len))
    }

    fn flag_range(&mut self) -> Range<usize> {
        let at = self.sends_len();
        at..at + self.n as usize
    }

    fn reply_range(&mut self) -> Range<usize> {
        let at = self.sends_len() + self.n as usize;
        at..at + self.gets
    }

    /// Naive, before anything else of its fence: a receive for every other
    /// rank's flag, so no flag waits as an unexpected message holding
    /// credit a finish message needs.
    fn expect_flags<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Result<(), CollectiveError> {
        let t = TagSel::Tag(tag(self.window, self.epoch, FLAG));
        let at = self.flag_range().start;
        let me = self.me;
        for p in (0..self.n).filter(|&p| p != me) {
            let b = self.at(self.layout.flags + p as usize);
            // SAFETY: the lent bytes, this receive's alone.
            let q = unsafe { host.rank().irecv(Source::Rank(p), t, CONTEXT, b, 1) };
            self.slots.as_mut()[at + p as usize] = Some(q.map_err(CollectiveError::Recv)?);
        }
        Ok(())
    }

    /// Naive's opening: a flag to every other rank from `from` on, as far
    /// as request handles allow (the receives are waited for with them);
    /// the rank to go on from, if any is left.
    fn send_flags<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        from: u16,
    ) -> Result<Option<u16>, CollectiveError> {
        let t = tag(self.window, self.epoch, FLAG);
        let b = self.at(self.layout.flags + self.n as usize);
        let mut p = from;
        while p < self.n {
            if p == self.me {
                p += 1;
                continue;
            }
            if !self.room(host, false) {
                return Ok(Some(p));
            }
            // SAFETY: the lent byte every flag carries, read only.
            match unsafe { host.rank().isend(p, t, CONTEXT, b, 1) } {
                Ok(q) => {
                    self.keep_send(q);
                    p += 1;
                }
                Err(SendError::RequestTableFull) if self.out > 0 => {
                    if !self.freed(host) {
                        return Ok(Some(p));
                    }
                }
                Err(e) => return Err(CollectiveError::Send(e)),
            }
        }
        Ok(None)
    }

    /// Deferred: a receive for every answer to this rank's gets, before
    /// its operations leave (a target answers as soon as it takes a get).
    fn expect_replies<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Result<(), CollectiveError> {
        let range = self.reply_range();
        for (i, at) in range.clone().enumerate() {
            let Some(r) = host.reply(i) else {
                return Ok(());
            };
            let sel = TagSel::Tag(tag(self.window, self.epoch, r.id));
            // SAFETY: the host keeps the reply's bytes until the report.
            let q = unsafe {
                host.rank()
                    .irecv(Source::Rank(r.target), sel, CONTEXT, r.into, r.len)
            };
            self.slots.as_mut()[at] = Some(q.map_err(CollectiveError::Recv)?);
        }
        match host.reply(range.len()) {
            None => Ok(()),
            Some(_) => Err(CollectiveError::Length {
                want: range.len() + 1,
                got: range.len(),
            }),
        }
    }

    /// Sends the queued operations from `next` on as far as request
    /// handles allow: `true` once every one is out.
    fn send_queued<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        mut next: usize,
        mut rest: bool,
    ) -> Result<bool, CollectiveError> {
        let (w, epoch) = (self.window, self.epoch);
        while let Some(o) = host.outgoing(next) {
            let (what, b) = match rest {
                false => (HEADERS, o.first),
                true => (DATA, o.rest),
            };
            if rest && b.len == 0 {
                (next, rest) = (next + 1, false);
                continue;
            }
            if !self.room(host, false) {
                self.wait = Wait::Sending { next, rest };
                return Ok(false);
            }
            // SAFETY: the host keeps the operation's bytes until the report.
            match unsafe {
                host.rank()
                    .isend(o.target, tag(w, epoch, what), CONTEXT, b.ptr, b.len)
            } {
                Ok(q) => self.keep_send(q),
                Err(SendError::RequestTableFull) if self.out > 0 => {
                    if self.freed(host) {
                        continue;
                    }
                    self.wait = Wait::Sending { next, rest };
                    return Ok(false);
                }
                Err(e) => return Err(CollectiveError::Send(e)),
            }
            (next, rest) = match rest {
                false => (next, true),
                true => (next + 1, false),
            };
        }
        Ok(true)
    }

    /// Whether a send may be posted now: a slot is free and, with many
    /// sends out, enough request handles are left for what the rank
    /// receives meanwhile. Collects the sends that ended first.
    fn room<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        answer: bool,
    ) -> bool {
        let fits = |t: &mut Self, host: &mut H| {
            let cap = t.sends_len() - if answer { 0 } else { HEADROOM };
            let paced = answer || t.out < PACE_FROM || host.rank().free_requests() >= HEADROOM;
            t.out == 0 || (t.out < cap && paced)
        };
        if fits(self, host) {
            return true;
        }
        self.collect_sends(host);
        fits(self, host)
    }

    /// The request table was full: collects the sends that ended (each
    /// holds a handle until then); whether any did.
    fn freed<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) -> bool {
        let before = self.out;
        self.collect_sends(host);
        self.out < before
    }

    /// Sends are kept packed in the first slots, so collecting them looks
    /// at those out only.
    fn keep_send(&mut self, q: Q) {
        assert!(self.out < self.sends_len(), "room checked before the send");
        self.slots.as_mut()[self.out] = Some(q);
        self.out += 1;
    }

    fn flags_out(&mut self) -> bool {
        let r = self.flag_range();
        self.slots.as_mut()[r].iter().any(Option::is_some)
    }

    fn replies_out(&mut self) -> bool {
        let r = self.reply_range();
        self.slots.as_mut()[r].iter().any(Option::is_some)
    }

    /// Completes the receives in `range` that ended; their first fault
    /// joins the fence's unless `ignore` says it is expected.
    fn collect<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        range: Range<usize>,
        ignore: Option<RecvFault>,
    ) {
        for i in range {
            let Some(q) = self.slots.as_mut()[i].take() else {
                continue;
            };
            match host.rank().test(q) {
                Err(q) => self.slots.as_mut()[i] = Some(q),
                Ok(st) => {
                    if st.fault != ignore {
                        self.fault = self.fault.or(st.fault);
                    }
                }
            }
        }
    }

    fn collect_sends<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) {
        let slots = self.slots.as_mut();
        let mut i = 0;
        while i < self.out {
            let q = slots[i].take().expect("sends are packed");
            match host.rank().test(q) {
                Err(q) => {
                    slots[i] = Some(q);
                    i += 1;
                }
                Ok(st) => {
                    self.fault = self.fault.or(st.fault);
                    self.out -= 1;
                    slots.swap(i, self.out);
                }
            }
        }
    }

    fn collect_flags<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) {
        let r = self.flag_range();
        self.collect(host, r, Some(RecvFault::Cancelled));
    }

    fn collect_replies<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) {
        let r = self.reply_range();
        self.collect(host, r, None);
    }

    /// Receives the operations that came while the epoch awaits any, each
    /// applied (a get answered, while a send's slot is free) and handed to
    /// the core; whether any came.
    fn drain<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Result<bool, CollectiveError> {
        let mut arrived = false;
        // Once the core's last step came, the epoch is the next one's.
        // An await step needs the receive; another wait posts it once the
        // rank stalls.
        let post = self.wait == Wait::Await || host.rank().stalled();
        while !self.ended && self.room(host, true) {
            let d = self.inbox.drain(host, post)?;
            arrived |= d.arrived;
            match d.answer {
                Some(q) => self.keep_send(q),
                None => break,
            }
        }
        Ok(arrived)
    }

    fn fail<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        e: CollectiveError,
    ) -> Poll<Result<Fenced, CollectiveError>> {
        if let Some(c) = &mut self.coll {
            c.abort(host.rank());
        }
        let n = self.sends_len();
        let slots = self.slots.as_mut();
        for q in self.finish.iter().chain(slots[n..].iter().flatten()) {
            host.rank().cancel(q);
        }
        self.inbox.cancel(host);
        self.state = State::Ending(e);
        self.end(host, e)
    }

    /// Collects the requests of a failed fence; its error once none is
    /// left, the epoch ended where it stood. Receives are always waited
    /// for (cancelled, or matched and ending); a send only while the group
    /// is whole: once it lost a rank, a live peer that left the fence
    /// never takes it.
    fn end<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        e: CollectiveError,
    ) -> Poll<Result<Fenced, CollectiveError>> {
        let mut left = false;
        if let Some(c) = &mut self.coll {
            match c.poll(host.rank()) {
                Poll::Pending => left = true,
                Poll::Ready(_) => self.coll = None,
            }
        }
        if let Some(q) = self.finish.take() {
            if let Err(q) = host.rank().test(q) {
                self.finish = Some(q);
                left = true;
            }
        }
        left |= !self.inbox.end(host);
        let lost = !host.rank().group_intact();
        let n = self.sends_len();
        for (i, slot) in self.slots.as_mut().iter_mut().enumerate() {
            if let Some(q) = slot.take() {
                match host.rank().test(q) {
                    Ok(_) => {}
                    Err(q) if lost && i < n => {
                        host.rank().forget(q);
                    }
                    Err(q) => {
                        *slot = Some(q);
                        left = true;
                    }
                }
            }
        }
        if left {
            return Poll::Pending;
        }
        self.out = 0;
        if !self.ended {
            host.epoch().abort();
        }
        host.rank().watch_all(false);
        self.state = State::Done(Err(e));
        Poll::Ready(Err(e))
    }
}

/// A fence's wait for any origin ended because a rank of the group failed:
/// what it waits for may never come.
fn lost() -> CollectiveError {
    CollectiveError::Failed(RecvFault::PeerFailed)
}

/// # Safety
/// `len` bytes at `p` are valid and not written meanwhile.
unsafe fn slice<'a>(p: *const u8, len: usize) -> &'a [u8] {
    match len {
        0 => &[],
        // SAFETY: the caller's contract.
        _ => unsafe { core::slice::from_raw_parts(p, len) },
    }
}

/// # Safety
/// `len` bytes at `p` are valid and no one else's meanwhile.
unsafe fn slice_mut<'a>(p: *mut u8, len: usize) -> &'a mut [u8] {
    // SAFETY: the caller's contract.
    unsafe { core::slice::from_raw_parts_mut(p, len) }
}

#[cfg(test)]
mod tests;
