//! A window and its rank as the driver layer's tasks see them
//! ([`FenceHost`]): the rank's messages, the epoch the rank keeps, the
//! window's memory, and the fence's buffers in [`Io`], which outlive every
//! request that names them.

use std::ops::Range;

use rmx_core::onesided::{OpHeader, Target};
use rmx_core::RecvFault;
use rmx_driver::task::{FenceHost, Outgoing, Reply};

use super::io::Io;
use super::memory::WinMemory;
use super::{deferred, epoch_of, Queued, Win};
use crate::rank::Driver;
use crate::transport::Transport;

/// A window and its rank, as the fence task (and an epoch's inbox) sees
/// them.
pub(super) struct Host<'a, T: Transport> {
    d: &'a mut Driver<T>,
    id: u16,
    me: u16,
    mem: &'a WinMemory,
    misapplied: &'a mut u64,
    queued: &'a mut Vec<Queued>,
    fault: Option<&'a mut Option<RecvFault>>,
    io: &'a mut Io,
}

impl<'a, T: Transport> Host<'a, T> {
    pub(super) fn new(d: &'a mut Driver<T>, w: &'a mut Win, io: &'a mut Io) -> Self {
        Host {
            d,
            id: w.id,
            me: w.me,
            mem: &w.mem,
            misapplied: &mut w.misapplied,
            queued: &mut w.queued,
            fault: w.imm.as_mut().map(|i| &mut i.fault),
            io,
        }
    }
}

impl<T: Transport> FenceHost for Host<'_, T> {
    type Rank = Driver<T>;
    type Targets = Vec<Target>;

    fn rank(&mut self) -> &mut Driver<T> {
        self.d
    }

    fn epoch(&mut self) -> &mut rmx_core::onesided::Epoch<Vec<Target>> {
        epoch_of(&mut self.d.windows, self.id)
    }

    fn send_queued(&mut self) {
        let queued = std::mem::take(self.queued);
        deferred::ready(self.me, self.mem, self.misapplied, queued, self.io);
    }

    fn outgoing(&mut self, i: usize) -> Option<Outgoing> {
        self.io.outgoing.get(i).map(|o| o.parts())
    }

    fn reply(&mut self, i: usize) -> Option<Reply> {
        let (id, target, buf) = self.io.replies.get_mut(i)?;
        // This rank's own gets were read already (they come last).
        if *target == self.me {
            return None;
        }
        Some(Reply::new(*target, *id, buf))
    }

    fn data(&mut self, len: usize) -> *mut u8 {
        self.io.data.clear();
        self.io.data.resize(len, 0);
        self.io.data.as_mut_ptr()
    }

    fn apply(&mut self, h: &OpHeader, _range: Range<u64>, data: &[u8]) {
        super::apply(self.mem, self.misapplied, h, data);
    }

    fn answer(&mut self, range: Range<u64>) -> *const u8 {
        let mut b = vec![0u8; (range.end - range.start) as usize];
        self.mem.read(range.start as usize, &mut b);
        self.io.answers.push(b);
        self.io.answers.last().expect("just pushed").as_ptr()
    }

    fn flushed(&mut self) -> Option<RecvFault> {
        self.fault.as_mut().and_then(|f| f.take())
    }
}
