//! What ends a live request, whatever it is: a test that moves it on
//! once, a wait, and the end of every request of a rank that ends.

use rmx_driver::task::CollectiveError;
use rmx_linux::window::WinError;

use crate::errors::Error;
use crate::held::rmx_win_t;
use crate::held::Fencing;
use crate::rank::State;
use crate::requests::Live;
use crate::status::rmx_status_t;

/// Ends every request still live (receives cancelled first), so that no
/// buffer of the caller is written once the rank is given back.
pub(crate) fn end_all(s: &mut State) {
    for live in s.requests.drain() {
        wait(s, live, true);
    }
}

/// Tests `live` once (after a round of progress): how it ended, or it
/// back while it runs.
pub(crate) fn step(s: &mut State, live: Live) -> Result<rmx_status_t, Live> {
    if let Live::Fence(f) = live {
        return test_fence(s, f).map_err(Live::Fence);
    }
    let r = s.rank();
    match live {
        // A message's test moves nothing (a collective's does): one round
        // first.
        Live::Msg(q, sent) => {
            r.progress();
            r.test(q)
                .map(|st| rmx_status_t::of(st, sent))
                .map_err(|q| Live::Msg(q, sent))
        }
        Live::Coll {
            mut req,
            at,
            out,
            len,
        } => match r.test_collective(&mut req) {
            None => Err(Live::Coll { req, at, out, len }),
            Some(res) => {
                let data = res.map(|()| from(req.data().unwrap_or_default(), at));
                // SAFETY: `out` names `len` bytes of the request's (its
                // starter's contract), which has not ended yet.
                Ok(unsafe { copy_out(data, out, len) })
            }
        },
        Live::Fence(_) => unreachable!("tested above"),
    }
}

/// Waits for `live` to end (`cancel`: a receive cancelled first, if it
/// had not matched): how it ended.
pub(crate) fn wait(s: &mut State, live: Live, cancel: bool) -> rmx_status_t {
    let r = s.rank();
    match live {
        Live::Msg(q, sent) => {
            if sent.is_none() && cancel {
                r.cancel(&q);
            }
            rmx_status_t::of(r.wait(q), sent)
        }
        Live::Coll { req, at, out, len } => {
            let res = r.wait_collective(req);
            let data = res.as_deref().map(|d| from(d, at)).map_err(|e| *e);
            // SAFETY: as in `step`.
            unsafe { copy_out(data, out, len) }
        }
        Live::Fence(f) => wait_fence(s, *f),
    }
}

/// A collective's data from `at` (none past its end).
fn from(data: &[u8], at: usize) -> &[u8] {
    data.get(at..).unwrap_or_default()
}

/// A collective ended with `res`: its result copied to `out`; how it
/// ended.
///
/// # Safety
/// `out` names `len` writable bytes (or `len` is 0).
pub(crate) unsafe fn copy_out(
    res: Result<&[u8], CollectiveError>,
    out: *mut u8,
    len: usize,
) -> rmx_status_t {
    let error = match res {
        Ok(data) => {
            let n = data.len().min(len);
            if n > 0 {
                // SAFETY: the caller's contract; the result is the
                // request's own.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out, n) };
            }
            0
        }
        Err(e) => Error::from(e).code,
    };
    rmx_status_t {
        source: -1,
        len,
        error,
        ..Default::default()
    }
}

/// Moves a started fence on once: how it ended (its window free again,
/// its gets landed), or it back while it runs.
pub(crate) fn test_fence(s: &mut State, mut f: Box<Fencing>) -> Result<rmx_status_t, Box<Fencing>> {
    match s.rank().test_fence(&mut f.req) {
        None => Err(f),
        Some(r) => {
            let win = f.win;
            drop(f);
            Ok(fenced(s, win, r))
        }
    }
}

/// Waits for a started fence: how it ended.
pub(crate) fn wait_fence(s: &mut State, f: Fencing) -> rmx_status_t {
    let Fencing { win, req } = f;
    let r = s.rank().wait_fence(req);
    fenced(s, win, r)
}

/// A started fence on `win` ended with `r`: the window is free again; the
/// status the request reports.
fn fenced(s: &mut State, win: rmx_win_t, r: Result<(), WinError>) -> rmx_status_t {
    if let Some(mut cw) = s.windows.take(win) {
        cw.fencing = false;
        cw.land_gets();
        s.windows.put_back(win, cw);
    }
    rmx_status_t {
        source: -1,
        error: r.map_or_else(|e| Error::from(e).report(), |()| 0),
        ..Default::default()
    }
}
