//! The driver layer's tasks ([`rmx_driver::task`]) on a simulated rank:
//! its requests keep their bytes in the rank's own buffers, so a receive
//! copies into the task's memory when it is collected, and a send copies
//! out when posted.

use rmx_core::{RecvError, SendError, Source, Status, TagSel};
use rmx_driver::task::Messages;

use crate::node::Node;
use crate::req::Req;

/// A task's request on a simulated rank: the rank's request and, for a
/// receive, where its bytes go.
pub struct TaskReq {
    req: Req,
    into: Option<(usize, usize)>,
}

impl TaskReq {
    /// A send the rank started itself, handed to a task to wait for.
    pub fn sent(req: Req) -> TaskReq {
        TaskReq { req, into: None }
    }
}

impl Messages for Node {
    type Req = TaskReq;

    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        data: *const u8,
        len: usize,
    ) -> Result<TaskReq, SendError> {
        // SAFETY: the caller's contract (the rank copies the bytes now).
        let bytes = unsafe { core::slice::from_raw_parts(data, len) };
        let req = Node::isend(self, dest, tag, context, bytes)?;
        Ok(TaskReq { req, into: None })
    }

    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        data: *mut u8,
        len: usize,
    ) -> Result<TaskReq, RecvError> {
        let req = Node::irecv(self, src, tag, context, len)?;
        let into = Some((data as usize, len));
        Ok(TaskReq { req, into })
    }

    fn test(&mut self, q: TaskReq) -> Result<Status, TaskReq> {
        let got = Node::test(self, &q.req).expect("a task's request is tested until it ends");
        let Some((st, bytes)) = got else {
            return Err(q);
        };
        if let Some((ptr, cap)) = q.into {
            let n = bytes.len().min(cap);
            // SAFETY: the task keeps the receive's bytes until it completes.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, n) };
        }
        Ok(st)
    }

    fn cancel(&mut self, q: &TaskReq) {
        Node::cancel(self, &q.req);
    }

    fn free_requests(&self) -> usize {
        self.ep.free_requests()
    }

    fn group_intact(&self) -> bool {
        self.ep.group_intact()
    }

    fn watch_all(&mut self, on: bool) {
        match on {
            true => self.ep.watch_all(self.cpu()),
            false => self.ep.unwatch_all(),
        }
    }

    fn reduced(&mut self, bytes: usize) {
        self.spend(self.model().reduce_ns(bytes));
    }
}
