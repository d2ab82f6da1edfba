//! Windows and fence epochs: `MPI_Win_create`, `Win_allocate`,
//! `Win_fence`, `Put`, `Get`, `Accumulate`, `Win_free`, over rmx's
//! windows (the fence paper's deferred design). rmx's windows span the
//! job, so a window's communicator holds every rank in the job's order.
//!
//! `MPI_Win_allocate` hands out rmx's own window memory. `MPI_Win_create`
//! keeps the caller's memory in step with it at each fence: the bytes the
//! caller stored since the last fence go to the window first, and the
//! window's bytes come back once the fence ended. MPI's rules (no
//! conflicting local and remote access in one epoch) make that exact.

use std::ffi::{c_int, c_void};

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::Float;
use rmx_linux::rank::Rank;
use rmx_linux::window::{Assert, Get, Win, WinError};

use crate::abi::*;
use crate::args::{buffer, elements, out};
use crate::comm::Group;
use crate::datatype::Elem;
use crate::error::{call, Error, Handler, Result};
use crate::state::{handler_of, with, Lib};

/// A window as MPI holds it.
pub struct Window {
    win: Win,
    /// The caller's memory a `MPI_Win_create` window mirrors, and what it
    /// held after the last fence.
    user: Option<(*mut u8, Vec<u8>)>,
    /// Gets of the open epoch: where their bytes go when it ends.
    gets: Vec<(Get, *mut u8, usize)>,
    pub handler: Handler,
}

// SAFETY: the caller's memory is the window's from creation to free (MPI's
// rule), and the library uses it under one lock.
unsafe impl Send for Window {}

fn win_error(e: WinError) -> Error {
    let class = match e {
        WinError::Rma(_) => MPI_ERR_RMA_RANGE,
        WinError::Memory { .. } => MPI_ERR_NO_MEM,
        WinError::TooLong => MPI_ERR_COUNT,
        _ => MPI_ERR_OTHER,
    };
    Error::new(class, format!("window: {e:?}"))
}

impl Window {
    /// Fences the window one last time and frees it (collective).
    pub fn free(mut self, rank: &mut Rank) -> Result<()> {
        self.sync_in()?;
        self.win.free(rank).map_err(win_error)
    }

    /// The caller's stores since the last fence, into the window.
    fn sync_in(&mut self) -> Result<()> {
        let Some((p, last)) = &self.user else {
            return Ok(());
        };
        // SAFETY: the caller's memory of `last.len()` bytes (MPI_Win_create's contract).
        let now = unsafe { std::slice::from_raw_parts(*p, last.len()) };
        let mut i = 0;
        while i < now.len() {
            if now[i] == last[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < now.len() && now[i] != last[i] {
                i += 1;
            }
            self.win.write(start, &now[start..i]).map_err(win_error)?;
        }
        Ok(())
    }

    /// The window's bytes, back into the caller's memory.
    fn sync_out(&mut self) -> Result<()> {
        let Some((p, last)) = &mut self.user else {
            return Ok(());
        };
        self.win.read(0, last).map_err(win_error)?;
        // SAFETY: as in `sync_in`.
        unsafe { std::ptr::copy_nonoverlapping(last.as_ptr(), *p, last.len()) };
        Ok(())
    }
}

impl Lib {
    fn window(&mut self, h: Handle) -> Result<(&mut Rank, &mut Window)> {
        let w = self
            .wins
            .get_mut(h)
            .ok_or_else(|| Error::new(MPI_ERR_WIN, format!("{h:#x} is no window")))?;
        Ok((self.job.rank(), w))
    }

    fn make(&mut self, comm: Handle, size: isize, disp_unit: c_int) -> Result<Win> {
        let c = self.comm(comm)?;
        let world = Group::World(self.world.size());
        if !c.group.same(&world) {
            return Err(Error::new(
                MPI_ERR_UNSUPPORTED_OPERATION,
                "rmx's windows span every rank: create them on MPI_COMM_WORLD or a copy of it",
            ));
        }
        let len = usize::try_from(size)
            .map_err(|_| Error::new(MPI_ERR_SIZE, format!("size {size} is negative")))?;
        let unit = u32::try_from(disp_unit)
            .ok()
            .filter(|&u| u > 0)
            .ok_or_else(|| Error::arg(format!("disp_unit {disp_unit} is not positive")))?;
        self.rank().win_create(len, unit).map_err(win_error)
    }
}

/// The handler of window `win`'s errors: `MPI_COMM_WORLD`'s when `win`
/// names none.
fn window_handler(win: Handle) -> Handler {
    match &*crate::state::lock() {
        crate::state::Phase::Running(lib) => {
            lib.wins.get(win).map_or(lib.world.handler, |w| w.handler)
        }
        _ => Handler::Fatal,
    }
}

/// A window of `size` bytes of rmx's memory, whose address goes to
/// `*baseptr` (collective).
///
/// # Safety
/// `baseptr` names a writable `void *`; `win` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate(
    size: isize,
    disp_unit: c_int,
    _info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    call(
        "MPI_Win_allocate",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let (base, out_win) =
                    unsafe { (out(baseptr.cast::<*mut u8>(), "baseptr")?, out(win, "win")?) };
                let mut w = lib.make(comm, size, disp_unit)?;
                *base = w.memory().map_err(win_error)?.as_mut_ptr();
                let handler = lib.comm(comm)?.handler;
                *out_win = lib.wins.insert(Window {
                    win: w,
                    user: None,
                    gets: Vec::new(),
                    handler,
                });
                Ok(())
            })
        },
    )
}

