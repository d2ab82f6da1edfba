//! Collectives on an embedded endpoint, as [`CollectiveTask`]s in memory
//! the caller provides: started, then tested while the caller moves the
//! endpoint on, never blocking. Every rank starts the same collectives in
//! the same order.

use core::ffi::c_int;
use core::task::Poll;

use rmx_core::collective::{Collective, Int, Op};

use super::carve::{fill, Carve, ALIGN};
use super::endpoint::rmx_ep_t;
use super::request::EpReq;
use super::EmbedError;
use crate::task::CollectiveTask;

/// `rmx_coll_t.kind`: returns once every rank entered it.
pub const RMX_COLL_BARRIER: c_int = 0;
/// Every rank's `len` bytes become their reduction over all ranks.
pub const RMX_COLL_ALLREDUCE: c_int = 1;
/// Every rank ends with the root's `len` bytes.
pub const RMX_COLL_BCAST: c_int = 2;
/// The root ends with the reduction of every rank's `len` bytes (the
/// others' are left partly reduced).
pub const RMX_COLL_REDUCE: c_int = 3;
/// Rank i gives block i (`len` bytes at i × `len`) of a buffer of n
/// blocks; every rank ends with all of them.
pub const RMX_COLL_ALLGATHER: c_int = 4;
/// As allgather, but only the root ends with all blocks.
pub const RMX_COLL_GATHER: c_int = 5;
/// The root's n blocks of `len` bytes: rank i ends with block i.
pub const RMX_COLL_SCATTER: c_int = 6;
/// Every rank gives n blocks; rank i ends with the reduction of every
/// rank's block i, at i × `len`.
pub const RMX_COLL_REDUCE_SCATTER: c_int = 7;
/// Rank i's n blocks (block j for rank j), then n blocks of room: it
/// ends with block i of every rank j at (n + j) × `len`.
pub const RMX_COLL_ALLTOALL: c_int = 8;

/// A collective, as every rank starts it alike.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmx_coll_t {
    /// `RMX_COLL_*`.
    pub kind: c_int,
    /// A reducing collective's element type (`RMX_INT32` …).
    pub ty: c_int,
    /// A reducing collective's reduction (`RMX_SUM` …).
    pub op: c_int,
    /// A rooted collective's root.
    pub root: c_int,
    /// The data's bytes, or one block's (see each kind).
    pub len: usize,
}

/// A collective running on an endpoint, in memory the caller provides,
/// from its start until a test reports its end. Opaque.
// The magic first, as for an endpoint (the header declares it opaque).
#[repr(C)]
pub struct rmx_task_t {
    magic: u64,
    task: CollectiveTask<EpReq>,
}

const MAGIC: u64 = u64::from_be_bytes(*b"rmx-task");

/// The element type `RMX_UINT8` (0) … `RMX_INT64` (7) names.
pub fn int(ty: c_int) -> Option<Int> {
    usize::try_from(ty)
        .ok()
        .and_then(|i| Int::ALL.get(i).copied())
}

/// The reduction `RMX_SUM` (0) … `RMX_BXOR` (5) names.
pub fn op_of(op: c_int) -> Option<Op> {
    usize::try_from(op)
        .ok()
        .filter(|&i| i <= 5)
        .and_then(|i| Op::ALL.get(i).copied())
}

/// The core's collective for `c` on `e`, planned.
fn plan(e: &rmx_ep_t, c: &rmx_coll_t) -> Result<CollectiveTask<EpReq>, EmbedError> {
    let root = || {
        u16::try_from(c.root)
            .ok()
            .filter(|&r| r < e.ranks)
            .ok_or(EmbedError::Arg("what.root is not one of the ranks"))
    };
    let reduce = || -> Result<Option<(Op, Int)>, EmbedError> {
        let op = op_of(c.op).ok_or(EmbedError::Arg("what.op is no RMX_ reduction"))?;
        let ty = int(c.ty).ok_or(EmbedError::Arg("what.ty is no RMX_ element type"))?;
        Ok(Some((op, ty)))
    };
    let (len, block) = (c.len, c.len);
    let (what, op) = match c.kind {
        RMX_COLL_BARRIER => (Collective::Barrier, None),
        RMX_COLL_ALLREDUCE => (Collective::Allreduce { len }, reduce()?),
        RMX_COLL_BCAST => (Collective::Bcast { len, root: root()? }, None),
        RMX_COLL_REDUCE => (Collective::Reduce { len, root: root()? }, reduce()?),
        RMX_COLL_ALLGATHER => (Collective::Allgather { block }, None),
        RMX_COLL_GATHER => (
            Collective::Gather {
                block,
                root: root()?,
            },
            None,
        ),
        RMX_COLL_SCATTER => (
            Collective::Scatter {
                block,
                root: root()?,
            },
            None,
        ),
        RMX_COLL_REDUCE_SCATTER => (Collective::ReduceScatter { block }, reduce()?),
        RMX_COLL_ALLTOALL => (Collective::Alltoall { block }, None),
        _ => return Err(EmbedError::Arg("what.kind is none of RMX_COLL_*")),
    };
    CollectiveTask::new(what, e.ranks, e.me, e.collectives, op).map_err(EmbedError::Collective)
}

