//! The embedded endpoint as the driver's tasks see a rank
//! ([`Messages`]): each post names its bytes by a user-buffer handle for
//! the core, given back when the request ends. The C entry points for
//! sends and receives take the same path.

use crate::port::Port;
use crate::task::Messages;
use rmx_core::{RecvError, Request, RequestError, SendError, Source, Status, TagSel};

use super::endpoint::rmx_ep_t;
use super::request::EpReq;

impl Messages for rmx_ep_t {
    type Req = EpReq;

    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        data: *const u8,
        len: usize,
    ) -> Result<EpReq, SendError> {
        let len32 = u32::try_from(len).map_err(|_| SendError::TooLong)?;
        let (ep, now) = (&mut self.ep, self.now);
        let full = SendError::RequestTableFull;
        // SAFETY: the caller's contract.
        let (req, buf) = unsafe {
            self.nic.lend(data as usize, len, full, |nic, buf| {
                ep.isend(now, nic, dest, tag, context, buf, len32)
            })
        }?;
        Ok(EpReq { req, buf })
    }

    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<EpReq, RecvError> {
        let (ep, now) = (&mut self.ep, self.now);
        let full = RecvError::RequestTableFull;
        // A buffer past 4 GiB takes any message whole.
        let cap = len.min(u32::MAX as usize) as u32;
        // SAFETY: the caller's contract.
        let r = unsafe {
            self.nic.lend(data as usize, len, full, |nic, buf| {
                ep.irecv(now, nic, src, tag, context, buf, cap)
            })
        };
        // A matched rendezvous may have asked for its data.
        self.nic.port().doorbell();
        let (req, buf) = r?;
        Ok(EpReq { req, buf })
    }

    fn test(&mut self, req: EpReq) -> Result<Status, EpReq> {
        if req.req == Request::COMPLETE {
            return Ok(Status {
                source: 0,
                tag: 0,
                len: 0,
                fault: None,
            });
        }
        match self.ep.test(req.req) {
            Ok(Some(st)) => {
                if let Some(b) = req.buf {
                    self.nic.drop_user(b);
                }
                Ok(st)
            }
            Ok(None) => Err(req),
            // An `EpReq` is spent when it ends: it never goes stale.
            Err(RequestError::Stale) => unreachable!("a spent request tested"),
        }
    }

    fn cancel(&mut self, req: &EpReq) {
        let _ = self.ep.cancel(req.req);
    }

    fn free_requests(&self) -> usize {
        self.ep.free_requests()
    }

    fn group_intact(&self) -> bool {
        self.ep.group_intact()
    }

    fn watch_all(&mut self, on: bool) {
        match on {
            true => self.ep.watch_all(self.now),
            false => self.ep.unwatch_all(),
        }
    }
}
