//! Medium messages ([`crate::wire::medium`]): sent as fragments of one packet
//! each, back to back in the connection's sequence, each taking a credit
//! and a bounce slot like an eager message; reassembled by the receiver
//! straight into a matched receive's buffer, or kept fragment by fragment
//! in their receive buffers while unexpected.

use super::*;
use crate::wire::medium::{Fragment, FRAG_HEAD};

/// Where a fragment's bytes start in its packet.
const DATA_AT: u32 = (HEADER_LEN + FRAG_HEAD) as u32;

/// Where the next fragments from a peer go: the receiver's state of the
/// one medium message that peer may be part way through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Into {
    /// No message in progress: the next fragment must start one.
    Idle,
    /// Into a matched receive (its buffer and tag in its work entry).
    Recv(Request),
    /// Held as unexpected, each fragment in its receive buffer; `last` is
    /// the hold of the newest, which the next one is chained to.
    Held { last: u16 },
}

/// A peer's medium message in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Assembly {
    pub into: Into,
    /// Bytes arrived so far: the offset the next fragment must have.
    pub got: u32,
    pub total: u32,
}

impl Assembly {
    pub const IDLE: Assembly = Assembly {
        into: Into::Idle,
        got: 0,
        total: 0,
    };
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// `isend` of a medium message: as many fragments as credits and slots
    /// allow go now; the rest wait in the send queue, which keeps every
    /// later message to the peer behind them. A request is needed to wait,
    /// so without a free one the message must go whole or not at all.
    pub(super) fn start_medium<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        mut q: QueuedSend,
    ) -> Result<Request, SendError> {
        let d = q.dest as usize;
        if self.peers[d].queued == 0 && (self.reqs.has_free() || self.fits_whole(&q)) {
            if let Sent::Done = self.send_fragments(now, nic, &mut q) {
                return Ok(Request::COMPLETE);
            }
        }
        let req = self
            .reqs
            .alloc(State::SendQueued)
            .ok_or(SendError::RequestTableFull)?;
        self.queue_send(now, QueuedSend { req, ..q });
        self.ask_credit(now, nic, q.dest);
        Ok(req)
    }

    /// Credits and slots are free for every fragment `q` has left.
    fn fits_whole(&self, q: &QueuedSend) -> bool {
        let frags = self.credits_needed(q);
        self.peers[q.dest as usize].credits_left() >= frags && self.slots.free() > frags as usize
    }

    /// Sends the fragments of `q` from `q.sent` on while a credit and a
    /// bounce slot are free (one slot always kept for control packets),
    /// advancing `q.sent`. `Sent::Done` once the last has left the user
    /// buffer.
    pub(super) fn send_fragments<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        q: &mut QueuedSend,
    ) -> Sent {
        let d = q.dest as usize;
        let frag = self.cfg.fragment();
        while q.sent < q.len {
            if self.peers[d].credits_left() == 0 || self.slots.free() < 2 {
                return Sent::No;
            }
            let Some(slot) = self.slots.take() else {
                return Sent::No;
            };
            let n = frag.min(q.len - q.sent);
            let h = Header {
                context: q.context,
                tag: q.tag,
                len: FRAG_HEAD as u32 + n,
                ..self.header(q.dest, Kind::Medium)
            };
            let out = nic.slot_mut(SlotId(slot));
            let _ = h.encode(out);
            Fragment {
                total: q.len,
                offset: q.sent,
            }
            .encode(&mut out[HEADER_LEN..]);
            nic.copy(
                Loc::Slot(SlotId(slot), DATA_AT),
                Loc::User(q.buf, q.sent),
                n as usize,
            );
            let p = &mut self.peers[d];
            p.tx_seq = p.tx_seq.wrapping_add(1);
            p.carried(h.credit);
            self.stats.messages_out += (q.sent == 0) as u64;
            self.stats.fragments_out += 1;
            self.slots[slot as usize] = SlotEntry {
                peer: q.dest,
                len: DATA_AT + n,
                seq: h.seq,
                msgs: 1,
                awaiting_ack: !self.cfg.reliable,
                ..SlotEntry::default()
            };
            self.track_unacked(now, d, slot);
            self.post_or_queue(nic, slot);
            q.sent += n;
        }
        Sent::Done
    }

    /// A fragment arrived in `buf`. The first of a message is matched like
    /// an eager message; the others must continue the message in progress
    /// from that peer at the offset reached, or are dropped as malformed.
    pub(super) fn on_fragment<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header) {
        let src = h.src as usize;
        let body = &nic.rx(buf)[HEADER_LEN..];
        let Ok((f, len)) = Fragment::decode(body, self.cfg.medium()) else {
            debug!("rmx: rank {} dropped a malformed fragment", self.me);
            self.stats.malformed += 1;
            return;
        };
        if !self.cfg.reliable && !self.in_sequence(now, nic, src, h.seq) {
            return;
        }
        let a = self.peers[src].assembly;
        let fits = match a.into {
            Into::Idle => f.offset == 0,
            _ => f.offset == a.got && f.offset > 0 && f.total == a.total,
        };
        if !fits {
            debug!("rmx: rank {} dropped a fragment out of place", self.me);
            self.stats.malformed += 1;
            return;
        }
        let accepted = if f.offset == 0 {
            let env = Envelope {
                src: h.src,
                tag: h.tag,
                context: h.context,
            };
            self.first_fragment(now, nic, env, buf, f.total, len)
        } else {
            self.next_fragment(now, nic, src, buf, len)
        };
        if !accepted {
            // Left unacknowledged: a lossy peer sends it again.
            self.stats.no_room += 1;
        }
    }

    /// The fragment at offset 0: into the oldest matching posted receive,
    /// or held as a new unexpected message. `false`: no room to hold it.
    fn first_fragment<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        env: Envelope,
        buf: RxBuf,
        total: u32,
        len: u32,
    ) -> bool {
        let src = env.src as usize;
        let more = len < total;
        let posted = self.matcher.arrive(&env);
        if let Some(pr) = &posted {
            self.unposted(pr);
        }
        match posted {
            None => {
                if self.matcher.unexpected_full() {
                    return false;
                }
                let Some(hold) = self.holds.hold(buf, &mut self.rx_hold) else {
                    return false;
                };
                self.fragment_taken(now, src);
                let _ = self.matcher.push_unexpected(
                    env,
                    Held::Medium {
                        first: hold,
                        len: total,
                    },
                );
                if more {
                    self.peers[src].assembly = Assembly {
                        into: Into::Held { last: hold },
                        got: len,
                        total,
                    };
                }
                self.stats.messages_in += 1;
                self.stats.unexpected += 1;
            }
            Some(pr) => {
                self.fragment_taken(now, src);
                self.stats.messages_in += 1;
                let into = Receiving {
                    buf: pr.buf,
                    capacity: pr.capacity,
                    tag: env.tag,
                };
                self.place(nic, into, Loc::Rx(buf, DATA_AT), 0, len);
                if more {
                    self.work[pr.req.index()].recv = into;
                    self.reqs.set(pr.req, State::Receiving);
                    self.peers[src].assembly = Assembly {
                        into: Into::Recv(pr.req),
                        got: len,
                        total,
                    };
                } else {
                    self.finish_medium(pr.req, env.src, into, total);
                }
                self.consumed(now, nic, env.src);
            }
        }
        true
    }

    /// A later fragment of the message in progress from `src`.
    fn next_fragment<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        src: usize,
        buf: RxBuf,
        len: u32,
    ) -> bool {
        let a = self.peers[src].assembly;
        let into = match a.into {
            Into::Held { last } => {
                let Some(hold) = self.holds.hold(buf, &mut self.rx_hold) else {
                    return false;
                };
                self.holds.chain(last, hold);
                Into::Held { last: hold }
            }
            Into::Recv(req) => {
                let r = self.work[req.index()].recv;
                self.place(nic, r, Loc::Rx(buf, DATA_AT), a.got, len);
                Into::Recv(req)
            }
            Into::Idle => return false,
        };
        self.fragment_taken(now, src);
        let got = a.got + len;
        self.peers[src].assembly = if got == a.total {
            Assembly::IDLE
        } else {
            Assembly { into, got, ..a }
        };
        if let Into::Recv(req) = into {
            if got == a.total {
                let r = self.work[req.index()].recv;
                self.finish_medium(req, src as u16, r, a.total);
            }
            self.consumed(now, nic, src as u16);
        }
        true
    }

    /// Bookkeeping of an accepted fragment: its sequence (lossy transports).
    fn fragment_taken(&mut self, now: u64, src: usize) {
        self.stats.fragments_in += 1;
        if !self.cfg.reliable {
            let p = &mut self.peers[src];
            p.rx_next = p.rx_next.wrapping_add(1);
            p.nacked = None;
            self.arm_ack(now, src);
        }
    }

    /// Copies `len` bytes at `from` to byte `offset` of the receive's
    /// buffer, as far as it reaches.
    fn place<N: Nic>(&mut self, nic: &mut N, r: Receiving, from: Loc, offset: u32, len: u32) {
        if offset < r.capacity {
            let n = len.min(r.capacity - offset);
            nic.copy(Loc::User(r.buf, offset), from, n as usize);
        }
    }

    /// The last fragment is in: the receive completes.
    fn finish_medium(&mut self, req: Request, src: u16, r: Receiving, total: u32) {
        let st = self.received(src, r.tag, total, r.capacity);
        self.reqs.set(req, State::Done(st));
    }

    /// `irecv` matched a medium message held as unexpected: its fragments
    /// are copied out and their buffers reposted (each gives its credit
    /// back); if more are still to come, they go straight to `req`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take_held_medium<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        req: Request,
        src: u16,
        first: u16,
        total: u32,
        r: Receiving,
    ) {
        let a = self.peers[src as usize].assembly;
        let tail = match a.into {
            Into::Held { last } => Some(last),
            _ => None,
        };
        let mut in_progress = false;
        let mut next = Some(first);
        while let Some(h) = next {
            in_progress |= Some(h) == tail;
            next = self.holds.chained(h);
        }
        let failed = self.peers[src as usize].failed;
        if in_progress && !failed {
            // Before the fragments are consumed: their credits go back to
            // the sender for the rest (see `consumed`).
            self.work[req.index()].recv = r;
            self.reqs.set(req, State::Receiving);
            self.peers[src as usize].assembly.into = Into::Recv(req);
        }
        let mut next = Some(first);
        while let Some(h) = next {
            let b = self.holds.buf(h);
            if let Ok((_, body)) = decode_packet(nic.rx(b)) {
                if let Ok((f, len)) = Fragment::decode(body, u32::MAX) {
                    self.place(nic, r, Loc::Rx(b, DATA_AT), f.offset, len);
                }
            }
            next = self.holds.chained(h);
            if let Some(b) = self.holds.release(h) {
                nic.repost(b);
            }
            self.consumed(now, nic, src);
        }
        self.check_pool(nic);
        if !in_progress {
            self.finish_medium(req, src, r, total);
        } else if failed {
            self.peers[src as usize].assembly = Assembly::IDLE;
            self.reqs.set(req, State::Done(failed_status(src)));
        }
    }

    /// `peer` failed: a receive its medium message was filling ends. One
    /// still held as unexpected ends when a receive matches it.
    pub(super) fn fail_assembly(&mut self, peer: u16) {
        let a = &mut self.peers[peer as usize].assembly;
        if let Into::Recv(req) = a.into {
            *a = Assembly::IDLE;
            self.reqs.set(req, State::Done(failed_status(peer)));
        }
    }
}

/// How a request that named a failed peer ends.
pub(super) fn failed_status(peer: u16) -> Status {
    Status {
        source: peer,
        tag: 0,
        len: 0,
        fault: Some(RecvFault::PeerFailed),
    }
}
