//! Collectives started without waiting ([`Rank::iallreduce`] and its
//! kin): their tasks live with the rank's driver, so that every progress
//! round that found work (or ran the timers) moves them on, whatever the
//! rank waits for meanwhile and whoever drives it (its own thread, or its
//! progress thread). MPI asks this of a nonblocking collective: a rank
//! that starts one and then blocks in a receive its peer sends only after
//! the collective still takes part.
//!
//! [`Rank::iallreduce`]: super::Rank::iallreduce

use std::task::Poll;

use rmx_driver::task::{CollectiveError, CollectiveTask};

use super::{Driver, Req};
use crate::transport::Transport;

/// One started collective, by the number its request carries.
pub(crate) struct Running {
    id: u64,
    task: CollectiveTask<Req>,
    result: Option<Result<(), CollectiveError>>,
}

// SAFETY: the task's pointers name heap bytes its request owns (or leaked
// when dropped unfinished), touched only by whoever holds the driver.
unsafe impl Send for Running {}

impl<T: Transport> Driver<T> {
    /// Takes `task` (started) into the running collectives and polls it
    /// once (its first exchange posted); its number.
    pub(crate) fn run(&mut self, task: CollectiveTask<Req>) -> u64 {
        self.started += 1;
        let id = self.started;
        self.running.push(Running {
            id,
            task,
            result: None,
        });
        self.poll_running();
        id
    }

    /// Polls every running collective not finished.
    pub(crate) fn poll_running(&mut self) {
        // Out of the driver while it is driven (a poll posts and tests
        // through it); nothing starts a collective meanwhile.
        let mut running = std::mem::take(&mut self.running);
        for r in running.iter_mut().filter(|r| r.result.is_none()) {
            if let Poll::Ready(res) = r.task.poll(self) {
                r.result = Some(res);
            }
        }
        self.running = running;
    }

    /// Whether collective `id` finished (or is no longer here).
    pub(crate) fn finished(&self, id: u64) -> bool {
        self.running
            .iter()
            .find(|r| r.id == id)
            .is_none_or(|r| r.result.is_some())
    }

    /// Collective `id`'s result, once it finished; it is then forgotten.
    pub(crate) fn take_result(&mut self, id: u64) -> Option<Result<(), CollectiveError>> {
        let at = self
            .running
            .iter()
            .position(|r| r.id == id && r.result.is_some())?;
        self.running.swap_remove(at).result
    }
}
