//! RPUT and RGET: the RDMA side of a transfer (the RPUT sender writes, the
//! RGET receiver reads) posts the message in operations of at most the
//! transport's maximum size, then the FIN ends both sides.

use super::rendezvous::Owe;
use super::*;
use crate::nic::{RdmaError, RdmaOp, Remote};
use crate::wire::rendezvous::{Cts, Protocol};

impl<S: Storage, Z: SendReuse> Endpoint<S, Z> {
    pub(super) fn on_cts<N: Nic>(&mut self, nic: &mut N, src: u16, c: Cts) -> bool {
        let Some(i) = self.named(c.sender, src, true) else {
            return false;
        };
        let x = &mut self.work[i].xfer;
        if x.proto != Protocol::Rput || x.remote_id != 0 || c.receiver == 0 {
            return false;
        }
        x.remote = c.remote;
        x.remote_id = c.receiver;
        x.len = x.len.min(c.len);
        if x.len == 0 {
            x.owe = Owe::Fin;
            self.settle(nic, i);
        } else {
            self.pump(nic, i);
        }
        true
    }

    /// RDMA side (RGET receiver, RPUT sender): posts the transfer in
    /// operations of at most the transport's maximum size.
    pub(super) fn pump<N: Nic>(&mut self, nic: &mut N, i: usize) {
        let max = nic.caps().max_transfer.max(1);
        let op = if self.work[i].xfer.send {
            RdmaOp::Write
        } else {
            RdmaOp::Read
        };
        self.work[i].xfer.stalled = false;
        // The remote address came from the wire: a range past the end of
        // the address space is an access error on both sides, never a wrap.
        let x = self.work[i].xfer;
        let end = u64::from(x.len);
        if x.addr.checked_add(end).is_none() || x.remote.addr.checked_add(end).is_none() {
            self.work[i].xfer.fault = Some(RdmaError::Access);
        }
        loop {
            let x = self.work[i].xfer;
            if x.posted >= x.len || x.fault.is_some() {
                break;
            }
            let n = (x.len - x.posted).min(max);
            // Within the ranges checked above.
            let at = u64::from(x.posted);
            let local = Gather {
                addr: x.addr.saturating_add(at),
                len: n,
                key: x.reg.key(),
            };
            let remote = Remote {
                addr: x.remote.addr.saturating_add(at),
                key: x.remote.key,
            };
            let work = WorkId::Rdma(x.req.to_wire());
            let r = nic.post_rdma(x.peer, work, op, local, remote);
            let x = &mut self.work[i].xfer;
            match r {
                Ok(Posted::Done) => x.posted += n,
                Ok(Posted::Later) => {
                    x.posted += n;
                    x.chunks += 1;
                }
                Err(PostError::Busy) => {
                    x.stalled = true;
                    self.nic_busy(Timer::Rndv);
                    self.stats.post_busy += 1;
                    return;
                }
                Err(PostError::Access) => x.fault = Some(RdmaError::Access),
                Err(PostError::Unsupported) => x.fault = Some(RdmaError::Down),
                Err(PostError::Down) => {
                    x.fault = Some(RdmaError::Down);
                    let peer = x.peer;
                    self.peer_down(peer);
                }
            }
            self.stats.rdma_ops += 1;
        }
        self.settle(nic, i);
    }

    /// An RDMA operation posted with `Posted::Later` completed.
    pub fn on_rdma_complete<N: Nic>(
        &mut self,
        nic: &mut N,
        id: u32,
        result: Result<(), RdmaError>,
    ) {
        let r = Request::from_wire(id);
        let i = r.index();
        match self.work.get(i).map(|w| &w.xfer) {
            Some(x) if x.active && x.req == r && x.chunks > 0 => {}
            _ => return,
        }
        let x = &mut self.work[i].xfer;
        x.chunks -= 1;
        if let Err(e) = result {
            x.fault = Some(e);
            if e == RdmaError::Down {
                // The connection broke: the peer is failed at the next poll.
                let peer = x.peer;
                self.peer_down(peer);
            }
        }
        self.settle(nic, i);
    }

    /// RDMA side: once every operation completed (or one failed and the
    /// rest drained), the peer is told by FIN and this side ends.
    pub(super) fn settle<N: Nic>(&mut self, nic: &mut N, i: usize) {
        let x = self.work[i].xfer;
        if x.chunks > 0 || (x.posted < x.len && x.fault.is_none()) {
            return;
        }
        if x.fault.is_some() {
            self.stats.rdma_faults += 1;
        }
        self.finish(nic, i);
    }
}
