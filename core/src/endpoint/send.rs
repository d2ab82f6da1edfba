//! Sending eager messages: at once from the user buffer (inline, copied
//! into a bounce slot, or zero-copy), packed with others into one packet,
//! or queued until a credit or a slot frees.

use super::backlog::Post;
use super::*;
use crate::wire::context::is_priority;

/// Where an inline send's payload is.
#[derive(Clone, Copy)]
pub(super) enum Body<'a> {
    /// In a user buffer the NIC resolves.
    User(UserBuf),
    /// In bytes the shell handed over.
    Bytes(&'a [u8]),
}

/// How an inline post went.
pub(super) enum Inlined {
    /// Posted (or lost with its connection, as any send on it is).
    Done,
    /// Refused for good: the bytes could not be read.
    Refused(PostError),
    /// Receiver or send queue not ready: nothing was posted.
    Busy,
    /// The NIC sends nothing inline: nothing was posted.
    Unsupported,
}

/// How far `try_send` got.
pub(super) enum Sent {
    /// Not sent: no credit or no slot (or the NIC was busy).
    No,
    /// The data left the user buffer.
    Done,
    /// Posted zero-copy; the NIC reads the user buffer until this slot completes.
    Reading(u16),
    /// A rendezvous's RTS left; its request stays pending.
    Rts,
    /// The NIC refused the send for good: nothing left.
    Refused(PostError),
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// Sends `q` now if a credit and a bounce slot are free. One slot is always
    /// kept for control packets, so acknowledgements can never deadlock.
    /// When the connection has no free send entry (or already has a backlog,
    /// which keeps the order) the message is copied into the backlog, packed
    /// with others when coalescing allows. `may_pend`: a zero-copy send whose
    /// completion comes later can be given a request.
    pub(super) fn try_send<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        q: &mut QueuedSend,
        may_pend: bool,
    ) -> Sent {
        if q.rndv {
            return self.send_rts(now, nic, q);
        }
        if q.len > self.cfg.eager_threshold {
            return self.send_fragments(now, nic, q);
        }
        let d = q.dest as usize;
        if self.peers[d].credits_left() == 0 {
            return Sent::No;
        }
        let packable = self.packable(q.len);
        let wait = self.must_wait(d, q.len);
        if wait && packable {
            return self.pack(now, nic, q);
        }
        let h = self.eager_header(&self.peers[d], q.context, q.tag, q.len);
        if !wait && q.len <= self.cfg.inline_max && self.cfg.reliable {
            match self.post_inline(nic, d, &h, Body::User(q.buf)) {
                Inlined::Done => return Sent::Done,
                Inlined::Refused(e) => return Sent::Refused(e),
                Inlined::Busy => {
                    // Receiver or send queue not ready: wait in the backlog.
                    self.stats.post_busy += 1;
                    self.nic_busy(Timer::Retry);
                    if packable {
                        return self.pack(now, nic, q);
                    }
                }
                Inlined::Unsupported => {}
            }
        }
        let Some(slot) = self.slots.take_spare() else {
            return Sent::No;
        };
        let _ = h.encode(nic.slot_mut(SlotId(slot)));
        if !wait && self.cfg.reliable && may_pend && q.len > 0 {
            let meta = self.slot_entry(q.dest, &h);
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
        self.send_slot(now, nic, d, &h, slot)
    }

    /// [`isend_now`](Self::isend_now) of `data` to peer `d`, which has a
    /// credit and no waiting send, behind sends that hold every send
    /// entry: copied into the backlog, unless it could be packed with the
    /// messages there (`None`: the shell goes by handle).
    #[inline(never)]
    pub(super) fn queue_now<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        d: usize,
        tag: u32,
        context: u16,
        data: &[u8],
    ) -> Option<Result<Taken, SendError>> {
        let len = u32::try_from(data.len()).ok()?;
        if self.packable(len) {
            return None;
        }
        let h = self.eager_header(&self.peers[d], context, tag, len);
        match self.queue_bytes(now, nic, d, &h, data) {
            Sent::Done => Some(Ok(Taken::Queued)),
            Sent::Refused(e) => Some(Err(SendError::Refused(e))),
            _ => None,
        }
    }

    /// Copies the eager message `h` with payload `data` into a bounce slot
    /// and queues it behind the sends that hold the connection's send
    /// entries (or posts it, if one came free): what [`try_send`] does
    /// with a message that must wait and cannot be packed, for bytes the
    /// shell handed over. `No` (nothing done) if no slot is spare, or the
    /// message does not fit one.
    ///
    /// [`try_send`]: Self::try_send
    fn queue_bytes<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        d: usize,
        h: &Header,
        data: &[u8],
    ) -> Sent {
        let Some(slot) = self.slots.take_spare() else {
            return Sent::No;
        };
        let buf = nic.slot_mut(SlotId(slot));
        match buf.get_mut(HEADER_LEN..HEADER_LEN + data.len()) {
            Some(body) => body.copy_from_slice(data),
            None => {
                self.slots.put(slot);
                return Sent::No;
            }
        }
        let _ = h.encode(buf);
        self.send_slot(now, nic, d, h, slot)
    }

    /// The slot entry of the eager message `h` to `dest`, one packet.
    fn slot_entry(&self, dest: u16, h: &Header) -> SlotEntry {
        SlotEntry {
            peer: dest,
            len: HEADER_LEN as u32 + h.len,
            seq: h.seq,
            msgs: 1,
            awaiting_ack: !self.cfg.reliable,
            ..SlotEntry::default()
        }
    }

    /// Sends the eager message `h` to peer `d`, whole in `slot`:
    /// sequenced, tracked until acknowledged, and posted or queued.
    #[inline]
    fn send_slot<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        d: usize,
        h: &Header,
        slot: u16,
    ) -> Sent {
        self.sent(d, h);
        self.slots[slot as usize] = self.slot_entry(d as u16, h);
        self.track_unacked(now, d, slot);
        match self.post_or_queue(nic, slot) {
            Post::Refused(e) => Sent::Refused(e),
            _ => Sent::Done,
        }
    }

    /// Whether an eager message of `len` bytes to peer `d` must wait behind
    /// others (in the backlog, packed where coalescing allows): the
    /// connection has a backlog, or holds every send entry it may (under
    /// a coalescing threshold, that many).
    #[inline]
    pub(super) fn must_wait(&self, d: usize, len: u32) -> bool {
        waits(&self.peers[d], self.wqe_limit(len))
    }

    /// The send entries a message of `len` bytes may find in use and
    /// still go: fewer than all when it could be packed instead.
    #[inline]
    pub(super) fn wqe_limit(&self, len: u32) -> u16 {
        match self.cfg.coalesce {
            Coalesce::Outstanding(n) if self.packable(len) => n,
            _ => self.cfg.send_wqes,
        }
    }

    /// Posts the eager message `h` to peer `d` as an inline send of `body`
    /// and, if it went, accounts for it as sent.
    // The small-message send: inlined into `isend_now`, so the whole
    // path from the caller's bytes to the port makes no call of its own.
    #[inline(always)]
    pub(super) fn post_inline<N: Nic>(
        &mut self,
        nic: &mut N,
        d: usize,
        h: &Header,
        body: Body<'_>,
    ) -> Inlined {
        let mut hdr = [0u8; HEADER_LEN];
        let _ = h.encode(&mut hdr);
        let signal = self.signal_inline(d);
        let dest = d as u16;
        let r = match body {
            Body::User(buf) => {
                nic.send_inline(dest, &hdr, Loc::User(buf, 0), h.len as usize, signal)
            }
            Body::Bytes(b) => nic.send_inline_bytes(dest, &hdr, b, signal),
        };
        match r {
            Ok(r) => {
                self.nic_ready();
                self.inline_posted(d, r, signal, Some(h.credit));
                self.stats.messages_out += 1;
                Inlined::Done
            }
            Err(PostError::Busy) => Inlined::Busy,
            Err(PostError::Down) => {
                // Lost with its connection, as any send on it is.
                self.stats.post_down += 1;
                self.peer_down(dest);
                self.sent(d, h);
                Inlined::Done
            }
            Err(PostError::Access) => {
                // The user's bytes could not be read: nothing was
                // sequenced, the connection goes on.
                self.stats.post_refused += 1;
                Inlined::Refused(PostError::Access)
            }
            Err(PostError::Unsupported) => Inlined::Unsupported,
        }
    }

    /// An inline send to peer `d` went (`r`; `signal`: with a completion
    /// of its own): while it holds a send entry, the peer counts it, and
    /// the unsignalled run it joins or ends. `sent`: the credit limit of a
    /// packet sequenced only now (a queued one was when queued).
    #[inline(always)]
    pub(super) fn inline_posted(&mut self, d: usize, r: Posted, signal: bool, sent: Option<u32>) {
        let later = (r == Posted::Later) as u16;
        let p = &mut self.peers[d];
        p.wqes += later;
        p.inlines += later;
        p.quiet = match signal {
            true => 0,
            false => p.quiet + later,
        };
        if let Some(limit) = sent {
            p.sent(limit);
        }
        self.stats.unsignalled += u64::from(!signal && later == 1);
        self.stats.packets_out += 1;
    }

    /// Whether an inline send to peer `d` asks for its own completion: see
    /// [`signal_every`].
    #[inline(always)]
    pub(super) fn signal_inline(&self, d: usize) -> bool {
        self.peers[d].quiet.saturating_add(1) >= self.signal_every
    }

    /// A header to `dest` with the current sequence, ack and credit.
    #[inline]
    pub(super) fn header(&self, dest: u16, kind: Kind) -> Header {
        self.header_of(&self.peers[dest as usize], kind)
    }

    /// The header of an eager message of `len` bytes to peer `p`.
    #[inline(always)]
    pub(super) fn eager_header(&self, p: &Peer, context: u16, tag: u32, len: u32) -> Header {
        Header {
            context,
            tag,
            len,
            ..self.header_of(p, Kind::Eager)
        }
    }

    /// [`header`](Self::header) to peer `p`, at hand.
    #[inline]
    pub(super) fn header_of(&self, p: &Peer, kind: Kind) -> Header {
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
    #[inline]
    pub(super) fn packable(&self, len: u32) -> bool {
        self.cfg.coalesce != Coalesce::Off && len <= self.cfg.eager_threshold / 2
    }

    /// Copies `q` into the connection's backlog: appended to the newest queued
    /// packed send if it has room, else as the first record of a new one.
    pub(super) fn pack<N: Nic>(&mut self, now: u64, nic: &mut N, q: &QueuedSend) -> Sent {
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
        let Some(slot) = self.slots.take_spare() else {
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
    pub(super) fn append<N: Nic>(
        &mut self,
        nic: &mut N,
        slot: u16,
        q: &QueuedSend,
        rec: Record,
        n: u32,
    ) {
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
        self.stats.cached_headers += (head == crate::wire::packed::CACHED_LEN) as u64;
        let m = &mut self.slots[slot as usize];
        m.msgs = msgs;
        m.len = len;
        m.last = Some(rec);
    }

    /// Posts the header in `slot` with the payload gathered straight from the
    /// user buffer, if the reuse policy says the buffer is worth it. `None`:
    /// not taken (the slot still holds the header; the caller copies).
    pub(super) fn try_zero_copy<N: Nic>(
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
                self.peer_down(q.dest);
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

    /// How a request whose post the NIC refused for good ends.
    pub(super) fn refused(e: PostError) -> State {
        let fault = match e {
            PostError::Access => RecvFault::Rdma(RdmaError::Access),
            // Its connection failed with it.
            _ => RecvFault::PeerFailed,
        };
        State::Done(Status {
            fault: Some(fault),
            ..Status::SENT
        })
    }

    /// Bookkeeping of an eager message that left: sequence, piggybacked ack and credit.
    #[inline]
    pub(super) fn sent(&mut self, d: usize, h: &Header) {
        self.peers[d].sent(h.credit);
        self.stats.messages_out += 1;
    }

    /// Queues `q` (its request's work) behind every send already waiting.
    pub(super) fn queue_send(&mut self, now: u64, q: QueuedSend) {
        self.start_waiting(now, q.dest);
        let i = q.req.index();
        self.work[i].send = q;
        self.queued.push_back(self.reqs.all_mut(), 0, i as u16);
        let need = self.credits_needed(&q);
        let p = &mut self.peers[q.dest as usize];
        p.queued += 1;
        p.need = p.need.saturating_add(need);
        if is_priority(q.context) {
            p.priority_queued += 1;
            self.priority_queued += 1;
        }
        self.stats.send_stalls += 1;
    }

    /// A queued send left the queue (sent, refused or failed).
    pub(super) fn unqueued(&mut self, q: &QueuedSend) {
        let p = &mut self.peers[q.dest as usize];
        p.queued -= 1;
        if is_priority(q.context) {
            p.priority_queued -= 1;
            self.priority_queued -= 1;
        }
    }

    /// Credits `q` still needs: each fragment left of a medium message
    /// takes one, any other message (an RTS included) one.
    pub(super) fn credits_needed(&self, q: &QueuedSend) -> u32 {
        if q.rndv || q.len <= self.cfg.eager_threshold {
            1
        } else {
            q.len
                .saturating_sub(q.sent)
                .div_ceil(self.cfg.fragment())
                .max(1)
        }
    }

    /// Sends queued sends in order, skipping peers already blocked in this
    /// pass so that each peer's messages leave in the order they were
    /// posted; a blocked peer holds back its own sends only. Priority
    /// messages go first, in their own order: a reserve credit lent for
    /// one must carry it, and a rank waiting in a collective must not wait
    /// for point-to-point messages it has not received.
    pub(super) fn flush_queued<N: Nic>(&mut self, now: u64, nic: &mut N) {
        if self.priority_queued > 0 {
            self.flush_pass(now, nic, true);
        }
        self.flush_pass(now, nic, false);
    }

    /// One pass over the queue; `priority`: only priority messages, each
    /// overtaking the others queued to its peer unless a medium message
    /// to the peer is part way (its fragments must follow each other).
    fn flush_pass<N: Nic>(&mut self, now: u64, nic: &mut N, priority: bool) {
        let mut any_blocked = false;
        for _ in 0..self.queued.len() {
            let Some(i) = self.queued.pop_front(self.reqs.all(), 0) else {
                break;
            };
            let mut q = self.work[i as usize].send;
            let d = q.dest as usize;
            if priority && !is_priority(q.context) {
                if q.sent > 0 && !self.peers[d].blocked {
                    self.peers[d].blocked = true;
                    any_blocked = true;
                }
                self.queued.push_back(self.reqs.all_mut(), 0, i);
                continue;
            }
            let before = self.peers[d].tx_seq;
            let sent = if self.peers[d].blocked {
                Sent::No
            } else {
                self.try_send(now, nic, &mut q, true)
            };
            // Every message and fragment that left took one credit.
            let p = &mut self.peers[d];
            p.need = p.need.saturating_sub(p.tx_seq.wrapping_sub(before));
            match sent {
                Sent::No => {
                    // A medium message may have sent some fragments: the
                    // other pass must not send between them.
                    self.work[i as usize].send = q;
                    self.peers[d].blocked = true;
                    any_blocked = true;
                    self.queued.push_back(self.reqs.all_mut(), 0, i);
                    self.ask_credit(now, nic, q.dest);
                    continue;
                }
                Sent::Done => self.reqs.set(q.req, State::SendDone),
                Sent::Refused(e) => self.reqs.set(q.req, Self::refused(e)),
                Sent::Rts => {}
                Sent::Reading(slot) => {
                    self.reqs.set(q.req, State::SendInFlight);
                    self.slots[slot as usize].req = Some(q.req);
                }
            }
            self.unqueued(&q);
        }
        if !any_blocked {
            return;
        }
        // Only sends still queued can have blocked their peer.
        for i in self.queued.iter(self.reqs.all(), 0) {
            let d = self.work[i as usize].send.dest as usize;
            self.peers[d].blocked = false;
        }
        if priority {
            // A priority message part way keeps its peer's others back
            // in the pass that follows.
            for i in self.queued.iter(self.reqs.all(), 0) {
                let q = &self.work[i as usize].send;
                if is_priority(q.context) && q.sent > 0 {
                    self.peers[q.dest as usize].blocked = true;
                }
            }
        }
    }
}

/// How often an inline send asks for its own completion: once in
/// `Config::cq_moderation`, and at least once in half the entries a send
/// may wait for. The unsignalled sends after the last signalled one then
/// hold fewer entries than any send waits for, so a send that waits always
/// has a signalled one ahead to complete.
pub(super) fn signal_every(cfg: &Config) -> u16 {
    let limit = match cfg.coalesce {
        Coalesce::Outstanding(n) => n.min(cfg.send_wqes),
        _ => cfg.send_wqes,
    };
    cfg.cq_moderation.min((limit / 2).max(1))
}

/// A send to `p` must wait (or be packed): the connection has a backlog,
/// which keeps the order, or `limit` of its send entries in use.
#[inline]
pub(super) fn waits(p: &Peer, limit: u16) -> bool {
    !p.backlog.is_empty() || p.wqes >= limit
}
