//! One window's access epochs, sans I/O: what every operation is checked
//! against, how each one is counted, the RDMA the immediate designs post
//! through the [`Nic`], and the steps a fence takes in each of the four
//! designs ([`Step`]). The shell keeps the window's memory (staging,
//! applying accumulates, the bytes of messages) and carries out the steps
//! with its two-sided messages and collectives; every rule a peer can see
//! (counts, channels, tags, immediates, what a fence waits for) is here.
//!
//! A fence, driven by the shell:
//!
//! ```text
//! epoch.fence(assert)?;
//! loop {
//!     match epoch.step(&mut counts) {
//!         Step::ExpectFlags => post a receive for the flag of every other rank,
//!         Step::SendQueued => send the deferred design's queued operations,
//!         Step::Flush => wait until in_flight() == 0,
//!         Step::Reduce { collective, len } => run it over counts[..len], then reduced(&counts),
//!         Step::SendFinish { to, body } => send body (tag FINISH) to `to`,
//!         Step::RecvFinish => receive one (tag FINISH, any source), then finished(src, body),
//!         Step::Await { from, immediates } => receive one operation (unless satisfied()
//!             first, with immediates), then arrived(src),
//!         Step::Flags => send every other rank its flag, wait for the receives,
//!         Step::DropFlags => cancel those receives, Step::Barrier => a barrier,
//!         Step::Done(outcome) => break,
//!     }
//! }
//! ```
//!
//! While a step waits and [`Epoch::awaiting`] holds, the shell also
//! receives this epoch's operations as they come (any source) and feeds
//! each in with [`Epoch::arrived`]. Otherwise operations nobody receives
//! hold the receive pool, their origins run out of credit, and the
//! collective a fence waits for is queued behind them: a fence with more
//! operations than the pool holds would never end.

use crate::completion::{WcResult, WorkId, WINDOW_OPS};
use crate::nic::{Gather, Nic, PostError, Posted, RdmaOp, Remote};
use crate::wire::onesided::{
    imm, Descriptor, OpHeader, RmaError, RmaKind, HEADER, INLINE, MAX_GETS,
};

use super::design::{Design, Opening, TargetCompletion};

/// What this rank knows of one rank of the window, and what its epoch sent
/// there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    desc: Descriptor,
    /// Puts with immediate posted (and not failed) this epoch.
    puts: u32,
    /// Operations sent as messages this epoch.
    msgs: u32,
    /// Whether this epoch used the channel to it (a finish message is owed).
    used: bool,
    /// Operations from it received this fence before its finish message
    /// said how many to await (designs with finish messages).
    arrived: u32,
    /// RDMA operations posted to it since the window was made: the next
    /// one's number (its work id carries it modulo [`WINDOW_OPS`]).
    posted: u16,
    /// Which of the last [`IN_FLIGHT`] numbers are in flight (bit `n % 64`):
    /// a completion of one that is not is a repeat and changes nothing.
    flying: u64,
    /// Which of those are puts with immediate: a completion must name
    /// the operation as it was posted.
    imms: u64,
}

/// RDMA operations in flight to one target at most; the next post waits
/// ([`EpochError::Busy`]) until the oldest completes.
pub const IN_FLIGHT: u16 = 64;

impl Target {
    /// A rank's entry, from the descriptor it published.
    pub const fn new(desc: Descriptor) -> Target {
        Target {
            desc,
            puts: 0,
            msgs: 0,
            used: false,
            arrived: 0,
            posted: 0,
            flying: 0,
            imms: 0,
        }
    }

    /// Whether operation number `op` (modulo [`WINDOW_OPS`]) is among the
    /// last [`IN_FLIGHT`] posted and has not completed.
    fn in_flight(&self, op: u16) -> bool {
        let age = self.posted.wrapping_sub(op) % WINDOW_OPS;
        (1..=IN_FLIGHT).contains(&age) && self.flying & (1 << (op % IN_FLIGHT)) != 0
    }
}

