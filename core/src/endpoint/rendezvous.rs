//! The rendezvous state machines of an endpoint ([`crate::wire::rendezvous`] has
//! the protocols and their packets). A transfer advances only when the
//! endpoint is driven — by a packet, a completion, a call or `poll` — from
//! whichever thread drives it: without a call or a progress thread, an RPUT
//! sender never sees its CTS and no data moves.
//!
//! Each request can carry one transfer, kept at the request's index, so a
//! large message needs no capacity beyond its request handle.

use super::pull_frames::{Arrivals, Asked};
use super::*;
use crate::nic::{Caps, MemKey, RdmaError, Remote};
use crate::reuse::Pinned;
use crate::wire::rendezvous::{Cts, Fin, Probe, Protocol, Pull, Rts};

/// How a transfer's user buffer is registered.
#[derive(Clone, Copy, Debug)]
pub(super) enum Reg {
    None,
    /// Through the registration cache (released, not deregistered).
    Cached(Pinned),
    /// For this transfer only.
    Own(MemKey),
}

impl Reg {
    pub(super) fn key(self) -> MemKey {
        match self {
            Reg::None => MemKey(0),
            Reg::Cached(p) => p.key,
            Reg::Own(k) => k,
        }
    }
}

/// A control packet a transfer still has to send (no slot, or a busy NIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owe {
    Nothing,
    Cts,
    Fin,
}

/// One side of a rendezvous.
#[derive(Clone, Copy, Debug)]
pub(super) struct Transfer {
    pub active: bool,
    pub send: bool,
    pub proto: Protocol,
    pub req: Request,
    pub peer: u16,
    pub buf: UserBuf,
    /// Bytes to move: the message (sender), what the receive takes (receiver).
    pub len: u32,
    pub reg: Reg,
    pub addr: u64,
    pub remote: Remote,
    pub remote_id: u32,
    /// RDMA: bytes posted so far, and operations not yet completed.
    pub posted: u32,
    pub chunks: u16,
    /// The RDMA side could not post everything (busy NIC): `poll` goes on.
    pub stalled: bool,
    pub fault: Option<RdmaError>,
    /// What the receive reports when it ends.
    pub status: Status,
    pub owe: Owe,
    /// PULL receiver: frames arrived and asked for.
    pub arrivals: Arrivals,
    /// PULL sender: frames asked for and not yet sent.
    pub asked: Asked,
    /// PULL sender: sent a frame since the last FIN-less timeout.
    pub served: bool,
    /// PULL sender: probes for a lost FIN since it last sent a frame; each
    /// waits twice as long as the one before (`Endpoint::backoff_ns`), so
    /// that the transfers of a window, probing a peer that went quiet, do
    /// not flood it with a probe each per timeout.
    pub probes: u16,
    /// When the transfer last moved (PULL timers on lossy transports).
    pub last: u64,
}

impl Transfer {
    pub const IDLE: Transfer = Transfer {
        active: false,
        send: false,
        proto: Protocol::Pull,
        req: Request::COMPLETE,
        peer: 0,
        buf: UserBuf(0),
        len: 0,
        reg: Reg::None,
        addr: 0,
        remote: Remote {
            addr: 0,
            key: MemKey(0),
        },
        remote_id: 0,
        posted: 0,
        chunks: 0,
        stalled: false,
        fault: None,
        status: Status::SENT,
        owe: Owe::Nothing,
        arrivals: Arrivals::new(0),
        asked: Asked::EMPTY,
        served: false,
        probes: 0,
        last: 0,
    };
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// The rendezvous to offer: configured, else the best the transport
    /// can do. An RDMA protocol the transport lacks becomes PULL, and so
    /// does every choice on a lossy transport: only PULL recovers lost
    /// control packets (an RDMA rendezvous configured there is refused by
    /// [`Endpoint::new`]).
    pub(super) fn protocol(&self, caps: Caps) -> Protocol {
        if !self.cfg.reliable {
            return Protocol::Pull;
        }
        let best = if caps.rdma_read {
            Protocol::Rget
        } else if caps.rdma_write {
            Protocol::Rput
        } else {
            Protocol::Pull
        };
        match self.cfg.rendezvous {
            None => best,
            Some(Protocol::Rget) if caps.rdma_read => Protocol::Rget,
            Some(Protocol::Rput) if caps.rdma_write => Protocol::Rput,
            Some(_) => Protocol::Pull,
        }
    }

