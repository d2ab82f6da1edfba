//! A fence on a std rank: the driver layer's [`FenceTask`], the one every
//! shell runs, started over this window's parts ([`Win::ifence`]) with
//! the window as its host (`host.rs`) and handed to the rank, whose every
//! progress round moves it on (as a started collective's), whatever the
//! rank waits for meanwhile, until [`Rank::test_fence`] or
//! [`Rank::wait_fence`] finds it done.
//!
//! [`FenceTask`]: rmx_driver::task::FenceTask

use std::any::Any;
use std::task::Poll;

use rmx_driver::task::{CollectiveError, FenceLayout, Fenced};

use super::host::{Host, Parts};
use super::io::{Task, KEEP};
use super::{deferred, immediate, Assert, Win, WinError};
use crate::rank::{Driver, Rank, Started};
use crate::transport::Transport;

/// A fence under way, started by [`Win::ifence`]: the window is its until
/// it completes ([`Rank::test_fence`] or [`Rank::wait_fence`]). The rank
/// moves it on meanwhile. One dropped before then leaves it with the rank,
/// which carries it to its end and keeps its buffers, and leaves the
/// window in its fence (every later call on it fails).
#[must_use = "a fence must be completed with test_fence or wait_fence"]
pub struct FenceReq<'w> {
    w: &'w mut Win,
    /// Its number among the rank's running work; `None` once taken back.
    id: Option<u64>,
    gets: u32,
    /// The rank that started it (its requests are that rank's).
    rank: u64,
    result: Option<Result<(), WinError>>,
}

/// A started fence as the rank holds it: the task, the window's parts it
/// works on (while it runs), and its report. Its box is kept by the
/// window from fence to fence, the next task started in its place.
pub(super) struct Running {
    task: Task,
    parts: Option<Parts>,
    report: Option<Result<Fenced, CollectiveError>>,
}

// SAFETY: the task's pointers name the heap bytes of `parts` (and the
// window's memory, kept alive by its `Arc` there), touched only by whoever
// holds the rank's driver.
unsafe impl Send for Running {}

impl Running {
    /// Its slots' capacity (for tests of what a window keeps).
    #[cfg(test)]
    pub(super) fn slots_capacity(&mut self) -> usize {
        self.task.slots_mut().map_or(0, |s| s.capacity())
    }
}

impl<T: Transport> Started<T> for Running {
    fn poll(&mut self, d: &mut Driver<T>) -> bool {
        let Some(parts) = self.parts.as_mut() else {
            return true;
        };
        let mut host = Host::new(d, parts);
        if let Poll::Ready(r) = self.task.poll(&mut host) {
            self.report = Some(r);
        }
        self.report.is_some()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl Win {
    /// Starts the fence that ends this epoch (see
    /// [`fence_with`](Self::fence_with)) without waiting for it: the
    /// application computes while the rank, in every progress round,
    /// moves the fence on. Collective: every rank fences, and starts its
    /// other collectives in the same order around it.
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
        let mut io = self.io.take().unwrap_or_default();
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
        let seq = r.collectives;
        r.collectives = seq.wrapping_add(Task::COLLECTIVES);
        let (mem_ptr, mem_len) = (io.mem.as_mut_ptr(), io.mem.len());
        let mut kept = self.fence.take();
        let mut fresh = Vec::new();
        // The last fence left every slot empty: they are laid out afresh
        // only when sends are already out or the count differs.
        let slots = match kept.as_mut() {
            Some(b) => b.task.slots_mut().expect("a kept fence reported"),
            None => &mut fresh,
        };
        let want = Task::slots_len(n, gets, sent.len());
        if !sent.is_empty() || slots.len() != want {
            slots.clear();
            slots.extend(sent.into_iter().map(Some));
            slots.resize_with(want, || None);
        }
        let mut parts = Parts::take(self, io);
        // Both starts below: the lent bytes and every buffer the host
        // names lie on the heap in `parts`, which moves with the task to
        // the rank and stays there until the task reported; the window's
        // memory is kept alive by the `Arc` in `parts`; the slots hold the
        // sends already out first and nothing after them.
        let id = r.with(|d| {
            let running = match kept {
                Some(mut b) => {
                    let host = &mut Host::new(d, b.parts.insert(parts));
                    // SAFETY: as said above.
                    unsafe { b.task.restart(host, layout, mem_ptr, mem_len, seq) };
                    b.report = None;
                    b
                }
                None => {
                    let host = &mut Host::new(d, &mut parts);
                    // SAFETY: as said above.
                    let task = unsafe { Task::start(host, layout, mem_ptr, mem_len, fresh, seq) };
                    let (parts, report) = (Some(parts), None);
                    Box::new(Running {
                        task,
                        parts,
                        report,
                    })
                }
            };
            d.run(running)
        });
        Ok(FenceReq {
            w: self,
            id: Some(id),
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
        if let Some(id) = f.id {
            let done = self.with(|d| {
                d.progress();
                d.poll_running();
                d.take_finished(id)
            });
            if let Some(done) = done {
                f.id = None;
                f.result = Some(finish(f, self, done));
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
        if let Some(id) = f.id.take() {
            let done = self.drive(|d| match d.finished(id) {
                true => Poll::Ready(d.take_finished(id)),
                false => Poll::Pending,
            });
            f.result = Some(finish(&mut f, self, done.expect("a finished fence")));
        }
        f.result.take().expect("a fence completes once")
    }
}

/// The fence reported: the window hands out the gets of the epoch it ended
/// and keeps the fence's buffers, emptied, for the next.
fn finish<T: Transport + 'static>(
    f: &mut FenceReq<'_>,
    r: &mut Rank<T>,
    done: Box<dyn Any>,
) -> Result<(), WinError> {
    let w = &mut *f.w;
    let mut running = done
        .downcast::<Running>()
        .expect("a fence's work is a fence");
    let res = running.report.take().expect("reported");
    let parts = running
        .parts
        .take()
        .expect("a started fence holds its parts");
    let mut io = parts.put_back(w);
    if let Some(slots) = running.task.slots_mut() {
        // Every one empty (the task reported); one large epoch does not
        // keep its slots' memory for the window's life.
        slots.truncate(KEEP);
        slots.shrink_to(KEEP);
    }
    w.fence = Some(running);
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
    w.io = Some(io);
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