/// Why an operation or a fence was refused; nothing was counted or posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochError {
    /// The origin's checks failed (target, range, alignment).
    Rma(RmaError),
    /// More gets in one epoch than [`MAX_GETS`].
    TooManyGets,
    /// Longer than one operation carries (4 GiB).
    TooLong,
    /// An operation after a fence that asserted none would follow, or a
    /// fence asserting no operation ends here after some were issued.
    Assertion,
    /// The NIC cannot take the RDMA now (send queue full, or the target
    /// out of receive buffers for an immediate): progress, then issue it
    /// again. Counted in [`Epoch::retries`].
    Busy,
    /// A fence is under way: finish it first.
    Fencing,
}

impl From<RmaError> for EpochError {
    fn from(e: RmaError) -> Self {
        EpochError::Rma(e)
    }
}

/// Which collective a [`Step::Reduce`] runs: a sum of native-endian u32s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// Each rank keeps its own block of `len / ranks` bytes.
    ReduceScatter,
    /// Each rank keeps all of it.
    Allreduce,
}

/// How a fence ended, once every step was carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// RDMA operations of the epoch the NIC refused or failed: their data
    /// is missing; the fence itself completed on every rank.
    pub failed: u32,
    /// Ranks passed different assertions: "no operation follows" (the
    /// window stays open on every rank) or "no operation precedes" (every
    /// rank completed the epoch as if none had asserted it).
    pub disagree: bool,
    /// This rank asserted that no operation of its precedes the fence,
    /// yet it issued some: the fence completed them on every rank.
    pub false_assertion: bool,
}

/// What the shell does next for a fence under way. Messages the shell
/// sent for the epoch (operations, finish messages, answers to gets) need
/// only have left before [`Step::Barrier`], [`Step::Flags`] and
/// [`Step::Done`] are carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Naive design, first: post a receive for the
    /// [`FLAG`](crate::wire::onesided::channel::FLAG) of every other rank
    /// now, so flags never wait as unexpected messages. Otherwise a
    /// receiver still waiting for a finish message may have lent its whole
    /// credit budget to peers' flags, and the finish message waits for
    /// credit that never comes (from some hundreds of ranks on a default
    /// receive pool).
    ExpectFlags,
    /// Deferred design: send the operations queued this epoch now (each
    /// counted by [`Epoch::message`]); they travel while counts are summed.
    SendQueued,
    /// Wait until [`Epoch::in_flight`] is zero (the rank's progress feeds
    /// completions in), so that what follows on a channel comes after the
    /// epoch's RDMA there.
    Flush,
    /// Sum the first `len` bytes of the step's buffer, as u32s, with this
    /// collective; hand the result to [`Epoch::reduced`].
    Reduce { collective: Reduction, len: usize },
    /// Send `body` to `to` on the [`FINISH`](crate::wire::onesided::channel::FINISH)
    /// channel.
    SendFinish { to: u16, body: [u8; 4] },
    /// Receive one finish message from any rank; hand it to
    /// [`Epoch::finished`].
    RecvFinish,
    /// Receive one operation's messages from `from` (any rank if `None`;
    /// one from another rank may come first and counts as well) and apply
    /// it ([`Epoch::admit`]), then call [`Epoch::arrived`].
    /// With `immediates`, the rest may come as immediates instead: receive
    /// unless [`Epoch::satisfied`] becomes true first, then cancel the
    /// receive; without, only a message satisfies the fence.
    Await { from: Option<u16>, immediates: bool },
    /// Send a flag to every other rank; then wait for the receives
    /// [`Step::ExpectFlags`] posted.
    Flags,
    /// The opening is skipped (every rank closed the window): cancel the
    /// receives [`Step::ExpectFlags`] posted.
    DropFlags,
    /// A barrier.
    Barrier,
    /// The fence is over; the next epoch is open (unless the window closed).
    Done(Outcome),
}

/// Where a fence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Idle,
    /// Naive: flags' receives are posted first.
    Expect,
    /// Queued operations leave (deferred) or RDMA completes (immediate).
    Flush,
    Reduce,
    Reduced,
    /// Finish messages: the next target to send one to, then how many to
    /// receive.
    SendFinish(u16),
    RecvFinish,
    /// Operations still to receive from one rank (after its finish
    /// message), or from any.
    AwaitFrom(u16, u32),
    AwaitAny,
    Open,
    Done,
}

