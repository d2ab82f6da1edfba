//! An epoch's sends waiting for request handles outside a fence (an
//! immediate design's accumulates, issued faster than they leave): while
//! the older ones are waited for, the operations other ranks aim at this
//! one are received through the driver layer's [`Inbox`], as the fence
//! receives them. Every rank may be issuing at once: a rank that waited
//! without receiving could wait for ever, since unreceived operations hold
//! its receive pool and their origins run out of credit.

use std::task::Poll;

use rmx_core::onesided::channel::{DATA, HEADERS};
use rmx_core::onesided::{tag, FIRST};
use rmx_core::{RecvFault, SendError};
use rmx_driver::task::{CollectiveError, FenceHost, Inbox, Messages};

use super::host::{Host, Parts};
use super::messages::Outgoing;
use super::{Win, WinError, RMA_CONTEXT};
use crate::rank::{Rank, Req};
use crate::transport::Transport;

/// Request handles an operation's sends leave free: what a rank receives
/// while it waits for them (an operation's first message and its data, the
/// answer to a get) needs some.
const HEADROOM: usize = 4;

/// Sends pending before the free handles are counted: fewer hold too few
/// to fill the table.
const PACE_FROM: usize = 64;

/// Starts `out`'s messages, their requests pushed onto
/// `pending`. An epoch may hold more operations than the rank has
/// request handles: while fewer than [`HEADROOM`] are free (or none),
/// the older half of `pending` is waited for, the operations aimed at
/// this rank received meanwhile, and the send tried again. The first
/// fault among the requests waited for.
///
/// # Safety
/// `out` stays in place, unmodified, until every request pushed onto
/// `pending` completed.
pub(super) unsafe fn send_paced<T: Transport + 'static>(
    out: &Outgoing,
    w: &mut Win,
    r: &mut Rank<T>,
    pending: &mut Vec<Req>,
) -> Result<Option<RecvFault>, WinError> {
    let (id, epoch) = (out.window, out.epoch);
    let mut fault = None;
    for (what, b) in [(HEADERS, &out.first), (DATA, &out.rest)] {
        if what == DATA && b.is_empty() {
            break;
        }
        loop {
            if pending.len() >= PACE_FROM && r.free_requests() < HEADROOM {
                fault = fault.or(wait_older_half(w, r, pending)?);
                continue;
            }
            // SAFETY: the caller's contract.
            let s = unsafe {
                r.isend_in(
                    out.target,
                    tag(id, epoch, what),
                    RMA_CONTEXT,
                    b.as_ptr(),
                    b.len(),
                )
            };
            match s {
                Ok(q) => {
                    pending.push(q);
                    break;
                }
                Err(SendError::RequestTableFull) if !pending.is_empty() => {
                    fault = fault.or(wait_older_half(w, r, pending)?);
                }
                Err(e) => return Err(WinError::Collective(CollectiveError::Send(e))),
            }
        }
    }
    Ok(fault)
}

/// Where an operation's first message lands while the window waits (on
/// the heap, allocated once, kept with the window).
pub(super) type First = Box<[u8; FIRST]>;

/// Waits for the older half of `pending`, receiving the epoch's
/// operations meanwhile (the inbox closed before this returns); the first
/// fault among the sends waited for.
pub(super) fn wait_older_half<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    pending: &mut Vec<Req>,
) -> Result<Option<RecvFault>, WinError> {
    let mut older: Vec<Option<Req>> = pending
        .drain(..pending.len().div_ceil(2))
        .map(Some)
        .collect();
    let epoch = w.epoch(r, |e, _| e.epoch());
    let mut first = w.first.take().unwrap_or_else(|| Box::new([0u8; FIRST]));
    let io = w.io.take().unwrap_or_default();
    let mut parts = Parts::take(w, io);
    // SAFETY: `first` stays on the heap, here, until the inbox holds no
    // request (it is closed below before `first` goes back).
    let mut inbox = unsafe { Inbox::new(w.id, epoch, first.as_mut_ptr()) };
    let (mut fault, mut failed, mut closing) = (None, None, false);
    r.drive(|d| {
        let mut host = Host::new(d, &mut parts);
        for s in older.iter_mut() {
            if let Some(q) = s.take() {
                match host.rank().test(q) {
                    Ok(st) => fault = fault.or(st.fault),
                    Err(q) => *s = Some(q),
                }
            }
        }
        if !closing && older.iter().all(Option::is_none) {
            inbox.cancel(&mut host);
            closing = true;
        }
        if !closing {
            let post = host.rank().stalled();
            match inbox.drain(&mut host, post) {
                // An answer to a get (none comes in an immediate design
                // but a forged one): waited for with the sends.
                Ok(d) => older.extend(d.answer.map(Some)),
                Err(e) => {
                    failed = Some(e);
                    inbox.cancel(&mut host);
                    closing = true;
                }
            }
            return Poll::Pending;
        }
        match inbox.close(&mut host, true) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                if let Err(e) = r {
                    failed = failed.or(Some(e));
                }
                match older.iter().all(Option::is_none) {
                    true => Poll::Ready(()),
                    false => Poll::Pending,
                }
            }
        }
    });
    // Nothing names the answers or the data any more.
    let mut io = parts.put_back(w);
    io.answers.clear();
    io.data.clear();
    w.io = Some(io);
    w.first = Some(first);
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(fault),
    }
}
