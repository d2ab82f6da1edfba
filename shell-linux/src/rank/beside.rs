//! Waits that do other work when they stall. A fence that waits for a
//! collective (or for its own sends) must meanwhile receive the
//! operations other ranks aim at it: unreceived, they hold the receive
//! pool, their origins run out of credit, and the collective's messages
//! queue behind them for good. The work beside runs only once a wait has
//! polled nothing for a while, so waits that end quickly pay nothing.

use rmx_core::RecvFault;
use rmx_driver::task::Messages;

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
}
