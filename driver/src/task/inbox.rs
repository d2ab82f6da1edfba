//! The operations of an epoch that reach this rank as messages (all of the
//! deferred design's, the immediate designs' accumulates): one receive
//! from any rank posted at a time for the next one's first message, its
//! data received next when it came apart, then applied (a get answered)
//! and handed to the core. A rank must take them whenever the epoch
//! awaits them, whatever else it waits for: unreceived, they hold the
//! receive pool, their origins run out of credit, and the messages the
//! rank waits for queue behind them for good. The fence drains it on every
//! poll; a shell does the same while an epoch's sends wait for request
//! handles.

use core::task::Poll;

use rmx_core::onesided::channel::{DATA, HEADERS};
use rmx_core::onesided::{tag, Arrival, Data, RmaKind, CONTEXT, FIRST, HEADER};
use rmx_core::{RecvError, Source, TagSel};

use super::{CollectiveError, FenceHost, Messages};

/// What one [`Inbox::drain`] did.
#[derive(Debug)]
pub struct Drained<Q> {
    /// An operation arrived (the core was told).
    pub arrived: bool,
    /// The send of an answer to a get, for the caller to wait for: the
    /// drain stops after one, so the caller makes room for the next.
    pub answer: Option<Q>,
}

/// The receive of window `window`'s operations of epoch `epoch`.
pub struct Inbox<Q> {
    window: u16,
    epoch: u16,
    /// Where the next operation's first message lands (lent).
    first: usize,
    op: Option<Q>,
    /// An operation whose data is still being received, and where it
    /// lands.
    rest: Option<(Arrival, u16, Q, usize)>,
}

impl<Q> Inbox<Q> {
    /// The inbox of an epoch; nothing is posted yet.
    ///
    /// # Safety
    /// `first` names [`FIRST`] bytes that stay valid, untouched by anyone
    /// else, while the inbox [holds requests](Self::holds_requests).
    pub unsafe fn new(window: u16, epoch: u16, first: *mut u8) -> Self {
        Inbox {
            window,
            epoch,
            first: first as usize,
            op: None,
            rest: None,
        }
    }

    /// A receive of it is posted: its bytes are the network's.
    pub fn holds_requests(&self) -> bool {
        self.op.is_some() || self.rest.is_some()
    }

