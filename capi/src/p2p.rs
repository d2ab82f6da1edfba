//! Sends and receives that return requests, and what ends a request:
//! `rmx_test`, `rmx_wait`, `rmx_cancel`. A request's buffer belongs to
//! rmx from the call that started it until the call that ended it
//! returns; after that rmx never touches it.

use std::ffi::{c_int, c_void};

use rmx_core::{Source, TagSel};

use crate::end::{step, wait};
use crate::errors::{Error, RMX_ERR_REQUEST};
use crate::guard::{bytes, guard, out};
use crate::rank::{rmx_rank_t, with};
use crate::requests::{rmx_request_t, Live, RMX_REQUEST_NULL};
use crate::status::rmx_status_t;

/// A receive from any rank.
pub const RMX_ANY_SOURCE: c_int = -1;
/// A receive of any tag.
pub const RMX_ANY_TAG: i64 = -1;
const _: () = assert!(
    RMX_ANY_SOURCE == rmx_driver::embed::calls::ANY_SOURCE
        && RMX_ANY_TAG == rmx_driver::embed::calls::ANY_TAG
);

/// `dest` as a rank of a job of `size`.
fn peer(size: u16, dest: c_int) -> Result<u16, Error> {
    Ok(rmx_driver::embed::calls::peer(size, dest)?)
}

/// Starts a send of `len` bytes at `buf` to rank `dest` with `tag`; its
/// request in `*req`. Small messages complete once copied; larger ones
/// once the receiver has the data. 0, or a negative code (nothing sent,
/// `*req` untouched).
///
/// Contract: `rank` is null or a live rank; `buf` is null or names `len` readable
/// bytes, unchanged until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_isend(
    rank: *mut rmx_rank_t,
    dest: c_int,
    tag: u32,
    buf: *const c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        let ptr = bytes(buf, len)?;
        // SAFETY: the caller's contract: the rank is live, and the bytes
        // stay the request's until it ended (a rank ends its requests
        // before it goes).
        unsafe {
            with(rank, |s| {
                let dest = peer(s.rank().size(), dest)?;
                let q = s.rank().isend_raw(dest, tag, ptr, len)?;
                *req = s.requests.insert(Live::Msg(q, Some(len)));
                Ok(0)
            })
        }
    })
}

/// Starts a receive into `len` bytes at `buf`, of a message from `src`
/// (or `RMX_ANY_SOURCE`) with `tag` (0 … 2^32 − 1, or `RMX_ANY_TAG`);
/// its request in `*req`. 0, or a negative code (nothing posted).
///
/// Contract: `rank` is null or a live rank; `buf` is null or names `len` writable
/// bytes, untouched by the caller until the request ended; `req` is null
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_irecv(
    rank: *mut rmx_rank_t,
    src: c_int,
    tag: i64,
    buf: *mut c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        let ptr = bytes(buf, len)?.cast_mut();
        // SAFETY: as for a send.
        unsafe {
            with(rank, |s| {
                let (src, tag) = selection(s.rank().size(), src, tag)?;
                let q = s.rank().irecv_raw(src, tag, ptr, len)?;
                *req = s.requests.insert(Live::Msg(q, None));
                Ok(0)
            })
        }
    })
}

/// A receive's selection of messages: `src` a rank or `RMX_ANY_SOURCE`,
/// `tag` 0 … 2^32 − 1 or `RMX_ANY_TAG`.
fn selection(size: u16, src: c_int, tag: i64) -> Result<(Source, TagSel), Error> {
    Ok(rmx_driver::embed::calls::selection(size, src, tag)?)
}

/// Looks once (moving the rank on first) for a message a receive of
/// `src` and `tag` would take now, and leaves it for that receive: 1 if
/// one is here (`status`, may be null, gets its sender, tag and whole
/// length), 0 if none, or a negative code.
///
/// Contract: `rank` is null or a live rank; `status` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_iprobe(
    rank: *mut rmx_rank_t,
    src: c_int,
    tag: i64,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { probe(rank, src, tag, status, false) })
}

/// Waits until a message a receive of `src` and `tag` would take is
/// here, as `rmx_iprobe` finds it: 0, or a negative code
/// (`RMX_ERR_PEER_FAILED` if `src` failed with none left).
///
/// Contract: as for `rmx_iprobe`.
#[no_mangle]
pub unsafe extern "C" fn rmx_probe(
    rank: *mut rmx_rank_t,
    src: c_int,
    tag: i64,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { probe(rank, src, tag, status, true) }.map(|_| 0))
}