/// A window over the caller's `size` bytes at `base` (collective).
///
/// # Safety
/// `base` names `size` bytes, the window's until it is freed; `win` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create(
    base: *mut c_void,
    size: isize,
    disp_unit: c_int,
    _info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> c_int {
    call(
        "MPI_Win_create",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let out_win = unsafe { out(win, "win") }?;
                let len = usize::try_from(size).unwrap_or(0);
                let p = buffer(base, len)?.cast_mut();
                let mut w = lib.make(comm, size, disp_unit)?;
                // SAFETY: the caller's contract.
                let now = unsafe { std::slice::from_raw_parts(p, len) }.to_vec();
                w.write(0, &now).map_err(win_error)?;
                let handler = lib.comm(comm)?.handler;
                *out_win = lib.wins.insert(Window {
                    win: w,
                    user: Some((p, now)),
                    gets: Vec::new(),
                    handler,
                });
                Ok(())
            })
        },
    )
}

/// Ends an epoch and opens the next (collective): every put, get and
/// accumulate of the epoch has landed when it returns.
#[no_mangle]
pub extern "C" fn MPI_Win_fence(assert: c_int, win: Handle) -> c_int {
    call(
        "MPI_Win_fence",
        || window_handler(win),
        || {
            with(|lib| {
                let known = MPI_MODE_NOCHECK
                    | MPI_MODE_NOPRECEDE
                    | MPI_MODE_NOPUT
                    | MPI_MODE_NOSTORE
                    | MPI_MODE_NOSUCCEED;
                if assert & !known != 0 {
                    return Err(Error::new(
                        MPI_ERR_ASSERT,
                        format!("assertion {assert:#x} is not a fence's"),
                    ));
                }
                let mut a = Assert::NONE;
                for (m, r) in [
                    (MPI_MODE_NOPRECEDE, Assert::NO_PRECEDE),
                    (MPI_MODE_NOSUCCEED, Assert::NO_SUCCEED),
                    (MPI_MODE_NOSTORE, Assert::NO_STORE),
                    (MPI_MODE_NOPUT, Assert::NO_PUT),
                ] {
                    if assert & m != 0 {
                        a = a | r;
                    }
                }
                let (rank, w) = lib.window(win)?;
                w.sync_in()?;
                w.win.fence_with(rank, a).map_err(win_error)?;
                for (g, to, len) in std::mem::take(&mut w.gets) {
                    if let Some(b) = w.win.take(g) {
                        // SAFETY: the get's origin buffer names `len` writable
                        // bytes until its epoch ended (`MPI_Get`'s contract).
                        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), to, len.min(b.len())) };
                    }
                }
                w.sync_out()
            })
        },
    )
}

/// Frees a window (collective); `*win` becomes `MPI_WIN_NULL`.
///
/// # Safety
/// `win` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_free(win: *mut Handle) -> c_int {
    // SAFETY: the caller's contract (read for the handler only).
    let h = unsafe { win.as_ref() }.copied().unwrap_or(MPI_WIN_NULL);
    call(
        "MPI_Win_free",
        || window_handler(h),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let win = unsafe { out(win, "win") }?;
                let w = lib
                    .wins
                    .remove(*win)
                    .ok_or_else(|| Error::new(MPI_ERR_WIN, format!("{:#x} is no window", *win)))?;
                *win = MPI_WIN_NULL;
                w.free(lib.rank())
            })
        },
    )
}

/// What an origin and target of one operation name: the bytes, the
/// element type and the target's displacement.
struct Access {
    len: usize,
    ty: crate::datatype::Type,
    target: u16,
    disp: u64,
}

/// The target side of an operation, as C gives it.
struct Target {
    rank: c_int,
    disp: isize,
    count: c_int,
    datatype: Handle,
}

fn access(lib: &Lib, count: c_int, datatype: Handle, t: &Target) -> Result<Access> {
    let (ty, len) = elements(count, datatype)?;
    let (_, tlen) = elements(t.count, t.datatype)?;
    if tlen != len {
        return Err(Error::new(
            MPI_ERR_TRUNCATE,
            format!("the origin names {len} bytes but the target {tlen}"),
        ));
    }
    let target = lib.world.peer(t.rank)?;
    let disp = u64::try_from(t.disp)
        .map_err(|_| Error::new(MPI_ERR_DISP, format!("displacement {} is negative", t.disp)))?;
    Ok(Access {
        len,
        ty,
        target,
        disp,
    })
}

