//! The embedded endpoint as the driver's tasks see a rank
//! ([`Messages`]): each post names its bytes by a user-buffer handle for
//! the core, given back when the request ends. The C entry points for
//! sends and receives take the same path.

use crate::port::Port;
use crate::task::Messages;
use rmx_core::{RecvError, Request, RequestError, SendError, Source, Status, TagSel, UserBuf};

use super::endpoint::rmx_ep_t;
use super::request::EpReq;

impl rmx_ep_t {
    /// Starts an operation on `len` bytes at `ptr`, named by a handle the
    /// core gets back when the request ends (at once if it ended during
    /// the call, or was refused).
    ///
    /// # Safety
    /// The bytes stay valid until the request ends.
    unsafe fn start<E>(
        &mut self,
        ptr: usize,
        len: usize,
        full: E,
        op: impl FnOnce(&mut Self, UserBuf) -> Result<Request, E>,
    ) -> Result<EpReq, E> {
        // SAFETY: the caller's contract; the handle goes back below or
        // when the request ends (`test`).
        let Some(buf) = (unsafe { self.nic.add_user(ptr, len) }) else {
            return Err(full);
        };
        match op(self, buf) {
            Ok(req) if req == Request::COMPLETE => {
                self.nic.drop_user(buf);
                Ok(EpReq { req, buf: None })
            }
            Ok(req) => Ok(EpReq {
                req,
                buf: Some(buf),
            }),
            Err(e) => {
                self.nic.drop_user(buf);
                Err(e)
            }
        }
    }
}

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
        let full = SendError::RequestTableFull;
        // SAFETY: the caller's contract.
        unsafe {
            self.start(data as usize, len, full, |e, buf| {
                e.ep.isend(e.now, &mut e.nic, dest, tag, context, buf, len32)
            })
        }
    }

    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<EpReq, RecvError> {
        let full = RecvError::RequestTableFull;
        // SAFETY: the caller's contract.
        let r = unsafe {
            self.start(data as usize, len, full, |e, buf| {
                // A buffer past 4 GiB takes any message whole.
                let cap = len.min(u32::MAX as usize) as u32;
                e.ep.irecv(e.now, &mut e.nic, src, tag, context, buf, cap)
            })
        };
        // A matched rendezvous may have asked for its data.
        self.nic.port().doorbell();
        r
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
