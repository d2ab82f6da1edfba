//! Collectives started as requests that `rmx_test`, `rmx_wait` and
//! `rmx_cancel` end like any other. The caller's data is copied in when
//! one starts and its result out when it ends, so a buffer is touched only
//! by those calls; a buffer only the root uses is never touched elsewhere.

use std::ffi::{c_int, c_void};

use rmx_linux::collective::CollReq;

use crate::collective::{blocks, elements, int, op_of, placed, root_of};
use crate::errors::Error;
use crate::guard::{bytes, guard, read};
use crate::rank::{rmx_rank_t, with, State};
use crate::requests::{rmx_request_t, Live};

/// A started collective and where its result goes: `len` bytes of its
/// data from `at` to `out`.
type Started = (CollReq, usize, *mut u8, usize);

/// Runs `begin` on the rank and holds what it started as a request in
/// `*req`: 0, or a negative code with nothing started.
///
/// # Safety
/// `rank` is null or a live rank; `req` is null or writable.
unsafe fn start(
    rank: *mut rmx_rank_t,
    req: *mut rmx_request_t,
    begin: impl FnOnce(&mut State) -> Result<Started, Error>,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let req = unsafe { crate::guard::out(req, "req") }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let (c, at, out, len) = begin(s)?;
                *req = s.requests.insert(Live::Coll {
                    req: c,
                    at,
                    out,
                    len,
                });
                Ok(0)
            })
        }
    })
}

/// `rmx_barrier`, started: its request in `*req`.
///
/// Contract: `rank` is null or a live rank; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ibarrier(rank: *mut rmx_rank_t, req: *mut rmx_request_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            Ok((s.rank().ibarrier()?, 0, std::ptr::null_mut(), 0))
        })
    }
}

/// `rmx_allreduce`, started: its request in `*req`; the result is in
/// `data` once the request ended well.
///
/// Contract: as for `rmx_allreduce`, and `data` stays valid, untouched by the
/// caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_iallreduce(
    rank: *mut rmx_rank_t,
    data: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let (ty, op) = (int(ty)?, op_of(op)?);
            let (ptr, len) = elements(data, count, ty)?;
            // SAFETY: the caller's contract (a dangling pointer when empty).
            let mine = std::slice::from_raw_parts(ptr, len).to_vec();
            Ok((s.rank().iallreduce(mine, ty, op)?, 0, ptr, len))
        })
    }
}

/// `rmx_bcast`, started: its request in `*req`; `data` holds `root`'s
/// bytes once the request ended well.
///
/// Contract: as for `rmx_bcast`, and `data` stays valid, untouched by the
/// caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ibcast(
    rank: *mut rmx_rank_t,
    data: *mut c_void,
    len: usize,
    root: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let root = root_of(s, root)?;
            // SAFETY: the caller's contract.
            let mine = read(data, len)?.to_vec();
            let to = bytes(data, len)?.cast_mut();
            Ok((s.rank().ibcast(mine, root)?, 0, to, len))
        })
    }
}

/// Where a rooted collective's result goes: `len` bytes at `out` at
/// the root, nothing (and `out` unread) elsewhere.
fn root_out(root: bool, out: *mut c_void, len: usize) -> Result<(*mut u8, usize), Error> {
    match root {
        true => Ok((bytes(out, len)?.cast_mut(), len)),
        false => Ok((std::ptr::null_mut(), 0)),
    }
}

/// `rmx_reduce`, started: its request in `*req`; `root`'s `out` holds the
/// reduction once the request ended well.
///
/// Contract: as for `rmx_reduce`, and `out` stays valid, untouched by the
/// caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ireduce(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    out: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
    root: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let (ty, op, root) = (int(ty)?, op_of(op)?, root_of(s, root)?);
            let (p, len) = elements(src.cast_mut(), count, ty)?;
            // SAFETY: the caller's contract (a dangling pointer when empty).
            let data = std::slice::from_raw_parts(p, len).to_vec();
            let (to, n) = root_out(s.rank().rank() == root, out, len)?;
            Ok((s.rank().ireduce(data, ty, op, root)?, 0, to, n))
        })
    }
}

/// `rmx_gather`, started: its request in `*req`; `root`'s `out` holds
/// every rank's block once the request ended well.
///
/// Contract: as for `rmx_gather`, and `out` stays valid, untouched by the
/// caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_igather(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    root: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let root = root_of(s, root)?;
            // SAFETY: the caller's contract.
            let (me, data) = placed(s, read(src, block)?)?;
            let (to, n) = root_out(me == root, out, data.len())?;
            Ok((s.rank().igather(data, root)?, 0, to, n))
        })
    }
}

/// `rmx_scatter`, started: its request in `*req`; `out` holds this rank's
/// block once the request ended well.
///
/// Contract: as for `rmx_scatter`, and `out` stays valid, untouched by the
/// caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_iscatter(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    root: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let to = bytes(out, block)?.cast_mut();
            let root = root_of(s, root)?;
            let (len, me) = (blocks(s, block)?, s.rank().rank());
            let data = match me == root {
                // SAFETY: the caller's contract.
                true => read(src, len)?.to_vec(),
                false => vec![0u8; len],
            };
            let at = me as usize * block;
            Ok((s.rank().iscatter(data, root)?, at, to, block))
        })
    }
}

/// `rmx_allgather`, started: its request in `*req`; `out` holds every
/// rank's block once the request ended well.
///
/// Contract: as for `rmx_allgather`, and `out` stays valid, untouched by
/// the caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_iallgather(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            // SAFETY: the caller's contract.
            let (_, data) = placed(s, read(src, block)?)?;
            let (to, len) = (bytes(out, data.len())?.cast_mut(), data.len());
            Ok((s.rank().iallgather(data)?, 0, to, len))
        })
    }
}

/// `rmx_alltoall`, started: its request in `*req`; `out` holds the
/// blocks for this rank once the request ended well.
///
/// Contract: as for `rmx_alltoall`, and `out` stays valid, untouched by
/// the caller, until the request ended; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ialltoall(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let len = blocks(s, block)?;
            // SAFETY: the caller's contract.
            let (send, to) = (read(src, len)?, bytes(out, len)?.cast_mut());
            // The request's data is `send`, then the blocks received.
            Ok((s.rank().ialltoall(send)?, len, to, len))
        })
    }
}

/// `rmx_reduce_scatter`, started: its request in `*req`; `out` holds this
/// rank's reduced block once the request ended well.
///
/// Contract: as for `rmx_reduce_scatter`, and `out` stays valid,
/// untouched by the caller, until the request ended; `req` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ireduce_scatter(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    out: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
    req: *mut rmx_request_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start(rank, req, |s| {
            let (ty, op) = (int(ty)?, op_of(op)?);
            let (to, block) = elements(out, count, ty)?;
            let all = count
                .checked_mul(s.rank().size() as usize)
                .ok_or_else(|| Error::arg("size × count is past the address space"))?;
            let (p, len) = elements(src.cast_mut(), all, ty)?;
            // SAFETY: the caller's contract.
            let data = std::slice::from_raw_parts(p, len).to_vec();
            let at = s.rank().rank() as usize * block;
            Ok((s.rank().ireduce_scatter(data, ty, op)?, at, to, block))
        })
    }
}
