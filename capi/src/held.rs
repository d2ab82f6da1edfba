//! A window as its rank keeps it for C, and a fence started on it: the
//! types the request table and the rank hold, apart from the calls that
//! make them (`window`).

use rmx_linux::window::{FenceReq, Get, Win};

use crate::errors::{Error, RMX_ERR_BUSY};

/// A window of a rank, as C holds it: 0 is none.
pub type rmx_win_t = u64;

/// The handle no window has.
pub const RMX_WIN_NULL: rmx_win_t = 0;

/// A window and the gets of its open epoch, which the fence that ends it
/// copies out. The window lies on the heap, reached through a raw
/// pointer, so that a started fence may hold it while this entry moves.
pub(crate) struct CWin {
    pub win: *mut Win,
    pub gets: Vec<(Get, *mut u8, usize)>,
    /// A started fence holds the window.
    pub fencing: bool,
}

// SAFETY: the window is used under its rank's lock only, as the rank is.
unsafe impl Send for CWin {}

impl CWin {
    pub(crate) fn new(win: Win) -> CWin {
        CWin {
            win: Box::into_raw(Box::new(win)),
            gets: Vec::new(),
            fencing: false,
        }
    }

    /// The window, unless a started fence holds it.
    pub(crate) fn get(&mut self) -> Result<&mut Win, Error> {
        if self.fencing {
            return Err(Error::new(
                RMX_ERR_BUSY,
                "a fence started on this window runs: end its request first",
            ));
        }
        // SAFETY: no fence holds it (above); it lives as long as self.
        Ok(unsafe { &mut *self.win })
    }

    /// The epoch a fence ended: each get's bytes copied to its buffer.
    pub(crate) fn land_gets(&mut self) {
        let gets = std::mem::take(&mut self.gets);
        // SAFETY: the fence that held the window ended.
        let win = unsafe { &mut *self.win };
        for (g, to, len) in gets {
            if let Some(b) = win.take(g) {
                // SAFETY: the get's buffer names `len` writable bytes
                // until its epoch ends (its issuer's contract), which is now.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), to, len.min(b.len())) };
            }
        }
    }

    /// The window, given up: `None` while a fence holds it.
    pub(crate) fn into_win(mut self) -> Result<Win, CWin> {
        if self.fencing {
            return Err(self);
        }
        let w = std::mem::replace(&mut self.win, std::ptr::null_mut());
        // SAFETY: made by `Box::into_raw` in `new`, and given up once.
        Ok(*unsafe { Box::from_raw(w) })
    }
}

impl Drop for CWin {
    fn drop(&mut self) {
        // A window still held by a fence is left (its rank ends the fence
        // first; see `State::end_requests`), never freed under it.
        if !self.win.is_null() && !self.fencing {
            // SAFETY: made by `Box::into_raw`, not given up.
            drop(unsafe { Box::from_raw(self.win) });
        }
    }
}

/// A started fence as a request holds it.
pub(crate) struct Fencing {
    pub win: rmx_win_t,
    pub req: FenceReq<'static>,
}

impl CWin {
    pub(crate) fn busy() -> Error {
        Error::new(
            RMX_ERR_BUSY,
            "a fence started on this window runs: end its request first",
        )
    }
}
