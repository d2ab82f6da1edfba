//! Waits for a task: the rank's progress rounds, and the task polled
//! after each that may have moved it on.

use std::task::Poll;

use super::thread::CLOCK_POLLS;
use super::{Driver, Rank};
use crate::transport::Transport;

impl<T: Transport + 'static> Rank<T> {
    /// Drives `poll` until it is ready: after the first call, only after a
    /// progress round that found work (a request can only have ended then),
    /// one that ran the timers (a peer given up ends requests), or any
    /// round while a progress thread may have done the work. An empty round
    /// stays as cheap as a point-to-point wait's, so an oversubscribed rank
    /// yields its core as soon.
    pub(crate) fn drive<R>(&mut self, mut poll: impl FnMut(&mut Driver<T>) -> Poll<R>) -> R {
        let mut armed = None;
        let shared = self.progress_thread();
        let mut first = true;
        loop {
            let (p, idle) = self.with(|d| {
                let look = std::mem::take(&mut first)
                    || d.progress() > 0
                    || shared
                    || d.idle % CLOCK_POLLS == CLOCK_POLLS - 1;
                let p = if look { poll(d) } else { Poll::Pending };
                (p, d.idle)
            });
            if let Poll::Ready(r) = p {
                return r;
            }
            self.rest(idle, &mut armed);
        }
    }
}
