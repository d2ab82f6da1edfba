//! One-sided communication from C: a window of memory every rank of the
//! job exposes, puts, gets and accumulates into other ranks' windows, and
//! epochs closed by fences — blocking, or started as a request that
//! `rmx_test` and `rmx_wait` end like any other.
//!
//! A window is a handle of its rank (checked like a request's: a freed
//! or made-up one is refused). A put's and an accumulate's data are
//! copied when they are issued; a get's bytes land in the caller's buffer
//! when the fence that ends its epoch ends, and not after. While a started
//! fence runs, its window refuses every other call (`RMX_ERR_BUSY`).

use std::ffi::{c_int, c_uint, c_void};

use rmx_core::onesided::Design;
use rmx_linux::window::{Assert, Win, WinError};

use crate::collective::{int, op_of};
use crate::errors::*;
use crate::guard::{bytes, guard, out, read, write};
use crate::held::{CWin, Fencing};
use crate::rank::{rmx_rank_t, with, State};
use crate::requests::{rmx_request_t, Live};

pub use crate::held::{rmx_win_t, RMX_WIN_NULL};

/// How a window's fences complete its epochs (the fence paper's four
/// designs): operations sent as messages inside the closing fence (every
/// transport), or issued at once as RDMA and closed by finish messages
/// and all-pairs flags, by finish messages and a barrier, or by counted
/// writes with immediate (transports with RDMA: loop, verbs).
pub const RMX_FENCE_DEFERRED: c_int = 0;
pub const RMX_FENCE_NAIVE: c_int = 1;
pub const RMX_FENCE_OPT: c_int = 2;
pub const RMX_FENCE_RI: c_int = 3;

/// What a fence may assume (MPI's `MPI_MODE_*`), or'ed: no operation of
/// the epoch ends here; none follows until the next fence; the window's
/// memory was not written locally; it will not be put into.
pub const RMX_NO_PRECEDE: c_uint = 1;
pub const RMX_NO_SUCCEED: c_uint = 2;
pub const RMX_NO_STORE: c_uint = 4;
pub const RMX_NO_PUT: c_uint = 8;

impl From<WinError> for Error {
    fn from(e: WinError) -> Error {
        let code = match &e {
            WinError::Rma(_) | WinError::Assertion | WinError::Unsupported(_) => RMX_ERR_ARG,
            WinError::Collective(c) => Error::from(*c).code,
            WinError::TooManyGets | WinError::Register(_) | WinError::Memory { .. } => {
                RMX_ERR_NO_RESOURCE
            }
            WinError::TooLong => RMX_ERR_TOO_LONG,
            WinError::Transfer { .. } => RMX_ERR_TRANSFER,
            WinError::Disagree => RMX_ERR_MISMATCH,
            WinError::Exposed => RMX_ERR_BUSY,
        };
        Error::new(code, format!("window: {e:?}"))
    }
}

fn not_a_window() -> Error {
    Error::arg("not a live window of this rank (freed already, another rank's, or never one)")
}

/// Runs `f` on window `w` of the rank in `s`.
fn on_window<R>(
    s: &mut State,
    w: rmx_win_t,
    f: impl FnOnce(&mut rmx_linux::rank::Rank, &mut CWin) -> Result<R, Error>,
) -> Result<R, Error> {
    let mut cw = s.windows.take(w).ok_or_else(not_a_window)?;
    let r = f(s.rank(), &mut cw);
    s.windows.put_back(w, cw);
    r
}

fn design(d: c_int) -> Result<Design, Error> {
    usize::try_from(d)
        .ok()
        .and_then(|i| Design::ALL.get(i).copied())
        .ok_or_else(|| Error::arg(format!("{d} is no RMX_FENCE_ design")))
}

fn assertion(a: c_uint) -> Result<Assert, Error> {
    u8::try_from(a)
        .ok()
        .filter(|&a| a & !0xf == 0)
        .map(Assert)
        .ok_or_else(|| Error::arg(format!("{a:#x} is no set of RMX_NO_ assertions")))
}

/// Creates a window of `len` bytes (zeroed) on every rank, whose
/// displacements count in `disp_unit` bytes, fenced by `design`; its
/// handle in `*win`. Collective: every rank calls it, in the same order
/// as its other window creations, with the same design.
///
/// Contract: `rank` is null or a live rank; `win` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_create(
    rank: *mut rmx_rank_t,
    len: usize,
    disp_unit: u32,
    design: c_int,
    win: *mut rmx_win_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let win = unsafe { out(win, "win") }?;
        let d = self::design(design)?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let w = s.rank().win_create_with(len, disp_unit, d)?;
                *win = s.windows.insert(CWin::new(w));
                Ok(0)
            })
        }
    })
}

