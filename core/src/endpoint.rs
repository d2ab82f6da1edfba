//! The endpoint: one per rank. Two-sided MPI messaging: the eager protocol
//! with credit flow control, a rendezvous for large messages
//! ([`crate::wire::rendezvous`]), and, for lossy transports, a
//! reliability layer.
//!
//! Sans-I/O: every call takes `now` (nanoseconds, any monotonic origin) and the
//! shell's [`Nic`]; the endpoint reads no clock and touches no memory but through
//! the `Nic`. Call [`Endpoint::poll`] once `now` reaches [`Endpoint::poll_timeout`].
//!
//! This file holds the endpoint's state and its API; each mechanism has a
//! file under `endpoint/`: `arrival` (receiving and matching), `send` (eager
//! sends, packing, the send queue), `backlog` (posting slots within the send
//! entries), `medium` (messages sent as fragments and reassembled),
//! `reliability` (acknowledgements and retransmission on lossy
//! transports), `credit` (flow control from the shared receive pool),
//! `rendezvous` (large messages), `timers` (deadlines and `poll`), and the
//! tables `slots` (bounce slots) and `holds` (receive buffers kept for
//! unexpected messages).

mod arrival;
mod backlog;
mod credit;
mod failure;
mod holds;
mod liveness;
mod medium;
mod peer;
mod pull;
mod pull_frames;
mod rdma;
mod reliability;
mod rendezvous;
mod send;
mod slots;
pub mod storage;
mod timers;

pub use credit::Stall;

use crate::completion::{WcResult, WorkId};
use crate::config::TableName;
use crate::config::{Coalesce, Config, ConfigError};
use crate::fifo::{Fifo, Node, NIL};
use crate::log::debug;
use crate::matching::{Envelope, Matcher, Pattern, Source, TagSel};
use crate::nic::{Gather, Loc, Nic, PostError, Posted, RdmaError, RxBuf, SlotId, UserBuf};
use crate::request::{
    PostedRecv, QueuedSend, Receiving, RecvFault, Request, RequestEntry, RequestError, State,
    Status, Table,
};
use crate::reuse::{Invalidation, NoReuse, Pending, SendReuse};
use crate::stats::Stats;
use crate::wire::packed::{record_len, write_head, Record, Unpacker};
use crate::wire::{decode_packet, Header, Kind, HEADER_LEN};
pub use holds::HoldEntry;
use holds::Holds;
pub use peer::Peer;
use peer::{seq_le, BACKLOGGED};
use rendezvous::Transfer;
use send::Sent;
pub use slots::SlotEntry;
use slots::{SlotPool, BACKLOG, UNACKED};
use storage::{Sizes, Storage, Tables, MAX_TABLE};
use timers::{Timer, Timers};

/// What [`Endpoint::isend_now`] did with the bytes it took: either way
/// the send is complete for the caller, whose buffer is free again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Posted inline.
    Sent,
    /// Copied into the connection's backlog, behind the sends that hold
    /// every send entry: it leaves as completions free them, so a shell
    /// takes the completions the NIC has now rather than at its next wait.
    Queued,
}

/// Why a send was refused. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The destination is not a rank of this job.
    BadRank,
    /// Every request handle is in use: complete some with `test`.
    RequestTableFull,
    /// The destination failed ([`Endpoint::failed`]).
    PeerFailed,
    /// Longer than one message carries (`u32::MAX` bytes): a shell whose
    /// lengths are wider refuses it rather than send a truncated message.
    TooLong,
    /// The NIC refused the send for good: nothing left. `Access`: the
    /// buffer could not be read; otherwise the connection failed with it.
    Refused(PostError),
}

/// Why a receive was refused. Nothing was posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvError {
    /// The source is not a rank of this job.
    BadRank,
    /// The posted-receive queue is full: complete or cancel some receives.
    PostedQueueFull,
    /// Every request handle is in use: complete some with `test`.
    RequestTableFull,
    /// The source failed ([`Endpoint::failed`]).
    PeerFailed,
}

/// What the endpoint keeps for a message nobody has asked for yet.
#[derive(Clone, Copy, Debug)]
pub enum Held {
    /// An eager message kept at byte `at` of the receive buffer behind `hold`.
    Eager { hold: u16, at: u32, len: u32 },
    /// A large message's request to send (its data stays at the sender).
    Rts(crate::wire::rendezvous::Rts),
    /// A medium message of `len` bytes, its fragments in the receive
    /// buffers chained from hold `first` (all of them once its sender's
    /// assembly has moved on).
    Medium { first: u16, len: u32 },
}

