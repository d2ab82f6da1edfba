//! The request table: what `isend`/`irecv` hand out and `test` completes.

use crate::fifo::{Node, Stack, NIL};
use crate::nic::UserBuf;

/// A handle on an operation. Generation-checked: a stale handle is an error,
/// never another request's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    idx: u16,
    gen: u16,
}

impl Request {
    /// An eager send whose data left the user buffer during the call.
    pub const COMPLETE: Request = Request {
        idx: u16::MAX,
        gen: 0,
    };

    /// Slot in the request table (and in the endpoint's transfer table).
    pub(crate) fn index(self) -> usize {
        self.idx as usize
    }

    /// The handle as a rendezvous packet names it: index and generation.
    pub(crate) fn to_wire(self) -> u32 {
        (self.gen as u32) << 16 | self.idx as u32
    }

    pub(crate) fn from_wire(id: u32) -> Request {
        Request {
            idx: id as u16,
            gen: (id >> 16) as u16,
        }
    }

    /// The handle as one integer, for an embedder that hands requests
    /// across a C boundary; [`from_raw`](Self::from_raw) takes it back.
    /// Any integer is safe to take back: one that names no live request
    /// is refused as stale by [`Endpoint::test`](crate::Endpoint::test).
    pub fn to_raw(self) -> u32 {
        self.to_wire()
    }

    /// The handle [`to_raw`](Self::to_raw) gave.
    pub fn from_raw(raw: u32) -> Request {
        Request::from_wire(raw)
    }

    /// Its row in the request table (below the endpoint's
    /// [`Sizes::requests`](crate::Sizes::requests)), for an embedder that
    /// keeps something per pending request; `u16::MAX` for
    /// [`COMPLETE`](Self::COMPLETE).
    pub fn slot(self) -> usize {
        self.idx as usize
    }
}

/// Why a receive finished without delivering all it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvFault {
    /// The message (of `len` bytes) was larger than the posted buffer; the
    /// buffer holds its first `capacity` bytes.
    Truncated { len: u32, capacity: u32 },
    /// The receive was cancelled before it matched.
    Cancelled,
    /// A rendezvous transfer failed (a memory key or bound check, or the
    /// connection): the receive buffer holds no defined data. Sends report
    /// it too, as both sides of the transfer complete with the error.
    Rdma(crate::nic::RdmaError),
    /// The peer failed (it stopped acknowledging, or the transport reported
    /// its connection down): the request ended without it.
    PeerFailed,
    /// The receive pool stayed full for twice the peer timeout: unexpected
    /// messages nobody received held every credit while the message this
    /// receive waits for queued at its sender. Raise
    /// [`Config::rx_buffers`](crate::Config::rx_buffers), or receive
    /// messages in the order they are sent.
    NoBuffers,
}

/// The outcome of a completed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Sender's rank (receives; what ANY_SOURCE matched).
    pub source: u16,
    /// Message tag (receives; what ANY_TAG matched).
    pub tag: u32,
    /// Bytes delivered (receive) or sent.
    pub len: u32,
    /// Why a receive delivered less than it was sent, if it did.
    pub fault: Option<RecvFault>,
}

impl Status {
    /// What a completed send reports (a request that completed when
    /// started, [`Request::COMPLETE`], always does).
    pub const SENT: Status = Status {
        source: 0,
        tag: 0,
        len: 0,
        fault: None,
    };
}

/// Misuse of a request handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// Already completed and collected, or never handed out.
    Stale,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Free,
    /// Waiting for a credit or a bounce slot.
    SendQueued,
    /// Sent zero-copy: the NIC still reads the user buffer.
    SendInFlight,
    SendDone,
    RecvPosted,
    /// A rendezvous in progress (either side): matched, not cancellable.
    Rndv,
    /// A medium message matched, more of its fragments to come.
    Receiving,
    /// Finished with a status (receives, and sends that failed).
    Done(Status),
}

/// One entry of the request table (storage for an endpoint): a handle's
/// generation and state. Small, so the requests in flight share few cache
/// lines; the work each carries is in a table of its own. Opaque; make
/// tables of [`RequestEntry::UNUSED`].
#[derive(Clone, Copy, Debug)]
pub struct RequestEntry {
    gen: u16,
    state: State,
    /// The next entry of the free list, or of the queue the request waits in.
    next: u16,
}

impl RequestEntry {
    /// An unused entry.
    pub const UNUSED: RequestEntry = RequestEntry {
        gen: 0,
        state: State::Free,
        next: NIL,
    };
}

impl Node for RequestEntry {
    fn next(&self, _list: usize) -> u16 {
        self.next
    }
    fn set_next(&mut self, _list: usize, next: u16) {
        self.next = next;
    }
}

/// The requests in table `T` with a free list: its length is how many
/// requests can be pending at once.
#[derive(Debug)]
pub(crate) struct Table<T> {
    entries: T,
    free: Stack,
}

impl<T: AsRef<[RequestEntry]> + AsMut<[RequestEntry]>> Table<T> {
    /// Takes `entries` over, every request free.
    pub fn new(mut entries: T) -> Self {
        let all = entries.as_mut();
        for e in all.iter_mut() {
            e.state = State::Free;
        }
        // Index u16::MAX names `Request::COMPLETE`: the stack never has it.
        let free = Stack::full(all, 0);
        Table { entries, free }
    }

