//! Operations as two-sided messages (all of the deferred design's, the
//! immediate designs' accumulates), in the messages the core composes
//! ([`OpHeader::compose`]): the header with small data, larger data in a
//! message of its own, so the target receives it straight into a buffer of
//! the size the header announced.

use rmx_core::onesided::channel::{DATA, HEADERS};
use rmx_core::onesided::{tag, OpHeader, FIRST};
use rmx_core::{RecvFault, SendError};
use rmx_driver::task::CollectiveError;

use super::{inbox, Win, WinError, RMA_CONTEXT};
use crate::rank::{Rank, Req};
use crate::transport::Transport;

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
        use rmx_driver::task::Bytes;
        rmx_driver::task::Outgoing {
            target: self.target,
            first: Bytes::of(&self.first),
            rest: Bytes::of(&self.rest),
        }
    }

    /// Starts the operation's messages, their requests pushed onto
    /// `pending`. An epoch may hold more operations than the rank has
    /// request handles: while fewer than [`HEADROOM`] are free (or none),
    /// the older half of `pending` is waited for, the operations aimed at
    /// this rank received meanwhile, and the send tried again. The first
    /// fault among the requests waited for.
    ///
    /// # Safety
    /// `self` stays in place, unmodified, until every request pushed onto
    /// `pending` completed.
    pub unsafe fn send<T: Transport + 'static>(
        &self,
        w: &mut Win,
        r: &mut Rank<T>,
        pending: &mut Vec<Req>,
    ) -> Result<Option<RecvFault>, WinError> {
        let (id, epoch) = (self.window, self.epoch);
        let mut fault = None;
        for (what, b) in [(HEADERS, &self.first), (DATA, &self.rest)] {
            if what == DATA && b.is_empty() {
                break;
            }
            loop {
                if pending.len() >= PACE_FROM && r.free_requests() < HEADROOM {
                    fault = fault.or(inbox::wait_older_half(w, r, pending)?);
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
                        fault = fault.or(inbox::wait_older_half(w, r, pending)?);
                    }
                    Err(e) => return Err(WinError::Collective(CollectiveError::Send(e))),
                }
            }
        }
        Ok(fault)
    }
}
