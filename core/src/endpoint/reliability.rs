//! The reliability layer of lossy transports (go-back-N: cumulative
//! acknowledgements, retransmission after a timeout, NACK of a gap) and the
//! control packets that carry acknowledgements and credit.

use super::*;

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    #[inline]
    pub(super) fn arm_ack(&mut self, now: u64, src: usize) {
        if let Some(t) = self.peers[src].delay_ack(now, self.cfg.ack_delay_ns) {
            self.arm(t);
        }
    }

    /// Applies a cumulative ack; `false` if it acknowledges what was never sent.
    pub(super) fn take_ack(&mut self, now: u64, src: usize, ack: u32) -> bool {
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

    /// Lossy transports keep every data slot until it is acknowledged.
    #[inline]
    pub(super) fn track_unacked(&mut self, now: u64, d: usize, slot: u16) {
        if self.cfg.reliable {
            return;
        }
        if self.peers[d].rto_at.is_none() {
            // Waiting for an acknowledgement begins: silence counts from now.
            self.start_waiting(now, d as u16);
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

    /// Re-sends every unacknowledged packet to `peer` (go-back-N).
    pub(super) fn retransmit<N: Nic>(&mut self, now: u64, nic: &mut N, peer: usize) {
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

    /// Sends an ACK (with credit) or a NACK; `false` if no slot or the NIC is busy
    /// (the caller's timer or the next event tries again, no sooner than
    /// `retry_at`: slots free when sends complete, which takes time).
    pub(super) fn send_control<N: Nic>(
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
    pub(super) fn post_control<N: Nic>(
        &mut self,
        nic: &mut N,
        dest: u16,
        h: Header,
        body: &[u8],
        wake: bool,
    ) -> bool {
        if self.peers[dest as usize].failed {
            return true; // nobody to tell: as good as sent
        }
        self.post_notice(nic, dest, h, body, wake)
    }

    /// Posts `h` with `body` from a bounce slot, even to a failed peer (a
    /// GONE notice goes to nobody else); `false` if no slot or the NIC is busy.
    pub(super) fn post_notice<N: Nic>(
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
            Err(e) => {
                self.slots.put(slot);
                match e {
                    PostError::Busy => {
                        self.stats.post_busy += 1;
                        false
                    }
                    PostError::Down => {
                        self.stats.post_down += 1;
                        self.peer_down(dest);
                        true
                    }
                    // Retried, it would be refused again for ever.
                    PostError::Access | PostError::Unsupported => {
                        self.post_refused(dest);
                        true
                    }
                }
            }
        }
    }
}