    /// Takes the operations that came while the epoch awaits any, each
    /// applied and handed to the core with [`arrived`]; stops after one
    /// answered get. With `post`, the next operation's receive is posted
    /// once the last ended, so whatever comes next finds one; without,
    /// only a receive posted already is looked at (a wait that ends
    /// quickly pays nothing for operations that may never come).
    ///
    /// [`arrived`]: rmx_core::onesided::Epoch::arrived
    pub fn drain<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        post: bool,
    ) -> Result<Drained<Q>, CollectiveError> {
        let mut arrived = false;
        while host.epoch().awaiting() {
            if !self.finish_rest(host, true)? {
                break;
            }
            let q = match self.op.take() {
                Some(q) => q,
                None if !post => break,
                None => match self.post(host) {
                    Ok(q) => q,
                    // Every handle or posted entry in use: the waits of
                    // the rank free some.
                    Err(RecvError::RequestTableFull | RecvError::PostedQueueFull) => break,
                    Err(e) => return Err(CollectiveError::Recv(e)),
                },
            };
            match host.rank().test(q) {
                Err(q) => {
                    self.op = Some(q);
                    break;
                }
                Ok(st) => {
                    if let Some(f) = st.fault {
                        return Err(CollectiveError::Failed(f));
                    }
                    let got = (st.len as usize).min(FIRST);
                    let (from, answer) = self.take(host, st.source, got, true)?;
                    if let Some(from) = from {
                        host.epoch().arrived(from);
                        arrived = true;
                    }
                    if answer.is_some() {
                        return Ok(Drained { arrived, answer });
                    }
                }
            }
        }
        Ok(Drained {
            arrived,
            answer: None,
        })
    }

    /// Cancels what is posted (the epoch ended, or the caller failed):
    /// [`close`](Self::close) or [`end`](Self::end) then waits for it.
    pub fn cancel<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) {
        if let Some(q) = &self.op {
            host.rank().cancel(q);
        }
    }

    /// Waits for the operation receive, cancelled first, to end; an
    /// operation that matched it meanwhile is taken: applied and counted
    /// if `counted` (its epoch still open), else admitted only (its epoch
    /// moved on: the core refuses it), so that its data does not stay
    /// behind. Ready once nothing of the inbox is left.
    pub fn close<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        counted: bool,
    ) -> Poll<Result<(), CollectiveError>> {
        match self.finish_rest(host, counted) {
            Ok(true) => {}
            Ok(false) => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        }
        let Some(q) = self.op.take() else {
            return Poll::Ready(Ok(()));
        };
        match host.rank().test(q) {
            Err(q) => {
                self.op = Some(q);
                Poll::Pending
            }
            Ok(st) if st.fault.is_some() => Poll::Ready(Ok(())),
            Ok(st) => {
                let got = (st.len as usize).min(FIRST);
                match self.take(host, st.source, got, false) {
                    Err(e) => Poll::Ready(Err(e)),
                    Ok((from, _)) => {
                        if let (Some(from), true) = (from, counted) {
                            host.epoch().arrived(from);
                        }
                        match self.rest {
                            Some(_) => self.close(host, counted),
                            None => Poll::Ready(Ok(())),
                        }
                    }
                }
            }
        }
    }

    /// After [`cancel`](Self::cancel) on an error: `true` once no request
    /// is left (what they brought is dropped).
    pub fn end<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(&mut self, host: &mut H) -> bool {
        if let Some((a, from, q, at)) = self.rest.take() {
            if let Err(q) = host.rank().test(q) {
                self.rest = Some((a, from, q, at));
            }
        }
        if let Some(q) = self.op.take() {
            if let Err(q) = host.rank().test(q) {
                self.op = Some(q);
            }
        }
        !self.holds_requests()
    }

    /// The data of an operation that came apart, once received: applied
    /// (and the core told, if `count`). `true` once none is awaited.
    fn finish_rest<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        count: bool,
    ) -> Result<bool, CollectiveError> {
        let Some((a, from, q, data)) = self.rest.take() else {
            return Ok(true);
        };
        match host.rank().test(q) {
            Err(q) => {
                self.rest = Some((a, from, q, data));
                Ok(false)
            }
            Ok(st) => {
                if let (Ok((h, range)), None) = (&a.admitted, st.fault) {
                    let len = (range.end - range.start) as usize;
                    // SAFETY: the receive completed into the bytes the host
                    // gave, kept until its next call.
                    host.apply(h, range.clone(), unsafe { slice(data as *const u8, len) });
                }
                if count {
                    host.epoch().arrived(from);
                }
                Ok(true)
            }
        }
    }

    /// Posts the receive of the epoch's next operation, from any rank.
    fn post<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
    ) -> Result<Q, RecvError> {
        let sel = TagSel::Tag(tag(self.window, self.epoch, HEADERS));
        // SAFETY: the lent bytes, this receive's alone (one at a time,
        // read before the next is posted).
        unsafe {
            host.rank()
                .irecv(Source::Any, sel, CONTEXT, self.first as *mut u8, FIRST)
        }
    }

    /// An operation whose first message (`got` bytes) came from `from`:
    /// admitted and applied, or a get answered (if `answer`, its send
    /// returned; else the get is dropped); its origin, unless its data
    /// sent apart is still being received.
    fn take<H: FenceHost<Rank = M>, M: Messages<Req = Q>>(
        &mut self,
        host: &mut H,
        from: u16,
        got: usize,
        answer: bool,
    ) -> Result<(Option<u16>, Option<Q>), CollectiveError> {
        // SAFETY: the receive completed into the lent bytes.
        let first = unsafe { slice(self.first as *const u8, got) };
        let a = host.epoch().admit(first);
        match (&a.admitted, a.data) {
            (Ok((h, range)), Data::Inline(_)) if h.kind == RmaKind::Get => {
                if !answer {
                    return Ok((Some(from), None));
                }
                let len = (range.end - range.start) as usize;
                let b = host.answer(range.clone());
                let t = tag(self.window, self.epoch, h.id);
                // SAFETY: the host keeps the answer until the fence reports.
                let q = unsafe { host.rank().isend(from, t, CONTEXT, b, len) };
                Ok((Some(from), Some(q.map_err(CollectiveError::Send)?)))
            }
            (Ok((h, range)), Data::Inline(n)) => {
                host.apply(h, range.clone(), &first[HEADER..HEADER + n as usize]);
                Ok((Some(from), None))
            }
            (Err(_), Data::Inline(_)) => Ok((Some(from), None)),
            (_, Data::Apart(n)) => {
                // A refused operation's data is received too (into no
                // bytes), so the next header is read as one.
                let len = match a.admitted {
                    Ok(_) => n as usize,
                    Err(_) => 0,
                };
                let into = host.data(len);
                let sel = TagSel::Tag(tag(self.window, self.epoch, DATA));
                // SAFETY: the host keeps the bytes until its next call,
                // made once this receive completed.
                let q = unsafe {
                    host.rank()
                        .irecv(Source::Rank(from), sel, CONTEXT, into, len)
                };
                let q = q.map_err(CollectiveError::Recv)?;
                self.rest = Some((a, from, q, into as usize));
                Ok((None, None))
            }
        }
    }
}

/// # Safety
/// `len` bytes at `p` are valid and not written meanwhile.
unsafe fn slice<'a>(p: *const u8, len: usize) -> &'a [u8] {
    match len {
        0 => &[],
        // SAFETY: the caller's contract.
        _ => unsafe { core::slice::from_raw_parts(p, len) },
    }
}
