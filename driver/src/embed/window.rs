//! Windows on an embedded endpoint, closed by fences in the fence
//! paper's deferred design (Fence-Def, section 3.1): every operation is
//! checked at the origin and queued, and the closing fence sends them as
//! two-sided messages; the target applies what its epoch admits. It runs
//! on any port. The window's state, its epoch, its queue and the fence's
//! own bytes lie in memory the caller provides; the fence is the driver's
//! [`FenceTask`], the one every shell runs.
//!
//! Origin buffers are not copied: as in MPI, a put's or an accumulate's
//! buffer stays unchanged, and a get's untouched, until the fence that
//! ends the epoch has ended. A get of another rank's window is answered
//! straight from its window memory, which no rank may write in the same
//! epoch (MPI's rule for conflicting accesses).

use core::ffi::c_int;
use core::ops::Range;
use core::task::Poll;

use rmx_core::collective::{reduce, Collective, Int, Op};
use rmx_core::onesided::{
    Descriptor, Design, Epoch, EpochError, OpHeader, Outcome, RmaKind, Target, Window, FIRST,
};
use rmx_core::{MemKey, Remote};

use super::carve::{fill, fill_with, Carve, ALIGN};
use super::endpoint::rmx_ep_t;
use super::request::EpReq;
use super::EmbedError;
use crate::task::{Bytes, CollectiveTask, FenceHost, FenceLayout, FenceTask, Outgoing, Reply};

/// A window's limits; a field left 0 takes its default.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmx_ep_win_config_t {
    /// `sizeof(rmx_ep_win_config_t)`.
    pub size: u32,
    /// Operations one epoch may issue (default 256).
    pub max_ops: u32,
    /// Of them, gets of other ranks' windows (default `max_ops`).
    pub max_gets: u32,
    /// Bytes one displacement counts (default 1).
    pub disp_unit: u32,
}

/// `rmx_ep_fence`'s assertion: no operation of this rank's epoch ends
/// at this fence (MPI_MODE_NOPRECEDE).
pub const RMX_EP_NO_PRECEDE: u32 = 1;
/// No operation follows this fence until the next (MPI_MODE_NOSUCCEED).
pub const RMX_EP_NO_SUCCEED: u32 = 2;

/// A window of an embedded endpoint, from its creation to its end.
/// Opaque.
// The magic first, as for an endpoint (the header declares it opaque).
#[repr(C)]
pub struct rmx_ep_win_t {
    magic: u64,
    /// The endpoint it is of (calls naming another are refused).
    ep: usize,
    parts: Parts,
    step: StepTask,
}