/// The state of one fence.
#[derive(Clone, Copy, Debug)]
struct Fencing {
    stage: Stage,
    completion: Option<TargetCompletion>,
    closing: bool,
    /// Finish messages or operations this rank waits for.
    expected: u32,
    /// Finish messages or operations received.
    got: u32,
    closers: u32,
    /// This rank asserted that no operation precedes, truthfully; and
    /// falsely (it issued some).
    asserted: bool,
    false_assertion: bool,
    /// Ranks that asserted it truthfully, once the counts are summed.
    asserters: u32,
    /// Every rank's count was zero: nothing is left to order, the opening
    /// is skipped.
    quiet: bool,
    /// Flags' receives were posted ([`Step::ExpectFlags`]).
    expecting: bool,
}

impl Fencing {
    const IDLE: Fencing = Fencing {
        stage: Stage::Idle,
        completion: None,
        closing: false,
        expected: 0,
        got: 0,
        closers: 0,
        asserted: false,
        false_assertion: false,
        asserters: 0,
        quiet: false,
        expecting: false,
    };
}

/// Where an arrived operation's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    /// Bytes `HEADER..HEADER + len` of the first message.
    Inline(u32),
    /// A message of its own of this many bytes follows on the
    /// [`DATA`](crate::wire::onesided::channel::DATA) channel from the same
    /// rank: receive it even when the operation was refused, so the next
    /// header is read as one.
    Apart(u32),
}

/// The target's verdict on an operation's first message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The operation and the byte range of the window it touches, or why
    /// it was refused (counted in [`Epoch::refused`]).
    pub admitted: Result<(OpHeader, core::ops::Range<u64>), RmaError>,
    pub data: Data,
}

/// One window's epochs at one rank: `C` holds one [`Target`] per rank of
/// the window (storage the embedder supplies, as the endpoint's tables).
pub struct Epoch<C> {
    window: u16,
    me: u16,
    design: Design,
    epoch: u16,
    /// The last fence closed the window on every rank.
    closed: bool,
    targets: C,
    /// Operations issued this epoch, local ones too.
    ops: u32,
    gets: u32,
    /// RDMA posted whose completion has not come.
    in_flight: u32,
    failed: u32,
    /// Immediates of this epoch, and of the next (a peer that left the
    /// fence first may already write).
    notified: u32,
    notified_next: u32,
    retries: u64,
    refused: u64,
    fence: Fencing,
}

impl<C: AsRef<[Target]> + AsMut<[Target]>> Epoch<C> {
    /// Window number `window` of rank `me`, fenced by `design`, with every
    /// rank's descriptor in `targets` (one per rank; `me` among them).
    /// `None` if `me` is not one of them.
    pub fn new(window: u16, me: u16, design: Design, targets: C) -> Option<Epoch<C>> {
        if me as usize >= targets.as_ref().len() {
            return None;
        }
        Some(Epoch {
            window,
            me,
            design,
            epoch: 0,
            closed: false,
            targets,
            ops: 0,
            gets: 0,
            in_flight: 0,
            failed: 0,
            notified: 0,
            notified_next: 0,
            retries: 0,
            refused: 0,
            fence: Fencing::IDLE,
        })
    }

    pub fn design(&self) -> Design {
        self.design
    }

    pub fn window(&self) -> u16 {
        self.window
    }

    /// This rank's number in the window's group.
    pub fn me(&self) -> u16 {
        self.me
    }

    /// The ranks of the window's group (one descriptor each).
    pub fn group(&self) -> u16 {
        u16::try_from(self.targets.as_ref().len()).unwrap_or(u16::MAX)
    }

    /// The epoch's number (wrapping); its messages' tags carry it.
    pub fn epoch(&self) -> u16 {
        self.epoch
    }

    /// The last fence closed the window on every rank: nothing reaches its
    /// memory until the next fence.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// RDMA operations posted whose completion has not been fed in.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Gets issued this epoch (the next one's number).
    pub fn gets(&self) -> u32 {
        self.gets
    }