/// A table of `E`s in the embedder's storage `C`, indexed by number.
struct Rows<E, C>(C, core::marker::PhantomData<E>);

impl<E, C: AsRef<[E]> + AsMut<[E]>> Rows<E, C> {
    fn new(c: C) -> Self {
        Rows(c, core::marker::PhantomData)
    }

    fn all(&self) -> &[E] {
        self.0.as_ref()
    }

    fn all_mut(&mut self) -> &mut [E] {
        self.0.as_mut()
    }

    fn get(&self, i: usize) -> Option<&E> {
        self.0.as_ref().get(i)
    }
}

impl<E, C: AsRef<[E]>> core::ops::Index<usize> for Rows<E, C> {
    type Output = E;
    fn index(&self, i: usize) -> &E {
        &self.0.as_ref()[i]
    }
}

impl<E, C: AsRef<[E]> + AsMut<[E]>> core::ops::IndexMut<usize> for Rows<E, C> {
    fn index_mut(&mut self, i: usize) -> &mut E {
        &mut self.0.as_mut()[i]
    }
}

/// One rank's messaging state, in tables the embedder supplies (see
/// [`crate::endpoint::storage`]): `S` names their containers, and their lengths are
/// the capacities (ranks, posted receives, unexpected messages, held
/// receive buffers, send bounce slots, requests), chosen at run time so one
/// build serves any job size. `Z` decides which eager sends go zero-copy
/// from registered user memory ([`NoReuse`]: none).
pub struct Endpoint<S: Storage, Z = NoReuse> {
    cfg: Config,
    /// Decided from `cfg` once, read by every small send: the largest
    /// message [`isend_now`](Self::isend_now) may send (`None`: it sends
    /// none), and how many inline sends in a row go unsignalled plus one.
    inline_now_max: Option<u32>,
    signal_every: u16,
    me: u16,
    npeers: u16,
    peers: Rows<Peer, S::Table<Peer>>,
    matcher: Matcher<PostedRecv, Held, S::Table<PostedEntry>, S::Table<UnexpectedEntry>>,
    slots: SlotPool<S::Table<SlotEntry>>,
    /// Receive buffers kept for the unexpected eager messages in them.
    holds: Holds<S::Table<HoldEntry>>,
    /// The hold made for the packet being handled, if one was.
    rx_hold: Option<u16>,
    /// The credit budget and the peers waiting for credit.
    lender: credit::Lender,
    /// Requests, and the work each carries (a queued send, a transfer) at
    /// the same index.
    reqs: Table<S::Table<RequestEntry>>,
    work: Rows<WorkEntry, S::Table<WorkEntry>>,
    /// Sends waiting for a credit or a bounce slot, oldest first (requests).
    queued: Fifo,
    /// Of those, sends of a priority context ([`crate::wire::context::is_priority`]).
    priority_queued: u32,
    /// Peers whose backlog is not empty (each listed once).
    backlogged: Fifo,
    timers: Timers,
    /// The latest time a call brought.
    now: u64,
    /// How long the next post to a busy NIC waits.
    backoff: u64,
    /// A peer was reported down since the last poll.
    downs: bool,
    /// When receives for any source began to be posted (without a gap):
    /// the silence of the peers they wait on counts from then at the latest.
    any_since: u64,
    /// Collectives of every rank under way ([`Endpoint::watch_all`]), and
    /// since when they wait.
    watching: u16,
    watch_since: u64,
    stats: Stats,
    reuse: Z,
    /// Transfers active.
    active: u16,
    /// What the PULL receives share: the frames they asked for, bounded so
    /// that many concurrent large receives do not ask for more than the
    /// receive pool holds.
    pull: pull::Pulls,
}

/// What the endpoint keeps per request: an entry of the work table (as
/// long as the request table). Opaque; make tables of [`WorkEntry::UNUSED`].
#[derive(Clone, Copy, Debug)]
pub struct WorkEntry {
    /// A send waiting in `queued`.
    send: QueuedSend,
    /// A rendezvous transfer.
    xfer: Transfer,
    /// A medium message's receive.
    recv: Receiving,
}

/// An entry of the posted-receive table.
pub type PostedEntry = crate::matching::Slot<Pattern, PostedRecv>;
/// An entry of the unexpected-message table.
pub type UnexpectedEntry = crate::matching::Slot<Envelope, Held>;

