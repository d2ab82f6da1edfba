//! Waits that do other work when they stall. A fence that waits for a
//! collective (or for its own sends) must meanwhile receive the
//! operations other ranks aim at it: unreceived, they hold the receive
//! pool, their origins run out of credit, and the collective's messages
//! queue behind them for good. The work beside runs only once a wait has
//! polled nothing for a while, so waits that end quickly pay nothing.

use std::task::Poll;

use rmx_core::RecvFault;
use rmx_driver::task::{CollectiveError, CollectiveTask, Messages};

use super::thread::CLOCK_POLLS;
use super::{Rank, Req};
use crate::transport::Transport;

/// Empty polls in a row before a stalled wait runs its work beside.
const STALLED: u32 = CLOCK_POLLS - 1;

/// Work a stalled wait does: it may post, test and complete requests of its
/// own (never the wait's), and ends the wait with its error.
pub(crate) type Beside<'a, T, E> = &'a mut dyn FnMut(&mut Rank<T>) -> Result<(), E>;

impl<T: Transport + 'static> Rank<T> {
    /// [`wait_all`](Self::wait_all), running `beside` whenever the wait
    /// stalls. On its error every request of `reqs` is ended
    /// ([`abandon`](Self::abandon)) before this returns.
    pub(crate) fn wait_all_beside<E>(
        &mut self,
        reqs: impl IntoIterator<Item = Req>,
        beside: Beside<'_, T, E>,
    ) -> Result<Option<RecvFault>, E> {
        let mut fault = None;
        let mut reqs = reqs.into_iter();
        while let Some(q) = reqs.next() {
            match self.wait_beside(q, beside) {
                Ok(st) => fault = fault.or(st.fault),
                Err((q, e)) => {
                    self.abandon(std::iter::once(q).chain(reqs));
                    return Err(e);
                }
            }
        }
        Ok(fault)
    }

    /// [`wait`](Self::wait), running `beside` whenever the wait stalls;
    /// its error hands the request back, still pending.
    pub(crate) fn wait_beside<E>(
        &mut self,
        mut req: Req,
        beside: Beside<'_, T, E>,
    ) -> Result<rmx_core::Status, (Req, E)> {
        let mut armed = None;
        loop {
            let (r, idle) = self.with(|d| {
                d.progress();
                (d.test(req), d.idle)
            });
            match r {
                Ok(st) => return Ok(st),
                Err(q) => req = q,
            }
            if idle >= STALLED {
                if let Err(e) = beside(self) {
                    return Err((req, e));
                }
            }
            self.rest(idle, &mut armed);
        }
    }

    /// Drives progress (sleeping as [`wait`](Self::wait) does when nothing
    /// comes) until `done` holds, running `beside` whenever the wait stalls.
    pub(crate) fn wait_until_beside<E>(
        &mut self,
        mut done: impl FnMut(&mut super::Driver<T>) -> bool,
        beside: Beside<'_, T, E>,
    ) -> Result<(), E> {
        let mut armed = None;
        loop {
            let (ok, idle) = self.with(|d| {
                if done(d) {
                    return (true, 0);
                }
                d.progress();
                (done(d), d.idle)
            });
            if ok {
                return Ok(());
            }
            if idle >= STALLED {
                beside(self)?;
            }
            self.rest(idle, &mut armed);
        }
    }

    /// Drives `task` (started) until it reports, running `beside` whenever
    /// the wait stalls. On `beside`'s error the task is aborted and waited
    /// for (none of its requests stays posted) before the error returns.
    pub(crate) fn wait_task<E: From<CollectiveError>>(
        &mut self,
        task: &mut CollectiveTask<Req>,
        beside: Beside<'_, T, E>,
    ) -> Result<(), E> {
        let mut armed = None;
        let mut failed = None;
        // The first poll posts the first exchange. Later ones follow a
        // progress round that found work (a request can only have ended
        // then), one that ran the timers (a peer given up ends requests), or
        // any round while a progress thread may have done the work: an
        // empty round stays as cheap as a point-to-point wait's, so an
        // oversubscribed rank yields its core as soon.
        let shared = self.progress_thread();
        let mut first = true;
        loop {
            let (p, idle) = self.with(|d| {
                let look = std::mem::take(&mut first)
                    || d.progress() > 0
                    || shared
                    || d.idle % CLOCK_POLLS == CLOCK_POLLS - 1;
                let p = if look { task.poll(d) } else { Poll::Pending };
                (p, d.idle)
            });
            if let Poll::Ready(r) = p {
                return match failed {
                    Some(e) => Err(e),
                    None => r.map_err(E::from),
                };
            }
            if idle >= STALLED && failed.is_none() {
                if let Err(e) = beside(self) {
                    self.with(|d| task.abort(d));
                    failed = Some(e);
                }
            }
            self.rest(idle, &mut armed);
        }
    }
}