/// Runs one operation of an epoch on `win`: nothing for a target of
/// `MPI_PROC_NULL`, else `f` with its checked access.
fn operation(
    name: &str,
    win: Handle,
    origin: (c_int, Handle),
    t: Target,
    f: impl FnOnce(&mut Lib, Access) -> Result<()>,
) -> c_int {
    call(
        name,
        || window_handler(win),
        || {
            with(|lib| {
                if t.rank == MPI_PROC_NULL {
                    return Ok(());
                }
                let a = access(lib, origin.0, origin.1, &t)?;
                f(lib, a)
            })
        },
    )
}

/// Writes the origin's bytes to the target's window in this epoch.
///
/// # Safety
/// `origin_addr` names the bytes, unchanged until the epoch ends.
#[no_mangle]
pub unsafe extern "C" fn MPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: isize,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let t = Target {
        rank: target_rank,
        disp: target_disp,
        count: target_count,
        datatype: target_datatype,
    };
    operation(
        "MPI_Put",
        win,
        (origin_count, origin_datatype),
        t,
        |lib, a| {
            let p = buffer(origin_addr, a.len)?;
            // SAFETY: the caller's contract.
            let data = unsafe { std::slice::from_raw_parts(p, a.len) };
            let (rank, w) = lib.window(win)?;
            w.win.put(rank, a.target, a.disp, data).map_err(win_error)
        },
    )
}

/// Reads the target window's bytes into the origin buffer, there once the
/// epoch ends.
///
/// # Safety
/// `origin_addr` names the bytes, writable and left alone until the epoch ends.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: isize,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let t = Target {
        rank: target_rank,
        disp: target_disp,
        count: target_count,
        datatype: target_datatype,
    };
    operation(
        "MPI_Get",
        win,
        (origin_count, origin_datatype),
        t,
        |lib, a| {
            let p = buffer(origin_addr, a.len)?.cast_mut();
            let (rank, w) = lib.window(win)?;
            let g = w
                .win
                .get(rank, a.target, a.disp, a.len)
                .map_err(win_error)?;
            w.gets.push((g, p, a.len));
            Ok(())
        },
    )
}

/// The reduction an accumulate applies at the target, as rmx's window takes it.
enum Combine {
    Int(Op, Int),
    Float(Op, Float),
    Replace,
}

fn combine(op: Handle, elem: Elem) -> Result<Combine> {
    let o = match op {
        MPI_REPLACE => return Ok(Combine::Replace),
        MPI_SUM => Op::Sum,
        MPI_MIN => Op::Min,
        MPI_MAX => Op::Max,
        MPI_BAND => Op::BitAnd,
        MPI_BOR => Op::BitOr,
        MPI_BXOR => Op::BitXor,
        _ => {
            return Err(Error::new(
                MPI_ERR_OP,
                format!(
                    "accumulate takes SUM, MIN, MAX, BAND, BOR, BXOR and REPLACE here, not {op:#x}"
                ),
            ))
        }
    };
    let int = |i| Ok(Combine::Int(o, i));
    match elem {
        Elem::I8 => int(Int::I8),
        Elem::U8 | Elem::Byte => int(Int::U8),
        Elem::I16 => int(Int::I16),
        Elem::U16 => int(Int::U16),
        Elem::I32 => int(Int::I32),
        Elem::U32 => int(Int::U32),
        Elem::I64 => int(Int::I64),
        Elem::U64 => int(Int::U64),
        Elem::F32 if Float::allows(o) => Ok(Combine::Float(o, Float::F32)),
        Elem::F64 if Float::allows(o) => Ok(Combine::Float(o, Float::F64)),
        _ => Err(Error::new(
            MPI_ERR_OP,
            "accumulate does not take this datatype with this reduction",
        )),
    }
}

/// Combines the origin's elements into the target's window by `op`.
///
/// # Safety
/// As `MPI_Put`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: isize,
    target_count: c_int,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
) -> c_int {
    let t = Target {
        rank: target_rank,
        disp: target_disp,
        count: target_count,
        datatype: target_datatype,
    };
    operation(
        "MPI_Accumulate",
        win,
        (origin_count, origin_datatype),
        t,
        |lib, a| {
            let how = combine(op, a.ty.elem)?;
            let p = buffer(origin_addr, a.len)?;
            // SAFETY: the caller's contract.
            let data = unsafe { std::slice::from_raw_parts(p, a.len) };
            let (rank, w) = lib.window(win)?;
            match how {
                Combine::Replace => w.win.put(rank, a.target, a.disp, data),
                Combine::Int(o, i) => w.win.accumulate(rank, a.target, a.disp, data, o, i),
                Combine::Float(o, f) => w.win.accumulate_float(rank, a.target, a.disp, data, o, f),
            }
            .map_err(win_error)
        },
    )
}

/// Sets what the window's errors do (as `MPI_Comm_set_errhandler`).
#[no_mangle]
pub extern "C" fn MPI_Win_set_errhandler(win: Handle, errhandler: Handle) -> c_int {
    call(
        "MPI_Win_set_errhandler",
        || window_handler(win),
        || {
            with(|lib| {
                let h = Handler::of(errhandler).ok_or_else(|| {
                    Error::arg(format!("{errhandler:#x} is no predefined error handler"))
                })?;
                lib.window(win)?.1.handler = h;
                Ok(())
            })
        },
    )
}