/// What the window's collective step is.
enum StepTask {
    /// Swapping descriptors with every rank.
    Opening(CollectiveTask<EpReq>),
    Open,
    Fencing(FenceTask<EpReq, &'static mut [Option<EpReq>]>),
    /// Between fences: the task kept for the next, over its slots.
    Fenced(FenceTask<EpReq, &'static mut [Option<EpReq>]>),
}

/// What the fence works on: the window's memory, its epoch, its queue.
struct Parts {
    base: usize,
    len: usize,
    epoch: Epoch<&'static mut [Target]>,
    queue: &'static mut [Queued],
    queued: usize,
    gets: &'static mut [Get],
    got: usize,
    /// Where an operation's data sent apart lands: as long as the window.
    staging: &'static mut [u8],
    /// The fence's lent bytes, and its request slots before its first.
    lent: &'static mut [u8],
    slots: Option<&'static mut [Option<EpReq>]>,
    /// Descriptors swapped at creation (one a rank), and its scratch.
    descs: &'static mut [u8],
    scratch: &'static mut [u8],
}

/// An operation queued for the fence: its first message, and its data's
/// own in the caller's buffer.
#[derive(Clone, Copy)]
struct Queued {
    target: u16,
    first: [u8; FIRST],
    first_len: usize,
    rest: (usize, usize),
}

const NO_OP: Queued = Queued {
    target: 0,
    first: [0; FIRST],
    first_len: 0,
    rest: (0, 0),
};

/// A get of another rank's window: answered into the caller's buffer.
#[derive(Clone, Copy)]
struct Get {
    target: u16,
    id: u32,
    into: usize,
    len: usize,
}

const NO_GET: Get = Get {
    target: 0,
    id: 0,
    into: 0,
    len: 0,
};

const MAGIC: u64 = u64::from_be_bytes(*b"rmx-win1");

/// The window's limits, defaults filled.
fn limits(c: &rmx_ep_win_config_t) -> Result<(usize, usize, u32), EmbedError> {
    if (c.size as usize) < core::mem::size_of::<rmx_ep_win_config_t>() {
        return Err(EmbedError::Arg(
            "config.size: set it to sizeof(rmx_ep_win_config_t)",
        ));
    }
    let ops = if c.max_ops == 0 {
        256
    } else {
        c.max_ops as usize
    };
    let gets = if c.max_gets == 0 {
        ops
    } else {
        c.max_gets as usize
    };
    if gets > ops || gets > rmx_core::onesided::MAX_GETS as usize {
        return Err(EmbedError::Arg(
            "config.max_gets is past max_ops or the most an epoch numbers",
        ));
    }
    let unit = if c.disp_unit == 0 { 1 } else { c.disp_unit };
    Ok((ops, gets, unit))
}

type Task = FenceTask<EpReq, &'static mut [Option<EpReq>]>;

/// Where each part lies in the block.
struct Plan {
    win: usize,
    targets: usize,
    queue: usize,
    gets: usize,
    staging: usize,
    lent: usize,
    slots: usize,
    descs: usize,
    scratch: usize,
    lens: (usize, usize, usize),
}

/// The descriptors' allgather, as every rank plans it.
fn swap(e: &rmx_ep_t) -> Result<CollectiveTask<EpReq>, EmbedError> {
    let what = Collective::Allgather {
        block: Descriptor::LEN,
    };
    CollectiveTask::new(what, e.ranks, e.me, e.collectives, None).map_err(EmbedError::Collective)
}

fn plan(c: &mut Carve, e: &rmx_ep_t, len: usize, ops: usize, gets: usize) -> Option<Plan> {
    let n = e.ranks as usize;
    let layout = FenceLayout::new(Design::Def, e.ranks, e.me);
    let slots = Task::slots_len(e.ranks, gets as u32, 0);
    let scratch = swap(e).ok()?.scratch_len();
    Some(Plan {
        win: c.take::<rmx_ep_win_t>(1)?,
        targets: c.take::<Target>(n)?,
        queue: c.take::<Queued>(ops)?,
        gets: c.take::<Get>(gets)?,
        staging: c.take::<u8>(len)?,
        lent: c.take::<u8>(layout.bytes())?,
        slots: c.take::<Option<EpReq>>(slots)?,
        descs: c.take::<u8>(n.checked_mul(Descriptor::LEN)?)?,
        scratch: c.take::<u8>(scratch)?,
        lens: (layout.bytes(), slots, scratch),
    })
}

/// The bytes a window of `len` bytes under `c` needs on `e`, in a block
/// aligned to [`ALIGN`].
pub fn size(e: &rmx_ep_t, len: usize, c: &rmx_ep_win_config_t) -> Result<usize, EmbedError> {
    let (ops, gets, _) = limits(c)?;
    let mut m = Carve::measure();
    plan(&mut m, e, len, ops, gets).ok_or(EmbedError::Arg("past the address space"))?;
    Ok(m.used(0))
}

/// Starts creating a window over the `len` bytes at `base` (collective:
/// every rank creates its windows in the same order), its state in the
/// `size` bytes at `mem`; [`test()`] says when it is open.
///
/// # Safety
/// `base` is `len` bytes and `mem` (null or) `size` bytes, both the
/// window's until [`free`] returned `Ok`; the caller reads and writes
/// `base` only between fences' ends and the next operation's issue.
pub unsafe fn create(
    e: &mut rmx_ep_t,
    base: *mut u8,
    len: usize,
    c: &rmx_ep_win_config_t,
    mem: *mut u8,
    size: usize,
) -> Result<*mut rmx_ep_win_t, EmbedError> {
    let (ops, gets, unit) = limits(c)?;
    let at = mem as usize;
    if mem.is_null() || !at.is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg(
            "mem must be a block aligned to RMX_EP_ALIGN",
        ));
    }
    let p = Carve::block(at, size)
        .and_then(|mut b| plan(&mut b, e, len, ops, gets))
        .ok_or(EmbedError::Arg("the block is too short: ask its size"))?;
    let id = e.windows;
    // The key accesses must show: this window's, from where it lies.
    let key = (at as u32 >> 6) ^ u32::from(id) << 20 ^ 0x5eed_0000;
    let mine = Descriptor {
        window: Window {
            len: len as u64,
            disp_unit: unit,
            key,
        },
        remote: Remote {
            addr: 0,
            key: MemKey(0),
        },
    };
    let n = e.ranks as usize;
    // SAFETY: `plan` laid every part out inside the caller's block.
    let parts = unsafe {
        let targets = fill(p.targets, n, Target::new(mine));
        let descs = fill(p.descs, n * Descriptor::LEN, 0u8);
        let me = e.me as usize * Descriptor::LEN;
        descs[me..me + Descriptor::LEN].copy_from_slice(&mine.encode());
        Parts {
            base: base as usize,
            len,
            epoch: Epoch::new(id, e.me, Design::Def, targets)
                .ok_or(EmbedError::Arg("this rank is not one of the window's"))?,
            queue: fill(p.queue, ops, NO_OP),
            queued: 0,
            gets: fill(p.gets, gets, NO_GET),
            got: 0,
            staging: fill(p.staging, len, 0u8),
            lent: fill(p.lent, p.lens.0, 0u8),
            slots: Some(fill_with(p.slots, p.lens.1, || None)),
            descs,
            scratch: fill(p.scratch, p.lens.2, 0u8),
        }
    };
    let mut open = swap(e)?;
    let (dp, dl) = (parts.descs.as_mut_ptr(), parts.descs.len());
    let (sp, sl) = (parts.scratch.as_mut_ptr(), parts.scratch.len());
    // SAFETY: both lie in the window's block, untouched until the task
    // ended (the window is written only once it did).
    unsafe { open.start(e, dp, dl, sp, sl) }.map_err(EmbedError::Collective)?;
    e.collectives = e.collectives.wrapping_add(1);
    e.windows = e.windows.wrapping_add(1);
    // A live window keeps its endpoint: it is destroyed only once every
    // window of it was freed.
    e.tasks += 1;
    let w = p.win as *mut rmx_ep_win_t;
    // SAFETY: `plan` placed and aligned the window's row.
    unsafe {
        w.write(rmx_ep_win_t {
            magic: MAGIC,
            ep: e as *mut rmx_ep_t as usize,
            parts,
            step: StepTask::Opening(open),
        })
    };
    Ok(w)
}