/// Both probes: looks once, or (`wait`) until a message is here; 1 if
/// one is (its envelope in `status`), else 0.
///
/// # Safety
/// As for `rmx_iprobe`.
unsafe fn probe(
    rank: *mut rmx_rank_t,
    src: c_int,
    tag: i64,
    status: *mut rmx_status_t,
    wait: bool,
) -> Result<c_int, Error> {
    // SAFETY: the caller's contract.
    let status = unsafe { status.as_mut() };
    // SAFETY: the caller's contract.
    let found = unsafe {
        with(rank, |s| {
            let (src, tag) = selection(s.rank().size(), src, tag)?;
            Ok(match wait {
                true => Some(s.rank().probe(src, tag)?),
                false => s.rank().iprobe(src, tag)?,
            })
        })
    }?;
    Ok(match found {
        Some(st) => {
            ended(rmx_status_t::of(st, None), status);
            1
        }
        None => 0,
    })
}

/// What ending a request reports: 0 when it ended well, else the code
/// it ended with.
fn ended(st: rmx_status_t, status: Option<&mut rmx_status_t>) -> c_int {
    if let Some(out) = status {
        *out = st;
    }
    st.error
}

/// Tests `*req` once (moving the rank on first): 1 once it ended well,
/// 0 while it runs, or a negative code. A request that ended (either
/// way) is freed and `*req` becomes `RMX_REQUEST_NULL`; a negative code
/// with `*req` unchanged is a refused call (`RMX_ERR_REQUEST`: not a
/// live request). `status` (may be null) gets how it ended. A null
/// request is ended.
///
/// Contract: `rank` is null or a live rank; `req` and `status` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_test(
    rank: *mut rmx_rank_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { end_request(rank, req, status, End::Test) })
}

/// Waits for `*req` to end: 0 if it ended well, else the code it ended
/// with (`*req` is then `RMX_REQUEST_NULL`), or a refused call's code
/// (`*req` unchanged). `status` as for `rmx_test`.
///
/// Contract: as for `rmx_test`.
#[no_mangle]
pub unsafe extern "C" fn rmx_wait(
    rank: *mut rmx_rank_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { end_request(rank, req, status, End::Wait) })
}

/// Cancels `*req` and waits for its end, so that its buffer is the
/// caller's again when this returns: 0, with `status->error`
/// `RMX_ERR_CANCELLED` if it had not matched (a receive), or how it ended
/// if it completed anyway (a send, or a receive that had matched);
/// `*req` becomes `RMX_REQUEST_NULL`. A refused call's code otherwise.
///
/// Contract: as for `rmx_test`.
#[no_mangle]
pub unsafe extern "C" fn rmx_cancel(
    rank: *mut rmx_rank_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { end_request(rank, req, status, End::Cancel) })
}

/// How a call ends a request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Once, if it ended: 1 when it ended well.
    Test,
    Wait,
    /// A receive cancelled first; 0 however it ended.
    Cancel,
}

/// The request calls' one body (see `rmx_test`, `rmx_wait`, `rmx_cancel`).
///
/// # Safety
/// As for `rmx_test`.
unsafe fn end_request(
    rank: *mut rmx_rank_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
    how: End,
) -> Result<c_int, Error> {
    // SAFETY: the caller's contract.
    let (req, status) = unsafe { (out(req, "req")?, status.as_mut()) };
    let reported = |st, status| match (how, ended(st, status)) {
        (End::Cancel, _) => 0,
        (End::Test, 0) => 1,
        (_, code) => code,
    };
    if *req == RMX_REQUEST_NULL {
        let none = rmx_status_t {
            source: -1,
            ..Default::default()
        };
        return Ok(reported(none, status));
    }
    // SAFETY: the caller's contract.
    unsafe {
        with(rank, |s| {
            let h = *req;
            let live = s.requests.take(h).ok_or_else(not_live)?;
            let st = match how {
                End::Test => match step(s, live) {
                    Ok(st) => st,
                    Err(live) => {
                        s.requests.put_back(h, live);
                        return Ok(0);
                    }
                },
                End::Wait => wait(s, live, false),
                End::Cancel => wait(s, live, true),
            };
            *req = RMX_REQUEST_NULL;
            Ok(reported(st, status))
        })
    }
}

fn not_live() -> Error {
    Error::new(
        RMX_ERR_REQUEST,
        "not a live request of this rank (ended already, another rank's, or never one)",
    )
}
