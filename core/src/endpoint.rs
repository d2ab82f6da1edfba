//! The endpoint: one per rank. Two-sided MPI messaging over the eager protocol,
//! with credit flow control and, for lossy transports, a reliability layer.
//!
//! Sans-I/O: every call takes `now` (nanoseconds, any monotonic origin) and the
//! shell's [`Nic`]; the endpoint reads no clock and touches no memory but through
//! the `Nic`. Call [`Endpoint::poll`] once `now` reaches [`Endpoint::poll_timeout`].

use heapless::{Deque, Vec};

use crate::config::{Config, ConfigError};
use crate::log::debug;
use crate::matching::{Envelope, Matcher, Pattern, Source, TagSel};
use crate::nic::{Gather, Loc, Nic, PostError, Posted, RxBuf, SlotId, UserBuf};
use crate::peer::{seq_le, Peer};
use crate::request::{
    PostedRecv, QueuedSend, RecvFault, Request, RequestError, State, Status, Table,
};
use crate::reuse::{Invalidation, NoReuse, Pending, RegId, SendReuse};
use crate::stats::Stats;
use crate::wire::{decode_packet, Header, Kind, HEADER_LEN};

/// Why a send was refused. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The destination is not a rank of this job.
    BadRank,
    /// Larger than the eager threshold (`max` bytes); rendezvous is not built yet.
    TooLarge { max: u32 },
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

/// An unexpected message kept in unexpected storage slot `slot`.
#[derive(Clone, Copy, Debug)]
struct Unexpected {
    slot: u16,
    len: u32,
}

/// Where an in-sequence message goes.
enum Arrival {
    /// Into the buffer of the oldest matching posted receive.
    Posted(PostedRecv),
    /// Into unexpected storage slot `0..UNEXP`, until a receive asks for it.
    Stored(u16),
}

/// What a send bounce slot is doing. Free when no flag is set.
#[derive(Clone, Copy, Debug, Default)]
struct SlotMeta {
    peer: u16,
    len: u32,
    seq: u32,
    in_nic: bool,
    awaiting_ack: bool,
    unposted: bool,
    /// A zero-copy send: the NIC reads the user buffer through this
    /// registration, and the send's request completes with the slot.
    pin: Option<RegId>,
    req: Option<Request>,
}

/// How far `try_send` got.
enum Sent {
    /// Not sent: no credit or no slot (or the NIC was busy).
    No,
    /// The data left the user buffer.
    Done,
    /// Posted zero-copy; the NIC reads the user buffer until this slot completes.
    Reading(u16),
}

impl SlotMeta {
    fn busy(&self) -> bool {
        self.in_nic || self.awaiting_ack || self.unposted
    }
}

/// One rank's messaging state, with capacities fixed by the embedder:
/// `PEERS` ranks, `POSTED` posted receives, `UNEXP` unexpected messages,
/// `SLOTS` send bounce slots, `REQS` request handles, `W` per-peer window
/// (the most credits a peer can be given); `Z` decides which eager sends go
/// zero-copy from registered user memory ([`NoReuse`]: none).
pub struct Endpoint<
    const PEERS: usize,
    const POSTED: usize,
    const UNEXP: usize,
    const SLOTS: usize,
    const REQS: usize,
    const W: usize,
    Z = NoReuse,
> {
    cfg: Config,
    me: u16,
    npeers: u16,
    peers: [Peer<W>; PEERS],
    matcher: Matcher<PostedRecv, Unexpected, POSTED, UNEXP>,
    slots: [SlotMeta; SLOTS],
    free_slots: Vec<u16, SLOTS>,
    unexp_free: Vec<u16, UNEXP>,
    reqs: Table<REQS>,
    queued: Deque<QueuedSend, REQS>,
    unposted: Deque<u16, SLOTS>,
    /// A bounce slot came free while sends were queued: flush at the next poll.
    flush_due: bool,
    deadline: Option<u64>,
    stats: Stats,
    reuse: Z,
}