impl WorkEntry {
    /// No work.
    pub const UNUSED: WorkEntry = WorkEntry {
        send: QueuedSend::NONE,
        xfer: Transfer::IDLE,
        recv: Receiving::NONE,
    };
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// Bytes each peer costs the endpoint: one entry of its peer table.
    pub const PEER_BYTES: usize = core::mem::size_of::<Peer>();

    /// Bytes an endpoint with tables of `sizes` occupies, all but its peer
    /// table: what a process pays whatever the job size.
    pub const fn fixed_bytes(sizes: &Sizes) -> usize {
        core::mem::size_of::<Self>() + sizes.shared_bytes()
    }

    /// An endpoint for rank `me` of `npeers` ranks, in `tables` (every
    /// entry is reset; the peer table at least `npeers` long).
    pub fn new(cfg: Config, me: u16, npeers: u16, tables: Tables<S>) -> Result<Self, ConfigError>
    where
        Z: Default,
    {
        Self::with_reuse(cfg, me, npeers, tables, Z::default())
    }

    /// An endpoint whose eager sends consult `reuse` for a zero-copy path.
    pub fn with_reuse(
        mut cfg: Config,
        me: u16,
        npeers: u16,
        tables: Tables<S>,
        reuse: Z,
    ) -> Result<Self, ConfigError> {
        let sizes = tables.sizes();
        let Tables {
            mut peers,
            posted,
            unexpected,
            holds,
            slots,
            requests,
            work,
        } = tables;
        let max = peers.as_ref().len();
        if npeers as usize > max || npeers == 0 {
            return Err(ConfigError::TooManyPeers { max });
        }
        if me >= npeers {
            return Err(ConfigError::RankOutOfRange);
        }
        cfg.validate()?;
        sizes.check()?;
        if work.as_ref().len() < sizes.requests {
            let (min, max) = (sizes.requests, MAX_TABLE);
            let table = TableName::Work;
            return Err(ConfigError::TableSize { table, min, max });
        }
        // Decided once: every later check reads the number.
        cfg.medium_max = Some(cfg.medium());
        let room = sizes.unexpected.min(sizes.holds);
        let (lender, share) = credit::Lender::new(&cfg, npeers, room);
        for p in peers.as_mut()[..npeers as usize].iter_mut() {
            *p = Peer::new(cfg.rto_ns, share);
        }
        let inline_now_max = cfg
            .reliable
            .then_some(cfg.inline_max.min(cfg.eager_threshold));
        let signal_every = send::signal_every(&cfg);
        Ok(Endpoint {
            cfg,
            inline_now_max,
            signal_every,
            me,
            npeers,
            peers: Rows::new(peers),
            matcher: Matcher::new(posted, unexpected),
            slots: SlotPool::new(slots),
            holds: Holds::new(holds),
            rx_hold: None,
            lender,
            reqs: Table::new(requests),
            work: Rows::new(work),
            queued: Fifo::EMPTY,
            priority_queued: 0,
            backlogged: Fifo::EMPTY,
            timers: Timers::default(),
            now: 0,
            backoff: 0,
            downs: false,
            any_since: 0,
            watching: 0,
            watch_since: 0,
            stats: Stats::default(),
            reuse,
            active: 0,
            pull: pull::Pulls::default(),
        })
    }

    /// The configuration this endpoint runs with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// This endpoint's rank.
    pub fn rank(&self) -> u16 {
        self.me
    }

    /// Event counters: every drop, retransmission and stall is counted here.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The zero-copy policy and its state (tracker, cache, counters).
    pub fn reuse(&self) -> &Z {
        &self.reuse
    }

    /// Memory changed under `what`: no later send reads it through a stale
    /// registration. Sends already posted keep theirs until they complete.
    pub fn invalidate<N: Nic>(&mut self, nic: &mut N, what: Invalidation) {
        self.reuse.invalidate(nic, what);
    }

    /// Applies invalidations queued by a notifier. Call before every send
    /// when memory can change (one atomic load when nothing is queued).
    #[inline]
    pub fn apply_invalidations<N: Nic, const Q: usize>(
        &mut self,
        nic: &mut N,
        pending: &Pending<Q>,
    ) {
        if !pending.is_empty() {
            pending.drain(|what| self.reuse.invalidate(nic, what));
        }
    }