    /// Posts the NIC refused for now, since the window was created.
    pub fn retries(&self) -> u64 {
        self.retries
    }

    /// Operations from the wire the window refused (bad key, out of
    /// bounds, malformed, uncounted), since it was created.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The descriptor rank `rank` published.
    pub fn descriptor(&self, rank: u16) -> Option<Descriptor> {
        self.targets.as_ref().get(rank as usize).map(|t| t.desc)
    }

    /// Replaces what this rank believes of `rank`'s window: a stale or
    /// forged descriptor makes accesses the target (or its NIC) refuses.
    pub fn set_descriptor(&mut self, rank: u16, desc: Descriptor) {
        if let Some(t) = self.targets.as_mut().get_mut(rank as usize) {
            t.desc = desc;
        }
    }

    fn ranks(&self) -> usize {
        self.targets.as_ref().len()
    }

    /// The origin's checks: the epoch is open, the target exists, the range
    /// lies in its window, an accumulate is whole elements. The header the
    /// operation carries (a get's `id` is set when it is issued).
    pub fn check(
        &self,
        target: u16,
        disp: u64,
        len: u64,
        kind: RmaKind,
    ) -> Result<OpHeader, EpochError> {
        if self.fence.stage != Stage::Idle {
            return Err(EpochError::Fencing);
        }
        if self.closed {
            return Err(EpochError::Assertion);
        }
        let t = self
            .targets
            .as_ref()
            .get(target as usize)
            .ok_or(RmaError::Target)?;
        let len32 = u32::try_from(len).map_err(|_| EpochError::TooLong)?;
        let range = t.desc.window.range(disp, len)?;
        if let Some(s) = kind.element_size() {
            let s = s as u64;
            if !range.start.is_multiple_of(s) || !len.is_multiple_of(s) {
                return Err(RmaError::Misaligned.into());
            }
        }
        Ok(OpHeader {
            kind,
            last: false,
            window: self.window,
            epoch: self.epoch,
            key: t.desc.window.key,
            len: len32,
            offset: range.start,
            id: 0,
        })
    }

    /// Numbers a get checked by [`check`](Self::check).
    pub fn number_get(&mut self, h: &mut OpHeader) -> Result<u32, EpochError> {
        if self.gets >= MAX_GETS {
            return Err(EpochError::TooManyGets);
        }
        h.id = self.gets;
        self.gets += 1;
        Ok(h.id)
    }

    /// An operation carried out at this rank (its own window): counted so
    /// that a fence asserting none ended here refuses.
    pub fn local(&mut self) {
        self.ops += 1;
    }

    /// An operation sent (or queued to send at the fence) as messages to
    /// `target`: the target's fence waits for it.
    pub fn message(&mut self, target: u16) {
        self.ops += 1;
        if let Some(t) = self.targets.as_mut().get_mut(target as usize) {
            t.msgs += 1;
            t.used = true;
        }
    }

