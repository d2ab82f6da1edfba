//! `loop` behind the shell's transport seam.

use rmx_core::{Caps, PostError, RdmaOp, RegError, WorkId};

use super::{Port, PostErr, Wc};
use crate::transport::{Completion, Events, Mr, Recv, Transport, Work};

/// What a refused post means to the core.
fn post_error(e: PostErr) -> PostError {
    match e {
        PostErr::Rnr | PostErr::SqFull => PostError::Busy,
        PostErr::TooLong => PostError::Unsupported,
        PostErr::BadPeer => PostError::Down,
    }
}

fn done(wc: Wc) -> Completion {
    // Unsignalled inline sends completed with this one: one completion
    // for them all.
    let wr_id = match WorkId::from_wr_id(wc.wr_id) {
        Some(WorkId::Inline(peer)) if wc.sends > 1 => WorkId::Inlines {
            peer,
            count: wc.sends,
        }
        .wr_id(),
        _ => wc.wr_id,
    };
    Completion {
        wr_id,
        result: wc.status.to_core(),
    }
}

impl rmx_driver::Port for Port {
    fn caps(&self) -> Caps {
        let c = self.config();
        let clamp = |v: usize| v.min(u32::MAX as usize) as u32;
        Caps {
            rdma_write: true,
            rdma_read: true,
            write_imm: true,
            max_transfer: c.max_transfer,
            inline_max: clamp(c.inline_max),
            send_queue: c.sq_depth,
            rx_buffers: clamp(c.srq_depth),
            mtu: clamp(c.buf_size),
            lossy: false,
            cheap_gather: false,
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the domain's.
        unsafe { self.register_access(addr, len, 0) }.map_err(|_| RegError::NoResources)
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the domain's.
        unsafe { self.register_pages(addr, len) }.map_err(|_| RegError::NoResources)
    }

    fn deregister(&mut self, mr: Mr) {
        // Both kinds end the same way; the page record of a user one goes too.
        let _ = self.deregister_pages(mr);
    }

    // Each caller posts one kind of work: inlined, the match folds to
    // that kind and the post costs no call.
    #[inline(always)]
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        let r = match work {
            Work::Send {
                sges,
                solicited: true,
            } => self.post_send_solicited(peer, wr_id, sges),
            Work::Send {
                sges,
                solicited: false,
            } => Port::post_send(self, peer, wr_id, sges),
            Work::Inline { head, body, signal } => {
                let r = match signal {
                    true => self.post_send_inline(peer, wr_id, head, body),
                    false => self.post_send_inline_unsignalled(peer, wr_id, head, body),
                };
                return r.map(|()| None).map_err(post_error);
            }
            Work::Rdma { op, local, remote } => {
                let Ok(raddr) = usize::try_from(remote.addr) else {
                    return Err(PostError::Access);
                };
                match op {
                    RdmaOp::Write => self.post_write(peer, wr_id, local, raddr, remote.key.0, None),
                    RdmaOp::Read => self.post_read(peer, wr_id, local, raddr, remote.key.0),
                }
            }
            Work::WriteImm { local, remote, imm } => {
                let Ok(raddr) = usize::try_from(remote.addr) else {
                    return Err(PostError::Access);
                };
                self.post_write(peer, wr_id, local, raddr, remote.key.0, Some(imm))
            }
        };
        r.map(|w| w.map(done)).map_err(post_error)
    }

    #[inline]
    fn poll_recv(&mut self) -> Option<Recv> {
        Port::poll_recv(self).map(|wc| Recv {
            buf: wc.buf,
            imm: wc.imm,
        })
    }

    #[inline]
    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        Port::rx_bytes(self, buf)
    }

    #[inline]
    fn repost(&mut self, buf: u32) -> bool {
        Port::repost(self, buf)
    }

    #[inline]
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        self.poll_cq_each(out.len(), |wc| {
            out[n] = done(wc);
            n += 1;
        })
    }

    fn drain(&mut self) {
        Port::drain(self)
    }
}

impl Transport for Port {
    #[inline]
    fn rank(&self) -> u16 {
        Port::rank(self)
    }

    fn events(&self) -> Events {
        Events::Loop(Port::events(self))
    }

    #[inline]
    fn busy(&self) -> bool {
        self.nic_working()
    }
}
