//! The endpoint: one per rank. Two-sided MPI messaging: the eager protocol
//! with credit flow control, a rendezvous for large messages
//! ([`crate::rendezvous`]), and, for lossy transports, a
//! reliability layer.
//!
//! Sans-I/O: every call takes `now` (nanoseconds, any monotonic origin) and the
//! shell's [`Nic`]; the endpoint reads no clock and touches no memory but through
//! the `Nic`. Call [`Endpoint::poll`] once `now` reaches [`Endpoint::poll_timeout`].

mod credit;
mod holds;
mod rendezvous;
mod slots;

pub use credit::Stall;

use crate::config::{Coalesce, Config, ConfigError};
use crate::fifo::{Fifo, Node, NIL};
use crate::log::debug;
use crate::matching::{Envelope, Matcher, Pattern, Source, TagSel};
use crate::nic::{Gather, Loc, Nic, PostError, Posted, RxBuf, SlotId, UserBuf};
use crate::packed::{record_len, write_head, Record, Unpacker};
use crate::peer::{seq_le, Peer, BACKLOGGED};
use crate::rendezvous::Protocol;
use crate::request::{
    PostedRecv, QueuedSend, RecvFault, Request, RequestError, State, Status, Table,
};
use crate::reuse::{Invalidation, NoReuse, Pending, SendReuse};
use crate::stats::Stats;
use crate::storage::{Sizes, Storage, Tables};
use crate::wire::{decode_packet, Header, Kind, HEADER_LEN};
pub use holds::HoldEntry;
use holds::Holds;
use rendezvous::Transfer;
pub use slots::SlotEntry;
use slots::{SlotPool, BACKLOG, UNACKED};

/// Why a send was refused. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The destination is not a rank of this job.
    BadRank,
    /// Every request handle is in use: complete some with `test`.
    RequestTableFull,
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
}

/// What the endpoint keeps for a message nobody has asked for yet.
#[derive(Clone, Copy, Debug)]
pub enum Held {
    /// An eager message kept at byte `at` of the receive buffer behind `hold`.
    Eager { hold: u16, at: u32, len: u32 },
    /// A large message's request to send (its data stays at the sender).
    Rts(crate::rendezvous::Rts),
}

/// What an in-sequence message brings.
#[derive(Clone, Copy)]
enum Incoming {
    Eager { buf: RxBuf, at: u32, len: u32 },
    Rts(crate::rendezvous::Rts),
}

/// How far `try_send` got.
enum Sent {
    /// Not sent: no credit or no slot (or the NIC was busy).
    No,
    /// The data left the user buffer.
    Done,
    /// Posted zero-copy; the NIC reads the user buffer until this slot completes.
    Reading(u16),
    /// A rendezvous's RTS left; its request stays pending.
    Rts,
}

/// The peer table, indexed by rank.
struct Peers<P>(P);

impl<P: AsRef<[Peer]> + AsMut<[Peer]>> Peers<P> {
    fn all(&self) -> &[Peer] {
        self.0.as_ref()
    }

    fn all_mut(&mut self) -> &mut [Peer] {
        self.0.as_mut()
    }
}

impl<P: AsRef<[Peer]>> core::ops::Index<usize> for Peers<P> {
    type Output = Peer;
    fn index(&self, i: usize) -> &Peer {
        &self.0.as_ref()[i]
    }
}

impl<P: AsRef<[Peer]> + AsMut<[Peer]>> core::ops::IndexMut<usize> for Peers<P> {
    fn index_mut(&mut self, i: usize) -> &mut Peer {
        &mut self.0.as_mut()[i]
    }
}

/// One rank's messaging state, in tables the embedder supplies (see
/// [`crate::storage`]): `S` names their containers, and their lengths are
/// the capacities (ranks, posted receives, unexpected messages, held
/// receive buffers, send bounce slots, requests), chosen at run time so one
/// build serves any job size. `Z` decides which eager sends go zero-copy
/// from registered user memory ([`NoReuse`]: none).
pub struct Endpoint<S: Storage, Z = NoReuse> {
    cfg: Config,
    me: u16,
    npeers: u16,
    peers: Peers<S::Table<Peer>>,
    matcher: Matcher<PostedRecv, Held, S::Table<PostedEntry>, S::Table<UnexpectedEntry>>,
    slots: SlotPool<S::Table<SlotEntry>>,
    /// Receive buffers kept for the unexpected eager messages in them.
    holds: Holds<S::Table<HoldEntry>>,
    /// The hold made for the packet being handled, if one was.
    rx_hold: Option<u16>,
    /// The credit budget and the peers waiting for credit.
    lender: credit::Lender,
    /// Requests, with the work each carries (a queued send, a transfer).
    reqs: Table<Work, S::Table<RequestEntry>>,
    /// Sends waiting for a credit or a bounce slot, oldest first (requests).
    queued: Fifo,
    /// Peers whose backlog is not empty (each listed once).
    backlogged: Fifo,
    /// A bounce slot came free while sends were queued or transfers were
    /// active: flush and resume them at the next poll.
    flush_due: bool,
    /// A post met a busy NIC: retry the backlogs at the next poll.
    retry_due: bool,
    deadline: Option<u64>,
    stats: Stats,
    reuse: Z,
    /// Transfers active.
    active: u16,
    /// A transfer met a busy NIC: retry at the next poll (one waiting for a
    /// bounce slot resumes when one frees).
    rndv_due: bool,
}

