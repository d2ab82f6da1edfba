//! Peers that fail. A peer is given up once silent for
//! `Config::peer_timeout_ns` while something here waits on it (lossy
//! transports, see `liveness`), once it says it gave this rank up (GONE),
//! or once the transport reports its connection down (a post, or a
//! completion with `RdmaError::Down`). Then every request to or from it
//! ends with [`RecvFault::PeerFailed`]: sends waiting for credit,
//! rendezvous transfers (once the NIC is done with their buffers),
//! receives posted for it; later calls naming it are refused
//! ([`SendError::PeerFailed`], [`RecvError::PeerFailed`]) and its packets
//! are dropped and answered with GONE. So a rank whose peer process died
//! fails with an error that says so instead of waiting for ever. Receives
//! posted for any source stay while another peer may still match them.

use super::medium::failed_status;
use super::*;

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    /// Whether `peer` was given up as failed.
    pub fn failed(&self, peer: u16) -> bool {
        peer < self.npeers && self.peers[peer as usize].failed
    }

    /// The transport reported `peer`'s connection down. It is failed at the
    /// next poll, not here: the caller may be walking the peer's lists.
    /// The NIC refused a post to `peer` for good ([`PostError::Access`] or
    /// [`PostError::Unsupported`]) though the packet was sequenced and
    /// counted against credit: the connection cannot go on in order, so
    /// it fails as a broken one does, and whatever waits on it ends.
    pub(super) fn post_refused(&mut self, peer: u16) {
        self.stats.post_refused += 1;
        self.peer_down(peer);
    }

    pub(super) fn peer_down(&mut self, peer: u16) {
        let p = &mut self.peers[peer as usize];
        if !p.down && !p.failed {
            p.down = true;
            self.downs = true;
            self.timers.arm(Timer::Down, 0);
        }
    }

    /// Fails the peers reported down since the last poll.
    pub(super) fn fail_down_peers<N: Nic>(&mut self, nic: &mut N) {
        if !core::mem::take(&mut self.downs) {
            return;
        }
        for i in 0..self.npeers {
            if self.peers[i as usize].down {
                self.fail_peer(nic, i);
            }
        }
    }

    /// Gives `peer` up: frees what waits for it and ends every request that
    /// names it.
    pub(super) fn fail_peer<N: Nic>(&mut self, nic: &mut N, peer: u16) {
        let d = peer as usize;
        if self.peers[d].failed {
            return;
        }
        debug!("rmx: rank {} gives up on rank {}", self.me, peer);
        self.stats.peers_failed += 1;
        let p = &mut self.peers[d];
        p.failed = true;
        p.down = false;
        (p.rto_at, p.ack_at, p.ask_at, p.asked) = (None, None, None, false);
        // Packets that wait for a send entry or an acknowledgement.
        while let Some(s) = self.peers[d].backlog.pop_front(self.slots.all(), BACKLOG) {
            self.slots[s as usize].unposted = false;
            self.free_slot(s);
        }
        while let Some(s) = self.peers[d].unacked.pop_front(self.slots.all(), UNACKED) {
            self.slots[s as usize].awaiting_ack = false;
            self.free_slot(s);
        }
        // Eager sends waiting for credit; a rendezvous's ends with its transfer.
        for _ in 0..self.queued.len() {
            let Some(i) = self.queued.pop_front(self.reqs.all(), 0) else {
                break;
            };
            let q = self.work[i as usize].send;
            if q.dest != peer {
                self.queued.push_back(self.reqs.all_mut(), 0, i);
            } else if !q.rndv {
                let st = Status {
                    tag: q.tag,
                    ..failed_status(peer)
                };
                self.reqs.set(q.req, State::Done(st));
            }
        }
        self.priority_queued -= self.peers[d].priority_queued;
        let p = &mut self.peers[d];
        (p.queued, p.need, p.priority_queued) = (0, 0, 0);
        self.fail_transfers(nic, peer);
        self.fail_assembly(peer);
        // Receives posted for this peer alone.
        while let Some(pr) = self.matcher.remove_posted_from(peer) {
            self.reqs.set(pr.req, State::Done(failed_status(peer)));
        }
        // Receives for any source, once no other peer is left to match them.
        let me = self.me as usize;
        let left = self.peers.all()[..self.npeers as usize]
            .iter()
            .enumerate()
            .any(|(i, p)| i != me && !p.failed);
        if !left && self.npeers > 1 {
            while let Some(pr) = self.matcher.remove_posted_any() {
                self.reqs.set(pr.req, State::Done(failed_status(peer)));
            }
        }
    }
}
