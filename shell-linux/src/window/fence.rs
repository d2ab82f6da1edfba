//! A fence on a std rank: the driver layer's [`FenceTask`], the one every
//! shell runs, started over this window's bytes ([`Win::ifence`]) with the
//! window as its host (`host.rs`) and moved on by the rank
//! ([`Rank::test_fence`], [`Rank::wait_fence`]) until it reports.
//!
//! [`FenceTask`]: rmx_driver::task::FenceTask

use std::task::Poll;

use rmx_driver::task::{CollectiveError, FenceLayout, Fenced};

use super::host::Host;
use super::io::{Io, Task};
use super::{deferred, immediate, Assert, Win, WinError};
use crate::rank::{Driver, Rank};
use crate::transport::Transport;

/// A fence under way, started by [`Win::ifence`]: the window is its until
/// it completes ([`Rank::test_fence`] or [`Rank::wait_fence`], which move
/// it on). One dropped before then leaks the fence's buffers rather than
/// free memory the network may still write, and leaves the window in its
/// fence (every later call on it fails).
#[must_use = "a fence must be completed with test_fence or wait_fence"]
pub struct FenceReq<'w> {
    w: &'w mut Win,
    /// On the heap, kept by the window from fence to fence: the request
    /// moves cheaply.
    task: Option<Box<Task>>,
    io: Io,
    gets: u32,
    /// The rank that started it (its requests are that rank's).
    rank: u64,
    result: Option<Result<(), WinError>>,
}

impl FenceReq<'_> {
    fn running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| t.holds_requests())
    }
}

impl Drop for FenceReq<'_> {
    fn drop(&mut self) {
        if self.running() {
            std::mem::forget(std::mem::take(&mut self.io));
            std::mem::forget(self.task.take());
        }
    }
}

impl Win {
    /// Starts the fence that ends this epoch (see
    /// [`fence_with`](Self::fence_with)) without waiting for it: the
    /// application computes while the rank, whenever it is tested, moves
    /// the fence on. Collective: every rank fences, and starts its other
    /// collectives in the same order around it.
    pub fn ifence<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        assert: Assert,
    ) -> Result<FenceReq<'_>, WinError> {
        let (no_precede, no_succeed) = (
            assert.has(Assert::NO_PRECEDE),
            assert.has(Assert::NO_SUCCEED),
        );
        let (gets, design) = self.epoch(r, |e, _| {
            e.fence(no_precede, no_succeed)
                .map(|()| (e.gets(), e.design()))
        })?;
        let (n, me) = (r.size(), self.me);
        let mut io = std::mem::take(&mut self.io);
        // Sized once: the window's design and group never change, and the
        // task writes each byte before it reads it.
        let layout = *io
            .layout
            .get_or_insert_with(|| FenceLayout::new(design, n, me));
        if io.mem.len() < layout.bytes() {
            io.mem = vec![0; layout.bytes()];
        }
        // An immediate design's accumulates already out: the fence waits
        // for them as for its own sends, and keeps their bytes.
        let sent = match self.imm.as_mut() {
            Some(imm) => immediate::take_sent(imm, &mut io.sent),
            None => Vec::new(),
        };
        let mut slots = std::mem::take(&mut io.slots);
        slots.clear();
        let want = Task::slots_len(n, gets, sent.len());
        slots.extend(sent.into_iter().map(Some));
        slots.resize_with(want, || None);
        let seq = r.collectives;
        r.collectives = seq.wrapping_add(Task::COLLECTIVES);
        let (mem_ptr, mem_len) = (io.mem.as_mut_ptr(), io.mem.len());
        let kept = io.task.take();
        let task = r.with(|d| {
            let mut host = Host::new(d, self, &mut io);
            // SAFETY: `io` (the lent bytes and every buffer the host names)
            // moves into the request, whose heap bytes stay in place until
            // the task reported or are leaked with it; the window's memory
            // lives as long as the window, borrowed by the request.
            let start = |host: &mut Host<'_, T>| unsafe {
                Task::start(host, layout, mem_ptr, mem_len, slots, seq)
            };
            match kept {
                Some(mut b) => {
                    *b = start(&mut host);
                    b
                }
                None => Box::new(start(&mut host)),
            }
        });
        Ok(FenceReq {
            w: self,
            task: Some(task),
            io,
            gets,
            rank: r.id(),
            result: None,
        })
    }
}

impl<T: Transport + 'static> Rank<T> {
    /// Polls the NIC once and moves `f` on: its result once it completed
    /// (the next epoch open, the gets of the one it ended taken with
    /// [`Win::take`]), `None` while it runs; after that, `None` again.
    ///
    /// # Panics
    /// If `f` was started by another rank.
    pub fn test_fence(&mut self, f: &mut FenceReq<'_>) -> Option<Result<(), WinError>> {
        assert_eq!(
            f.rank,
            self.id(),
            "a fence is tested on the rank that started it"
        );
        if f.running() {
            let p = self.with(|d| {
                d.progress();
                poll(f, d)
            });
            if let Poll::Ready(res) = p {
                f.result = Some(finish(f, self, res));
            }
        }
        f.result.take()
    }

    /// Waits for `f` to complete.
    ///
    /// # Panics
    /// If `f` was started by another rank.
    pub fn wait_fence(&mut self, mut f: FenceReq<'_>) -> Result<(), WinError> {
        assert_eq!(
            f.rank,
            self.id(),
            "a fence is waited for on the rank that started it"
        );
        if f.running() {
            let res = self.drive(|d| poll(&mut f, d));
            f.result = Some(finish(&mut f, self, res));
        }
        f.result.take().expect("a fence completes once")
    }
}

/// Polls the fence's task with the window as its host.
fn poll<T: Transport>(
    f: &mut FenceReq<'_>,
    d: &mut Driver<T>,
) -> Poll<Result<Fenced, CollectiveError>> {
    let mut host = Host::new(d, f.w, &mut f.io);
    f.task.as_mut().expect("started").poll(&mut host)
}

/// The fence reported: the window hands out the gets of the epoch it ended
/// and keeps the fence's buffers, emptied, for the next.
fn finish<T: Transport + 'static>(
    f: &mut FenceReq<'_>,
    r: &mut Rank<T>,
    res: Result<Fenced, CollectiveError>,
) -> Result<(), WinError> {
    let w = &mut *f.w;
    let mut io = std::mem::take(&mut f.io);
    let mut task = f.task.take().expect("started");
    io.slots = task.slots_mut().map(std::mem::take).unwrap_or_default();
    io.task = Some(task);
    if let Some(imm) = w.imm.as_mut() {
        immediate::end_flush(imm, r);
    }
    // What the epoch counted in the fence.
    w.epoch(r, |_, _| ());
    match w.design.immediate() {
        true => immediate::end_epoch(w, f.gets),
        false => deferred::end_epoch(w, f.gets, &mut io),
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
