//! Work started without waiting (a collective from [`Rank::iallreduce`]
//! and its kin, a fence from `Win::ifence`): it lives with the rank's
//! driver, so that every progress round that found work (or ran the
//! timers) moves it on, whatever the rank waits for meanwhile and whoever
//! drives it (its own thread, or its progress thread). MPI asks this of a
//! nonblocking collective: a rank that starts one and then blocks in a
//! receive its peer sends only after the collective still takes part.
//!
//! [`Rank::iallreduce`]: super::Rank::iallreduce

use std::any::Any;
use std::task::Poll;

use rmx_driver::task::{CollectiveError, CollectiveTask};

use super::{Driver, Req};
use crate::transport::Transport;

/// Work the rank moves on until it reports: what it needs beside the
/// driver (buffers, a window's parts) it owns.
pub(crate) trait Started<T: Transport>: Send {
    /// Moves it on as far as it goes now; `true` once it reported (it is
    /// never polled again).
    fn poll(&mut self, d: &mut Driver<T>) -> bool;

    /// For its starter to take it back once it reported.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// One piece of started work, by the number its request carries.
pub(crate) struct Running<T: Transport> {
    id: u64,
    work: Box<dyn Started<T>>,
    done: bool,
}

/// A started collective and, once it reported, its result.
pub(crate) struct Collective {
    task: CollectiveTask<Req>,
    result: Option<Result<(), CollectiveError>>,
}

// SAFETY: the task's pointers name heap bytes its request owns (or leaked
// when dropped unfinished), touched only by whoever holds the driver.
unsafe impl Send for Collective {}

impl<T: Transport> Started<T> for Collective {
    fn poll(&mut self, d: &mut Driver<T>) -> bool {
        if let Poll::Ready(res) = self.task.poll(d) {
            self.result = Some(res);
        }
        self.result.is_some()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl<T: Transport> Driver<T> {
    /// Takes `work` (started) into the running work and polls it once;
    /// its number.
    pub(crate) fn run(&mut self, work: Box<dyn Started<T>>) -> u64 {
        self.started += 1;
        let id = self.started;
        self.running.push(Running {
            id,
            work,
            done: false,
        });
        self.poll_running();
        id
    }

    /// Takes a started collective into the running work; its number.
    pub(crate) fn run_collective(&mut self, task: CollectiveTask<Req>) -> u64 {
        self.run(Box::new(Collective { task, result: None }))
    }

    /// Polls every piece of running work not finished.
    pub(crate) fn poll_running(&mut self) {
        // Out of the driver while it is driven (a poll posts and tests
        // through it); nothing starts work meanwhile.
        let mut running = std::mem::take(&mut self.running);
        for r in running.iter_mut().filter(|r| !r.done) {
            r.done = r.work.poll(self);
        }
        self.running = running;
    }

    /// Whether work `id` finished (or is no longer here).
    pub(crate) fn finished(&self, id: u64) -> bool {
        self.running
            .iter()
            .find(|r| r.id == id)
            .is_none_or(|r| r.done)
    }

    /// Work `id`, once it finished; it is then forgotten.
    pub(crate) fn take_finished(&mut self, id: u64) -> Option<Box<dyn Any>> {
        let at = self.running.iter().position(|r| r.id == id && r.done)?;
        Some(self.running.swap_remove(at).work.into_any())
    }

    /// Collective `id`'s result, once it finished; it is then forgotten.
    pub(crate) fn take_result(&mut self, id: u64) -> Option<Result<(), CollectiveError>> {
        let c = self.take_finished(id)?.downcast::<Collective>().ok()?;
        c.result
    }
}