/// What the endpoint keeps per request.
#[derive(Clone, Copy, Debug)]
pub struct Work {
    /// A send waiting in `queued`.
    send: QueuedSend,
    /// A rendezvous transfer.
    xfer: Transfer,
}

/// An entry of the posted-receive table.
pub type PostedEntry = crate::matching::Slot<Pattern, PostedRecv>;
/// An entry of the unexpected-message table.
pub type UnexpectedEntry = crate::matching::Slot<Envelope, Held>;
/// An entry of the request table.
pub type RequestEntry = crate::request::Slot<Work>;

impl RequestEntry {
    /// An unused request.
    pub const UNUSED: RequestEntry = RequestEntry::unused(Work {
        send: QueuedSend::NONE,
        xfer: Transfer::IDLE,
    });
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
        cfg: Config,
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
        } = tables;
        let max = peers.as_ref().len();
        if npeers as usize > max || npeers == 0 {
            return Err(ConfigError::TooManyPeers { max });
        }
        if me >= npeers {
            return Err(ConfigError::RankOutOfRange);
        }
        if cfg.credits == 0 {
            return Err(ConfigError::Credits);
        }
        if cfg.rx_buffers <= cfg.rx_reserve
            || cfg.rx_low_water < cfg.rx_reserve
            || cfg.rx_low_water >= cfg.rx_buffers
        {
            return Err(ConfigError::RxPool);
        }
        let max = (u16::MAX as usize - HEADER_LEN) as u32;
        let min = crate::rendezvous::MAX_BODY as u32;
        if cfg.eager_threshold > max || cfg.eager_threshold < min {
            return Err(ConfigError::EagerThreshold { min, max });
        }
        if !cfg.reliable && matches!(cfg.rendezvous, Some(Protocol::Rput | Protocol::Rget)) {
            return Err(ConfigError::RendezvousNeedsReliable);
        }
        sizes.check()?;
        let threshold_ok = match cfg.coalesce {
            Coalesce::Outstanding(n) => n >= 1 && n <= cfg.send_wqes,
            _ => true,
        };
        if cfg.send_wqes == 0 || !threshold_ok {
            return Err(ConfigError::SendWqes);
        }
        let window = cfg.pull_frames as u32 * cfg.pull_requests as u32;
        if cfg.pull_frames == 0 || cfg.pull_requests == 0 || window > 64 {
            return Err(ConfigError::PullWindow);
        }
        let room = sizes.unexpected.min(sizes.holds);
        let (lender, share) = credit::Lender::new(&cfg, npeers, room);
        for p in peers.as_mut()[..npeers as usize].iter_mut() {
            *p = Peer::new(cfg.rto_ns, share);
        }
        Ok(Endpoint {
            cfg,
            me,
            npeers,
            peers: Peers(peers),
            matcher: Matcher::new(posted, unexpected),
            slots: SlotPool::new(slots),
            holds: Holds::new(holds),
            rx_hold: None,
            lender,
            reqs: Table::new(requests),
            queued: Fifo::EMPTY,
            backlogged: Fifo::EMPTY,
            flush_due: false,
            retry_due: false,
            deadline: None,
            stats: Stats::default(),
            reuse,
            active: 0,
            rndv_due: false,
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

    /// Sends whose data still waits for a credit or a bounce slot.
    pub fn queued_sends(&self) -> usize {
        self.queued.len()
    }

    /// Posted receives and unexpected messages currently held.
    pub fn queue_lens(&self) -> (usize, usize) {
        self.matcher.lens()
    }

    /// Non-blocking send of `len` bytes of `buf`. Returns [`Request::COMPLETE`]
    /// when the data left the user buffer during the call (the common case);
    /// otherwise a request to `test` — the buffer must stay valid until then.
    /// Above the eager threshold the message goes by rendezvous, and the
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
        if dest >= self.npeers {
            return Err(SendError::BadRank);
        }
        if len > self.cfg.eager_threshold {
            return self.start_send(now, nic, dest, tag, context, buf, len);
        }
        let q = QueuedSend {
            req: Request::COMPLETE,
            dest,
            tag,
            context,
            buf,
            len,
            rndv: false,
        };
        if self.peers[dest as usize].queued == 0 {
            match self.try_send(now, nic, &q, self.reqs.has_free()) {
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
                Sent::No | Sent::Rts => {}
            }
        }
        let req = self
            .reqs
            .alloc(State::SendQueued)
            .ok_or(SendError::RequestTableFull)?;
        self.queue_send(QueuedSend { req, ..q });
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
            }
            self.consumed(now, nic, env.src);
            return Ok(req);
        }
        let posted = PostedRecv { req, buf, capacity };
        if self.matcher.post(pattern, posted).is_err() {
            self.reqs.release(req);
            return Err(RecvError::PostedQueueFull);
        }
        Ok(req)
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
        self.matcher.remove_posted(|p| p.req == req);
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

    /// A packet arrived in `buf`. The endpoint reposts `buf` before
    /// returning, unless it keeps unexpected messages in it: then it
    /// reposts it when the last of them is received.
    pub fn on_receive<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf) {
        self.stats.packets_in += 1;
        let parsed = decode_packet(nic.rx(buf)).map(|(h, p)| (h, p.len()));
        match parsed {
            Ok((h, len)) => self.handle(now, nic, buf, h, len as u32),
            Err(_) => {
                debug!("rmx: rank {} dropped an undecodable packet", self.me);
                self.stats.malformed += 1;
            }
        }
        if self.rx_hold.take().is_some() {
            self.check_pool(nic);
        } else {
            nic.repost(buf);
        }
    }

    fn handle<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header, len: u32) {
        if h.src >= self.npeers || (h.kind.has_payload() && len > self.cfg.eager_threshold) {
            debug!(
                "rmx: rank {} dropped a packet from bad rank {} or of {} bytes",
                self.me, h.src, len
            );
            self.stats.malformed += 1;
            return;
        }
        let src = h.src as usize;
        if !self.cfg.reliable && !self.take_ack(now, src, h.ack) {
            self.stats.malformed += 1;
            return;
        }
        let before = self.peers[src].peer_limit;
        if !self.peers[src].take_credit(h.credit, u16::MAX) {
            self.stats.malformed += 1;
            return;
        }
        match h.kind {
            Kind::Ack => {}
            Kind::Credit => self.on_credit_request(now, nic, h.src, h.tag),
            Kind::Nack => {
                if !self.cfg.reliable {
                    let p = &self.peers[src];
                    if seq_le(p.tx_acked, h.seq) && !seq_le(p.tx_seq, h.seq) {
                        self.stats.nacks_in += 1;
                        self.retransmit(now, nic, src);
                    }
                }
            }
            Kind::Eager | Kind::Rts => {
                let env = Envelope {
                    src: h.src,
                    tag: h.tag,
                    context: h.context,
                };
                let what = if h.kind == Kind::Rts {
                    match crate::rendezvous::Rts::decode(&nic.rx(buf)[HEADER_LEN..]) {
                        Ok(rts) => Incoming::Rts(rts),
                        Err(_) => {
                            self.stats.malformed += 1;
                            return;
                        }
                    }
                } else {
                    Incoming::Eager {
                        buf,
                        at: HEADER_LEN as u32,
                        len,
                    }
                };
                if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
                    return;
                }
                self.arrive(now, nic, env, what);
            }
            Kind::Cts | Kind::Fin | Kind::Pull | Kind::Data | Kind::Probe => {
                self.on_rndv_packet(now, nic, buf, h);
            }
            Kind::Packed => {
                if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
                    return;
                }
                self.unpack(now, nic, buf, h);
            }
        }
        let credit_back = self.peers[src].peer_limit != before && self.peers[src].queued > 0;
        if credit_back || (self.flush_due && !self.queued.is_empty()) {
            self.flush_due = false;
            self.flush_queued(now, nic);
        }
    }

    /// Go-back-N receive rule: `true` if `seq` is the next packet from `src`.
    /// A duplicate is acknowledged again; a gap is re-requested once by NACK.
    fn in_sequence<N: Nic>(&mut self, now: u64, nic: &mut N, src: usize, seq: u32) -> bool {
        let p = &mut self.peers[src];
        if seq == p.rx_next {
            return true;
        }
        if seq_le(seq, p.rx_next) {
            self.stats.duplicates += 1;
            // Our ack may have been lost: acknowledge again soon.
            self.arm_ack(now, src);
        } else {
            self.stats.out_of_order += 1;
            if p.nacked != Some(p.rx_next) {
                let missing = p.rx_next;
                debug!(
                    "rmx: rank {} re-requests {} from rank {}",
                    self.me, missing, src
                );
                if self.send_control(now, nic, src as u16, Kind::Nack, missing) {
                    self.peers[src].nacked = Some(missing);
                    self.stats.nacks_out += 1;
                }
            }
        }
        false
    }

    /// The messages of an in-sequence packed packet, in order, each matched
    /// as if it had arrived alone. A malformed record is counted and ends the
    /// packet; the records before it are delivered. On a lossy transport a
    /// packet is taken whole or not at all (the sender resends what is not
    /// acknowledged), so it is checked before anything is delivered.
    fn unpack<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header) {
        if !self.cfg.reliable {
            let mut dry = Unpacker::new(h.tag);
            let body = &nic.rx(buf)[HEADER_LEN..];
            while let Some(r) = dry.next(body) {
                let bad = match r {
                    Ok((rec, _)) => rec.len > self.cfg.eager_threshold,
                    Err(_) => true,
                };
                if bad {
                    self.stats.malformed += 1;
                    self.stats.malformed_packed += 1;
                    return;
                }
            }
            if !self.holds.has_room() || self.matcher.unexpected_room() < h.tag as usize {
                // Not every message could be kept: take none, like a lone
                // eager packet without room (a conforming peer never gets here).
                self.stats.no_room += 1;
                return;
            }
        }
        let mut u = Unpacker::new(h.tag);
        loop {
            let next = u.next(&nic.rx(buf)[HEADER_LEN..]);
            let (rec, at) = match next {
                None => return,
                Some(Ok((rec, at))) if rec.len <= self.cfg.eager_threshold => (rec, at),
                Some(_) => {
                    debug!("rmx: rank {} dropped a malformed packed record", self.me);
                    self.stats.malformed += 1;
                    self.stats.malformed_packed += 1;
                    return;
                }
            };
            let env = Envelope {
                src: h.src,
                tag: rec.tag,
                context: rec.context,
            };
            let at = (HEADER_LEN + at) as u32;
            let what = Incoming::Eager {
                buf,
                at,
                len: rec.len,
            };
            if !self.arrive(now, nic, env, what) {
                return;
            }
        }
    }

    /// An in-sequence message: delivered to (or, for an RTS, started with)
    /// the oldest matching posted receive, or kept as unexpected. `false`: no room.
    fn arrive<N: Nic>(&mut self, now: u64, nic: &mut N, env: Envelope, what: Incoming) -> bool {
        let posted = self.matcher.arrive(&env);
        let held = match (posted, what) {
            (Some(_), _) => None,
            (None, Incoming::Rts(rts)) => Some(Held::Rts(rts)),
            (None, Incoming::Eager { buf, at, len }) => self
                .holds
                .hold(buf, &mut self.rx_hold)
                .map(|hold| Held::Eager { hold, at, len }),
        };
        if posted.is_none() && (held.is_none() || self.matcher.unexpected_full()) {
            if let Some(Held::Eager { hold, .. }) = held {
                // Drops the count just taken; the packet's buffer is still
                // reposted by `on_receive` if nothing else holds it.
                if self.holds.release(hold).is_some() {
                    self.rx_hold = None;
                }
            }
            // Nothing accepted is lost: on a lossy transport leave it
            // unacknowledged for the sender to retransmit; on a reliable
            // one only a peer ignoring its credits gets here.
            self.stats.no_room += 1;
            return false;
        }
        self.stats.messages_in += 1;
        if !self.cfg.reliable {
            let p = &mut self.peers[env.src as usize];
            p.rx_next = p.rx_next.wrapping_add(1);
            p.nacked = None;
            self.arm_ack(now, env.src as usize);
        }
        match (posted, what) {
            (Some(pr), Incoming::Eager { buf, at, len }) => {
                let from = Loc::Rx(buf, at);
                let st = self.deliver_to(nic, env, len, from, pr.buf, pr.capacity);
                self.reqs.set(pr.req, State::Done(st));
                self.consumed(now, nic, env.src);
            }
            (Some(pr), Incoming::Rts(rts)) => {
                self.start_recv(now, nic, pr.req, pr.buf, pr.capacity, env, rts);
                self.consumed(now, nic, env.src);
            }
            (None, _) => {
                if let Some(h) = held {
                    // Cannot fail: checked for room above.
                    let _ = self.matcher.push_unexpected(env, h);
                }
                self.stats.unexpected += 1;
            }
        }
        true
    }

    fn deliver_to<N: Nic>(
        &mut self,
        nic: &mut N,
        env: Envelope,
        len: u32,
        from: Loc,
        buf: UserBuf,
        capacity: u32,
    ) -> Status {
        let n = len.min(capacity);
        if n > 0 {
            nic.copy(Loc::User(buf, 0), from, n as usize);
        }
        let fault = (len > capacity).then(|| {
            self.stats.truncated += 1;
            RecvFault::Truncated { len, capacity }
        });
        Status {
            source: env.src,
            tag: env.tag,
            len: n,
            fault,
        }
    }

    pub(super) fn arm_ack(&mut self, now: u64, src: usize) {
        let p = &mut self.peers[src];
        if p.ack_at.is_none() {
            let t = now.saturating_add(self.cfg.ack_delay_ns);
            p.ack_at = Some(t);
            self.arm(t);
        }
    }

    pub(super) fn arm(&mut self, t: u64) {
        self.deadline = Some(self.deadline.map_or(t, |d| d.min(t)));
    }

    /// Applies a cumulative ack; `false` if it acknowledges what was never sent.
    fn take_ack(&mut self, now: u64, src: usize, ack: u32) -> bool {
        let p = &mut self.peers[src];
        if !seq_le(ack, p.tx_seq) {
            return false;
        }
        if !seq_le(ack, p.tx_acked) {
            p.tx_acked = ack;
            while let Some(s) = self.peers[src].unacked.head() {
                let m = &self.slots[s as usize];
                let last = m.seq.wrapping_add(m.msgs.max(1) as u32 - 1);
                if seq_le(ack, last) {
                    break;
                }
                self.peers[src].unacked.pop_front(self.slots.all(), UNACKED);
                self.slots[s as usize].awaiting_ack = false;
                self.free_slot(s);
            }
            let p = &mut self.peers[src];
            p.rto = self.cfg.rto_ns;
            p.rto_at = if p.unacked.is_empty() {
                None
            } else {
                Some(now.saturating_add(p.rto))
            };
            if let Some(t) = p.rto_at {
                self.arm(t);
            }
        }
        true
    }

    /// Sends `q` now if a credit and a bounce slot are free. One slot is always
    /// kept for control packets, so acknowledgements can never deadlock.
    /// When the connection has no free send entry (or already has a backlog,
    /// which keeps the order) the message is copied into the backlog, packed
    /// with others when coalescing allows. `may_pend`: a zero-copy send whose
    /// completion comes later can be given a request.
    fn try_send<N: Nic>(&mut self, now: u64, nic: &mut N, q: &QueuedSend, may_pend: bool) -> Sent {
        if q.rndv {
            return self.send_rts(now, nic, q);
        }
        let d = q.dest as usize;
        if self.peers[d].credits_left() == 0 {
            return Sent::No;
        }
        let packable = self.packable(q.len);
        let limit = match self.cfg.coalesce {
            Coalesce::Outstanding(n) if packable => n,
            _ => self.cfg.send_wqes,
        };
        let p = &self.peers[d];
        let wait = !p.backlog.is_empty() || p.wqes >= limit;
        if wait && packable {
            return self.pack(now, nic, q);
        }
        let h = Header {
            context: q.context,
            tag: q.tag,
            len: q.len,
            ..self.header(q.dest, Kind::Eager)
        };
        if !wait && q.len <= self.cfg.inline_max && self.cfg.reliable {
            let mut hdr = [0u8; HEADER_LEN];
            let _ = h.encode(&mut hdr);
            match nic.send_inline(q.dest, &hdr, Loc::User(q.buf, 0), q.len as usize) {
                Ok(r) => {
                    self.peers[d].wqes += (r == Posted::Later) as u16;
                    self.stats.packets_out += 1;
                    self.sent(d, &h);
                    return Sent::Done;
                }
                Err(PostError::Busy) => {
                    // Receiver or send queue not ready: wait in the backlog.
                    self.stats.post_busy += 1;
                    self.retry_due = true;
                    if packable {
                        return self.pack(now, nic, q);
                    }
                }
                Err(PostError::Down | PostError::Access) => {
                    self.stats.post_down += 1;
                    self.sent(d, &h);
                    return Sent::Done;
                }
                Err(PostError::Unsupported) => {}
            }
        }
        if self.slots.free() < 2 {
            return Sent::No;
        }
        let Some(slot) = self.slots.take() else {
            return Sent::No;
        };
        let _ = h.encode(nic.slot_mut(SlotId(slot)));
        let meta = SlotEntry {
            peer: q.dest,
            len: HEADER_LEN as u32 + q.len,
            seq: h.seq,
            msgs: 1,
            awaiting_ack: !self.cfg.reliable,
            ..SlotEntry::default()
        };
        if !wait && self.cfg.reliable && may_pend && q.len > 0 {
            if let Some(sent) = self.try_zero_copy(nic, q, slot, &h, meta) {
                return sent;
            }
        }
        if q.len > 0 {
            nic.copy(
                Loc::Slot(SlotId(slot), HEADER_LEN as u32),
                Loc::User(q.buf, 0),
                q.len as usize,
            );
        }
        self.sent(d, &h);
        self.slots[slot as usize] = meta;
        self.track_unacked(now, d, slot);
        self.post_or_queue(nic, slot);
        Sent::Done
    }

    /// A header to `dest` with the current sequence, ack and credit.
    fn header(&self, dest: u16, kind: Kind) -> Header {
        let p = &self.peers[dest as usize];
        Header {
            kind,
            src: self.me,
            context: 0,
            tag: 0,
            len: 0,
            seq: p.tx_seq,
            ack: p.rx_next,
            credit: p.limit,
        }
    }

    /// Small enough to share a packed send: at most half a buffer (the paper's rule).
    fn packable(&self, len: u32) -> bool {
        self.cfg.coalesce != Coalesce::Off && len <= self.cfg.eager_threshold / 2
    }

    /// Lossy transports keep every data slot until it is acknowledged.
    fn track_unacked(&mut self, now: u64, d: usize, slot: u16) {
        if self.cfg.reliable {
            return;
        }
        self.peers[d]
            .unacked
            .push_back(self.slots.all_mut(), UNACKED, slot);
        if self.peers[d].rto_at.is_none() {
            let t = now.saturating_add(self.peers[d].rto);
            self.peers[d].rto_at = Some(t);
            self.arm(t);
        }
    }

    /// Copies `q` into the connection's backlog: appended to the newest queued
    /// packed send if it has room, else as the first record of a new one.
    fn pack<N: Nic>(&mut self, now: u64, nic: &mut N, q: &QueuedSend) -> Sent {
        let d = q.dest as usize;
        let rec = Record {
            context: q.context,
            tag: q.tag,
            len: q.len,
        };
        let cap = HEADER_LEN as u32 + self.cfg.eager_threshold;
        if let Some(tail) = self.peers[d].backlog.tail() {
            let m = self.slots[tail as usize];
            let n = record_len(m.last, rec, self.cfg.header_cache) as u32;
            if m.last.is_some() && !m.sealed && m.len + n <= cap {
                self.append(nic, tail, q, rec, n);
                self.stats.coalesced += 1;
                self.stats.backlogged += 1;
                return Sent::Done;
            }
        }
        if self.slots.free() < 2 {
            return Sent::No;
        }
        let Some(slot) = self.slots.take() else {
            return Sent::No;
        };
        let h = self.header(q.dest, Kind::Packed);
        let _ = h.encode(nic.slot_mut(SlotId(slot)));
        self.slots[slot as usize] = SlotEntry {
            peer: q.dest,
            len: HEADER_LEN as u32,
            seq: h.seq,
            awaiting_ack: !self.cfg.reliable,
            ..SlotEntry::default()
        };
        let n = record_len(None, rec, self.cfg.header_cache) as u32;
        self.append(nic, slot, q, rec, n);
        self.track_unacked(now, d, slot);
        self.enqueue(slot);
        Sent::Done
    }

    /// Adds `q` as a record of `n` bytes to the packed, unposted `slot`, and
    /// refreshes the packet's count, length, ack and credit.
    fn append<N: Nic>(&mut self, nic: &mut N, slot: u16, q: &QueuedSend, rec: Record, n: u32) {
        let m = self.slots[slot as usize];
        let at = m.len as usize;
        let cache = self.cfg.header_cache;
        let head = write_head(&mut nic.slot_mut(SlotId(slot))[at..], m.last, rec, cache);
        if q.len > 0 {
            nic.copy(
                Loc::Slot(SlotId(slot), (at + head) as u32),
                Loc::User(q.buf, 0),
                q.len as usize,
            );
        }
        let msgs = m.msgs + 1;
        let len = m.len + n;
        let p = &mut self.peers[q.dest as usize];
        let (ack, credit) = (p.rx_next, p.limit);
        let out = nic.slot_mut(SlotId(slot));
        Header::set_packed(out, msgs as u32, len - HEADER_LEN as u32);
        Header::refresh(out, ack, credit);
        p.tx_seq = p.tx_seq.wrapping_add(1);
        p.carried(credit);
        self.stats.messages_out += 1;
        self.stats.cached_headers += (head == crate::packed::CACHED_LEN) as u64;
        let m = &mut self.slots[slot as usize];
        m.msgs = msgs;
        m.len = len;
        m.last = Some(rec);
    }

    /// Puts `slot` at the tail of its peer's backlog.
    fn enqueue(&mut self, slot: u16) {
        let m = &mut self.slots[slot as usize];
        // A retransmission (sealed) is not a message waiting for an entry,
        // nor is a PULL frame (no message of its own).
        self.stats.backlogged += (!m.sealed && m.msgs > 0) as u64;
        m.unposted = true;
        let d = m.peer as usize;
        let p = &mut self.peers[d];
        p.backlog.push_back(self.slots.all_mut(), BACKLOG, slot);
        if !p.listed {
            p.listed = true;
            self.backlogged
                .push_back(self.peers.all_mut(), BACKLOGGED, d as u16);
        }
    }

    /// Posts the oldest backlog slots of `peer` while it has free send entries.
    fn drain<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        let d = peer as usize;
        while self.peers[d].wqes < self.cfg.send_wqes {
            let Some(slot) = self.peers[d].backlog.head() else {
                return;
            };
            let p = &self.peers[d];
            Header::refresh(nic.slot_mut(SlotId(slot)), p.rx_next, p.limit);
            let credit = p.limit;
            if !self.post_now(nic, slot) {
                return;
            }
            self.peers[d].carried(credit);
            self.peers[d].backlog.pop_front(self.slots.all(), BACKLOG);
            let m = &mut self.slots[slot as usize];
            m.unposted = false;
            self.free_slot(slot);
        }
    }

    /// Posts the header in `slot` with the payload gathered straight from the
    /// user buffer, if the reuse policy says the buffer is worth it. `None`:
    /// not taken (the slot still holds the header; the caller copies).
    fn try_zero_copy<N: Nic>(
        &mut self,
        nic: &mut N,
        q: &QueuedSend,
        slot: u16,
        h: &Header,
        meta: SlotEntry,
    ) -> Option<Sent> {
        let addr = nic.user_addr(q.buf)?;
        let pin = self.reuse.plan(nic, addr, q.len)?;
        let payload = Gather {
            addr,
            len: q.len,
            key: pin.key,
        };
        let r = nic.post_send_gather(q.dest, SlotId(slot), HEADER_LEN, payload);
        if !matches!(r, Ok(Posted::Later)) {
            self.reuse.release(nic, pin.id);
        }
        let sent = match r {
            Ok(Posted::Done) => Sent::Done,
            Ok(Posted::Later) => {
                self.slots[slot as usize] = SlotEntry {
                    in_nic: true,
                    sealed: true,
                    pin: Some(pin.id),
                    ..meta
                };
                self.peers[q.dest as usize].wqes += 1;
                Sent::Reading(slot)
            }
            Err(PostError::Down) => {
                self.stats.post_down += 1;
                Sent::Done
            }
            // Busy or unable to gather: the copy path queues or posts it.
            Err(PostError::Busy | PostError::Unsupported | PostError::Access) => return None,
        };
        self.stats.packets_out += 1;
        self.stats.zero_copy_sends += 1;
        self.sent(q.dest as usize, h);
        if !matches!(sent, Sent::Reading(_)) {
            self.slots.put(slot);
        }
        Some(sent)
    }

    /// Bookkeeping of an eager message that left: sequence, piggybacked ack and credit.
    fn sent(&mut self, d: usize, h: &Header) {
        let p = &mut self.peers[d];
        p.tx_seq = p.tx_seq.wrapping_add(1);
        p.carried(h.credit);
        self.stats.messages_out += 1;
    }

    /// Posts an encoded slot, or queues it behind its peer's backlog when the
    /// connection has no free send entry or the NIC is busy.
    fn post_or_queue<N: Nic>(&mut self, nic: &mut N, slot: u16) {
        let p = &self.peers[self.slots[slot as usize].peer as usize];
        if !p.backlog.is_empty() || p.wqes >= self.cfg.send_wqes || !self.post_now(nic, slot) {
            self.enqueue(slot);
            return;
        }
        self.slots.put(slot);
    }

    /// Posts `slot` now; `false` if the NIC was busy (nothing happened).
    /// The caller frees the slot if nothing else holds it.
    fn post_now<N: Nic>(&mut self, nic: &mut N, slot: u16) -> bool {
        let m = self.slots[slot as usize];
        let r = if m.wake {
            nic.post_send_solicited(m.peer, SlotId(slot), m.len as usize)
        } else {
            nic.post_send(m.peer, SlotId(slot), m.len as usize)
        };
        match r {
            Ok(r) => {
                if r == Posted::Later {
                    self.slots[slot as usize].in_nic = true;
                    self.peers[m.peer as usize].wqes += 1;
                }
                self.stats.packets_out += 1;
            }
            Err(PostError::Busy) => {
                self.stats.post_busy += 1;
                self.retry_due = true;
                return false;
            }
            Err(PostError::Down | PostError::Unsupported | PostError::Access) => {
                self.stats.post_down += 1
            }
        }
        self.slots[slot as usize].sealed = true;
        true
    }

    /// Sends an ACK (with credit) or a NACK; `false` if no slot or the NIC is busy
    /// (the caller's timer or the next event tries again, no sooner than
    /// `retry_at`: slots free when sends complete, which takes time).
    fn send_control<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        dest: u16,
        kind: Kind,
        seq: u32,
    ) -> bool {
        let h = Header {
            seq,
            ..self.header(dest, kind)
        };
        if !self.post_control(nic, dest, h, &[], false) {
            self.arm(self.retry_at(now));
            return false;
        }
        self.stats.acks_out += (kind == Kind::Ack) as u64;
        true
    }

    /// Posts control packet `h` with `body` to `dest` from a bounce slot
    /// (`wake`: as a solicited event, for the peer's progress thread);
    /// `false` if no slot or the NIC is busy (nothing was sent).
    fn post_control<N: Nic>(
        &mut self,
        nic: &mut N,
        dest: u16,
        h: Header,
        body: &[u8],
        wake: bool,
    ) -> bool {
        let Some(slot) = self.slots.take() else {
            return false;
        };
        let out = nic.slot_mut(SlotId(slot));
        let _ = h.encode(out);
        out[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
        let len = HEADER_LEN + body.len();
        let r = if wake {
            nic.post_send_solicited(dest, SlotId(slot), len)
        } else {
            nic.post_send(dest, SlotId(slot), len)
        };
        match r {
            Ok(r) => {
                self.stats.packets_out += 1;
                self.peers[dest as usize].carried(h.credit);
                if r == Posted::Later {
                    self.peers[dest as usize].wqes += 1;
                    self.slots[slot as usize] = SlotEntry {
                        peer: dest,
                        len: len as u32,
                        in_nic: true,
                        sealed: true,
                        ..SlotEntry::default()
                    };
                } else {
                    self.slots.put(slot);
                }
                true
            }
            Err(_) => {
                self.slots.put(slot);
                self.stats.post_busy += 1;
                false
            }
        }
    }

    /// Re-sends every unacknowledged packet to `peer` (go-back-N).
    fn retransmit<N: Nic>(&mut self, now: u64, nic: &mut N, peer: usize) {
        let p = &self.peers[peer];
        let (ack, credit) = (p.rx_next, p.limit);
        let mut next = p.unacked.head().unwrap_or(NIL);
        while next != NIL {
            let s = next;
            let m = self.slots[s as usize];
            next = m.next(UNACKED);
            if m.in_nic || m.unposted {
                continue;
            }
            Header::refresh(nic.slot_mut(SlotId(s)), ack, credit);
            self.stats.retransmits += 1;
            self.post_or_queue(nic, s);
        }
        let p = &mut self.peers[peer];
        p.carried(credit);
        if !p.unacked.is_empty() {
            let t = now.saturating_add(p.rto);
            p.rto_at = Some(t);
            self.arm(t);
        }
    }

    /// The NIC finished a send posted with [`Posted::Later`]: its send entry
    /// is free, and the slot (and, for a zero-copy send, the user buffer
    /// behind it) is no longer read. Posts what waits in the peer's backlog.
    pub fn on_send_complete<N: Nic>(&mut self, nic: &mut N, slot: SlotId) {
        let Some(m) = self.slots.get_mut(slot.0 as usize) else {
            return;
        };
        if !m.in_nic {
            return;
        }
        m.in_nic = false;
        let (pin, req, peer) = (m.pin.take(), m.req.take(), m.peer);
        if let Some(id) = pin {
            self.reuse.release(nic, id);
        }
        if let Some(r) = req {
            self.reqs.set(r, State::SendDone);
        }
        self.free_slot(slot.0);
        self.entry_free(nic, peer);
    }

    /// An inline send to `peer` that returned [`Posted::Later`] completed.
    pub fn on_inline_complete<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        if peer < self.npeers && self.peers[peer as usize].wqes > 0 {
            self.entry_free(nic, peer);
        }
    }

    /// Gives slot `s` back to the pool if nothing holds it any more; sends
    /// queued for a slot and transfers waiting for one go on at the next poll.
    fn free_slot(&mut self, s: u16) {
        if self.slots.put(s) {
            self.flush_due |= !self.queued.is_empty() || self.active > 0;
        }
    }

    fn entry_free<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        let p = &mut self.peers[peer as usize];
        p.wqes = p.wqes.saturating_sub(1);
        if !p.backlog.is_empty() {
            self.drain(nic, peer);
        }
    }

    /// Queues `q` (its request's work) behind every send already waiting.
    fn queue_send(&mut self, q: QueuedSend) {
        let i = q.req.index();
        self.reqs[i].send = q;
        self.queued.push_back(self.reqs.all_mut(), 0, i as u16);
        self.peers[q.dest as usize].queued += 1;
        self.stats.send_stalls += 1;
    }

    /// Sends queued sends in order, skipping peers still blocked so that each
    /// peer's messages leave in the order they were posted.
    fn flush_queued<N: Nic>(&mut self, now: u64, nic: &mut N) {
        let mut blocked: u64 = 0; // bitmap of blocked peers modulo 64: conservative
        for _ in 0..self.queued.len() {
            let Some(i) = self.queued.pop_front(self.reqs.all(), 0) else {
                break;
            };
            let q = self.reqs[i as usize].send;
            let bit = 1u64 << (q.dest % 64);
            let sent = if blocked & bit == 0 {
                self.try_send(now, nic, &q, true)
            } else {
                Sent::No
            };
            match sent {
                Sent::No => {
                    blocked |= bit;
                    self.queued.push_back(self.reqs.all_mut(), 0, i);
                    self.ask_credit(now, nic, q.dest);
                    continue;
                }
                Sent::Done => self.reqs.set(q.req, State::SendDone),
                Sent::Rts => {}
                Sent::Reading(slot) => {
                    self.reqs.set(q.req, State::SendInFlight);
                    self.slots[slot as usize].req = Some(q.req);
                }
            }
            self.peers[q.dest as usize].queued -= 1;
        }
    }

    /// Posts what the backlogs hold, as far as free send entries allow.
    fn drain_all<N: Nic>(&mut self, nic: &mut N) {
        for _ in 0..self.backlogged.len() {
            let Some(d) = self.backlogged.pop_front(self.peers.all(), BACKLOGGED) else {
                break;
            };
            self.drain(nic, d);
            if self.peers[d as usize].backlog.is_empty() {
                self.peers[d as usize].listed = false;
            } else {
                self.backlogged
                    .push_back(self.peers.all_mut(), BACKLOGGED, d);
            }
        }
    }

    /// Every send has left the endpoint's queues and backlogs for the NIC.
    /// Sends complete for the application before that (their data is
    /// copied), so a rank must keep driving the endpoint until this holds
    /// before it stops (MPI's finalize). A rendezvous needs nothing here:
    /// its request stays pending until its last packet has left.
    pub fn flushed(&self) -> bool {
        self.queued.is_empty()
            && self
                .backlogged
                .iter(self.peers.all(), BACKLOGGED)
                .all(|d| self.peers[d as usize].backlog.is_empty())
    }

    /// When to try again a control packet that found no free slot: a timer
    /// at `now` would be due again at once, and a driver that sleeps until
    /// `poll_timeout` would spin (a simulator's clock would stop).
    fn retry_at(&self, now: u64) -> u64 {
        now.saturating_add(self.cfg.ack_delay_ns.max(1))
    }

    /// When the endpoint next needs [`poll`](Self::poll): `None` if no timer is armed.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.flush_due || self.retry_due || self.rndv_due {
            return Some(0);
        }
        self.deadline
    }

    /// Runs timers: retransmission, delayed acks and credit returns, queued sends.
    pub fn poll<N: Nic>(&mut self, now: u64, nic: &mut N) {
        self.flush_due = false;
        self.retry_due = false;
        self.drain_all(nic);
        self.flush_queued(now, nic);
        self.deadline = None;
        for i in 0..self.npeers as usize {
            if let Some(t) = self.peers[i].rto_at {
                if t <= now {
                    debug!("rmx: rank {} timeout to rank {}: resending", self.me, i);
                    self.peers[i].rto =
                        self.peers[i].rto.saturating_mul(2).min(self.cfg.rto_max_ns);
                    self.stats.timeouts += 1;
                    self.retransmit(now, nic, i);
                }
            }
            self.poll_credit(now, nic, i as u16);
            if let Some(t) = self.peers[i].ack_at {
                if t <= now && !self.send_control(now, nic, i as u16, Kind::Ack, 0) {
                    self.peers[i].ack_at = Some(self.retry_at(now));
                }
            }
            let p = &self.peers[i];
            for t in [p.rto_at, p.ack_at].into_iter().flatten() {
                self.arm(t);
            }
        }
        self.poll_transfers(now, nic);
    }
}