    /// Posts the RDMA of a put (`RdmaOp::Write`, with an immediate in the
    /// RI design) or a get (`RdmaOp::Read`) checked as `h`, between
    /// `local` and the target's window. A post refused for good (the
    /// connection down, a key refused) is counted failed and reported by
    /// the fence, as a failed completion is.
    pub fn post<N: Nic>(
        &mut self,
        nic: &mut N,
        target: u16,
        h: &OpHeader,
        local: Gather,
    ) -> Result<(), EpochError> {
        let rdma = match h.kind {
            RmaKind::Put => RdmaOp::Write,
            RmaKind::Get => RdmaOp::Read,
            _ => return Err(RmaError::Malformed.into()),
        };
        if !self.design.immediate() || target == self.me || local.len != h.len {
            return Err(RmaError::Malformed.into());
        }
        if h.len == 0 {
            // Nothing to move.
            self.ops += 1;
            return Ok(());
        }
        let Some(t) = self.targets.as_ref().get(target as usize) else {
            return Err(RmaError::Target.into());
        };
        let op = t.posted % WINDOW_OPS;
        if t.flying & (1 << (op % IN_FLIGHT)) != 0 {
            // The operation [`IN_FLIGHT`] before this one is still in flight.
            self.retries += 1;
            return Err(EpochError::Busy);
        }
        let with_imm =
            rdma == RdmaOp::Write && self.design.completion() == TargetCompletion::Immediates;
        let remote = Remote {
            // Checked against the descriptor's length by `check`; an
            // address past the end of memory fails at the NIC, never wraps.
            addr: t.desc.remote.addr.saturating_add(h.offset),
            key: t.desc.remote.key,
        };
        let work = WorkId::Window {
            window: self.window,
            target,
            epoch: self.epoch,
            op,
            imm: with_imm,
        };
        let r = if with_imm {
            nic.post_write_imm(target, work, local, remote, imm(self.window, self.epoch))
        } else {
            nic.post_rdma(target, work, rdma, local, remote)
        };
        match r {
            Err(PostError::Busy) => {
                self.retries += 1;
                return Err(EpochError::Busy);
            }
            Ok(Posted::Later) => self.in_flight += 1,
            Ok(Posted::Done) => {}
            Err(_) => self.failed += 1,
        }
        self.ops += 1;
        let t = &mut self.targets.as_mut()[target as usize];
        t.used = true;
        t.posted = t.posted.wrapping_add(1) % WINDOW_OPS;
        if r == Ok(Posted::Later) {
            t.flying |= 1 << (op % IN_FLIGHT);
            if with_imm {
                t.imms |= 1 << (op % IN_FLIGHT);
            }
        }
        if with_imm && r.is_ok() {
            t.puts += 1;
        }
        Ok(())
    }

    /// The NIC finished work request `work`, one of this window's (the
    /// shell routes [`WorkId::Window`] completions here). `false` if it
    /// is no operation in flight in this epoch (another window's, an
    /// epoch that ended without it, a duplicate), which changes nothing.
    pub fn on_completion(&mut self, work: WorkId, result: WcResult) -> bool {
        let WorkId::Window {
            window,
            target,
            epoch,
            op,
            imm: with_imm,
        } = work
        else {
            return false;
        };
        if window != self.window || epoch != self.epoch || self.in_flight == 0 {
            return false;
        }
        let Some(t) = self.targets.as_mut().get_mut(target as usize) else {
            return false;
        };
        let bit = 1 << (op % IN_FLIGHT);
        if !t.in_flight(op) || (t.imms & bit != 0) != with_imm {
            return false;
        }
        t.flying &= !bit;
        t.imms &= !bit;
        // A put with immediate that failed raises none: not counted.
        if result.is_err() && with_imm {
            t.puts = t.puts.saturating_sub(1);
        }
        self.in_flight -= 1;
        self.failed += result.is_err() as u32;
        true
    }

    /// An immediate arrived (a peer's put with immediate landed here).
    /// `false` if it is not this window's in this epoch or the next.
    pub fn on_immediate(&mut self, value: u32) -> bool {
        if value == imm(self.window, self.epoch) {
            self.notified += 1;
        } else if value == imm(self.window, self.epoch.wrapping_add(1)) {
            self.notified_next += 1;
        } else {
            return false;
        }
        true
    }

    /// Whether any operation was issued this epoch.
    pub fn issued(&self) -> bool {
        self.ops > 0 || self.gets > 0
    }

