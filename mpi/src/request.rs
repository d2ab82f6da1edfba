//! Requests as MPI holds them, and what ends them: a test that moves a
//! request on once, and waits for one, all, or any of several. A request's
//! buffer is the library's from the call that started it to the call that
//! ended it; it is never touched afterwards.

use std::ffi::c_int;
use std::sync::Arc;

use rmx_core::{RecvFault, Status};
use rmx_linux::rank::{Rank, Req};

use crate::abi::*;
use crate::args::out;
use crate::comm::Group;
use crate::error::{call, Error, Result};
use crate::sched::Schedule;
use crate::state::{handler_of, with, Lib};

/// A started operation.
pub enum Request {
    Send(Req),
    /// A receive, and the group its sender is named in.
    Recv(Req, Arc<Group>),
    /// Ended when started (a message to or from `MPI_PROC_NULL`).
    Done(MPI_Status),
    Coll(Box<Schedule>),
}

/// How a request ended: its status, or the error of a collective.
pub type Ended = Result<MPI_Status>;

/// The status MPI gives for what the core says of a message.
pub fn status(st: Status, group: Option<&Group>) -> MPI_Status {
    let mut s = MPI_Status {
        MPI_SOURCE: group
            .and_then(|g| g.member(st.source))
            .map_or(MPI_ANY_SOURCE, i32::from),
        MPI_TAG: st.tag as i32,
        MPI_ERROR: MPI_SUCCESS,
        internal: [0; 5],
    };
    set_count(&mut s, st.len as u64);
    match st.fault {
        None => {}
        Some(RecvFault::Truncated { .. }) => s.MPI_ERROR = MPI_ERR_TRUNCATE,
        Some(RecvFault::Cancelled) => s.internal[2] = 1,
        Some(RecvFault::PeerFailed) => s.MPI_ERROR = MPI_ERR_PROC_ABORTED,
        Some(_) => s.MPI_ERROR = MPI_ERR_OTHER,
    }
    s
}

/// The status of a request that moved nothing (`MPI_PROC_NULL`, or empty).
pub fn empty_status() -> MPI_Status {
    MPI_Status {
        MPI_SOURCE: MPI_PROC_NULL,
        MPI_TAG: MPI_ANY_TAG,
        MPI_ERROR: MPI_SUCCESS,
        internal: [0; 5],
    }
}

/// Bytes a status says arrived.
pub fn count(s: &MPI_Status) -> u64 {
    (s.internal[0] as u32 as u64) | ((s.internal[1] as u32 as u64) << 32)
}

pub fn set_count(s: &mut MPI_Status, n: u64) {
    s.internal[0] = n as u32 as i32;
    s.internal[1] = (n >> 32) as u32 as i32;
}

pub fn cancelled(s: &MPI_Status) -> bool {
    s.internal[2] != 0
}

impl Request {
    /// Tests once, without progress: how it ended, or itself.
    pub fn test(self, rank: &mut Rank) -> std::result::Result<Ended, Request> {
        match self {
            Request::Send(q) => rank
                .test(q)
                .map(|st| Ok(status(st, None)))
                .map_err(Request::Send),
            Request::Recv(q, g) => match rank.test(q) {
                Ok(st) => Ok(Ok(status(st, Some(&g)))),
                Err(q) => Err(Request::Recv(q, g)),
            },
            Request::Done(s) => Ok(Ok(s)),
            Request::Coll(mut c) => match c.step(rank) {
                Some(r) => Ok(r.map(|()| empty_status())),
                None => Err(Request::Coll(c)),
            },
        }
    }

    /// Waits for it to end.
    pub fn wait(self, rank: &mut Rank) -> Ended {
        match self {
            Request::Send(q) => Ok(status(rank.wait(q), None)),
            Request::Recv(q, g) => Ok(status(rank.wait(q), Some(&g))),
            Request::Done(s) => Ok(s),
            Request::Coll(c) => c.wait(rank).map(|()| empty_status()),
        }
    }

    /// Asks a receive to stop if it has not matched (it still ends
    /// through a test or wait); anything else goes on to its end.
    pub fn cancel(&self, rank: &mut Rank) {
        if let Request::Recv(q, _) = self {
            rank.cancel(q);
        }
    }
}

/// Runs a call that starts a request on `comm`: its handle into `*request`.
pub fn started(
    name: &str,
    comm: Handle,
    request: *mut Handle,
    f: impl FnOnce(&mut Lib) -> Result<Request>,
) -> c_int {
    call(
        name,
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: `request` is null or writable (every caller's contract).
                let out = unsafe { out(request, "request") }?;
                let q = f(lib)?;
                *out = lib.reqs.insert(q);
                Ok(())
            })
        },
    )
}

/// An error the status of an ended message carries, as MPI returns it.
pub fn status_error(s: &MPI_Status) -> Result<()> {
    match s.MPI_ERROR {
        MPI_SUCCESS => Ok(()),
        MPI_ERR_TRUNCATE => Err(Error::new(
            MPI_ERR_TRUNCATE,
            "a message was longer than its receive buffer (it holds the start)",
        )),
        MPI_ERR_PROC_ABORTED => Err(Error::new(
            MPI_ERR_PROC_ABORTED,
            "the peer failed: the message did not arrive",
        )),
        c => Err(Error::new(c, "a message's transfer failed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_keeps_counts_past_32_bits_and_names_the_member() {
        let st = Status {
            source: 5,
            tag: 9,
            len: u32::MAX,
            fault: None,
        };
        let g = Group::List(vec![4, 5]);
        let s = status(st, Some(&g));
        assert_eq!(
            (s.MPI_SOURCE, s.MPI_TAG, count(&s)),
            (1, 9, u32::MAX as u64)
        );
        let mut s = empty_status();
        set_count(&mut s, 5 << 32 | 7);
        assert_eq!(count(&s), 5 << 32 | 7);
        let cut = Status {
            fault: Some(RecvFault::Truncated {
                len: 9,
                capacity: 4,
            }),
            ..st
        };
        assert_eq!(status(cut, None).MPI_ERROR, MPI_ERR_TRUNCATE);
        assert!(status_error(&status(cut, None)).is_err());
    }
}
