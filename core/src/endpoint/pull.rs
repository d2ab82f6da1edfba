//! PULL, the rendezvous of transports without RDMA (Open-MX's large
//! messages): the receiver asks for frames, a window at a time within a
//! budget all its receives share, and the sender answers each with a data
//! packet; on a lossy transport the receiver asks again and the sender
//! probes for a lost FIN. Per transfer, the frame windows of
//! [`super::pull_frames`]; per endpoint, [`Pulls`].

use super::rendezvous::{Reg, Transfer};
use super::*;
use crate::wire::rendezvous::{Fin, Probe, Protocol, Pull};

/// Retransmission timeouts a PULL receive waits while other receives'
/// frames keep arriving, before it asks again anyway.
pub(super) const PASSED_OVER: u64 = 16;

/// What all of an endpoint's PULL receives share.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pulls {
    /// Frames asked for and not yet arrived, across every receive.
    pub outstanding: u32,
    /// A receive found the budget spent and waits to ask.
    pub starved: bool,
    /// When a frame of any receive last arrived: frames still flowing mean
    /// the sender is serving, not that one was lost.
    pub last: u64,
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    pub(super) fn on_pull<N: Nic>(&mut self, now: u64, nic: &mut N, src: u16, p: Pull) -> bool {
        let Some(i) = self.named(p.sender, src, true) else {
            // Asked again after the FIN ended the send: nothing to serve.
            return !self.cfg.reliable;
        };
        let frames = self.work[i].xfer.len.div_ceil(self.cfg.eager_threshold);
        let x = &mut self.work[i].xfer;
        if p.receiver == 0
            || p.count == 0
            || p.first >= frames
            || p.count > frames - p.first
            || (x.remote_id != 0 && x.remote_id != p.receiver)
        {
            return false;
        }
        x.remote_id = p.receiver;
        x.last = now;
        for f in p.first..p.first + p.count {
            if !x.asked.insert(f) {
                return false;
            }
        }
        self.serve(now, nic, i);
        true
    }

    pub(super) fn on_data<N: Nic>(&mut self, now: u64, nic: &mut N, buf: RxBuf, h: Header) -> bool {
        let Some(i) = self.named(h.tag, h.src, false) else {
            // A late or repeated frame of a receive that already ended.
            return !self.cfg.reliable;
        };
        let frame = self.cfg.eager_threshold;
        let x = self.work[i].xfer;
        if x.proto != Protocol::Pull || h.seq >= x.arrivals.frames {
            return false;
        }
        let off = h.seq * frame;
        // A receive that truncates mid-frame takes the frame's first bytes.
        let expect = (x.len - off).min(frame);
        if h.len < expect || h.len > frame {
            return false;
        }
        let asked = self.work[i].xfer.arrivals.asked;
        if !self.work[i].xfer.arrivals.arrived(h.seq) {
            self.stats.duplicates += 1;
            return true;
        }
        if h.seq < asked {
            self.pull.outstanding = self.pull.outstanding.saturating_sub(1);
        }
        self.pull.last = now;
        nic.copy(
            Loc::User(x.buf, off),
            Loc::Rx(buf, HEADER_LEN as u32),
            expect as usize,
        );
        self.work[i].xfer.last = now;
        if self.work[i].xfer.arrivals.complete() {
            self.finish(nic, i);
        } else {
            self.ask(nic, i);
        }
        self.ask_starved(nic);
        true
    }

    /// A PULL sender got no FIN. A receive that is still live finishes (or
    /// asks again) by itself; one that is not has ended, since a receiver id
    /// reaches a sender only in this receiver's PULL and a matched receive
    /// ends only by finishing: the FIN is sent again. Nothing is kept of
    /// finished receives, so no history can be outrun.
    pub(super) fn on_probe<N: Nic>(&mut self, nic: &mut N, src: u16, p: Probe) -> bool {
        if self.cfg.reliable || p.receiver == 0 {
            return false;
        }
        if self.named(p.receiver, src, false).is_some() {
            return true;
        }
        self.stats.rndv_fin_repeats += 1;
        let fin = Fin {
            id: p.sender,
            fault: None,
        };
        // No slot now: the sender's next probe asks again.
        self.send_fin(nic, src, fin);
        true
    }

    /// PULL receiver: asks for frames up to the window's limit.
    pub(super) fn ask<N: Nic>(&mut self, nic: &mut N, i: usize) {
        let per = self.cfg.pull_frames as u32;
        let limit = per * self.cfg.pull_requests as u32;
        loop {
            let room = self.pull_budget().saturating_sub(self.pull.outstanding);
            if room == 0 {
                // Asked when another transfer's frames arrive or it ends.
                self.pull.starved = true;
                break;
            }
            let mut w = self.work[i].xfer.arrivals;
            let Some((first, count)) = w.next_ask(per.min(room), limit) else {
                break;
            };
            if !self.send_pull(nic, i, first, count) {
                // No slot now: the poll after one frees asks.
                break;
            }
            self.work[i].xfer.arrivals = w;
            self.pull.outstanding += count;
        }
        self.arm_transfer(i);
    }

    /// PULL frames all receives together may have asked for and not yet
    /// received: two transfers' windows, so one transfer streams at full
    /// window and many share it instead of overrunning the receive pool.
    pub(super) fn pull_budget(&self) -> u32 {
        2 * self.cfg.pull_frames as u32 * self.cfg.pull_requests as u32
    }

    /// Lets receives that found the PULL budget spent ask again.
    pub(super) fn ask_starved<N: Nic>(&mut self, nic: &mut N) {
        if !self.pull.starved || self.pull.outstanding >= self.pull_budget() {
            return;
        }
        self.pull.starved = false;
        for i in 0..self.reqs.capacity() {
            let x = &self.work[i].xfer;
            if x.active && !x.send && x.proto == Protocol::Pull && x.remote_id != 0 {
                self.ask(nic, i);
                if self.pull.starved {
                    return;
                }
            }
        }
    }

    pub(super) fn send_pull<N: Nic>(
        &mut self,
        nic: &mut N,
        i: usize,
        first: u32,
        count: u32,
    ) -> bool {
        let x = &self.work[i].xfer;
        let p = Pull {
            sender: x.remote_id,
            receiver: x.req.to_wire(),
            first,
            count,
        };
        let mut b = [0u8; Pull::LEN];
        p.encode(&mut b);
        let peer = x.peer;
        self.ctl(nic, peer, Kind::Pull, &b)
    }

    /// PULL sender: sends the frames asked for while slots allow.
    pub(super) fn serve<N: Nic>(&mut self, now: u64, nic: &mut N, i: usize) {
        let frame = self.cfg.eager_threshold;
        while let Some(f) = self.work[i].xfer.asked.first() {
            // The poll after a slot frees goes on.
            let Some(slot) = self.slots.take_spare() else {
                return;
            };
            let x = self.work[i].xfer;
            let off = f * frame;
            let n = (x.len - off).min(frame);
            let h = Header {
                tag: x.remote_id,
                seq: f,
                len: n,
                ..self.header(x.peer, Kind::Data)
            };
            let _ = h.encode(nic.slot_mut(SlotId(slot)));
            self.peers[x.peer as usize].carried(h.credit);
            if !self.gather_frame(nic, slot, &x, off, n) {
                nic.copy(
                    Loc::Slot(SlotId(slot), HEADER_LEN as u32),
                    Loc::User(x.buf, off),
                    n as usize,
                );
                self.slots[slot as usize] = SlotEntry {
                    peer: x.peer,
                    len: HEADER_LEN as u32 + n,
                    wake: true,
                    ..SlotEntry::default()
                };
                self.post_or_queue(nic, slot);
            }
            let x = &mut self.work[i].xfer;
            x.asked.pop();
            x.served = true;
            x.probes = 0;
            x.last = now;
        }
        self.arm_transfer(i);
    }

    /// PULL sender with a registered buffer: posts the header in `slot`
    /// with `n` bytes at `off` gathered straight from the buffer, if the
    /// connection may post now. `false`: not posted (the caller copies
    /// into the slot and queues it).
    pub(super) fn gather_frame<N: Nic>(
        &mut self,
        nic: &mut N,
        slot: u16,
        x: &Transfer,
        off: u32,
        n: u32,
    ) -> bool {
        let p = &self.peers[x.peer as usize];
        if matches!(x.reg, Reg::None) || !p.backlog.is_empty() || p.wqes >= self.cfg.send_wqes {
            return false;
        }
        let payload = Gather {
            // Within the registered buffer: `off + n` is at most its length.
            addr: x.addr.saturating_add(u64::from(off)),
            len: n,
            key: x.reg.key(),
        };
        self.slots[slot as usize] = SlotEntry {
            peer: x.peer,
            len: HEADER_LEN as u32,
            wake: true,
            sealed: true,
            ..SlotEntry::default()
        };
        match nic.post_send_gather(x.peer, SlotId(slot), HEADER_LEN, payload) {
            Ok(r) => {
                self.nic_ready();
                self.stats.packets_out += 1;
                if r == Posted::Later {
                    self.slots[slot as usize].in_nic = true;
                    self.peers[x.peer as usize].wqes += 1;
                } else {
                    self.free_slot(slot);
                }
                true
            }
            Err(PostError::Down) => {
                self.stats.post_down += 1;
                self.peer_down(x.peer);
                self.free_slot(slot);
                true
            }
            Err(PostError::Access | PostError::Unsupported) => {
                self.post_refused(x.peer);
                self.free_slot(slot);
                true
            }
            Err(PostError::Busy) => false,
        }
    }

    /// On lossy transports a PULL transfer keeps a timer: the receiver to
    /// ask again, the sender (once it sent every frame asked for) to probe
    /// for a lost FIN. A sender waiting for a slot resumes when one frees.
    pub(super) fn arm_transfer(&mut self, i: usize) {
        let x = &self.work[i].xfer;
        if self.cfg.reliable || !x.active || x.proto != Protocol::Pull {
            return;
        }
        if x.send && (!x.served || !x.asked.is_empty()) {
            return;
        }
        let rto = self.cfg.rto_ns;
        let mut at = x.last.saturating_add(self.backoff_ns(x.probes));
        if !x.send {
            // A receive asks again once no frame came for a timeout, or
            // once passed over long enough (see `poll_transfers`).
            let passed_over = x.last.saturating_add(rto.saturating_mul(PASSED_OVER));
            at = at.max(self.pull.last.saturating_add(rto)).min(passed_over);
        }
        self.arm(at);
    }

    /// From `poll`, for a PULL transfer: a sender serves what was asked or
    /// probes for a lost FIN; a receiver asks again for what is missing.
    pub(super) fn poll_pull<N: Nic>(&mut self, now: u64, nic: &mut N, i: usize) {
        let x = self.work[i].xfer;
        if x.send {
            if !x.asked.is_empty() {
                self.serve(now, nic, i);
            } else if !self.cfg.reliable
                && x.served
                && now >= x.last.saturating_add(self.backoff_ns(x.probes))
            {
                // No FIN: it may be lost. A probe makes a receiver that
                // ended repeat it; one still receiving asks on its own.
                let w = &mut self.work[i].xfer;
                w.last = now;
                w.probes = w.probes.saturating_add(1);
                let probe = Probe {
                    sender: x.req.to_wire(),
                    receiver: x.remote_id,
                };
                let mut b = [0u8; Probe::LEN];
                probe.encode(&mut b);
                self.stats.retransmits += 1;
                self.stats.rndv_probes += 1;
                self.ctl(nic, x.peer, Kind::Probe, &b);
            }
        } else if x.remote_id != 0 {
            // Frames asked for are missing after a timeout, unless
            // frames of other receives still flow (the sender serves
            // them first: the shared budget queues this one's); a
            // receive passed over that long asks again regardless.
            let rto = self.cfg.rto_ns;
            let quiet = now >= x.last.saturating_add(rto)
                && (now >= self.pull.last.saturating_add(rto)
                    || now >= x.last.saturating_add(rto.saturating_mul(PASSED_OVER)));
            if !self.cfg.reliable && quiet {
                let w = x.arrivals;
                let mut again = [(0u32, 0u32); 8];
                let mut n = 0;
                w.missing(|first, count| {
                    if n < again.len() {
                        again[n] = (first, count);
                        n += 1;
                    }
                });
                for &(first, count) in &again[..n] {
                    self.stats.retransmits += 1;
                    if !self.send_pull(nic, i, first, count) {
                        break;
                    }
                }
                self.work[i].xfer.last = now;
            }
            self.ask(nic, i);
        }
        self.arm_transfer(i);
    }
}