    /// Starts a fence: `no_precede` (no operation of this rank's epoch ends
    /// here) and `no_succeed` (none follows until the next fence) as MPI's
    /// assertions; every rank passes the same. Then [`step`](Self::step).
    ///
    /// Every fence sums the same counts whatever its assertions, with the
    /// number of ranks asserting `no_precede` among them: a rank that
    /// asserts it alone (an erroneous program) would otherwise run another
    /// collective than the others, and every rank would wait for ever.
    /// So ranks that disagree all learn it ([`Outcome::disagree`]), and a
    /// rank that asserts it falsely completes its operations as any fence
    /// does ([`Outcome::false_assertion`]). Only when every rank asserts it
    /// is the rest skipped: nothing was issued, so nothing is awaited and
    /// the next epoch needs no opening.
    pub fn fence(&mut self, no_precede: bool, no_succeed: bool) -> Result<(), EpochError> {
        if self.fence.stage != Stage::Idle {
            return Err(EpochError::Fencing);
        }
        let false_assertion = no_precede && self.issued();
        let steps = self.design.steps(false, no_succeed);
        // The naive design's flags may come whatever this rank asserts:
        // their receives are posted, and dropped if none is sent.
        let flags = self.design.opening() == Opening::AllPairs;
        self.fence = Fencing {
            stage: if flags { Stage::Expect } else { Stage::Flush },
            completion: steps.completion,
            closing: no_succeed,
            asserted: no_precede && !false_assertion,
            false_assertion,
            // Operations received before this fence began.
            got: self.fence.got,
            ..Fencing::IDLE
        };
        if self.design == Design::Def {
            // Nothing reaches a deferred window outside its own fence.
            self.closed = no_succeed;
        }
        Ok(())
    }

    /// Bytes a [`Step::Reduce`] needs for `ranks` ranks under `design`: the
    /// buffer [`step`](Self::step) writes counts into must be this long.
    pub const fn reduce_len(design: Design, ranks: usize) -> usize {
        match design.completion() {
            TargetCompletion::CountedMessages => 8 * ranks,
            TargetCompletion::FinishMessages => 12 * ranks,
            TargetCompletion::Immediates => 4 * (ranks + 2),
        }
    }

    /// The next step of the fence under way. `counts` is where a
    /// [`Step::Reduce`] writes this rank's vector: give
    /// [`reduce_len`](Self::reduce_len) bytes (counts past a shorter
    /// buffer's end are left out).
    pub fn step(&mut self, counts: &mut [u8]) -> Step {
        let f = self.fence;
        match f.stage {
            Stage::Idle => Step::Done(Outcome {
                failed: 0,
                disagree: false,
                false_assertion: false,
            }),
            Stage::Expect => {
                self.fence.stage = Stage::Flush;
                self.fence.expecting = true;
                Step::ExpectFlags
            }
            Stage::Flush => {
                self.fence.stage = Stage::Reduce;
                match self.design {
                    Design::Def => Step::SendQueued,
                    _ => Step::Flush,
                }
            }
            // `reduced` moves the fence on; stepping again repeats the ask.
            Stage::Reduce | Stage::Reduced => {
                self.fence.stage = Stage::Reduced;
                let collective = match f.completion {
                    Some(TargetCompletion::FinishMessages | TargetCompletion::CountedMessages) => {
                        Reduction::ReduceScatter
                    }
                    _ => Reduction::Allreduce,
                };
                Step::Reduce {
                    collective,
                    len: self.fill(counts),
                }
            }
            Stage::SendFinish(from) => {
                let next = (from as usize..self.ranks()).find(|&t| self.targets.as_ref()[t].used);
                match next {
                    Some(t) => {
                        self.fence.stage = Stage::SendFinish(t as u16 + 1);
                        Step::SendFinish {
                            to: t as u16,
                            body: self.targets.as_ref()[t].msgs.to_le_bytes(),
                        }
                    }
                    None => {
                        self.fence.stage = Stage::RecvFinish;
                        self.step(counts)
                    }
                }
            }
            Stage::RecvFinish => {
                if f.got < f.expected {
                    Step::RecvFinish
                } else {
                    self.fence.stage = Stage::Open;
                    self.step(counts)
                }
            }
            Stage::AwaitFrom(_, 0) => {
                self.fence.stage = Stage::RecvFinish;
                self.step(counts)
            }
            Stage::AwaitFrom(src, _) => Step::Await {
                from: Some(src),
                immediates: false,
            },
            Stage::AwaitAny => {
                if self.satisfied() {
                    self.fence.stage = Stage::Open;
                    self.step(counts)
                } else {
                    Step::Await {
                        from: None,
                        immediates: f.completion == Some(TargetCompletion::Immediates),
                    }
                }
            }
            Stage::Open => {
                self.fence.stage = Stage::Done;
                let all = f.closers == self.ranks() as u32;
                let opening = match self.design {
                    Design::Def => Opening::None,
                    _ if all || f.quiet => Opening::None,
                    d => d.opening(),
                };
                match opening {
                    Opening::Barrier => Step::Barrier,
                    Opening::AllPairs => Step::Flags,
                    Opening::None if f.expecting => Step::DropFlags,
                    Opening::None => self.step(counts),
                }
            }
            Stage::Done => {
                let all = f.closers == self.ranks() as u32;
                let n = self.ranks() as u32;
                let outcome = Outcome {
                    failed: self.failed,
                    disagree: (self.design.immediate() && f.closers > 0 && !all)
                        || (f.asserters > 0 && f.asserters < n),
                    false_assertion: f.false_assertion,
                };
                if self.design.immediate() {
                    self.closed = all;
                }
                self.end_epoch();
                Step::Done(outcome)
            }
        }
    }

