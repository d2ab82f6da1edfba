//! A fence on a std rank: the driver layer's [`FenceTask`], the one every
//! shell runs, started over this window's bytes and driven by the rank
//! until it reports. This file is the window as the task sees it
//! ([`FenceHost`]): the rank's messages, the epoch the rank keeps, the
//! window's memory, and the fence's buffers in [`Io`], which outlive every
//! request that names them.

use rmx_core::onesided::{OpHeader, Target};
use rmx_core::{RecvError, RecvFault, SendError, Source, Status, TagSel};
use rmx_driver::task::{CollectiveError, FenceHost, FenceTask, Fenced, Messages, Outgoing, Reply};
use std::ops::Range;

use super::io::Io;
use super::memory::WinMemory;
use super::{deferred, epoch_of, immediate, Queued, Win, WinError};
use crate::rank::{Driver, Rank, Req};
use crate::transport::Transport;

/// Ends the epoch of `w` (and opens the next) as the core's steps say.
pub(super) fn run<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    no_precede: bool,
    no_succeed: bool,
) -> Result<(), WinError> {
    let (gets, design) = w.epoch(r, |e, _| {
        e.fence(no_precede, no_succeed)
            .map(|()| (e.gets(), e.design()))
    })?;
    let (n, me) = (r.size(), w.me);
    let mut io = std::mem::take(&mut w.io);
    io.mem.clear();
    io.mem
        .resize(FenceTask::<Req, Vec<_>>::memory_len(design, n, me), 0);
    // An immediate design's accumulates already out: the fence waits for
    // them as for its own sends.
    let sent = w.imm.as_mut().map(immediate::take_sent).unwrap_or_default();
    let mut slots = std::mem::take(&mut io.slots);
    slots.clear();
    let want = FenceTask::<Req, Vec<_>>::slots_len(n, gets, sent.len());
    slots.extend(sent.into_iter().map(Some));
    slots.resize_with(want, || None);
    let mut seq = r.collectives;
    let (mem_ptr, mem_len) = (io.mem.as_mut_ptr(), io.mem.len());
    let mut task = r.with(|d| {
        let mut host = Host::new(d, w, &mut io, &mut seq);
        // SAFETY: `io` (the lent bytes and every buffer the host names)
        // and the window's memory stay in place until the task reported:
        // it is driven to its end below.
        unsafe { FenceTask::start(&mut host, mem_ptr, mem_len, slots) }
    });
    let res = r.drive(|d| {
        let mut host = Host::new(d, w, &mut io, &mut seq);
        task.poll(&mut host)
    });
    r.collectives = seq;
    io.slots = task.into_slots();
    if let Some(imm) = w.imm.as_mut() {
        immediate::end_flush(imm, r);
    }
    let (refused, retries, closed) = r.with(|d| {
        let e = epoch_of(&mut d.windows, w.id);
        (e.refused(), e.retries(), e.closed())
    });
    (w.refused, w.retries, w.closed) = (refused, retries, closed);
    match w.design.immediate() {
        true => immediate::end_epoch(w, gets),
        false => deferred::end_epoch(w, gets, &mut io),
    }
    w.got_epoch = w.epochs;
    w.epochs += 1;
    // Every request is done: the task reported.
    io.clear();
    w.io = io;
    let Fenced { outcome, fault } = res?;
    if let Some(f) = fault {
        Err(WinError::Collective(CollectiveError::Failed(f)))
    } else if outcome.false_assertion {
        Err(WinError::Assertion)
    } else if outcome.failed > 0 {
        Err(WinError::Transfer {
            failed: outcome.failed.into(),
        })
    } else if outcome.disagree {
        Err(WinError::Disagree)
    } else {
        Ok(())
    }
}

/// A window and its rank, as the fence task sees them.
struct Host<'a, T: Transport> {
    d: &'a mut Driver<T>,
    id: u16,
    me: u16,
    mem: &'a WinMemory,
    misapplied: &'a mut u64,
    queued: &'a mut Vec<Queued>,
    fault: Option<&'a mut Option<RecvFault>>,
    io: &'a mut Io,
    seq: &'a mut u16,
}

impl<'a, T: Transport> Host<'a, T> {
    fn new(d: &'a mut Driver<T>, w: &'a mut Win, io: &'a mut Io, seq: &'a mut u16) -> Self {
        Host {
            d,
            id: w.id,
            me: w.me,
            mem: &w.mem,
            misapplied: &mut w.misapplied,
            queued: &mut w.queued,
            fault: w.imm.as_mut().map(immediate::fault),
            io,
            seq,
        }
    }
}

impl<T: Transport> Messages for Host<'_, T> {
    type Req = Req;

    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        data: *const u8,
        len: usize,
    ) -> Result<Req, SendError> {
        // SAFETY: the caller's contract.
        unsafe { self.d.isend(dest, tag, context, data, len) }
    }

    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<Req, RecvError> {
        // SAFETY: the caller's contract.
        unsafe { self.d.irecv(src, tag, context, data, len) }
    }

    fn test(&mut self, req: Req) -> Result<Status, Req> {
        self.d.test(req)
    }

    fn cancel(&mut self, req: &Req) {
        Messages::cancel(self.d, req)
    }

    fn forget(&mut self, req: Req) {
        self.d.forget(req)
    }

    fn group_intact(&self) -> bool {
        self.d.group_intact()
    }

    fn watch_all(&mut self, on: bool) {
        self.d.watch_all(on)
    }
}

impl<T: Transport> FenceHost for Host<'_, T> {
    type Targets = Vec<Target>;

    fn epoch(&mut self) -> &mut rmx_core::onesided::Epoch<Vec<Target>> {
        epoch_of(&mut self.d.windows, self.id)
    }

    fn next_collective(&mut self) -> u16 {
        let seq = *self.seq;
        *self.seq = seq.wrapping_add(1);
        seq
    }

    fn free_requests(&self) -> usize {
        self.d.free_requests()
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
        Some(Reply {
            target: *target,
            id: *id,
            into: buf.as_mut_ptr(),
            len: buf.len(),
        })
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
