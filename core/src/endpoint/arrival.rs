//! Arrivals: a received packet is decoded, checked against its
//! connection (acknowledgement, credit, sequence) and its messages matched
//! to posted receives or kept as unexpected.

use super::*;

/// What an in-sequence message brings.
#[derive(Clone, Copy)]
pub(super) enum Incoming {
    Eager { buf: RxBuf, at: u32, len: u32 },
    Rts(crate::wire::rendezvous::Rts),
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// A packet arrived in `buf`. The endpoint reposts `buf` before
    /// returning, unless it keeps unexpected messages in it: then it
    /// reposts it when the last of them is received.
    pub fn on_receive<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf) {
        self.tick(now);
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

    pub(super) fn handle<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        buf: RxBuf,
        h: Header,
        len: u32,
    ) {
        // A control packet carries no payload (`decode_packet` checked):
        // only a payload can pass the threshold.
        debug_assert!(h.kind.has_payload() || len == 0);
        if h.src >= self.npeers || len > self.cfg.eager_threshold {
            debug!(
                "rmx: rank {} dropped a packet from bad rank {} or of {} bytes",
                self.me, h.src, len
            );
            self.stats.malformed += 1;
            return;
        }
        let src = h.src as usize;
        let p = &mut self.peers[src];
        if p.failed {
            self.stats.from_failed += 1;
            self.tell_gone(nic, h.src, h.kind);
            return;
        }
        if h.kind == Kind::Gone {
            // The peer gave this rank up and drops what it sends.
            self.stats.gone_in += 1;
            self.peer_down(h.src);
            return;
        }
        p.heard_at(now);
        // On a reliable transport the NIC acknowledged: the peer is still at hand.
        let p = if self.cfg.reliable {
            p
        } else {
            if !self.take_ack(now, src, h.ack) {
                self.stats.malformed += 1;
                return;
            }
            &mut self.peers[src]
        };
        let before = p.peer_limit;
        if !p.take_credit(h.credit, u16::MAX) {
            self.stats.malformed += 1;
            return;
        }
        match h.kind {
            Kind::Ack | Kind::Gone => {}
            // On a reliable transport the NIC's acknowledgement answered.
            Kind::Ping if self.cfg.reliable => {}
            Kind::Ping => {
                self.send_control(now, nic, h.src, Kind::Ack, 0);
            }
            Kind::Credit => {
                let priority = crate::wire::context::is_priority(h.context);
                self.on_credit_request(now, nic, h.src, h.tag, priority)
            }
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
                let rts = if h.kind == Kind::Rts {
                    match crate::wire::rendezvous::Rts::decode(&nic.rx(buf)[HEADER_LEN..]) {
                        Ok(rts) => Some(rts),
                        Err(_) => {
                            self.stats.malformed += 1;
                            return;
                        }
                    }
                } else {
                    None
                };
                if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
                    return;
                }
                match rts {
                    Some(rts) => self.arrive(now, nic, env, Incoming::Rts(rts)),
                    None => self.arrive_eager(now, nic, env, buf, HEADER_LEN as u32, len),
                };
            }
            Kind::Cts | Kind::Fin | Kind::Pull | Kind::Data | Kind::Probe => {
                self.on_rndv_packet(now, nic, buf, h);
            }
            Kind::Medium => self.on_fragment(now, nic, buf, h),
            Kind::Packed => {
                if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
                    return;
                }
                self.unpack(now, nic, buf, h);
            }
        }
        let credit_back = self.peers[src].peer_limit != before && self.peers[src].queued > 0;
        if credit_back || (self.timers.is_armed(Timer::Flush) && !self.queued.is_empty()) {
            self.timers.stop(Timer::Flush);
            self.flush_queued(now, nic);
        }
    }

    /// Go-back-N receive rule: `true` if `seq` is the next packet from `src`.
    /// A duplicate is acknowledged again; a gap is re-requested once by NACK.
    pub(super) fn in_sequence<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        src: usize,
        seq: u32,
    ) -> bool {
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
    pub(super) fn unpack<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header) {
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
            if !self.arrive_eager(now, nic, env, buf, at, rec.len) {
                return;
            }
        }
    }

    /// An in-sequence message: delivered to (or, for an RTS, started with)
    /// the oldest matching posted receive, or kept as unexpected. `false`: no room.
    pub(super) fn arrive<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        env: Envelope,
        what: Incoming,
    ) -> bool {
        match what {
            Incoming::Eager { buf, at, len } => self.arrive_eager(now, nic, env, buf, at, len),
            what => {
                let posted = self.matcher.arrive(&env);
                self.arrive_other(now, nic, env, posted, what)
            }
        }
    }

    /// An in-sequence eager message of `len` bytes at `at` in `buf`:
    /// delivered to the oldest matching posted receive, or kept as
    /// unexpected. `false`: no room. The small-message path, an expected
    /// message, comes first.
    fn arrive_eager<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        env: Envelope,
        buf: RxBuf,
        at: u32,
        len: u32,
    ) -> bool {
        let posted = self.matcher.arrive(&env);
        if let Some(pr) = &posted {
            self.unposted(pr);
            self.accepted(now, env.src);
            self.deliver_expected(now, nic, env, pr, Loc::Rx(buf, at), len);
            return true;
        }
        self.arrive_other(now, nic, env, posted, Incoming::Eager { buf, at, len })
    }

    /// A message in sequence is taken (delivered or kept): counted, and on
    /// a lossy transport acknowledged.
    #[inline(always)]
    fn accepted(&mut self, now: u64, src: u16) {
        self.stats.messages_in += 1;
        if !self.cfg.reliable {
            let p = &mut self.peers[src as usize];
            p.rx_next = p.rx_next.wrapping_add(1);
            p.nacked = None;
            self.arm_ack(now, src as usize);
        }
    }

    /// An eager message of `len` bytes at `from` matched `pr`: its bytes
    /// are delivered, its request completes, its credit goes back.
    #[inline(always)]
    fn deliver_expected<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        env: Envelope,
        pr: &PostedRecv,
        from: Loc,
        len: u32,
    ) {
        let st = self.deliver_to(nic, env, len, from, pr.buf, pr.capacity);
        self.reqs.set(pr.req, State::Done(st));
        self.consumed(now, nic, env.src);
    }

    /// An arrival but an expected eager message: `posted` is the receive
    /// it matched, if any.
    #[inline(never)]
    fn arrive_other<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        env: Envelope,
        posted: Option<PostedRecv>,
        what: Incoming,
    ) -> bool {
        if let Some(pr) = &posted {
            self.unposted(pr);
        }
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
        self.accepted(now, env.src);
        match (posted, what) {
            (Some(pr), Incoming::Eager { buf, at, len }) => {
                self.deliver_expected(now, nic, env, &pr, Loc::Rx(buf, at), len);
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

    // Every expected eager message passes here: inlined, it costs no call
    // (the small-message count, `cargo bench -p rmx-cost`, shows it).
    #[inline(always)]
    pub(super) fn deliver_to<N: Nic>(
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
        self.received(env.src, env.tag, len, capacity)
    }

    /// The status of a receive of a `len`-byte message into `capacity` bytes.
    pub(super) fn received(&mut self, source: u16, tag: u32, len: u32, capacity: u32) -> Status {
        let fault = (len > capacity).then(|| {
            self.stats.truncated += 1;
            RecvFault::Truncated { len, capacity }
        });
        Status {
            source,
            tag,
            len: len.min(capacity),
            fault,
        }
    }
}