    /// Writes this rank's contribution to the fence's reduction.
    fn fill(&self, counts: &mut [u8]) -> usize {
        let n = self.ranks();
        let closing = self.fence.closing as u32;
        let asserted = self.fence.asserted as u32;
        let mut put = |i: usize, v: u32| {
            if let Some(b) = counts.get_mut(4 * i..4 * i + 4) {
                b.copy_from_slice(&v.to_ne_bytes());
            }
        };
        // Each target's block ends with the assertion, so that a
        // reduce_scatter gives every rank the number of asserters.
        match self.fence.completion {
            Some(TargetCompletion::CountedMessages) => {
                for (i, t) in self.targets.as_ref().iter().enumerate() {
                    put(2 * i, t.msgs);
                    put(2 * i + 1, asserted);
                }
                8 * n
            }
            Some(TargetCompletion::FinishMessages) => {
                for (i, t) in self.targets.as_ref().iter().enumerate() {
                    put(3 * i, t.used as u32);
                    put(3 * i + 1, closing);
                    put(3 * i + 2, asserted);
                }
                12 * n
            }
            Some(TargetCompletion::Immediates) => {
                for (i, t) in self.targets.as_ref().iter().enumerate() {
                    put(i, t.puts.saturating_add(t.msgs));
                }
                put(n, closing);
                put(n + 1, asserted);
                4 * (n + 2)
            }
            // Not fencing: nothing to sum.
            None => 0,
        }
    }