/// `win` as a live window of `e`.
///
/// # Safety
/// `win` is null, or points to at least 8 readable bytes: memory given
/// to [`create`], or anything else, which is refused.
unsafe fn live<'a>(
    e: &rmx_ep_t,
    win: *mut rmx_ep_win_t,
) -> Result<&'a mut rmx_ep_win_t, EmbedError> {
    if win.is_null() || !(win as usize).is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg("win is null or not a window"));
    }
    // SAFETY: the caller's contract; the magic, the first field, is read
    // alone before anything else is trusted.
    if unsafe { win.cast::<u64>().read() } != MAGIC {
        return Err(EmbedError::Arg("win is not a live window (freed?)"));
    }
    // SAFETY: a live window, by its magic (the caller's contract).
    let w = unsafe { &mut *win };
    if w.ep != e as *const rmx_ep_t as usize {
        return Err(EmbedError::Arg("win is another endpoint's"));
    }
    Ok(w)
}

/// The window's fence as the task sees it.
struct Host<'a> {
    ep: &'a mut rmx_ep_t,
    p: &'a mut Parts,
}

impl FenceHost for Host<'_> {
    type Rank = rmx_ep_t;
    type Targets = &'static mut [Target];

    fn rank(&mut self) -> &mut rmx_ep_t {
        self.ep
    }

    fn epoch(&mut self) -> &mut Epoch<&'static mut [Target]> {
        &mut self.p.epoch
    }

    fn send_queued(&mut self) {
        // Operations on this rank's own window were applied when issued;
        // the rest wait in the queue, the gets' answers in `gets`.
    }

    fn outgoing(&mut self, i: usize) -> Option<Outgoing> {
        let q = self.p.queue[..self.p.queued].get(i)?;
        Some(Outgoing {
            target: q.target,
            first: Bytes {
                ptr: q.first.as_ptr(),
                len: q.first_len,
            },
            rest: Bytes {
                ptr: q.rest.0 as *const u8,
                len: q.rest.1,
            },
        })
    }

    fn reply(&mut self, i: usize) -> Option<Reply> {
        let g = self.p.gets[..self.p.got].get(i)?;
        Some(Reply {
            target: g.target,
            id: g.id,
            into: g.into as *mut u8,
            len: g.len,
        })
    }

    fn data(&mut self, len: usize) -> *mut u8 {
        // An admitted operation's data lies inside the window, so it is
        // never longer than the staging bytes.
        debug_assert!(len <= self.p.staging.len());
        self.p.staging.as_mut_ptr()
    }

    fn apply(&mut self, h: &OpHeader, range: Range<u64>, data: &[u8]) {
        self.p.apply(h.kind, range, data);
    }

    fn answer(&mut self, range: Range<u64>) -> *const u8 {
        (self.p.base + range.start as usize) as *const u8
    }
}

