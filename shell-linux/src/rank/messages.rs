//! The driver layer's tasks ([`rmx_driver::task`]) on a std rank: posts
//! name their bytes by a user-buffer handle for the core, which goes back
//! when the request completes; the rank's own sends and receives take the
//! same path.

use rmx_core::{
    RecvError, Request, RequestError, SendError, Source, Status, TagSel, Taken, UserBuf,
};
use rmx_driver::task::Messages;

use super::{CoreEndpoint, Driver, Req, ShellNic, NO_USER};
use crate::clock::now_ns;
use crate::transport::Transport;

impl<T: Transport> Driver<T> {
    /// Starts an operation on `len` bytes at `ptr`: names them by a user-buffer
    /// handle for the core, and gives the handle back if the core refuses.
    /// `full` if every handle is in use (as many as requests).
    ///
    /// # Safety
    /// The bytes stay valid until the request completes.
    #[inline]
    unsafe fn start<E>(
        &mut self,
        ptr: usize,
        len: usize,
        full: E,
        op: impl FnOnce(&mut CoreEndpoint, &mut ShellNic<T>, u64, UserBuf) -> Result<Request, E>,
    ) -> Result<Req, E> {
        let (ep, now) = (&mut self.ep, self.now);
        // SAFETY: the caller's contract; the handle goes back when the
        // request completes (`test`). One that ended during the call (an
        // eager send copied out) holds none: its handle serves the next
        // request at once, however long the caller keeps this one.
        let (req, buf) = unsafe {
            self.nic
                .lend(ptr, len, full, |nic, buf| op(ep, nic, now, buf))
        }?;
        Ok(Req {
            req,
            buf: buf.unwrap_or(NO_USER),
        })
    }
}

impl<T: Transport> Driver<T> {
    /// A send's bytes wait in the backlog: as after any send that leaves
    /// one, send entries the NIC freed take it now, not at the next wait.
    #[cold]
    #[inline(never)]
    fn queued_now(&mut self) {
        self.completions();
    }
}

impl<T: Transport> Messages for Driver<T> {
    type Req = Req;

    #[inline]
    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        data: *const u8,
        len: usize,
    ) -> Result<Req, SendError> {
        let Ok(len32) = u32::try_from(len) else {
            return Err(SendError::TooLong);
        };
        if let Some((m, q)) = &self.watch {
            // Memory unmapped before this call must not be sent from.
            m.settle();
            self.ep.apply_invalidations(&mut self.nic, q);
        }
        // A message whose bytes the core takes during the call needs no
        // handle: it leaves inline, or waits copied into the backlog
        // ([`isend_now`] decides).
        // An empty send may name no memory at all: it goes by handle.
        //
        // [`isend_now`]: rmx_core::Endpoint::isend_now
        if len > 0 {
            // SAFETY: the caller's contract: `len` readable bytes at `data`
            // (not null, as `len` > 0), read only during this call here.
            let bytes = unsafe { std::slice::from_raw_parts(data, len) };
            match self
                .ep
                .isend_now(self.now, &mut self.nic, dest, tag, context, bytes)
            {
                Some(Ok(taken)) => {
                    if taken == Taken::Queued {
                        self.queued_now();
                    }
                    return Ok(Req {
                        req: Request::COMPLETE,
                        buf: NO_USER,
                    });
                }
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        let full = SendError::RequestTableFull;
        // SAFETY: the caller's contract.
        let r = unsafe {
            self.start(data as usize, len, full, |ep, nic, now, buf| {
                ep.isend(now, nic, dest, tag, context, buf, len32)
            })
        };
        // Sends wait for free send entries: take the completions the NIC
        // has, so they leave now rather than at the next wait.
        if !self.ep.flushed() {
            self.completions();
        }
        // No doorbell: a window of sends leaves in one batch at the next
        // wait, test or progress, and messages that find every send entry
        // still queued are packed by the core meanwhile.
        r
    }

    #[inline]
    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<Req, RecvError> {
        let full = RecvError::RequestTableFull;
        // SAFETY: the caller's contract.
        let r = unsafe {
            self.start(data as usize, len, full, |ep, nic, now, buf| {
                // A buffer past 4 GiB takes any message whole.
                let len = len.min(u32::MAX as usize) as u32;
                ep.irecv(now, nic, src, tag, context, buf, len)
            })
        };
        // A matched rendezvous may have asked for its data.
        self.nic.port().doorbell();
        r
    }

    #[inline]
    fn test(&mut self, req: Req) -> Result<Status, Req> {
        match self.ep.test(req.req) {
            Ok(Some(st)) => {
                self.nic.drop_user(req.buf);
                Ok(st)
            }
            Ok(None) => Err(req),
            Err(RequestError::Stale) => unreachable!("Req is consumed when it completes"),
        }
    }

    fn cancel(&mut self, req: &Req) {
        let _ = self.ep.cancel(req.req);
    }

    fn free_requests(&self) -> usize {
        self.ep.free_requests()
    }

    fn stalled(&self) -> bool {
        self.idle >= super::thread::CLOCK_POLLS - 1
    }

    fn group_intact(&self) -> bool {
        self.ep.group_intact()
    }

    fn watch_all(&mut self, on: bool) {
        match on {
            true => self.ep.watch_all(now_ns()),
            false => self.ep.unwatch_all(),
        }
    }
}
