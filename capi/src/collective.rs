//! Collectives over every rank of the job, blocking (`started.rs` has
//! them started as requests), and the element types and reductions they
//! take.

use std::ffi::{c_int, c_void};

use rmx_core::collective::{Int, Op};

use crate::errors::Error;
use crate::guard::{bytes, guard, read, write};
use crate::rank::{rmx_rank_t, with};

/// Element types of a reduction.
pub const RMX_UINT8: c_int = 0;
pub const RMX_UINT16: c_int = 1;
pub const RMX_UINT32: c_int = 2;
pub const RMX_UINT64: c_int = 3;
pub const RMX_INT8: c_int = 4;
pub const RMX_INT16: c_int = 5;
pub const RMX_INT32: c_int = 6;
pub const RMX_INT64: c_int = 7;

/// Reductions (a sum wraps).
pub const RMX_SUM: c_int = 0;
pub const RMX_MIN: c_int = 1;
pub const RMX_MAX: c_int = 2;
pub const RMX_BAND: c_int = 3;
pub const RMX_BOR: c_int = 4;
pub const RMX_BXOR: c_int = 5;

pub(crate) fn int(ty: c_int) -> Result<Int, Error> {
    rmx_driver::embed::task::int(ty)
        .ok_or_else(|| Error::arg(format!("{ty} is no RMX_ element type")))
}

pub(crate) fn op_of(op: c_int) -> Result<Op, Error> {
    rmx_driver::embed::task::op_of(op)
        .ok_or_else(|| Error::arg(format!("{op} is no RMX_ reduction")))
}

/// `count` elements of `ty` at `data`: where their bytes lie, and how
/// many (checked as `bytes` checks any buffer).
pub(crate) fn elements(
    data: *mut c_void,
    count: usize,
    ty: Int,
) -> Result<(*mut u8, usize), Error> {
    let len = count
        .checked_mul(ty.size())
        .ok_or_else(|| Error::arg(format!("{count} elements are past the address space")))?;
    Ok((bytes(data, len)?.cast_mut(), len))
}

/// Returns once every rank of the job entered it: 0, or a negative code.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_barrier(rank: *mut rmx_rank_t) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { with(rank, |s| Ok(s.rank().barrier().map(|()| 0)?)) })
}

/// Every rank's `count` elements of type `ty` at `data` become their
/// element-wise reduction by `op` over all ranks (every rank passes the
/// same `count`, `ty` and `op`): 0, or a negative code.
///
/// Contract: `rank` is null or a live rank; `data` is null or names `count`
/// elements.
#[no_mangle]
pub unsafe extern "C" fn rmx_allreduce(
    rank: *mut rmx_rank_t,
    data: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
) -> c_int {
    guard(|| {
        let (ty, op) = (int(ty)?, op_of(op)?);
        let (ptr, len) = elements(data, count, ty)?;
        // SAFETY: the caller's contract (a dangling pointer when empty).
        let data = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                Ok(s.rank().allreduce(data, ty, op).map(|()| 0)?)
            })
        }
    })
}

/// `root` as a rank of the job.
pub(crate) fn root_of(s: &mut crate::rank::State, root: c_int) -> Result<u16, Error> {
    let n = s.rank().size();
    u16::try_from(root)
        .ok()
        .filter(|&r| r < n)
        .ok_or_else(|| Error::arg(format!("root {root} is not one of the job's {n} ranks")))
}

/// Every rank's `len` bytes at `data` become `root`'s (every rank passes
/// the same `len` and `root`): 0, or a negative code.
///
/// Contract: `rank` is null or a live rank; `data` is null or names `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_bcast(
    rank: *mut rmx_rank_t,
    data: *mut c_void,
    len: usize,
    root: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let data = unsafe { write(data, len) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let root = root_of(s, root)?;
                Ok(s.rank().bcast(data, root).map(|()| 0)?)
            })
        }
    })
}

/// `root`'s `out` receives the element-wise reduction by `op` of every
/// rank's `count` elements of `ty` at `src`; `src` is left as it was, and
/// `out` is not touched elsewhere (it may be null there).
///
/// Contract: `rank` is null or a live rank; `src` is null or names `count`
/// elements; at the root, `out` names `count` writable elements.
#[no_mangle]
pub unsafe extern "C" fn rmx_reduce(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    out: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
    root: c_int,
) -> c_int {
    guard(|| {
        let (ty, op) = (int(ty)?, op_of(op)?);
        let (p, len) = elements(src.cast_mut(), count, ty)?;
        // SAFETY: the caller's contract (a dangling pointer when empty).
        let mut data = unsafe { std::slice::from_raw_parts(p, len) }.to_vec();
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let root = root_of(s, root)?;
                let here = s.rank().rank() == root;
                let out = if here { Some(write(out, len)?) } else { None };
                s.rank().reduce(&mut data, ty, op, root)?;
                if let Some(out) = out {
                    out.copy_from_slice(&data);
                }
                Ok(0)
            })
        }
    })
}