impl Parts {
    /// The window's bytes at `range` (inside it: the epoch checked).
    fn bytes(&mut self, range: Range<u64>) -> &mut [u8] {
        let (at, end) = (range.start as usize, range.end as usize);
        debug_assert!(end <= self.len);
        // SAFETY: the creator's contract gives the window's bytes to the
        // window while an epoch applies operations.
        unsafe { core::slice::from_raw_parts_mut((self.base + at) as *mut u8, end - at) }
    }

    /// Applies an admitted put or integer accumulate. The epoch admitted
    /// its range and whole elements, so the reduction cannot fail; a
    /// float accumulate (no embedded origin issues one: the core has no
    /// floating point) changes nothing.
    fn apply(&mut self, kind: RmaKind, range: Range<u64>, data: &[u8]) {
        match kind {
            RmaKind::Put => self.bytes(range).copy_from_slice(data),
            RmaKind::Accumulate(op, ty) => {
                let _ = reduce(op, ty, self.bytes(range), data);
            }
            _ => {}
        }
    }
}

/// An operation of the epoch on `win`: `kind` on `len` bytes at `disp`
/// of `target`'s window, from or into `buf`.
///
/// # Safety
/// `win` is null, or memory given to [`create`] on `e`; `buf` is `len` bytes, unchanged (a put, an
/// accumulate) or untouched (a get) until the fence that ends the epoch
/// has ended.
pub unsafe fn issue(
    e: &mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    target: c_int,
    disp: u64,
    buf: *mut u8,
    len: usize,
    kind: RmaKind,
) -> Result<(), EmbedError> {
    // SAFETY: the caller's contract.
    let w = unsafe { live(e, win) }?;
    if !matches!(w.step, StepTask::Open | StepTask::Fenced(_)) {
        return Err(EmbedError::WindowBusy);
    }
    let target = super::args::peer(e.ranks, target)?;
    let p = &mut w.parts;
    let epoch_error = |x: EpochError| match x {
        EpochError::TooManyGets => EmbedError::Full,
        _ => EmbedError::Arg("the operation is outside the target's window, or misaligned"),
    };
    let mut h = p
        .epoch
        .check(target, disp, len as u64, kind)
        .map_err(epoch_error)?;
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts(buf as *const u8, len) };
    let range = h.offset..h.offset + len as u64;
    if target == e.me {
        p.epoch.local();
        match kind {
            RmaKind::Get => {
                let from = p.bytes(range);
                // SAFETY: the caller's buffer, `len` bytes; a get's buffer
                // and the window may not overlap (MPI's rule).
                unsafe { core::ptr::copy(from.as_ptr(), buf, len) };
            }
            _ => p.apply(kind, range, data),
        }
        return Ok(());
    }
    if p.queued == p.queue.len() || (kind == RmaKind::Get && p.got == p.gets.len()) {
        return Err(EmbedError::Full);
    }
    if kind == RmaKind::Get {
        let id = p.epoch.number_get(&mut h).map_err(epoch_error)?;
        p.gets[p.got] = Get {
            target,
            id,
            into: buf as usize,
            len,
        };
        p.got += 1;
    }
    let q = &mut p.queue[p.queued];
    let sent = if kind == RmaKind::Get { &[][..] } else { data };
    let (n, apart) = h.compose(sent, &mut q.first);
    q.target = target;
    q.first_len = n;
    q.rest = apart.map_or((0, 0), |d| (d.as_ptr() as usize, d.len()));
    p.queued += 1;
    p.epoch.message(target);
    Ok(())
}