    /// Requests that can be pending at once.
    pub fn capacity(&self) -> usize {
        self.entries.as_ref().len().min(NIL as usize)
    }

    pub fn alloc(&mut self, state: State) -> Option<Request> {
        let idx = self.free.pop(self.entries.as_ref(), 0)?;
        let e = &mut self.entries.as_mut()[idx as usize];
        // Generations run 1..=65535: a handle's wire id is never 0, which
        // rendezvous packets use for "no transfer".
        e.gen = e.gen.checked_add(1).unwrap_or(1);
        e.state = state;
        e.next = NIL;
        Some(Request { idx, gen: e.gen })
    }

    fn entry(&mut self, r: Request) -> Result<&mut RequestEntry, RequestError> {
        match self.entries.as_mut().get_mut(r.idx as usize) {
            Some(e) if e.gen == r.gen && e.state != State::Free => Ok(e),
            _ => Err(RequestError::Stale),
        }
    }

    /// Requests that can be handed out now.
    pub fn free_len(&self) -> usize {
        self.free.len()
    }

    /// A request can be handed out.
    pub fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    pub fn state(&mut self, r: Request) -> Result<State, RequestError> {
        Ok(self.entry(r)?.state)
    }

    pub fn set(&mut self, r: Request, s: State) {
        if let Ok(e) = self.entry(r) {
            e.state = s;
        }
    }

    /// Puts entry `idx` (just made free) on the free list.
    fn free(&mut self, idx: u16) {
        self.free.push(self.entries.as_mut(), 0, idx);
    }

    /// Frees a request that never got going (its post was refused).
    pub fn release(&mut self, r: Request) {
        if let Ok(e) = self.entry(r) {
            e.state = State::Free;
            self.free(r.idx);
        }
    }

    /// Returns the status if complete, freeing the entry.
    pub fn collect(&mut self, r: Request) -> Result<Option<Status>, RequestError> {
        if r == Request::COMPLETE {
            return Ok(Some(Status::SENT));
        }
        let e = self.entry(r)?;
        let st = match e.state {
            State::SendDone => Status::SENT,
            State::Done(s) => s,
            _ => return Ok(None),
        };
        e.state = State::Free;
        self.free(r.idx);
        Ok(Some(st))
    }

    /// Every entry, for the lists threaded through them.
    pub fn all(&self) -> &[RequestEntry] {
        self.entries.as_ref()
    }

    pub fn all_mut(&mut self) -> &mut [RequestEntry] {
        self.entries.as_mut()
    }
}

/// A send waiting for a credit or a bounce slot; it reads the user buffer when it goes.
#[derive(Clone, Copy, Debug)]
pub struct QueuedSend {
    pub req: Request,
    pub dest: u16,
    pub tag: u32,
    pub context: u16,
    pub buf: UserBuf,
    pub len: u32,
    /// Above the eager threshold: sending means sending the RTS, and the
    /// request stays pending until the rendezvous ends.
    pub rndv: bool,
    /// A medium message: bytes already sent as fragments.
    pub sent: u32,
}

impl QueuedSend {
    /// No send (the work of a request that is not a queued send).
    pub(crate) const NONE: QueuedSend = QueuedSend {
        req: Request::COMPLETE,
        dest: 0,
        tag: 0,
        context: 0,
        buf: UserBuf(0),
        len: 0,
        rndv: false,
        sent: 0,
    };
}

/// A medium message's receive while its fragments arrive: where they go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receiving {
    pub buf: UserBuf,
    pub capacity: u32,
    pub tag: u32,
}

impl Receiving {
    pub(crate) const NONE: Receiving = Receiving {
        buf: UserBuf(0),
        capacity: 0,
        tag: 0,
    };
}

/// A posted receive, as the matcher carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostedRecv {
    pub req: Request,
    /// The rank it names, or `None` for any source.
    pub source: Option<u16>,
    pub buf: UserBuf,
    pub capacity: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_are_refused_after_collection_and_reuse() {
        let mut t = Table::new([RequestEntry::UNUSED; 2]);
        let a = t.alloc(State::SendDone).unwrap();
        assert_eq!(t.collect(a), Ok(Some(Status::SENT)));
        assert_eq!(t.collect(a), Err(RequestError::Stale));
        let b = t.alloc(State::RecvPosted).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.collect(a), Err(RequestError::Stale));
        assert_eq!(t.collect(b), Ok(None));
        let _c = t.alloc(State::RecvPosted).unwrap();
        assert!(t.alloc(State::RecvPosted).is_none());
    }

    /// Generations wrapped to 0 after 65 535 reuses of a slot, so slot 0's
    /// handle went on the wire as id 0, which rendezvous packets read as
    /// "no transfer" (its PULLs and CTS were refused and it stalled).
    #[test]
    fn a_handle_never_goes_on_the_wire_as_zero() {
        let mut t = Table::new([RequestEntry::UNUSED; 1]);
        let first = t.alloc(State::RecvPosted).unwrap();
        t.release(first);
        for _ in 0..70_000 {
            let r = t.alloc(State::RecvPosted).unwrap();
            assert_ne!(r.to_wire(), 0);
            assert_ne!(r, Request::COMPLETE);
            t.release(r);
        }
    }
}