    /// Registers `len` bytes of `buf` for the NIC (cached when the reuse
    /// policy keeps registrations); `None` if the shell cannot.
    pub(super) fn register_buf<N: Nic>(
        &mut self,
        nic: &mut N,
        buf: UserBuf,
        len: u32,
    ) -> Option<(u64, Reg)> {
        let addr = nic.user_addr(buf)?;
        if let Some(p) = self.reuse.pin(nic, addr, len) {
            return Some((addr, Reg::Cached(p)));
        }
        match nic.register_once(addr, len as u64) {
            Ok(k) => Some((addr, Reg::Own(k))),
            Err(_) => {
                self.stats.rndv_register_failures += 1;
                None
            }
        }
    }

    pub(super) fn release_buf<N: Nic>(&mut self, nic: &mut N, i: usize) {
        match core::mem::replace(&mut self.work[i].xfer.reg, Reg::None) {
            Reg::None => {}
            Reg::Cached(p) => self.reuse.release(nic, p.id),
            Reg::Own(k) => nic.deregister(k),
        }
    }

    /// `isend` of a message above the eager threshold: registers the buffer
    /// when the protocol needs it, and sends (or queues) the RTS.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_send<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        dest: u16,
        tag: u32,
        context: u16,
        buf: UserBuf,
        len: u32,
    ) -> Result<Request, SendError> {
        let req = self
            .reqs
            .alloc(State::Rndv)
            .ok_or(SendError::RequestTableFull)?;
        let i = req.index();
        let mut proto = self.protocol(nic.caps());
        let mut x = Transfer {
            active: true,
            send: true,
            proto,
            req,
            peer: dest,
            buf,
            len,
            last: now,
            ..Transfer::IDLE
        };
        if proto != Protocol::Pull {
            match self.register_buf(nic, buf, len) {
                Some((addr, reg)) => {
                    x.addr = addr;
                    x.reg = reg;
                }
                None => proto = Protocol::Pull,
            }
            x.proto = proto;
        } else if nic.caps().cheap_gather {
            // Frames will be gathered from the buffer; without a
            // registration they are copied into slots as before.
            if let Some((addr, reg)) = self.register_buf(nic, buf, len) {
                x.addr = addr;
                x.reg = reg;
            }
        }
        self.work[i].xfer = x;
        self.active += 1;
        self.await_peer(now, dest);
        self.stats.rndv_sends += 1;
        let q = QueuedSend {
            req,
            dest,
            tag,
            context,
            buf,
            len,
            rndv: true,
            sent: 0,
        };
        if self.peers[dest as usize].queued == 0 {
            if let Sent::Rts = self.send_rts(now, nic, &q) {
                return Ok(req);
            }
        }
        self.queue_send(now, q);
        self.ask_credit(now, nic, dest);
        Ok(req)
    }

    /// Sends the RTS of `q` if a credit and a bounce slot are free: a
    /// sequenced message like an eager one, queued behind the connection's
    /// backlog to keep the order.
    pub(super) fn send_rts<N: Nic>(&mut self, now: u64, nic: &mut N, q: &QueuedSend) -> Sent {
        let d = q.dest as usize;
        if self.peers[d].credits_left() == 0 {
            return Sent::No;
        }
        let Some(slot) = self.slots.take_spare() else {
            return Sent::No;
        };
        let x = &self.work[q.req.index()].xfer;
        let rts = Rts {
            proto: x.proto,
            id: q.req.to_wire(),
            len: q.len,
            remote: if x.proto == Protocol::Rget {
                Remote {
                    addr: x.addr,
                    key: x.reg.key(),
                }
            } else {
                Remote::default()
            },
        };
        let h = Header {
            context: q.context,
            tag: q.tag,
            len: Rts::LEN as u32,
            ..self.header(q.dest, Kind::Rts)
        };
        let out = nic.slot_mut(SlotId(slot));
        let _ = h.encode(out);
        let mut body = [0u8; Rts::LEN];
        rts.encode(&mut body);
        out[HEADER_LEN..HEADER_LEN + Rts::LEN].copy_from_slice(&body);
        self.sent(d, &h);
        self.slots[slot as usize] = SlotEntry {
            peer: q.dest,
            len: (HEADER_LEN + Rts::LEN) as u32,
            seq: h.seq,
            msgs: 1,
            awaiting_ack: !self.cfg.reliable,
            wake: true,
            ..SlotEntry::default()
        };
        self.track_unacked(now, d, slot);
        self.post_or_queue(nic, slot);
        Sent::Rts
    }

    /// A receive matched an RTS: the transfer starts by the protocol the
    /// sender offered, or by pulling when this side cannot register.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_recv<N: Nic>(
        &mut self,
        now: u64,
        nic: &mut N,
        req: Request,
        buf: UserBuf,
        capacity: u32,
        env: Envelope,
        rts: Rts,
    ) {
        let n = rts.len.min(capacity);
        let fault = (rts.len > capacity).then(|| {
            self.stats.truncated += 1;
            RecvFault::Truncated {
                len: rts.len,
                capacity,
            }
        });
        self.reqs.set(req, State::Rndv);
        self.stats.rndv_recvs += 1;
        let i = req.index();
        self.work[i].xfer = Transfer {
            active: true,
            send: false,
            proto: rts.proto,
            req,
            peer: env.src,
            buf,
            len: n,
            remote: rts.remote,
            remote_id: rts.id,
            status: Status {
                source: env.src,
                tag: env.tag,
                len: n,
                fault,
            },
            last: now,
            ..Transfer::IDLE
        };
        self.active += 1;
        self.await_peer(now, env.src);
        if n == 0 {
            self.finish(nic, i);
            return;
        }
        // On a lossy transport a receiver pulls whatever was offered: a lost
        // CTS or FIN of an RDMA rendezvous would never be sent again.
        if !self.cfg.reliable {
            self.work[i].xfer.proto = Protocol::Pull;
        }
        if self.work[i].xfer.proto != Protocol::Pull {
            match self.register_buf(nic, buf, n) {
                Some((addr, reg)) => {
                    let x = &mut self.work[i].xfer;
                    x.addr = addr;
                    x.reg = reg;
                }
                None => self.work[i].xfer.proto = Protocol::Pull,
            }
        }
        match self.work[i].xfer.proto {
            Protocol::Rget => self.pump(nic, i),
            Protocol::Rput => {
                self.work[i].xfer.owe = Owe::Cts;
                self.send_owed(nic, i);
            }
            Protocol::Pull => {
                let frames = n.div_ceil(self.cfg.eager_threshold);
                self.work[i].xfer.arrivals = Arrivals::new(frames);
                self.ask(nic, i);
            }
        }
    }

    /// The transfer a rendezvous packet names, if it is live and `peer`'s.
    pub(super) fn named(&self, id: u32, peer: u16, send: bool) -> Option<usize> {
        let r = Request::from_wire(id);
        let x = &self.work.get(r.index())?.xfer;
        (x.active && x.req == r && x.peer == peer && x.send == send).then_some(r.index())
    }

    /// A CTS, FIN, PULL or DATA packet (RTS is matched as a message).
    pub(super) fn on_rndv_packet<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header) {
        let body = &nic.rx(buf)[HEADER_LEN..];
        let ok = match h.kind {
            Kind::Cts => match Cts::decode(body) {
                Ok(c) => self.on_cts(nic, h.src, c),
                Err(_) => {
                    self.stats.malformed += 1;
                    return;
                }
            },
            Kind::Fin => match Fin::decode(body) {
                Ok(f) => self.on_fin(nic, h.src, f),
                Err(_) => {
                    self.stats.malformed += 1;
                    return;
                }
            },
            Kind::Pull => match Pull::decode(body) {
                Ok(p) => self.on_pull(now, nic, h.src, p),
                Err(_) => {
                    self.stats.malformed += 1;
                    return;
                }
            },
            Kind::Data => self.on_data(now, nic, buf, h),
            Kind::Probe => match Probe::decode(body) {
                Ok(p) => self.on_probe(nic, h.src, p),
                Err(_) => {
                    self.stats.malformed += 1;
                    return;
                }
            },
            _ => false,
        };
        if !ok {
            // A body that decodes but names no live transfer of the sender's.
            debug!("rmx: rank {} dropped a stray rendezvous packet", self.me);
            self.stats.malformed += 1;
            self.stats.rndv_stray += 1;
        }
    }

    pub(super) fn on_fin<N: Nic>(&mut self, nic: &mut N, src: u16, f: Fin) -> bool {
        // A sender (RGET, PULL) or an RPUT receiver waits for a FIN.
        let i = match self.named(f.id, src, true) {
            Some(i) if self.work[i].xfer.proto != Protocol::Rput => i,
            _ => match self.named(f.id, src, false) {
                Some(i) if self.work[i].xfer.proto == Protocol::Rput => i,
                _ => {
                    // A repeated FIN of a transfer already ended.
                    return !self.cfg.reliable;
                }
            },
        };
        self.work[i].xfer.fault = self.work[i].xfer.fault.or(f.fault);
        self.complete(nic, i);
        true
    }

    /// This side moved its data: FIN to the peer, then the request ends.
    pub(super) fn finish<N: Nic>(&mut self, nic: &mut N, i: usize) {
        self.work[i].xfer.owe = Owe::Fin;
        self.send_owed(nic, i);
    }

    /// Sends the control packet the transfer owes; `false` if it must wait.
    pub(super) fn send_owed<N: Nic>(&mut self, nic: &mut N, i: usize) -> bool {
        let x = self.work[i].xfer;
        let sent = match x.owe {
            Owe::Nothing => return true,
            Owe::Cts => {
                let c = Cts {
                    sender: x.remote_id,
                    receiver: x.req.to_wire(),
                    len: x.len,
                    remote: Remote {
                        addr: x.addr,
                        key: x.reg.key(),
                    },
                };
                let mut b = [0u8; Cts::LEN];
                c.encode(&mut b);
                self.ctl(nic, x.peer, Kind::Cts, &b)
            }
            Owe::Fin => {
                let f = Fin {
                    id: x.remote_id,
                    fault: x.fault,
                };
                // A receive that ends before anything moved (nothing to take)
                // still tells the sender; a PULL sender never sends one.
                self.send_fin(nic, x.peer, f)
            }
        };
        if !sent {
            // No slot, or a busy NIC: retried from `poll`.
            if self.slots.free() > 0 {
                self.nic_busy(Timer::Rndv);
            }
            return false;
        }
        self.work[i].xfer.owe = Owe::Nothing;
        if x.owe == Owe::Fin {
            self.complete(nic, i);
        }
        true
    }

    /// Ends the transfers with `peer`, which failed: at once where the NIC
    /// holds none of their buffers, else when it gives the last one back.
    pub(super) fn fail_transfers<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        for i in 0..self.reqs.capacity() {
            let x = &mut self.work[i].xfer;
            if !x.active || x.peer != peer {
                continue;
            }
            x.fault = Some(RdmaError::Down);
            x.owe = Owe::Nothing;
            x.stalled = false;
            if x.chunks == 0 {
                self.complete(nic, i);
            }
        }
    }

    /// Ends the transfer and its request (with its fault, if any).
    pub(super) fn complete<N: Nic>(&mut self, nic: &mut N, i: usize) {
        self.release_buf(nic, i);
        let x = self.work[i].xfer;
        // `fail_transfers` gave every transfer with a failed peer its fault;
        // a broken connection (down, failed at the next poll) is one too.
        let (failed, down) = {
            let p = &self.peers[x.peer as usize];
            (p.failed, p.down)
        };
        let fault = |e| {
            if failed || (down && e == RdmaError::Down) {
                RecvFault::PeerFailed
            } else {
                RecvFault::Rdma(e)
            }
        };
        let state = if x.send {
            match x.fault {
                None => State::SendDone,
                Some(e) => State::Done(Status {
                    fault: Some(fault(e)),
                    ..Status::SENT
                }),
            }
        } else {
            let mut st = x.status;
            if let Some(e) = x.fault {
                st.fault = Some(fault(e));
                st.len = 0;
            }
            State::Done(st)
        };
        self.reqs.set(x.req, state);
        self.work[i].xfer = Transfer::IDLE;
        self.active -= 1;
        self.unawait_peer(x.peer);
        if !x.send && x.proto == Protocol::Pull {
            self.pull.outstanding = self
                .pull
                .outstanding
                .saturating_sub(x.arrivals.outstanding());
        }
        if self.active == 0 {
            self.pull.outstanding = 0;
        }
        self.ask_starved(nic);
    }

    /// Sends `fin` to `peer`; `false` if it must wait (see [`Self::ctl`]).
    pub(super) fn send_fin<N: Nic>(&mut self, nic: &mut N, peer: u16, fin: Fin) -> bool {
        let mut b = [0u8; Fin::LEN];
        fin.encode(&mut b);
        self.ctl(nic, peer, Kind::Fin, &b)
    }

    /// Sends a rendezvous control packet with `body`, waking the peer's
    /// progress thread; `false` if no slot or the NIC is busy (the transfer
    /// retries from `poll`).
    pub(super) fn ctl<N: Nic>(&mut self, nic: &mut N, dest: u16, kind: Kind, body: &[u8]) -> bool {
        let h = Header {
            len: body.len() as u32,
            ..self.header(dest, kind)
        };
        self.post_control(nic, dest, h, body, true)
    }

    /// From `poll`: retries what waited for a slot or a busy NIC, and on
    /// lossy transports recovers PULL transfers that stopped moving.
    pub(super) fn poll_transfers<N: Nic>(&mut self, now: u64, nic: &mut N) {
        if self.active == 0 {
            return;
        }
        for i in 0..self.reqs.capacity() {
            if !self.work[i].xfer.active {
                continue;
            }
            if self.work[i].xfer.owe != Owe::Nothing {
                self.send_owed(nic, i);
                continue;
            }
            let x = self.work[i].xfer;
            if x.stalled {
                self.pump(nic, i);
                continue;
            }
            if x.proto == Protocol::Pull {
                self.poll_pull(now, nic, i);
            }
        }
    }
}
