//! A rank as C holds it (`rmx_rank_t *`): the rank, its request handles,
//! and the lock every call on it takes, so that a runtime may call from
//! any of its threads (one call at a time per rank).

use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

use rmx_linux::job::Attached;
use rmx_linux::rank::{Armed, Rank};

use crate::errors::Error;
use crate::guard::guard;
use crate::held::CWin;
use crate::requests::Requests;

/// One rank of a job: from `rmx_init` to `rmx_finalize`, or for the
/// length of the `main` that `rmx_run` calls with it. Opaque.
pub struct rmx_rank_t {
    /// [`MAGIC`] while the rank lives: a pointer to something else is
    /// refused rather than used.
    magic: u64,
    state: Mutex<State>,
}

const MAGIC: u64 = u64::from_be_bytes(*b"rmx-rank");

/// What a rank's calls work on, under its lock.
pub(crate) struct State {
    home: Home,
    pub requests: Requests,
    /// Its windows (after `requests` ends: a started fence holds one).
    pub windows: Requests<CWin>,
}

/// Where the rank lives.
enum Home {
    /// Lent by the job runner for one `main` (threads, or a launched
    /// process under `rmx_run`).
    Lent(*mut Rank),
    /// This process's rank, set up by `rmx_init`.
    Attached(Attached),
}

// SAFETY: the lent rank is used only under the lock, by one thread at a
// time, while the runner that lent it waits for `main` to return; a rank
// may move between threads (checked below), and a collective's result
// pointer is written only by the call that ends its request.
unsafe impl Send for State {}

/// A rank may be used from any thread, one at a time.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Rank>();
};

impl State {
    pub(crate) fn rank(&mut self) -> &mut Rank {
        match &mut self.home {
            // SAFETY: lent for as long as this state lives (see `Home`).
            Home::Lent(r) => unsafe { &mut **r },
            Home::Attached(a) => a.rank(),
        }
    }

    /// Set up by `rmx_init` (on the heap, ended by `rmx_finalize`).
    pub(crate) fn attached(&self) -> bool {
        matches!(self.home, Home::Attached(_))
    }
}

impl rmx_rank_t {
    /// A rank over `rank`, lent for as long as the result lives.
    pub(crate) fn lent(rank: &mut Rank) -> rmx_rank_t {
        rmx_rank_t::new(Home::Lent(rank))
    }

    pub(crate) fn attached(a: Attached) -> rmx_rank_t {
        rmx_rank_t::new(Home::Attached(a))
    }

    fn new(home: Home) -> rmx_rank_t {
        rmx_rank_t {
            magic: MAGIC,
            state: Mutex::new(State {
                home,
                requests: Requests::default(),
                windows: Requests::default(),
            }),
        }
    }

    /// The rank's state, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the rank gone (a later call with its pointer is refused
    /// while the memory is not reused); its home, for the caller to end.
    pub(crate) fn retire(mut self) -> Option<Attached> {
        self.magic = 0;
        match self
            .state
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .home
        {
            Home::Attached(a) => Some(a),
            Home::Lent(_) => None,
        }
    }
}

/// Runs `f` on the rank `p` points to, locked.
///
/// # Safety
/// `p` is null or a pointer `rmx_init` or `rmx_run` gave, not yet ended.
pub(crate) unsafe fn with<R>(
    p: *const rmx_rank_t,
    f: impl FnOnce(&mut State) -> Result<R, Error>,
) -> Result<R, Error> {
    // SAFETY: the caller's contract.
    let r = unsafe { p.as_ref() }.ok_or_else(|| Error::arg("rank is null"))?;
    if r.magic != MAGIC {
        return Err(Error::arg("not a live rank (finalized, or never one)"));
    }
    f(&mut r.lock())
}

/// This rank's number in its job (0 … size − 1), or a negative code.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_rank_me(rank: *const rmx_rank_t) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { with(rank, |s| Ok(c_int::from(s.rank().rank()))) })
}

/// The number of ranks of the job, or a negative code.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_rank_size(rank: *const rmx_rank_t) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { with(rank, |s| Ok(c_int::from(s.rank().size()))) })
}

/// Moves the rank's communication on once (packets in, completions,
/// timers): the number of events handled (0 if none), or a negative code.
/// Nothing moves between calls unless a progress thread runs.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_progress(rank: *mut rmx_rank_t) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe {
        with(rank, |s| {
            Ok(s.rank().progress().min(c_int::MAX as usize) as c_int)
        })
    })
}

/// Starts (`on` non-zero) or stops a thread that moves the rank's
/// communication on while the caller computes (off by default). Calls
/// stay allowed from any thread; each then shares the rank with it.
///
/// Contract: `rank` is null or a live rank.
#[no_mangle]
pub unsafe extern "C" fn rmx_set_progress_thread(rank: *mut rmx_rank_t, on: c_int) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe {
        with(rank, |s| {
            s.rank().set_progress_thread(on != 0);
            Ok(0)
        })
    })
}

/// A file descriptor that turns readable when the rank has work after
/// `rmx_rank_arm` (as `ucp_worker_get_efd`): for `poll(2)` or an `epoll`
/// set of the caller's. Owned by the rank: valid until it ends, never
/// closed by the caller. The same descriptor every call.
///
/// Contract: `rank` is null or a live rank; `fd` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_rank_efd(rank: *mut rmx_rank_t, fd: *mut c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let fd = unsafe { crate::guard::out(fd, "fd") }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| {
                *fd = s.rank().sleep_fd().map_err(|e| {
                    Error::new(
                        crate::errors::RMX_ERR_SETUP,
                        format!("no descriptor to sleep on: {e}"),
                    )
                })?;
                Ok(0)
            })
        }
    })
}

/// Prepares a sleep on `rmx_rank_efd`'s descriptor (as `ucp_worker_arm`):
/// 0 when the caller may sleep on it, at most `*timeout_ms` milliseconds
/// (-1: until it turns readable), then call `rmx_progress`;
/// `RMX_ERR_BUSY` when work came meanwhile (it was taken: test requests,
/// arm again). A progress thread, if on, takes events too.
///
/// Contract: `rank` is null or a live rank; `timeout_ms` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_rank_arm(rank: *mut rmx_rank_t, timeout_ms: *mut c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { crate::guard::out(timeout_ms, "timeout_ms") }?;
        // SAFETY: the caller's contract.
        unsafe {
            with(rank, |s| match s.rank().arm() {
                Armed::Pending => Err(Error::new(
                    crate::errors::RMX_ERR_BUSY,
                    "work came in: test your requests and arm again",
                )),
                Armed::Sleep(d) => {
                    *t = d.map_or(-1, |d| {
                        d.as_nanos().div_ceil(1_000_000).min(c_int::MAX as u128) as c_int
                    });
                    Ok(0)
                }
            })
        }
    })
}
