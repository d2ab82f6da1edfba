//! What a task needs of the rank it runs on: two-sided messages in a
//! context of its own, their completion, and the group's liveness.

use rmx_core::{RecvError, SendError, Source, Status, TagSel};

/// A rank as the tasks see it. The std shell implements it over its
/// endpoint and adapter, a simulator over its simulated rank.
pub trait Messages {
    /// A posted request, spent by [`test`](Self::test) once complete.
    type Req;

    /// Starts a send of `len` bytes at `data`.
    ///
    /// # Safety
    /// The bytes stay valid and unchanged until the request completes.
    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        data: *const u8,
        len: usize,
    ) -> Result<Self::Req, SendError>;

    /// Starts a receive into `len` bytes at `data`.
    ///
    /// # Safety
    /// The bytes stay valid, and untouched, until the request completes.
    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<Self::Req, RecvError>;

    /// The request's status once complete; otherwise the request, back.
    fn test(&mut self, req: Self::Req) -> Result<Status, Self::Req>;

    /// Cancels a receive that has not matched (a send, or a matched
    /// receive, runs on to its end).
    fn cancel(&mut self, req: &Self::Req);

    /// Stops tracking a send the task no longer waits for: the group lost
    /// a rank, and a live peer that left the step will never take it.
    /// The request runs on in the endpoint (a group that lost a rank runs
    /// no later step that could match it); its handle is not reused.
    fn forget(&mut self, req: Self::Req) {
        let _ = req;
    }

    /// Request handles free: a task's sends are paced by them, so that
    /// what the rank receives meanwhile finds some. `usize::MAX` if
    /// unknown.
    fn free_requests(&self) -> usize {
        usize::MAX
    }

    /// The rank has polled nothing for a while: what a task does beside
    /// its wait (posting the receive of operations that may come) starts
    /// only then, so waits that end quickly pay nothing for it. `true` if
    /// the rank cannot tell.
    fn stalled(&self) -> bool {
        true
    }

    /// No rank of the group has been given up
    /// ([`rmx_core::Endpoint::group_intact`]).
    fn group_intact(&self) -> bool;

    /// A step of every rank starts (`true`) or ends: the endpoint watches
    /// every rank's liveness meanwhile ([`rmx_core::Endpoint::watch_all`]).
    fn watch_all(&mut self, on: bool);

    /// `bytes` were just reduced: a simulator charges its CPU model.
    fn reduced(&mut self, bytes: usize) {
        let _ = bytes;
    }
}