/// Starts the fence that ends the epoch (collective), with `assert`'s
/// `RMX_EP_NO_*`; [`test()`] says when it ended.
///
/// # Safety
/// `win` is null, or memory given to [`create`] on `e`.
pub unsafe fn fence(
    e: &mut rmx_ep_t,
    win: *mut rmx_ep_win_t,
    assert: u32,
) -> Result<(), EmbedError> {
    // SAFETY: the caller's contract.
    let w = unsafe { live(e, win) }?;
    if assert & !(RMX_EP_NO_PRECEDE | RMX_EP_NO_SUCCEED) != 0 {
        return Err(EmbedError::Arg("assert has bits that are no RMX_EP_NO_*"));
    }
    let (no_precede, no_succeed) = (
        assert & RMX_EP_NO_PRECEDE != 0,
        assert & RMX_EP_NO_SUCCEED != 0,
    );
    let layout = FenceLayout::new(Design::Def, e.ranks, e.me);
    let seq = e.collectives;
    let step = core::mem::replace(&mut w.step, StepTask::Open);
    let task = match step {
        StepTask::Open | StepTask::Fenced(_) => {
            if let Err(x) = w.parts.epoch.fence(no_precede, no_succeed) {
                w.step = step;
                return Err(match x {
                    EpochError::Assertion => EmbedError::Arg(
                        "an operation was issued after a fence asserting none follows",
                    ),
                    _ => EmbedError::WindowBusy,
                });
            }
            let p = &mut w.parts;
            let (mem, len) = (p.lent.as_mut_ptr(), p.lent.len());
            let mut host = Host { ep: &mut *e, p };
            match step {
                StepTask::Fenced(mut t) => {
                    // SAFETY: the window's lent bytes and queue stay until
                    // the fence reports; the last fence reported.
                    unsafe { t.restart(&mut host, layout, mem, len, seq) };
                    t
                }
                _ => {
                    let slots = host.p.slots.take().unwrap_or(&mut []);
                    // SAFETY: as above.
                    unsafe { Task::start(&mut host, layout, mem, len, slots, seq) }
                }
            }
        }
        other => {
            w.step = other;
            return Err(EmbedError::WindowBusy);
        }
    };
    e.collectives = e.collectives.wrapping_add(Task::COLLECTIVES);
    e.tasks += 1;
    w.step = StepTask::Fencing(task);
    Ok(())
}

