//! A window and its rank as the driver layer's tasks see them
//! ([`FenceHost`]): the rank's messages, the epoch the rank keeps, and
//! the window's [`Parts`] a fence works on, which outlive every request
//! that names them.

use std::ops::Range;
use std::sync::Arc;

use rmx_core::onesided::{OpHeader, Target};
use rmx_core::RecvFault;
use rmx_driver::task::{FenceHost, Outgoing, Reply};

use super::io::Io;
use super::memory::WinMemory;
use super::{deferred, epoch_of, Queued, Win};
use crate::rank::Driver;
use crate::transport::Transport;

/// What a fence (or an epoch's inbox) works on of its window, taken out
/// while it runs, so that the rank can move a started fence on without
/// the window: its memory, the deferred design's queued operations, the
/// counts and fault it reports, and the fence's buffers.
pub(super) struct Parts {
    id: u16,
    me: u16,
    mem: Arc<WinMemory>,
    misapplied: u64,
    queued: Vec<Queued>,
    /// An immediate design's first fault of an accumulate waited for.
    fault: Option<Option<RecvFault>>,
    pub(super) io: Box<Io>,
}

impl Parts {
    /// Takes what a fence works on out of `w` (its buffers from `io`).
    pub(super) fn take(w: &mut Win, io: Box<Io>) -> Parts {
        Parts {
            id: w.id,
            me: w.me,
            mem: Arc::clone(&w.mem),
            misapplied: std::mem::take(&mut w.misapplied),
            queued: std::mem::take(&mut w.queued),
            fault: w.imm.as_mut().map(|i| i.fault.take()),
            io,
        }
    }

    /// Gives back to `w` what [`take`](Self::take) took; the buffers.
    pub(super) fn put_back(self, w: &mut Win) -> Box<Io> {
        w.misapplied += self.misapplied;
        w.queued = self.queued;
        // One large epoch does not keep its list's memory.
        w.queued.shrink_to(super::io::KEEP);
        if let (Some(imm), Some(f)) = (w.imm.as_mut(), self.fault) {
            imm.fault = f;
        }
        self.io
    }
}

/// A window's parts and its rank, as the fence task (and an epoch's
/// inbox) sees them.
pub(super) struct Host<'a, T: Transport> {
    d: &'a mut Driver<T>,
    p: &'a mut Parts,
}

impl<'a, T: Transport> Host<'a, T> {
    pub(super) fn new(d: &'a mut Driver<T>, p: &'a mut Parts) -> Self {
        Host { d, p }
    }
}

impl<T: Transport> FenceHost for Host<'_, T> {
    type Rank = Driver<T>;
    type Targets = Vec<Target>;

    fn rank(&mut self) -> &mut Driver<T> {
        self.d
    }

    fn epoch(&mut self) -> &mut rmx_core::onesided::Epoch<Vec<Target>> {
        epoch_of(&mut self.d.windows, self.p.id)
    }

    fn send_queued(&mut self) {
        // Drained, so that the window keeps the list's memory.
        let p = &mut *self.p;
        deferred::ready(
            p.me,
            &p.mem,
            &mut p.misapplied,
            p.queued.drain(..),
            &mut p.io,
        );
    }

    fn outgoing(&mut self, i: usize) -> Option<Outgoing> {
        self.p.io.outgoing.get(i).map(|o| o.parts())
    }

    fn reply(&mut self, i: usize) -> Option<Reply> {
        let (id, target, buf) = self.p.io.replies.get_mut(i)?;
        // This rank's own gets were read already (they come last).
        if *target == self.p.me {
            return None;
        }
        Some(Reply::new(*target, *id, buf))
    }

    fn data(&mut self, len: usize) -> *mut u8 {
        self.p.io.data.clear();
        self.p.io.data.resize(len, 0);
        self.p.io.data.as_mut_ptr()
    }

    fn apply(&mut self, h: &OpHeader, _range: Range<u64>, data: &[u8]) {
        super::apply(&self.p.mem, &mut self.p.misapplied, h, data);
    }

    fn answer(&mut self, range: Range<u64>) -> *const u8 {
        let mut b = vec![0u8; (range.end - range.start) as usize];
        self.p.mem.read(range.start as usize, &mut b);
        self.p.io.answers.push(b);
        self.p.io.answers.last().expect("just pushed").as_ptr()
    }

    fn flushed(&mut self) -> Option<RecvFault> {
        self.p.fault.as_mut().and_then(|f| f.take())
    }
}
