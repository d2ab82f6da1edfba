//! A collective carried out by a simulated rank: the driver layer's task
//! ([`CollectiveTask`]), the one every shell runs, over the rank's
//! messages; the job wakes the rank when something arrives and polls it.

use std::task::Poll;

use rmx_core::collective::{Collective, Int, Op};
use rmx_driver::task::CollectiveTask;

use crate::messages::TaskReq;
use crate::node::Node;

/// One rank's run of one collective, over `data` (contribution in,
/// result out), reducing as a sum of u32s.
pub struct CollTask {
    task: CollectiveTask<TaskReq>,
    pub data: Vec<u8>,
    scratch: Vec<u8>,
    me: u16,
}

impl CollTask {
    /// Rank `node`'s run of `what` (its next collective) over `data`.
    pub fn new(
        node: &mut Node,
        ranks: u16,
        what: Collective,
        data: Vec<u8>,
    ) -> Result<CollTask, String> {
        let me = node.me;
        let fail = |e| format!("rank {me}: {what:?}: {e}");
        let op = Some((Op::Sum, Int::U32));
        let task = CollectiveTask::new(what, ranks, me, node.collectives, op).map_err(fail)?;
        node.collectives = node.collectives.wrapping_add(1);
        let scratch = vec![0; task.scratch_len()];
        let mut c = CollTask {
            task,
            data,
            scratch,
            me,
        };
        let (d, s) = (&mut c.data, &mut c.scratch);
        // SAFETY: the vectors' heap bytes stay where they are, owned by the
        // task's holder, which polls it to its end (a job that fails drops
        // every rank at once).
        unsafe {
            c.task
                .start(node, d.as_mut_ptr(), d.len(), s.as_mut_ptr(), s.len())
        }
        .map_err(fail)?;
        Ok(c)
    }

    /// Moves the collective on as far as it goes now: `Ok(true)` once done.
    pub fn poll(&mut self, node: &mut Node) -> Result<bool, String> {
        match self.task.poll(node) {
            Poll::Pending => Ok(false),
            Poll::Ready(Ok(())) => Ok(true),
            Poll::Ready(Err(e)) => Err(format!("rank {}: collective: {e} ({e:?})", self.me)),
        }
    }
}
