//! Operations as two-sided messages (all of the deferred design's, the
//! immediate designs' accumulates), in the messages the core composes
//! ([`OpHeader::compose`]): the header with small data, larger data in a
//! message of its own, so the target receives it straight into a buffer of
//! the size the header announced.

use std::ops::Range;

use rmx_core::onesided::{Data, OpHeader, FIRST, HEADER};
use rmx_core::{RecvFault, SendError, Source, TagSel};

use super::{Win, WinError, RMA_CONTEXT};
use crate::rank::{Beside, Rank, Req};
use crate::transport::Transport;
use rmx_core::onesided::{
    channel::{DATA, HEADERS},
    tag,
};
use rmx_driver::task::CollectiveError;

pub(super) fn send_failed(e: rmx_core::SendError) -> WinError {
    WinError::Collective(CollectiveError::Send(e))
}

pub(super) fn recv_failed(e: rmx_core::RecvError) -> WinError {
    WinError::Collective(CollectiveError::Recv(e))
}

/// Request handles an operation's sends leave free: what a rank receives
/// while it waits for them (an operation's first message and its data, the
/// answer to a get) needs some.
const HEADROOM: usize = 4;

/// Sends pending before the free handles are counted: fewer hold too few
/// to fill the table.
const PACE_FROM: usize = 64;

/// An operation ready to send: its first message, and the data's own
/// message when it does not fit in the first.
pub(super) struct Outgoing {
    pub target: u16,
    first: Vec<u8>,
    rest: Vec<u8>,
    window: u16,
    epoch: u16,
}

impl Outgoing {
    pub fn new(target: u16, header: &OpHeader, data: Vec<u8>) -> Outgoing {
        let mut buf = [0u8; FIRST];
        let (n, apart) = header.compose(&data, &mut buf);
        let rest = match apart {
            Some(_) => data,
            None => Vec::new(),
        };
        let first = buf[..n].to_vec();
        Outgoing {
            target,
            first,
            rest,
            window: header.window,
            epoch: header.epoch,
        }
    }

    /// The operation's messages, as the fence task sends them.
    pub fn parts(&self) -> rmx_driver::task::Outgoing {
        let bytes = |b: &[u8]| rmx_driver::task::Bytes {
            ptr: b.as_ptr(),
            len: b.len(),
        };
        rmx_driver::task::Outgoing {
            target: self.target,
            first: bytes(&self.first),
            rest: bytes(&self.rest),
        }
    }

    /// Starts the operation's messages, their requests pushed onto
    /// `pending`. An epoch may hold more operations than the rank has
    /// request handles: while fewer than [`HEADROOM`] are free (or none),
    /// the older half of `pending` is waited for, running `beside` when
    /// that wait stalls, and the send tried again. The first fault among
    /// the requests waited for.
    ///
    /// # Safety
    /// `self` stays in place, unmodified, until every request pushed onto
    /// `pending` completed.
    pub unsafe fn send<T: Transport + 'static>(
        &self,
        r: &mut Rank<T>,
        pending: &mut Vec<Req>,
        beside: Beside<'_, T, WinError>,
    ) -> Result<Option<RecvFault>, WinError> {
        let (id, epoch) = (self.window, self.epoch);
        let mut fault = None;
        for (what, b) in [(HEADERS, &self.first), (DATA, &self.rest)] {
            if what == DATA && b.is_empty() {
                break;
            }
            loop {
                if pending.len() >= PACE_FROM && r.free_requests() < HEADROOM {
                    fault = fault.or(wait_older_half(r, pending, beside)?);
                    continue;
                }
                // SAFETY: the caller's contract.
                let s = unsafe {
                    r.isend_in(
                        self.target,
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
                        fault = fault.or(wait_older_half(r, pending, beside)?);
                    }
                    Err(e) => return Err(send_failed(e)),
                }
            }
        }
        Ok(fault)
    }
}

/// Waits for the older half of `pending` (running `beside` when the wait
/// stalls): their first fault.
fn wait_older_half<T: Transport + 'static>(
    r: &mut Rank<T>,
    pending: &mut Vec<Req>,
    beside: Beside<'_, T, WinError>,
) -> Result<Option<RecvFault>, WinError> {
    let older: Vec<Req> = pending.drain(..pending.len().div_ceil(2)).collect();
    r.wait_all_beside(older, beside)
}

/// An operation that arrived: from whom, and what the window made of it.
pub(super) struct Arrived {
    pub from: u16,
    /// The header and byte range, if the window admitted it.
    pub admitted: Option<(OpHeader, Range<u64>)>,
    pub data: Vec<u8>,
}

/// The first message of an operation: its header, and its data if small.
pub(super) type First = [u8; FIRST];

/// Posts the receive of the next operation's first message from `src`.
///
/// # Safety
/// `first` stays in place, untouched, until the request completes.
pub(super) unsafe fn post<T: Transport + 'static>(
    window: u16,
    r: &mut Rank<T>,
    epoch: u16,
    src: Source,
    first: &mut First,
) -> Result<Req, WinError> {
    let sel = TagSel::Tag(tag(window, epoch, HEADERS));
    // SAFETY: the caller's contract.
    unsafe { r.irecv_in(src, sel, RMA_CONTEXT, first.as_mut_ptr(), first.len()) }
        .map_err(recv_failed)
}

/// The rest of an operation whose first message arrived (`st`): its data
/// if it came apart, and the core's verdict.
pub(super) fn finish<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    st: rmx_core::Status,
    first: &First,
) -> Result<Arrived, WinError> {
    let from = st.source;
    let got = (st.len as usize).min(first.len());
    let arrival = w.epoch(r, |e, _| e.admit(&first[..got]));
    let admitted = arrival.admitted.ok();
    let data = match arrival.data {
        Data::Inline(n) => match admitted {
            Some(_) => first[HEADER..HEADER + n as usize].to_vec(),
            None => Vec::new(),
        },
        Data::Apart(n) => {
            let mut data = match admitted {
                Some(_) => vec![0u8; n as usize],
                None => Vec::new(),
            };
            r.recv_in(
                Source::Rank(from),
                TagSel::Tag(tag(w.id, epoch, DATA)),
                RMA_CONTEXT,
                &mut data,
            )
            .map_err(recv_failed)?;
            data
        }
    };
    Ok(Arrived {
        from,
        admitted,
        data,
    })
}