/// `root`'s `out` receives every rank's `block` bytes at `src`, in rank
/// order (`size × block` bytes); `out` is not touched elsewhere (it may
/// be null there).
///
/// Contract: `rank` is null or a live rank; `src` is null or names `block`
/// bytes; at the root, `out` names `size × block` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_gather(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    root: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let mine = unsafe { read(src, block) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let root = root_of(s, root)?;
                let (me, all) = placed(s, mine)?;
                let mut data = all;
                let here = me == root;
                let out = if here {
                    Some(write(out, data.len())?)
                } else {
                    None
                };
                s.rank().gather(&mut data, root)?;
                if let Some(out) = out {
                    out.copy_from_slice(&data);
                }
                Ok(0)
            })
        }
    })
}

/// Every rank's `out` receives its own block of `block` bytes from
/// `root`'s `src` (`size × block` bytes, in rank order); `src` is read at
/// the root only (it may be null elsewhere).
///
/// Contract: `rank` is null or a live rank; at the root, `src` names
/// `size × block` bytes; `out` is null or names `block` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_scatter(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
    root: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { write(out, block) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let root = root_of(s, root)?;
                let (len, me) = (blocks(s, block)?, s.rank().rank());
                let mut data = match me == root {
                    true => read(src, len)?.to_vec(),
                    false => vec![0u8; len],
                };
                s.rank().scatter(&mut data, root)?;
                out.copy_from_slice(&data[me as usize * block..][..block]);
                Ok(0)
            })
        }
    })
}

/// Every rank's `out` receives every rank's `block` bytes at `src`, in
/// rank order (`size × block` bytes).
///
/// Contract: `rank` is null or a live rank; `src` is null or names `block`
/// bytes; `out` is null or names `size × block` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_allgather(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let mine = unsafe { read(src, block) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let (_, mut data) = placed(s, mine)?;
                let out = write(out, data.len())?;
                s.rank().allgather(&mut data)?;
                out.copy_from_slice(&data);
                Ok(0)
            })
        }
    })
}

/// Every rank's `out` receives, in rank order, the block for it of every
/// rank's `src` (`size × block` bytes each: block j for rank j).
///
/// Contract: `rank` is null or a live rank; `src` is null or names
/// `size × block` bytes; `out` is null or names as many writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_alltoall(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    block: usize,
    out: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let len = blocks(s, block)?;
                let (send, out) = (read(src, len)?, write(out, len)?);
                Ok(s.rank().alltoall(send, out).map(|()| 0)?)
            })
        }
    })
}

/// Every rank's `out` receives the element-wise reduction by `op` over all
/// ranks of their `count` elements for it: `src` holds `size × count`
/// elements of `ty`, the `count` for rank j at `j × count` (MPI's
/// reduce-scatter of equal blocks).
///
/// Contract: `rank` is null or a live rank; `src` is null or names
/// `size × count` elements; `out` is null or names `count` writable
/// elements.
#[no_mangle]
pub unsafe extern "C" fn rmx_reduce_scatter(
    rank: *mut rmx_rank_t,
    src: *const c_void,
    out: *mut c_void,
    count: usize,
    ty: c_int,
    op: c_int,
) -> c_int {
    guard(|| {
        let (ty, op) = (int(ty)?, op_of(op)?);
        let (o, block) = elements(out, count, ty)?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let (n, me) = (s.rank().size() as usize, s.rank().rank() as usize);
                let all = count
                    .checked_mul(n)
                    .ok_or_else(|| Error::arg("size × count is past the address space"))?;
                let (p, len) = elements(src.cast_mut(), all, ty)?;
                let mut data = std::slice::from_raw_parts(p, len).to_vec();
                s.rank().reduce_scatter(&mut data, ty, op)?;
                std::ptr::copy_nonoverlapping(data[me * block..].as_ptr(), o, block);
                Ok(0)
            })
        }
    })
}

/// A buffer of one block per rank with `mine` in this rank's place; this
/// rank's number.
pub(crate) fn placed(s: &mut crate::rank::State, mine: &[u8]) -> Result<(u16, Vec<u8>), Error> {
    let (len, me) = (blocks(s, mine.len())?, s.rank().rank());
    let mut all = vec![0u8; len];
    all[me as usize * mine.len()..][..mine.len()].copy_from_slice(mine);
    Ok((me, all))
}

/// `size × block` for this job, checked.
pub(crate) fn blocks(s: &mut crate::rank::State, block: usize) -> Result<usize, Error> {
    block
        .checked_mul(s.rank().size() as usize)
        .ok_or_else(|| Error::arg("size × block is past the address space"))
}
