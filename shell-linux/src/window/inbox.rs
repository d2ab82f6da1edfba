//! Operations reaching this rank as messages (all of the deferred
//! design's, the immediate designs' accumulates): one receive is posted at
//! a time for the epoch's next one from any rank, completed at the fence's
//! await steps or whenever a wait of the epoch stalls ([`drain`]). A rank
//! that waited without receiving them could wait for ever: unreceived,
//! they hold the receive pool, their origins run out of credit, and the
//! collective or sends the rank waits for are queued behind them. Each one
//! is applied (a get answered) and counted by the core.

use rmx_core::onesided::{tag, RmaKind, FIRST};
use rmx_core::{RecvError, RecvFault, Source};

use super::messages::{self, send_failed, Arrived, First};
use super::{Win, WinError, RMA_CONTEXT};
use crate::rank::{Rank, Req};
use crate::transport::Transport;
use rmx_driver::task::CollectiveError;

/// The receive of the next operation and the answers to gets, kept in the
/// window between epochs with nothing posted.
#[derive(Default)]
pub(super) struct Inbox {
    /// The posted receive, and where its first message lands (on the heap,
    /// allocated once).
    op: Option<Req>,
    first: Option<Box<First>>,
    /// Answers to gets and their sends.
    answers: Vec<Vec<u8>>,
    answered: Vec<Req>,
}

impl Inbox {
    /// Posts the receive of epoch `epoch`'s next operation, unless posted.
    ///
    /// # Safety
    /// `self` is closed ([`close`]) or abandoned ([`Inbox::requests`])
    /// before it is dropped.
    unsafe fn expect<T: Transport + 'static>(
        &mut self,
        window: u16,
        r: &mut Rank<T>,
        epoch: u16,
    ) -> Result<Req, WinError> {
        if let Some(q) = self.op.take() {
            return Ok(q);
        }
        let first = self.first.get_or_insert_with(|| Box::new([0u8; FIRST]));
        // SAFETY: the first message lands on the heap, kept by `self` under
        // the caller's contract.
        unsafe { messages::post(window, r, epoch, Source::Any, first) }
    }

    /// Nothing posted, no answer in flight.
    pub fn idle(&self) -> bool {
        self.op.is_none() && self.answered.is_empty()
    }
}

/// The operation whose first message arrived (`st`): its data received,
/// then applied or answered. Its origin.
///
/// # Safety
/// As [`Inbox::expect`].
unsafe fn take<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    st: rmx_core::Status,
    inbox: &mut Inbox,
) -> Result<u16, WinError> {
    let first = inbox.first.as_deref().expect("posted into");
    let a = messages::finish(w, r, epoch, st, first)?;
    let from = a.from;
    // SAFETY: the caller's contract.
    unsafe { apply(w, r, epoch, a, inbox)? };
    Ok(from)
}

/// Applies an operation that arrived, or answers it if it is a get.
///
/// # Safety
/// As [`Inbox::expect`].
unsafe fn apply<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    a: Arrived,
    inbox: &mut Inbox,
) -> Result<(), WinError> {
    match a.admitted {
        Some((h, range)) if h.kind == RmaKind::Get => {
            let mut b = vec![0u8; (range.end - range.start) as usize];
            w.mem.read(range.start as usize, &mut b);
            let t = tag(w.id, epoch, h.id);
            // SAFETY: the answer's bytes are on the heap, kept in `answers`
            // under the caller's contract.
            let s = unsafe { r.isend_in(a.from, t, RMA_CONTEXT, b.as_ptr(), b.len()) };
            inbox.answers.push(b);
            inbox.answered.push(s.map_err(send_failed)?);
        }
        Some((h, _)) => w.apply(&h, &a.data),
        None => {}
    }
    Ok(())
}

/// A stalled wait's work: takes the operations that have arrived while
/// the core awaits any, each fed to the core.
///
/// # Safety
/// As [`Inbox::expect`].
pub(super) unsafe fn drain<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    inbox: &mut Inbox,
) -> Result<(), WinError> {
    loop {
        let (awaiting, epoch) = w.epoch(r, |e, _| (e.awaiting(), e.epoch()));
        if !awaiting {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let q = match unsafe { inbox.expect(w.id, r, epoch) } {
            Ok(q) => q,
            // Every handle or posted entry in use: the wait frees some.
            Err(WinError::Collective(CollectiveError::Recv(
                RecvError::RequestTableFull | RecvError::PostedQueueFull,
            ))) => return Ok(()),
            Err(e) => return Err(e),
        };
        match r.test(q) {
            Ok(st) => {
                // SAFETY: the caller's contract.
                let from = unsafe { take(w, r, epoch, st, inbox)? };
                w.epoch(r, |e, _| e.arrived(from));
            }
            Err(q) => {
                inbox.op = Some(q);
                return Ok(());
            }
        }
    }
}

/// Ends the posted receive, if any, and waits for the answers sent. An
/// operation of epoch `epoch` that matched it meanwhile is taken and
/// counted if `counted` (its epoch still open); after its fence nobody
/// announced it: its data is taken and the core, its epoch moved on,
/// refuses and counts it. The first fault of an answer's send.
pub(super) fn close<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    inbox: &mut Inbox,
    counted: bool,
) -> Result<Option<RecvFault>, WinError> {
    if let Some(q) = inbox.op.take() {
        let cancelled = r.cancel(&q);
        let st = r.wait(q);
        if !cancelled {
            let first = inbox.first.as_deref().expect("posted into");
            let a = messages::finish(w, r, epoch, st, first)?;
            if counted {
                let from = a.from;
                // SAFETY: the answer's send, if any, is waited for below.
                unsafe { apply(w, r, epoch, a, inbox)? };
                w.epoch(r, |e, _| e.arrived(from));
            }
        }
    }
    let fault = r.wait_all(inbox.answered.drain(..));
    inbox.answers.clear();
    Ok(fault)
}