    /// The reduction of [`Step::Reduce`] ran: `counts` is its result, the
    /// whole vector (of a reduce_scatter, only this rank's block need be
    /// right). Counts missing from a short result read as zero.
    pub fn reduced(&mut self, counts: &[u8]) {
        if self.fence.stage != Stage::Reduced {
            return;
        }
        let (n, me) = (self.ranks(), self.me as usize);
        let at = |i: usize| -> u32 {
            counts
                .get(4 * i..4 * i + 4)
                .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let f = &mut self.fence;
        match f.completion {
            Some(TargetCompletion::CountedMessages) => {
                f.expected = at(2 * me);
                f.asserters = at(2 * me + 1);
                f.stage = Stage::AwaitAny;
            }
            Some(TargetCompletion::FinishMessages) => {
                f.expected = at(3 * me);
                f.closers = at(3 * me + 1);
                f.asserters = at(3 * me + 2);
                f.stage = Stage::SendFinish(0);
            }
            Some(TargetCompletion::Immediates) => {
                f.expected = at(me);
                f.closers = at(n);
                f.asserters = at(n + 1);
                f.quiet = (0..n).all(|i| at(i) == 0);
                f.stage = Stage::AwaitAny;
            }
            None => return,
        }
        if f.asserters == n as u32 {
            // Every rank asserted it, truthfully: nothing was issued.
            f.quiet = true;
            f.expected = 0;
            f.stage = Stage::Open;
        }
    }

    /// A finish message from `src` arrived with `body`: the operations it
    /// announces follow from `src` ([`Step::Await`]).
    pub fn finished(&mut self, src: u16, body: [u8; 4]) {
        if self.fence.stage != Stage::RecvFinish {
            return;
        }
        self.fence.got += 1;
        // Those received before the finish message are awaited no more.
        let early = self
            .targets
            .as_ref()
            .get(src as usize)
            .map_or(0, |t| t.arrived);
        let left = u32::from_le_bytes(body).saturating_sub(early);
        self.fence.stage = Stage::AwaitFrom(src, left);
    }

    /// Whether operations of this epoch aimed at this rank may still be on
    /// their way: from the epoch's start until its fence has all it
    /// awaits. A shell whose wait stalls meanwhile (in a fence, or issuing
    /// operations faster than they leave) receives them as they come.
    pub fn awaiting(&self) -> bool {
        match self.fence.stage {
            Stage::Open | Stage::Done => false,
            Stage::AwaitAny => !self.satisfied(),
            _ => true,
        }
    }

    /// An operation of this epoch from rank `from` arrived (admitted or
    /// not): at a [`Step::Await`], or early, while the shell waited for
    /// something else in the epoch or its fence. Once the fence has all it
    /// awaits, it counts for nothing.
    pub fn arrived(&mut self, from: u16) {
        let f = &mut self.fence;
        match f.stage {
            Stage::Open | Stage::Done => {}
            Stage::AwaitFrom(src, left) if src == from && left > 0 => {
                f.stage = Stage::AwaitFrom(src, left - 1);
            }
            _ if self.design.completion() == TargetCompletion::FinishMessages => {
                if let Some(t) = self.targets.as_mut().get_mut(from as usize) {
                    t.arrived = t.arrived.saturating_add(1);
                }
            }
            _ => f.got = f.got.saturating_add(1),
        }
    }

    /// Everything this rank's fence waits for has arrived: as messages,
    /// or (RI) as immediates.
    pub fn satisfied(&self) -> bool {
        let f = &self.fence;
        match (f.stage, f.completion) {
            (Stage::AwaitAny, Some(TargetCompletion::Immediates)) => {
                self.notified.saturating_add(f.got) >= f.expected
            }
            (Stage::AwaitAny, _) => f.got >= f.expected,
            (Stage::AwaitFrom(_, left), _) => left == 0,
            _ => true,
        }
    }

    /// The target's checks on an operation's first message (`first`, as
    /// received): epoch, window, key, range, length. Says where its data
    /// is; a refusal is counted.
    pub fn admit(&mut self, first: &[u8]) -> Arrival {
        let h = OpHeader::decode(first);
        let carries = match h {
            Ok(h) if h.kind.carries() => h.len,
            _ => 0,
        };
        let inline = carries as usize <= INLINE;
        let mine = self.targets.as_ref()[self.me as usize].desc.window;
        let mut admitted = h.and_then(|h| {
            if h.window != self.window || h.epoch != self.epoch {
                return Err(RmaError::Key);
            }
            mine.admit(&h).map(|range| (h, range))
        });
        let data = if inline {
            // The data came along: exactly as much as the header says.
            if first.len().saturating_sub(HEADER) != carries as usize {
                admitted = admitted.and(Err(RmaError::Malformed));
            }
            Data::Inline(carries)
        } else {
            Data::Apart(carries)
        };
        if admitted.is_err() {
            self.refused += 1;
        }
        Arrival { admitted, data }
    }

    /// Ends the epoch where it stands, with or without a fence under way
    /// (the shell's part of a step failed): the next one starts, its
    /// counts at zero, and what is still in flight is no longer awaited.
    pub fn abort(&mut self) {
        self.end_epoch();
    }

    /// Starts counting anew for the next epoch.
    fn end_epoch(&mut self) {
        for t in self.targets.as_mut() {
            (t.puts, t.msgs, t.used, t.arrived) = (0, 0, false, 0);
            (t.flying, t.imms) = (0, 0);
        }
        self.ops = 0;
        self.gets = 0;
        self.in_flight = 0;
        self.failed = 0;
        self.notified = self.notified_next;
        self.notified_next = 0;
        self.epoch = self.epoch.wrapping_add(1);
        self.fence = Fencing::IDLE;
    }
}

#[cfg(test)]
mod tests;
