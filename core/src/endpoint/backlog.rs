//! Posting bounce slots to the NIC: each connection has a bounded number of
//! send entries, and what finds none waits in the peer's backlog, in order,
//! until a completion frees one.

use super::*;

/// What became of a bounce slot's post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Post {
    /// Posted (or queued for a send entry), or lost with a broken
    /// connection, as any send on it is.
    Posted,
    /// The NIC was busy: nothing happened.
    Busy,
    /// The NIC refused it for good: its connection fails.
    Refused(PostError),
}

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// Puts `slot` at the tail of its peer's backlog.
    pub(super) fn enqueue(&mut self, slot: u16) {
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
    pub(super) fn drain<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        let d = peer as usize;
        while self.peers[d].wqes < self.cfg.send_wqes {
            let Some(slot) = self.peers[d].backlog.head() else {
                return;
            };
            let p = &self.peers[d];
            Header::refresh(nic.slot_mut(SlotId(slot)), p.rx_next, p.limit);
            let credit = p.limit;
            if self.post_now(nic, slot) == Post::Busy {
                return;
            }
            self.peers[d].carried(credit);
            self.peers[d].backlog.pop_front(self.slots.all(), BACKLOG);
            let m = &mut self.slots[slot as usize];
            m.unposted = false;
            self.free_slot(slot);
        }
    }

    /// Posts what the backlogs hold, as far as free send entries allow.
    pub(super) fn drain_all<N: Nic>(&mut self, nic: &mut N) {
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

    /// Posts an encoded slot, or queues it behind its peer's backlog when the
    /// connection has no free send entry or the NIC is busy; `Refused` if
    /// the NIC refused it for good (its connection then fails).
    #[inline]
    pub(super) fn post_or_queue<N: Nic>(&mut self, nic: &mut N, slot: u16) -> Post {
        let p = &self.peers[self.slots[slot as usize].peer as usize];
        let r = match !p.backlog.is_empty() || p.wqes >= self.cfg.send_wqes {
            true => Post::Busy,
            false => self.post_now(nic, slot),
        };
        if r == Post::Busy {
            self.enqueue(slot);
            return Post::Posted;
        }
        self.slots.put(slot);
        r
    }

    /// Posts `slot` now: `Busy` if the NIC was busy (nothing happened).
    /// The caller frees the slot if nothing else holds it.
    #[inline]
    pub(super) fn post_now<N: Nic>(&mut self, nic: &mut N, slot: u16) -> Post {
        let m = self.slots[slot as usize];
        if self.inlines_slot(&m) && self.post_slot_inline(nic, slot, &m) {
            return Post::Posted;
        }
        let r = if m.wake {
            nic.post_send_solicited(m.peer, SlotId(slot), m.len as usize)
        } else {
            nic.post_send(m.peer, SlotId(slot), m.len as usize)
        };
        match r {
            Ok(r) => {
                self.nic_ready();
                if r == Posted::Later {
                    self.slots[slot as usize].in_nic = true;
                    self.peers[m.peer as usize].wqes += 1;
                }
                self.stats.packets_out += 1;
            }
            Err(PostError::Busy) => {
                self.stats.post_busy += 1;
                self.nic_busy(Timer::Retry);
                return Post::Busy;
            }
            Err(PostError::Down) => {
                self.stats.post_down += 1;
                self.peer_down(m.peer);
            }
            Err(e @ (PostError::Access | PostError::Unsupported)) => {
                self.post_refused(m.peer);
                self.slots[slot as usize].sealed = true;
                return Post::Refused(e);
            }
        }
        self.slots[slot as usize].sealed = true;
        Post::Posted
    }

    /// Whether slot entry `m` may go as an inline send: on a reliable
    /// transport (nothing keeps the packet to send again), a packet whose
    /// bytes are all in the slot (not a zero-copy send's header) and not
    /// solicited, with a payload up to `inline_max`.
    fn inlines_slot(&self, m: &SlotEntry) -> bool {
        self.cfg.reliable
            && !m.wake
            && m.pin.is_none()
            && m.req.is_none()
            && (m.len as usize)
                .checked_sub(HEADER_LEN)
                .is_some_and(|body| body <= self.cfg.inline_max as usize)
    }

    /// Posts `slot` (entry `m`) as an inline send, as a message that found
    /// a free send entry at once goes: copied out during the call, so the
    /// slot is free when it returns (the caller frees it), and the send
    /// completes as an inline one, with the run of unsignalled ones it
    /// ends: a window of queued small messages costs the device a
    /// completion per run, not one each. Whether it went; if not (the NIC
    /// sends nothing inline, or refused it), nothing happened and the
    /// caller posts the slot as usual.
    fn post_slot_inline<N: Nic>(&mut self, nic: &mut N, slot: u16, m: &SlotEntry) -> bool {
        let d = m.peer as usize;
        let signal = self.signal_inline(d);
        // At least HEADER_LEN: checked by `inlines_slot`.
        match nic.send_inline_slot(m.peer, SlotId(slot), m.len as usize, signal) {
            Ok(r) => {
                self.nic_ready();
                self.inline_posted(d, r, signal, None);
                self.slots[slot as usize].sealed = true;
                true
            }
            Err(_) => false,
        }
    }

    /// The NIC finished a send posted with [`Posted::Later`]: its send entry
    /// is free, and the slot (and, for a zero-copy send, the user buffer
    /// behind it) is no longer read. Posts what waits in the peer's backlog.
    /// Shorthand for a successful [`on_completion`](Self::on_completion).
    pub fn on_send_complete<N: Nic>(&mut self, nic: &mut N, slot: SlotId) {
        self.send_completed(nic, slot, Ok(()));
    }

    /// The NIC finished the work request posted with `wr_id` (see
    /// [`WorkId`]), with `result` as the transport's status maps onto it.
    /// An id that names nothing outstanding (one the core never made, a
    /// slot not in the NIC, an inline send never posted) is counted in
    /// `unknown_completions` and ignored.
    pub fn on_completion<N: Nic>(&mut self, nic: &mut N, wr_id: u64, result: WcResult) {
        match WorkId::from_wr_id(wr_id) {
            Some(WorkId::Send(slot)) => self.send_completed(nic, slot, result),
            Some(WorkId::Inline(peer)) => self.inline_completed(nic, peer, 1, result),
            Some(WorkId::Inlines { peer, count }) => {
                self.inline_completed(nic, peer, count, result)
            }
            Some(WorkId::Rdma(id)) => self.on_rdma_complete(nic, id, result),
            // A window's: the shell hands it to the window's epoch.
            Some(WorkId::Window { .. }) | None => self.stats.unknown_completions += 1,
        }
    }

    /// An inline send to `peer` that returned [`Posted::Later`] completed.
    /// Shorthand for a successful [`on_completion`](Self::on_completion).
    pub fn on_inline_complete<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        self.inline_completed(nic, peer, 1, Ok(()));
    }

    fn send_completed<N: Nic>(&mut self, nic: &mut N, slot: SlotId, result: WcResult) {
        let Some(m) = self.slots.get_mut(slot.0 as usize).filter(|m| m.in_nic) else {
            self.stats.unknown_completions += 1;
            return;
        };
        m.in_nic = false;
        let (pin, req, peer) = (m.pin.take(), m.req.take(), m.peer);
        if let Some(id) = pin {
            self.reuse.release(nic, id);
        }
        if let Some(r) = req {
            let state = match result {
                Ok(()) => State::SendDone,
                Err(e) => State::Done(Status {
                    fault: Some(Self::send_fault(e)),
                    ..Status::SENT
                }),
            };
            self.reqs.set(r, state);
        }
        self.send_failed(peer, result);
        self.free_slot(slot.0);
        self.entry_free(nic, peer);
    }

    /// `count` inline sends to `peer` completed. More than are in the NIC
    /// names sends never posted: counted as unknown, and none is taken.
    fn inline_completed<N: Nic>(&mut self, nic: &mut N, peer: u16, count: u32, result: WcResult) {
        let Some(p) = self.peers.all_mut()[..self.npeers as usize]
            .get_mut(peer as usize)
            .filter(|p| count >= 1 && count <= u32::from(p.inlines))
        else {
            self.stats.unknown_completions += 1;
            return;
        };
        // Fits: at most `p.inlines`, a u16.
        let n = count as u16;
        p.inlines -= n;
        p.quiet = p.quiet.min(p.inlines);
        self.send_failed(peer, result);
        self.entries_free(nic, peer, n);
    }

    /// How a send whose completion reports `e` ends: a broken connection
    /// (verbs' flushed or retry-exceeded sends, a dead peer on a reliable
    /// transport) fails the peer; a key or bound error fails the send.
    fn send_fault(e: RdmaError) -> RecvFault {
        match e {
            RdmaError::Down => RecvFault::PeerFailed,
            RdmaError::Access => RecvFault::Rdma(e),
        }
    }

    /// A send to `peer` completed with `result`: an error is counted, and a
    /// broken connection takes the peer down (failed at the next poll), so
    /// what else waits for it ends too. A message already reported sent is
    /// lost with its peer, as on any failed connection.
    fn send_failed(&mut self, peer: u16, result: WcResult) {
        if let Err(e) = result {
            self.stats.send_faults += 1;
            if e == RdmaError::Down {
                self.peer_down(peer);
            }
        }
    }

    /// Gives slot `s` back to the pool if nothing holds it any more; sends
    /// queued for a slot and transfers waiting for one go on at the next poll.
    #[inline]
    pub(super) fn free_slot(&mut self, s: u16) {
        if self.slots.put(s) {
            self.slot_freed();
        }
    }

    /// One of `peer`'s send entries came free: its backlog may go on.
    pub(super) fn entry_free<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        self.entries_free(nic, peer, 1);
    }

    /// `n` of `peer`'s send entries came free at once.
    pub(super) fn entries_free<N: Nic>(&mut self, nic: &mut N, peer: u16, n: u16) {
        let p = &mut self.peers[peer as usize];
        p.wqes = p.wqes.saturating_sub(n);
        if !p.backlog.is_empty() {
            self.drain(nic, peer);
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
}
