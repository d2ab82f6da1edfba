//! A wait that tends other ranks when it stalls: a thread that drives
//! several ranks (the message-rate benchmark's) keeps the others moving
//! while one waits, since each moves only while it is driven. The tending
//! runs only once the wait has polled nothing for a while, so waits that
//! end quickly pay nothing.

use rmx_core::Status;
use rmx_driver::task::Messages;

use super::{Rank, Req};
use crate::transport::Transport;

impl<T: Transport + 'static> Rank<T> {
    /// [`wait`](Self::wait), calling `tend` whenever the wait stalls.
    pub(crate) fn wait_tending(&mut self, mut req: Req, mut tend: impl FnMut()) -> Status {
        let mut armed = None;
        loop {
            let (r, idle, stalled) = self.with(|d| {
                d.progress();
                (d.test(req), d.idle, d.stalled())
            });
            match r {
                Ok(st) => return st,
                Err(q) => req = q,
            }
            if stalled {
                tend();
            }
            self.rest(idle, &mut armed);
        }
    }
}