/// Frees a window: collective; an epoch still open is closed first (its
/// operations complete, its gets land). `*win` becomes `RMX_WIN_NULL`.
///
/// Contract: `rank` is null or a live rank; `win` is null or names a handle.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_free(rank: *mut rmx_rank_t, win: *mut rmx_win_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { out(win, "win") }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let mut cw = s.windows.take(*h).ok_or_else(not_a_window)?;
                if !cw.fencing && !cw.gets.is_empty() {
                    // The closing fence `free` would run, run here so the
                    // epoch's gets land in their buffers.
                    let r = s.rank();
                    let res = cw.get()?.fence_with(r, Assert::NO_SUCCEED);
                    cw.land_gets();
                    if let Err(e) = res {
                        s.windows.put_back(*h, cw);
                        return Err(e.into());
                    }
                }
                let w = match cw.into_win() {
                    Ok(w) => w,
                    Err(cw) => {
                        s.windows.put_back(*h, cw);
                        return Err(CWin::busy());
                    }
                };
                *h = RMX_WIN_NULL;
                w.free(s.rank())?;
                Ok(0)
            })
        }
    })
}

/// Copies `len` bytes of `data` to displacement `disp` of rank `target`'s
/// window; they are there once the fence that ends this epoch returned.
/// `data` is free again when this returns.
///
/// Contract: `rank` is null or a live rank; `data` is null or names `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_put(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    data: *const c_void,
    len: usize,
    target: u16,
    disp: u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let data = unsafe { read(data, len) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |r, cw| Ok(cw.get()?.put(r, target, disp, data)?))
            })
        }
        .map(|()| 0)
    })
}

/// Reads `len` bytes at displacement `disp` of rank `target`'s window
/// into `buf`, which receives them when the fence that ends this epoch
/// ends (and is not written after).
///
/// Contract: `rank` is null or a live rank; `buf` is null or names `len`
/// writable bytes, left alone by the caller until that fence ended.
#[no_mangle]
pub unsafe extern "C" fn rmx_get(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    buf: *mut c_void,
    len: usize,
    target: u16,
    disp: u64,
) -> c_int {
    guard(|| {
        let to = bytes(buf, len)?.cast_mut();
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |r, cw| {
                    let g = cw.get()?.get(r, target, disp, len)?;
                    cw.gets.push((g, to, len));
                    Ok(0)
                })
            })
        }
    })
}

/// Combines `count` elements of type `ty` (`RMX_UINT8` …) at `data` into
/// rank `target`'s window at displacement `disp` by `op` (`RMX_SUM` …),
/// element by element; done once the fence that ends this epoch
/// returned. `data` is free again when this returns.
///
/// Contract: `rank` is null or a live rank; `data` is null or names
/// `count` elements.
#[no_mangle]
pub unsafe extern "C" fn rmx_accumulate(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    data: *const c_void,
    count: usize,
    ty: c_int,
    op: c_int,
    target: u16,
    disp: u64,
) -> c_int {
    guard(|| {
        let (ty, op) = (int(ty)?, op_of(op)?);
        let (p, len) = crate::collective::elements(data.cast_mut(), count, ty)?;
        // SAFETY: the caller's contract (a dangling pointer when empty).
        let data = unsafe { std::slice::from_raw_parts(p, len) };
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |r, cw| {
                    Ok(cw.get()?.accumulate(r, target, disp, data, op, ty)?)
                })
            })
        }
        .map(|()| 0)
    })
}

/// Copies `len` bytes at offset `at` of this rank's own window memory to
/// `buf` (`rmx_win_write`: from `data` into it). Between fences, as MPI
/// allows local access.
///
/// Contract: `rank` is null or a live rank; `buf` is null or names `len`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_read(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    at: usize,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { write(buf, len) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |_, cw| Ok(cw.get()?.read(at, out)?))
            })
        }
        .map(|()| 0)
    })
}

/// See `rmx_win_read`.
///
/// Contract: `rank` is null or a live rank; `data` is null or names `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_write(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    at: usize,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let data = unsafe { read(data, len) }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |_, cw| Ok(cw.get()?.write(at, data)?))
            })
        }
        .map(|()| 0)
    })
}

/// Ends the epoch and opens the next: every operation this rank issued,
/// and every one aimed at it, is done, and the epoch's gets have landed,
/// when this returns. `assert`: `RMX_NO_*` or'ed, the same on every rank.
/// Collective.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_fence(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    assert: c_uint,
) -> c_int {
    guard(|| {
        let a = assertion(assert)?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                on_window(s, win, |r, cw| {
                    let res = cw.get()?.fence_with(r, a);
                    cw.land_gets();
                    Ok(res.map(|()| 0)?)
                })
            })
        }
    })
}

/// `rmx_win_fence`, started: its request in `*req`, ended by `rmx_test`
/// or `rmx_wait` (the gets land then); the window refuses other calls
/// until it ended.
///
/// Contract: `rank` is null or a live rank; `req` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_win_ifence(
    rank: *mut rmx_rank_t,
    win: rmx_win_t,
    assert: c_uint,
    req: *mut rmx_request_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        let a = assertion(assert)?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                let f = on_window(s, win, |r, cw| {
                    cw.get()?;
                    // SAFETY: the window lies on the heap until its entry
                    // is dropped, which waits for this fence (`fencing`
                    // keeps every other use and `rmx_win_free` off it).
                    let w: &'static mut Win = &mut *cw.win;
                    let f = w.ifence(r, a)?;
                    cw.fencing = true;
                    Ok(f)
                })?;
                *req = s
                    .requests
                    .insert(Live::Fence(Box::new(Fencing { win, req: f })));
                Ok(0)
            })
        }
    })
}