impl<
        const PEERS: usize,
        const POSTED: usize,
        const UNEXP: usize,
        const SLOTS: usize,
        const REQS: usize,
        const W: usize,
        Z: SendReuse,
    > Endpoint<PEERS, POSTED, UNEXP, SLOTS, REQS, W, Z>
{
    /// Bytes one endpoint occupies, all capacities included.
    pub const ENDPOINT_BYTES: usize = core::mem::size_of::<Self>();
    /// Bytes each peer slot of the endpoint costs (its share of `ENDPOINT_BYTES`).
    pub const PEER_BYTES: usize = core::mem::size_of::<Peer<W>>();

    /// An endpoint for rank `me` of `npeers` ranks.
    pub fn new(cfg: Config, me: u16, npeers: u16) -> Result<Self, ConfigError>
    where
        Z: Default,
    {
        Self::with_reuse(cfg, me, npeers, Z::default())
    }

    /// An endpoint whose eager sends consult `reuse` for a zero-copy path.
    pub fn with_reuse(cfg: Config, me: u16, npeers: u16, reuse: Z) -> Result<Self, ConfigError> {
        if npeers as usize > PEERS || npeers == 0 {
            return Err(ConfigError::TooManyPeers { max: PEERS });
        }
        if me >= npeers {
            return Err(ConfigError::RankOutOfRange);
        }
        if cfg.credits == 0 || cfg.credits as usize > W {
            return Err(ConfigError::Credits { max: W });
        }
        let required = npeers as usize * cfg.credits as usize;
        if UNEXP < required {
            return Err(ConfigError::UnexpectedCapacity { required });
        }
        let max = (u16::MAX as usize - HEADER_LEN) as u32;
        if cfg.eager_threshold > max {
            return Err(ConfigError::EagerThreshold { max });
        }
        if SLOTS < 2 {
            return Err(ConfigError::Slots { required: 2 });
        }
        let mut free_slots = Vec::new();
        for i in (0..SLOTS as u16).rev() {
            let _ = free_slots.push(i);
        }
        let mut unexp_free = Vec::new();
        for i in (0..UNEXP as u16).rev() {
            let _ = unexp_free.push(i);
        }
        Ok(Endpoint {
            cfg,
            me,
            npeers,
            peers: core::array::from_fn(|_| Peer::new(cfg.rto_ns)),
            matcher: Matcher::default(),
            slots: [SlotMeta::default(); SLOTS],
            free_slots,
            unexp_free,
            reqs: Table::new(),
            queued: Deque::new(),
            unposted: Deque::new(),
            flush_due: false,
            deadline: None,
            stats: Stats::default(),
            reuse,
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
        self.peers[peer as usize].credits_left(self.cfg.credits)
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
            return Err(SendError::TooLarge {
                max: self.cfg.eager_threshold,
            });
        }
        let q = QueuedSend {
            req: Request::COMPLETE,
            dest,
            tag,
            context,
            buf,
            len,
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
                Sent::No => {}
            }
        }
        let req = self
            .reqs
            .alloc(State::SendQueued)
            .ok_or(SendError::RequestTableFull)?;
        // Cannot fail: every queued send holds one of REQS requests.
        let _ = self.queued.push_back(QueuedSend { req, ..q });
        self.peers[dest as usize].queued += 1;
        self.stats.send_stalls += 1;
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
        if let Some((env, u)) = self.matcher.take_unexpected(&pattern) {
            let st = self.deliver_to(nic, env, u.len, Loc::Unexpected(u.slot, 0), buf, capacity);
            let _ = self.unexp_free.push(u.slot);
            self.reqs.set(req, State::RecvDone(st));
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
            State::RecvDone(Status {
                source: 0,
                tag: 0,
                len: 0,
                fault: Some(RecvFault::Cancelled),
            }),
        );
        Ok(true)
    }

    /// A packet arrived in `buf`. The endpoint always reposts `buf` before returning.
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
        nic.repost(buf);
        if !self.unposted.is_empty() {
            self.retry_unposted(nic);
        }
    }

    fn handle<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header, len: u32) {
        if h.src >= self.npeers || (h.kind == Kind::Eager && len > self.cfg.eager_threshold) {
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
        let before = self.peers[src].peer_consumed;
        if !self.peers[src].take_credit(h.credit) {
            self.stats.malformed += 1;
            return;
        }
        match h.kind {
            Kind::Ack => {}
            Kind::Nack => {
                if !self.cfg.reliable {
                    let p = &self.peers[src];
                    if seq_le(p.tx_acked, h.seq) && !seq_le(p.tx_seq, h.seq) {
                        self.stats.nacks_in += 1;
                        self.retransmit(now, nic, src);
                    }
                }
            }
            Kind::Eager => {
                let env = Envelope {
                    src: h.src,
                    tag: h.tag,
                    context: h.context,
                };
                if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
                    return;
                }
                self.arrive(now, nic, env, buf, len);
            }
        }
        let credit_back = self.peers[src].peer_consumed != before && self.peers[src].queued > 0;
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

    /// An in-sequence eager message: deliver it to the oldest matching posted
    /// receive, or keep it as unexpected.
    fn arrive<N: Nic>(&mut self, now: u64, nic: &mut N, env: Envelope, buf: RxBuf, len: u32) {
        let dest = match self.matcher.arrive(&env) {
            Some(posted) => Arrival::Posted(posted),
            None => match self.unexp_free.pop() {
                Some(slot) => Arrival::Stored(slot),
                None => {
                    // Nothing accepted is lost: on a lossy transport leave it
                    // unacknowledged for the sender to retransmit; on a reliable
                    // one only a peer ignoring its credits gets here.
                    self.stats.no_room += 1;
                    return;
                }
            },
        };
        self.stats.messages_in += 1;
        if !self.cfg.reliable {
            let p = &mut self.peers[env.src as usize];
            p.rx_next = p.rx_next.wrapping_add(1);
            p.nacked = None;
            self.arm_ack(now, env.src as usize);
        }
        let from = Loc::Rx(buf, HEADER_LEN as u32);
        match dest {
            Arrival::Posted(pr) => {
                let st = self.deliver_to(nic, env, len, from, pr.buf, pr.capacity);
                self.reqs.set(pr.req, State::RecvDone(st));
                self.consumed(now, nic, env.src);
            }
            Arrival::Stored(slot) => {
                nic.copy(Loc::Unexpected(slot, 0), from, len as usize);
                // Cannot fail: storage slots and queue entries are both UNEXP.
                let _ = self.matcher.push_unexpected(env, Unexpected { slot, len });
                self.stats.unexpected += 1;
            }
        }
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

    /// A message from `src` was consumed: its credit is owed back.
    fn consumed<N: Nic>(&mut self, now: u64, nic: &mut N, src: u16) {
        let p = &mut self.peers[src as usize];
        p.consumed = p.consumed.wrapping_add(1);
        if p.credit_owed() >= self.cfg.credit_return as u32 {
            self.send_control(now, nic, src, Kind::Ack, 0);
        } else {
            self.arm_ack(now, src as usize);
        }
    }

    fn arm_ack(&mut self, now: u64, src: usize) {
        let p = &mut self.peers[src];
        if p.ack_at.is_none() {
            let t = now + self.cfg.ack_delay_ns;
            p.ack_at = Some(t);
            self.arm(t);
        }
    }

    fn arm(&mut self, t: u64) {
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
            while let Some(&s) = p.unacked.front() {
                if seq_le(ack, self.slots[s as usize].seq) {
                    break;
                }
                p.unacked.pop_front();
                self.slots[s as usize].awaiting_ack = false;
                if !self.slots[s as usize].busy() {
                    let _ = self.free_slots.push(s);
                    self.flush_due |= !self.queued.is_empty();
                }
            }
            let p = &mut self.peers[src];
            p.rto = self.cfg.rto_ns;
            p.rto_at = if p.unacked.is_empty() {
                None
            } else {
                Some(now + p.rto)
            };
            if let Some(t) = p.rto_at {
                self.arm(t);
            }
        }
        true
    }

    /// Sends `q` now if a credit and a bounce slot are free. One slot is always
    /// kept for control packets, so acknowledgements can never deadlock.
    /// `may_pend`: a zero-copy send whose completion comes later can be given
    /// a request.
    fn try_send<N: Nic>(&mut self, now: u64, nic: &mut N, q: &QueuedSend, may_pend: bool) -> Sent {
        let d = q.dest as usize;
        if self.peers[d].credits_left(self.cfg.credits) == 0 {
            return Sent::No;
        }
        let p = &self.peers[d];
        let h = Header {
            kind: Kind::Eager,
            src: self.me,
            context: q.context,
            tag: q.tag,
            len: q.len,
            seq: p.tx_seq,
            ack: p.rx_next,
            credit: p.consumed,
        };
        if q.len <= self.cfg.inline_max && self.cfg.reliable {
            let mut hdr = [0u8; HEADER_LEN];
            let _ = h.encode(&mut hdr);
            match nic.send_inline(q.dest, &hdr, Loc::User(q.buf, 0), q.len as usize) {
                Ok(()) => {
                    self.stats.packets_out += 1;
                    self.sent(d, &h);
                    return Sent::Done;
                }
                Err(PostError::Busy) => {
                    // Receiver not ready: retry from the queue at the next poll.
                    self.stats.post_busy += 1;
                    self.flush_due = true;
                    return Sent::No;
                }
                Err(PostError::Down) => {
                    self.stats.post_down += 1;
                    self.sent(d, &h);
                    return Sent::Done;
                }
                Err(PostError::Unsupported) => {}
            }
        }
        if self.free_slots.len() < 2 {
            return Sent::No;
        }
        let Some(slot) = self.free_slots.pop() else {
            return Sent::No;
        };
        let _ = h.encode(nic.slot_mut(SlotId(slot)));
        let meta = SlotMeta {
            peer: q.dest,
            len: HEADER_LEN as u32 + q.len,
            seq: h.seq,
            awaiting_ack: !self.cfg.reliable,
            ..SlotMeta::default()
        };
        if self.cfg.reliable && may_pend && q.len > 0 {
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
        if !self.cfg.reliable {
            // Cannot fail: unacked packets never exceed credits <= W.
            let _ = self.peers[d].unacked.push_back(slot);
            if self.peers[d].rto_at.is_none() {
                let t = now + self.peers[d].rto;
                self.peers[d].rto_at = Some(t);
                self.arm(t);
            }
        }
        self.post(nic, slot);
        Sent::Done
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
        meta: SlotMeta,
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
                self.slots[slot as usize] = SlotMeta {
                    in_nic: true,
                    pin: Some(pin.id),
                    ..meta
                };
                Sent::Reading(slot)
            }
            Err(PostError::Down) => {
                self.stats.post_down += 1;
                Sent::Done
            }
            // Busy or unable to gather: the copy path queues or posts it.
            Err(PostError::Busy | PostError::Unsupported) => return None,
        };
        self.stats.packets_out += 1;
        self.stats.zero_copy_sends += 1;
        self.sent(q.dest as usize, h);
        if !matches!(sent, Sent::Reading(_)) {
            let _ = self.free_slots.push(slot);
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

    /// Posts an encoded slot and frees it if nothing else holds it.
    fn post<N: Nic>(&mut self, nic: &mut N, slot: u16) {
        let m = self.slots[slot as usize];
        self.stats.packets_out += 1;
        match nic.post_send(m.peer, SlotId(slot), m.len as usize) {
            Ok(Posted::Done) => {}
            Ok(Posted::Later) => self.slots[slot as usize].in_nic = true,
            Err(PostError::Busy) => {
                self.stats.post_busy += 1;
                self.slots[slot as usize].unposted = true;
                // Cannot fail: at most SLOTS slots exist.
                let _ = self.unposted.push_back(slot);
            }
            Err(PostError::Down | PostError::Unsupported) => self.stats.post_down += 1,
        }
        if !self.slots[slot as usize].busy() {
            let _ = self.free_slots.push(slot);
        }
    }

    /// Sends an ACK (with credit) or a NACK; `false` if no slot or the NIC is busy
    /// (the caller's timer or the next event tries again).
    fn send_control<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        dest: u16,
        kind: Kind,
        seq: u32,
    ) -> bool {
        let Some(slot) = self.free_slots.pop() else {
            return false;
        };
        let p = &mut self.peers[dest as usize];
        let h = Header {
            kind,
            src: self.me,
            context: 0,
            tag: 0,
            len: 0,
            seq,
            ack: p.rx_next,
            credit: p.consumed,
        };
        let _ = h.encode(nic.slot_mut(SlotId(slot)));
        self.stats.packets_out += 1;
        match nic.post_send(dest, SlotId(slot), HEADER_LEN) {
            Ok(r) => {
                self.peers[dest as usize].carried(h.credit);
                if r == Posted::Later {
                    self.slots[slot as usize] = SlotMeta {
                        peer: dest,
                        len: HEADER_LEN as u32,
                        in_nic: true,
                        ..SlotMeta::default()
                    };
                } else {
                    let _ = self.free_slots.push(slot);
                }
                self.stats.acks_out += (kind == Kind::Ack) as u64;
                true
            }
            Err(_) => {
                let _ = self.free_slots.push(slot);
                self.stats.post_busy += 1;
                self.arm(now);
                false
            }
        }
    }

    /// Re-sends every unacknowledged packet to `peer` (go-back-N).
    fn retransmit<N: Nic>(&mut self, now: u64, nic: &mut N, peer: usize) {
        let p = &self.peers[peer];
        let (ack, credit) = (p.rx_next, p.consumed);
        let pending = p.unacked.clone();
        for &s in pending.iter() {
            let m = self.slots[s as usize];
            if m.in_nic || m.unposted {
                continue;
            }
            Header::refresh(nic.slot_mut(SlotId(s)), ack, credit);
            self.stats.retransmits += 1;
            self.post(nic, s);
        }
        let p = &mut self.peers[peer];
        p.carried(credit);
        if !p.unacked.is_empty() {
            let t = now + p.rto;
            p.rto_at = Some(t);
            self.arm(t);
        }
    }

    /// The NIC finished reading a slot posted with [`Posted::Later`] (and,
    /// for a zero-copy send, the user buffer behind it).
    pub fn on_send_complete<N: Nic>(&mut self, nic: &mut N, slot: SlotId) {
        let Some(m) = self.slots.get_mut(slot.0 as usize) else {
            return;
        };
        if !m.in_nic {
            return;
        }
        m.in_nic = false;
        let (pin, req) = (m.pin.take(), m.req.take());
        if let Some(id) = pin {
            self.reuse.release(nic, id);
        }
        if let Some(r) = req {
            self.reqs.set(r, State::SendDone);
        }
        let m = &self.slots[slot.0 as usize];
        if !m.busy() {
            let _ = self.free_slots.push(slot.0);
            self.flush_due |= !self.queued.is_empty();
        }
    }

    fn retry_unposted<N: Nic>(&mut self, nic: &mut N) {
        for _ in 0..self.unposted.len() {
            let Some(s) = self.unposted.pop_front() else {
                break;
            };
            self.slots[s as usize].unposted = false;
            self.post(nic, s);
        }
    }

    /// Sends queued sends in order, skipping peers still blocked so that each
    /// peer's messages leave in the order they were posted.
    fn flush_queued<N: Nic>(&mut self, now: u64, nic: &mut N) {
        let mut blocked: u64 = 0; // bitmap of blocked peers modulo 64: conservative
        for _ in 0..self.queued.len() {
            let Some(q) = self.queued.pop_front() else {
                break;
            };
            let bit = 1u64 << (q.dest % 64);
            let sent = if blocked & bit == 0 {
                self.try_send(now, nic, &q, true)
            } else {
                Sent::No
            };
            match sent {
                Sent::No => {
                    blocked |= bit;
                    let _ = self.queued.push_back(q);
                    continue;
                }
                Sent::Done => self.reqs.set(q.req, State::SendDone),
                Sent::Reading(slot) => {
                    self.reqs.set(q.req, State::SendInFlight);
                    self.slots[slot as usize].req = Some(q.req);
                }
            }
            self.peers[q.dest as usize].queued -= 1;
        }
    }

    /// When the endpoint next needs [`poll`](Self::poll): `None` if no timer is armed.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.flush_due || !self.unposted.is_empty() {
            return Some(0);
        }
        self.deadline
    }

    /// Runs timers: retransmission, delayed acks and credit returns, queued sends.
    pub fn poll<N: Nic>(&mut self, now: u64, nic: &mut N) {
        self.retry_unposted(nic);
        self.flush_due = false;
        self.flush_queued(now, nic);
        self.deadline = None;
        for i in 0..self.npeers as usize {
            if let Some(t) = self.peers[i].rto_at {
                if t <= now {
                    debug!(
                        "rmx: rank {} timeout to rank {}: resending {} packets",
                        self.me,
                        i,
                        self.peers[i].unacked.len()
                    );
                    self.peers[i].rto = (self.peers[i].rto * 2).min(self.cfg.rto_max_ns);
                    self.stats.timeouts += 1;
                    self.retransmit(now, nic, i);
                }
            }
            if let Some(t) = self.peers[i].ack_at {
                if t <= now && !self.send_control(now, nic, i as u16, Kind::Ack, 0) {
                    self.peers[i].ack_at = Some(now);
                }
            }
            let p = &self.peers[i];
            for t in [p.rto_at, p.ack_at].into_iter().flatten() {
                self.arm(t);
            }
        }
    }
}
