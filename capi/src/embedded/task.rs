//! Collectives on an embedded endpoint, as the driver's tasks
//! ([`CollectiveTask`]) in memory the caller provides: started, then
//! tested while the caller moves the endpoint on, never blocking. Every
//! rank starts the same collectives in the same order.

use std::ffi::{c_int, c_void};
use std::task::Poll;

use rmx_core::collective::{Collective, Int, Op};
use rmx_driver::task::CollectiveTask;

use super::messages::EpReq;
use super::{live, rmx_ep_t};
use crate::carve::{fill, Carve, RMX_EP_ALIGN};
use crate::collective::{int, op_of};
use crate::errors::{Error, RMX_OK};
use crate::guard::{bytes, guard, out};

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
/// from `rmx_ep_task_start` until `rmx_ep_task_test` reports its end.
/// Opaque.
pub struct rmx_task_t {
    magic: u64,
    task: CollectiveTask<EpReq>,
}

const MAGIC: u64 = u64::from_be_bytes(*b"rmx-task");

/// The core's collective for `c` on `e`, and its reduction.
fn plan(e: &rmx_ep_t, c: &rmx_coll_t) -> Result<CollectiveTask<EpReq>, Error> {
    let root = || {
        u16::try_from(c.root)
            .ok()
            .filter(|&r| r < e.ranks)
            .ok_or_else(|| Error::arg(format!("root {} is not one of {} ranks", c.root, e.ranks)))
    };
    let reduce = || -> Result<Option<(Op, Int)>, Error> { Ok(Some((op_of(c.op)?, int(c.ty)?))) };
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
        k => return Err(Error::arg(format!("kind {k} is none of RMX_COLL_*"))),
    };
    Ok(CollectiveTask::new(what, e.ranks, e.me, e.collectives, op)?)
}

/// Where a task's scratch lies after it.
fn layout(c: &mut Carve, scratch: usize) -> Option<(usize, usize)> {
    Some((c.take::<rmx_task_t>(1)?, c.take::<u8>(scratch)?))
}

/// Writes the bytes a task of `*what` on `ep` needs into `*size` (the
/// block given to `rmx_ep_task_start`, aligned to `RMX_EP_ALIGN`): 0, or
/// a negative code.
///
/// Contract: `ep` is null or an endpoint; `what` and `size` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_size(
    ep: *mut rmx_ep_t,
    what: *const rmx_coll_t,
    size: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let c = unsafe { what.as_ref() }.ok_or_else(|| Error::arg("what is null"))?;
        // SAFETY: the caller's contract.
        let size = unsafe { out(size, "size") }?;
        let t = plan(e, c)?;
        let mut m = Carve::measure();
        layout(&mut m, t.scratch_len()).ok_or_else(|| Error::arg("past the address space"))?;
        *size = m.used(0);
        Ok(RMX_OK)
    })
}

/// Starts collective `*what` on `ep` over the `len` bytes at `data`
/// (as its kind says), with its state and scratch in the `size` bytes at
/// `mem` (`rmx_ep_task_size`, aligned to `RMX_EP_ALIGN`); the task in
/// `*task`. Every rank starts the same collectives in the same order.
/// 0, or a negative code (nothing started, the memory the caller's).
///
/// Contract: `ep` is null or an endpoint; `data` null or `len` bytes and
/// `mem` null or `size` bytes, both untouched by the caller until the
/// task's test reports its end; `what` and `task` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_start(
    ep: *mut rmx_ep_t,
    what: *const rmx_coll_t,
    data: *mut c_void,
    len: usize,
    mem: *mut c_void,
    size: usize,
    task: *mut *mut rmx_task_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let c = unsafe { what.as_ref() }.ok_or_else(|| Error::arg("what is null"))?;
        // SAFETY: the caller's contract.
        let task = unsafe { out(task, "task") }?;
        let data = bytes(data, len)?.cast_mut();
        let base = bytes(mem, size)? as usize;
        if mem.is_null() || !base.is_multiple_of(RMX_EP_ALIGN) {
            return Err(Error::arg(format!(
                "mem must be a block aligned to RMX_EP_ALIGN ({RMX_EP_ALIGN})"
            )));
        }
        let mut t = plan(e, c)?;
        let need = t.scratch_len();
        let (at, scratch) = Carve::block(base, size)
            .and_then(|mut b| layout(&mut b, need))
            .ok_or_else(|| Error::arg(format!("{size} bytes are too few: ask rmx_ep_task_size")))?;
        // SAFETY: the scratch lies in the caller's block, given to the
        // task until it ends.
        let scratch = unsafe { fill(scratch, need, 0u8) };
        // SAFETY: the caller's contract keeps `data` and the block until
        // the task ends.
        unsafe { t.start(e, data, len, scratch.as_mut_ptr(), need) }?;
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
        *task = at;
        Ok(RMX_OK)
    })
}

/// `task` as a live task.
///
/// # Safety
/// `task` is null, or points to memory given to `rmx_ep_task_start`.
unsafe fn running<'a>(task: *mut rmx_task_t) -> Result<&'a mut rmx_task_t, Error> {
    if task.is_null() || !(task as usize).is_multiple_of(RMX_EP_ALIGN) {
        return Err(Error::arg("task is null or not a task"));
    }
    // SAFETY: the caller's contract; the magic is checked first.
    let t = unsafe { &mut *task };
    if t.magic != MAGIC {
        return Err(Error::arg("task is not a running task (ended?)"));
    }
    Ok(t)
}

/// Moves `task` on as far as it goes now (`rmx_ep_progress` moves the
/// endpoint): 1 once it ended well, 0 while it runs, or the negative
/// code it ended with. Once it ended (either way) its data holds the
/// result, and its memory and data are the caller's again.
///
/// Contract: `ep` is null or an endpoint; `task` null or a task of it.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_test(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let t = unsafe { running(task) }?;
        let Poll::Ready(r) = t.task.poll(e) else {
            return Ok(0);
        };
        t.magic = 0;
        e.tasks -= 1;
        // SAFETY: ended: no request of it is left; never used again.
        unsafe { std::ptr::drop_in_place(task) };
        r?;
        Ok(1)
    })
}

/// Ends `task` early: its receives that have not matched are cancelled;
/// test it to its end (`RMX_ERR_CANCELLED`, or how it ended if it
/// already had). 0, or a negative code.
///
/// Contract: as for `rmx_ep_task_test`.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_task_abort(ep: *mut rmx_ep_t, task: *mut rmx_task_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let t = unsafe { running(task) }?;
        t.task.abort(e);
        Ok(RMX_OK)
    })
}