/// Where a task's scratch lies after it.
fn layout(c: &mut Carve, scratch: usize) -> Option<(usize, usize)> {
    Some((c.take::<rmx_task_t>(1)?, c.take::<u8>(scratch)?))
}

/// The bytes a task of `c` on `e` needs, in a block aligned to [`ALIGN`].
pub fn size(e: &rmx_ep_t, c: &rmx_coll_t) -> Result<usize, EmbedError> {
    let t = plan(e, c)?;
    let mut m = Carve::measure();
    layout(&mut m, t.scratch_len()).ok_or(EmbedError::Arg("past the address space"))?;
    Ok(m.used(0))
}

/// Starts collective `c` on `e` over the `len` bytes at `data`, with its
/// state and scratch in the `size` bytes at `mem`.
///
/// # Safety
/// `data` is `len` bytes and `mem` (null or) `size` bytes, both untouched
/// by the caller until [`test()`] reports the task's end.
pub unsafe fn start(
    e: &mut rmx_ep_t,
    c: &rmx_coll_t,
    data: *mut u8,
    len: usize,
    mem: *mut u8,
    size: usize,
) -> Result<*mut rmx_task_t, EmbedError> {
    let base = mem as usize;
    if mem.is_null() || !base.is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg(
            "mem must be a block aligned to RMX_EP_ALIGN",
        ));
    }
    let mut t = plan(e, c)?;
    let need = t.scratch_len();
    let (at, scratch) = Carve::block(base, size)
        .and_then(|mut b| layout(&mut b, need))
        .ok_or(EmbedError::Arg("the block is too short: ask its size"))?;
    // SAFETY: the scratch lies in the caller's block, the task's until it
    // ends.
    let scratch = unsafe { fill(scratch, need, 0u8) };
    // SAFETY: the caller's contract keeps `data` and the block until the
    // task ends.
    unsafe { t.start(e, data, len, scratch.as_mut_ptr(), need) }.map_err(EmbedError::Collective)?;
    e.collectives = e.collectives.wrapping_add(1);
    e.tasks += 1;
    let at = at as *mut rmx_task_t;
    // SAFETY: `layout` placed and aligned the task's row.
    unsafe {
        at.write(rmx_task_t {
            magic: MAGIC,
            task: t,
        })
    };
    Ok(at)
}

/// `task` as a running task.
///
/// # Safety
/// `task` is null, or points to at least 8 readable bytes: memory given
/// to [`start`], or anything else, which is refused.
unsafe fn running<'a>(task: *mut rmx_task_t) -> Result<&'a mut rmx_task_t, EmbedError> {
    if task.is_null() || !(task as usize).is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg("task is null or not a task"));
    }
    // SAFETY: the caller's contract; the magic, the first field, is read
    // alone before anything else is trusted.
    if unsafe { task.cast::<u64>().read() } != MAGIC {
        return Err(EmbedError::Arg("task is not a running task (ended?)"));
    }
    // SAFETY: a running task, by its magic (the caller's contract).
    Ok(unsafe { &mut *task })
}

/// Moves `task` on as far as it goes now: `Ok(true)` once it ended well,
/// `Ok(false)` while it runs, or the error it ended with. Once it ended
/// (either way) its memory and data are the caller's again.
///
/// # Safety
/// `task` is null, or points to memory given to [`start`] on `e`.
pub unsafe fn test(e: &mut rmx_ep_t, task: *mut rmx_task_t) -> Result<bool, EmbedError> {
    // SAFETY: the caller's contract.
    let t = unsafe { running(task) }?;
    let Poll::Ready(r) = t.task.poll(e) else {
        return Ok(false);
    };
    t.magic = 0;
    e.tasks -= 1;
    // SAFETY: ended: no request of it is left; never used again.
    unsafe { core::ptr::drop_in_place(task) };
    r.map_err(EmbedError::Collective)?;
    Ok(true)
}

/// Ends `task` early: its receives that have not matched are cancelled;
/// test it to its end.
///
/// # Safety
/// As for [`test()`].
pub unsafe fn abort(e: &mut rmx_ep_t, task: *mut rmx_task_t) -> Result<(), EmbedError> {
    // SAFETY: the caller's contract.
    let t = unsafe { running(task) }?;
    t.task.abort(e);
    Ok(())
}