/// Moves the window's step on (its opening, or a fence): `Ok(true)` once
/// it ended well (or none runs), `Ok(false)` while it runs, or the error
/// it ended with.
///
/// # Safety
/// `win` is null, or memory given to [`create`] on `e`.
pub unsafe fn test(e: &mut rmx_ep_t, win: *mut rmx_ep_win_t) -> Result<bool, EmbedError> {
    // SAFETY: the caller's contract.
    let w = unsafe { live(e, win) }?;
    match &mut w.step {
        StepTask::Open | StepTask::Fenced(_) => Ok(true),
        StepTask::Opening(t) => {
            let Poll::Ready(r) = t.poll(e) else {
                return Ok(false);
            };
            w.step = StepTask::Open;
            r.map_err(EmbedError::Collective)?;
            let p = &mut w.parts;
            for rank in 0..e.ranks {
                let at = rank as usize * Descriptor::LEN;
                let d = Descriptor::decode(&p.descs[at..at + Descriptor::LEN])
                    .map_err(|_| EmbedError::Arg("a rank's window descriptor is malformed"))?;
                p.epoch.set_descriptor(rank, d);
            }
            Ok(true)
        }
        StepTask::Fencing(t) => {
            let mut host = Host {
                ep: &mut *e,
                p: &mut w.parts,
            };
            let Poll::Ready(r) = t.poll(&mut host) else {
                return Ok(false);
            };
            e.tasks -= 1;
            let step = core::mem::replace(&mut w.step, StepTask::Open);
            if let StepTask::Fencing(t) = step {
                w.step = StepTask::Fenced(t);
            }
            // The next epoch starts afresh.
            w.parts.queued = 0;
            w.parts.got = 0;
            let f = r.map_err(EmbedError::Collective)?;
            if let Some(fault) = f.fault {
                return Err(EmbedError::Fault(fault));
            }
            outcome(f.outcome)?;
            Ok(true)
        }
    }
}

fn outcome(o: Outcome) -> Result<(), EmbedError> {
    if o.disagree {
        return Err(EmbedError::Collective(
            crate::task::CollectiveError::Mismatch {
                from: 0,
                got: 0,
                want: 0,
            },
        ));
    }
    if o.false_assertion {
        return Err(EmbedError::Arg(
            "operations were issued before a fence asserting none precedes",
        ));
    }
    Ok(())
}

/// Ends the window: refused while its opening or a fence runs, or with
/// operations of an epoch not yet fenced. The memory and the block are
/// the caller's again.
///
/// # Safety
/// `win` is null, or memory given to [`create`] on `e`, used by no call
/// after this returned `Ok`.
pub unsafe fn free(e: &mut rmx_ep_t, win: *mut rmx_ep_win_t) -> Result<(), EmbedError> {
    // SAFETY: the caller's contract.
    let w = unsafe { live(e, win) }?;
    if !matches!(w.step, StepTask::Open | StepTask::Fenced(_)) || w.parts.queued > 0 {
        return Err(EmbedError::WindowBusy);
    }
    w.magic = 0;
    e.tasks -= 1;
    // SAFETY: never used again: the magic is gone.
    unsafe { core::ptr::drop_in_place(win) };
    Ok(())
}

/// An accumulate's kind for C's element type and reduction.
pub fn accumulate(ty: c_int, op: c_int) -> Result<RmaKind, EmbedError> {
    let ty: Int = super::task::int(ty).ok_or(EmbedError::Arg("ty is no RMX_ element type"))?;
    let op: Op = super::task::op_of(op).ok_or(EmbedError::Arg("op is no RMX_ reduction"))?;
    Ok(RmaKind::Accumulate(op, ty))
}