    /// Credits left for eager sends to `peer`.
    pub fn credits_left(&self, peer: u16) -> u32 {
        self.peers[peer as usize].credits_left()
    }

    /// Receive buffers of the shared pool that unexpected messages hold.
    pub fn held_buffers(&self) -> usize {
        self.holds.len()
    }

    /// Request handles free: a shell that issues many requests in a row
    /// keeps a few for the receives it must post meanwhile.
    pub fn free_requests(&self) -> usize {
        self.reqs.free_len()
    }

    /// Sends whose data still waits for a credit or a bounce slot.
    pub fn queued_sends(&self) -> usize {
        self.queued.len()
    }

    /// Posted receives and unexpected messages currently held.
    pub fn queue_lens(&self) -> (usize, usize) {
        self.matcher.lens()
    }

    /// [`isend`](Self::isend) of `data` if its bytes can be taken during
    /// the call: an eager message within `Config::inline_max` on a
    /// reliable transport, to a peer with a credit and no send waiting
    /// for one. It leaves inline if the connection has a free send entry
    /// and nothing in its backlog, else it is copied into the backlog (as
    /// `isend` would copy it, unless it could be packed with the messages
    /// there). Then the send is complete ([`Taken`] says how it went);
    /// `None` otherwise, with nothing done: the shell names the bytes by
    /// handle and calls [`isend`](Self::isend). The small-message path: no
    /// handle for the bytes, no request.
    pub fn isend_now<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        dest: u16,
        tag: u32,
        context: u16,
        data: &[u8],
    ) -> Option<Result<Taken, SendError>> {
        let len = u32::try_from(data.len()).ok()?;
        if len > self.inline_now_max? {
            return None;
        }
        let d = dest as usize;
        let limit = self.wqe_limit(len);
        self.tick(now);
        let p = self.peers.all().get(d).filter(|_| dest < self.npeers)?;
        if p.failed || p.queued > 0 || p.credits_left() == 0 {
            return None;
        }
        if send::waits(p, limit) {
            return self.queue_now(now, nic, d, tag, context, data);
        }
        let h = self.eager_header(p, context, tag, len);
        match self.post_inline(nic, d, &h, send::Body::Bytes(data)) {
            send::Inlined::Done => Some(Ok(Taken::Sent)),
            send::Inlined::Refused(e) => Some(Err(SendError::Refused(e))),
            send::Inlined::Busy | send::Inlined::Unsupported => None,
        }
    }

    /// Non-blocking send of `len` bytes of `buf`. Returns [`Request::COMPLETE`]
    /// when the data left the user buffer during the call (the common case);
    /// otherwise a request to `test` — the buffer must stay valid until then.
    /// Above [`Config::eager_max`] the message goes by rendezvous, and the
    /// request completes once the receiver has it (synchronous, as `MPI_Issend`).
    #[allow(clippy::too_many_arguments)]
    pub fn isend<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        dest: u16,
        tag: u32,
        context: u16,
        buf: UserBuf,
        len: u32,
    ) -> Result<Request, SendError> {
        self.tick(now);
        if dest >= self.npeers {
            return Err(SendError::BadRank);
        }
        if self.peers[dest as usize].failed {
            return Err(SendError::PeerFailed);
        }
        let mut q = QueuedSend {
            req: Request::COMPLETE,
            dest,
            tag,
            context,
            buf,
            len,
            rndv: false,
            sent: 0,
        };
        if len > self.cfg.eager_threshold {
            if len > self.cfg.medium() {
                return self.start_send(now, nic, dest, tag, context, buf, len);
            }
            return self.start_medium(now, nic, q);
        }
        if self.peers[dest as usize].queued == 0 {
            match self.try_send(now, nic, &mut q, self.reqs.has_free()) {
                Sent::Done => return Ok(Request::COMPLETE),
                Sent::Reading(slot) => {
                    // Cannot fail: `has_free` was checked before the post.
                    let req = self
                        .reqs
                        .alloc(State::SendInFlight)
                        .unwrap_or(Request::COMPLETE);
                    self.slots[slot as usize].req = Some(req);
                    return Ok(req);
                }
                Sent::Refused(e) => return Err(SendError::Refused(e)),
                Sent::No | Sent::Rts => {}
            }
        }
        let req = self
            .reqs
            .alloc(State::SendQueued)
            .ok_or(SendError::RequestTableFull)?;
        self.queue_send(now, QueuedSend { req, ..q });
        self.ask_credit(now, nic, dest);
        Ok(req)
    }

    /// Non-blocking receive into `buf` (of `capacity` bytes).
    #[allow(clippy::too_many_arguments)]
    pub fn irecv<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        source: Source,
        tag: TagSel,
        context: u16,
        buf: UserBuf,
        capacity: u32,
    ) -> Result<Request, RecvError> {
        self.tick(now);
        if let Source::Rank(r) = source {
            if r >= self.npeers {
                return Err(RecvError::BadRank);
            }
            if self.peers[r as usize].failed {
                return Err(RecvError::PeerFailed);
            }
        }
        let pattern = Pattern {
            source,
            tag,
            context,
        };
        let req = self
            .reqs
            .alloc(State::RecvPosted)
            .ok_or(RecvError::RequestTableFull)?;
        if let Some((env, held)) = self.matcher.take_unexpected(&pattern) {
            match held {
                Held::Eager { hold, at, len } => {
                    let from = Loc::Rx(self.holds.buf(hold), at);
                    let st = self.deliver_to(nic, env, len, from, buf, capacity);
                    if let Some(b) = self.holds.release(hold) {
                        nic.repost(b);
                        self.check_pool(nic);
                    }
                    self.reqs.set(req, State::Done(st));
                }
                Held::Rts(rts) => self.start_recv(now, nic, req, buf, capacity, env, rts),
                Held::Medium { first, len } => {
                    let into = Receiving {
                        buf,
                        capacity,
                        tag: env.tag,
                    };
                    // Each fragment took a credit of its own.
                    self.take_held_medium(now, nic, req, env.src, first, len, into);
                    return Ok(req);
                }
            }
            self.consumed(now, nic, env.src);
            return Ok(req);
        }
        let from = match source {
            Source::Rank(r) => Some(r),
            Source::Any => {
                self.start_waiting_any(now);
                None
            }
        };
        let posted = PostedRecv {
            req,
            source: from,
            buf,
            capacity,
        };
        if self.matcher.post(pattern, posted).is_err() {
            self.reqs.release(req);
            return Err(RecvError::PostedQueueFull);
        }
        if let Some(r) = from {
            self.await_peer(now, r);
        }
        Ok(req)
    }

    /// The oldest message here that a receive of `source`, `tag` and
    /// `context` would take now, left in place (MPI's `Iprobe`): its
    /// sender, tag and length (`len`: the whole message's, whatever a
    /// receive's buffer holds). The receive posted next with the same
    /// selection takes it.
    pub fn iprobe(
        &mut self,
        now: u64,
        source: Source,
        tag: TagSel,
        context: u16,
    ) -> Result<Option<Status>, RecvError> {
        self.tick(now);
        if let Source::Rank(r) = source {
            if r >= self.npeers {
                return Err(RecvError::BadRank);
            }
        }
        let pattern = Pattern {
            source,
            tag,
            context,
        };
        let found = self.matcher.peek_unexpected(&pattern).map(|(env, held)| {
            let len = match *held {
                Held::Eager { len, .. } | Held::Medium { len, .. } => len,
                Held::Rts(rts) => rts.len,
            };
            Status {
                source: env.src,
                tag: env.tag,
                len,
                fault: None,
            }
        });
        // What a failed peer sent before it failed is still found; nothing
        // more will come from it.
        match (found, source) {
            (None, Source::Rank(r)) if self.peers[r as usize].failed => Err(RecvError::PeerFailed),
            (found, _) => Ok(found),
        }
    }

    /// The request's status if it is complete (and frees the handle), else `None`.
    pub fn test(&mut self, req: Request) -> Result<Option<Status>, RequestError> {
        self.reqs.collect(req)
    }

    /// Cancels a posted receive that has not matched yet; `test` then reports
    /// `RecvFault::Cancelled`. Returns `false` if it already matched (or is a send).
    pub fn cancel(&mut self, req: Request) -> Result<bool, RequestError> {
        if req == Request::COMPLETE {
            return Ok(false);
        }
        if self.reqs.state(req)? != State::RecvPosted {
            return Ok(false);
        }
        if let Some(pr) = self.matcher.remove_posted(|p| p.req == req) {
            self.unposted(&pr);
        }
        self.reqs.set(
            req,
            State::Done(Status {
                source: 0,
                tag: 0,
                len: 0,
                fault: Some(RecvFault::Cancelled),
            }),
        );
        Ok(true)
    }
}
