//! Ranks whose messages a test matches by hand, for the tasks' tests: a
//! message is delivered once a receive for its source (or any) and tag is
//! posted, sends complete when posted unless held.

extern crate std;

use std::cell::RefCell;
use std::vec::Vec;

use rmx_core::{RecvError, RecvFault, SendError, Source, Status, TagSel};

use super::Messages;

/// A message on its way.
pub(crate) struct Msg {
    pub(crate) from: u16,
    pub(crate) to: u16,
    pub(crate) tag: u32,
    pub(crate) bytes: Vec<u8>,
}

/// A posted receive.
pub(crate) struct Posted {
    pub(crate) rank: u16,
    pub(crate) id: u32,
    /// The source it takes (`None`: any).
    pub(crate) src: Option<u16>,
    pub(crate) tag: u32,
    pub(crate) ptr: usize,
    pub(crate) len: usize,
}

/// Every rank's messages, receives and completed requests.
#[derive(Default)]
pub(crate) struct Net {
    pub(crate) msgs: Vec<Msg>,
    pub(crate) posted: Vec<Posted>,
    pub(crate) done: Vec<(u16, u32, Status)>,
    pub(crate) next_id: u32,
    /// Receives cancelled, by rank.
    pub(crate) cancelled: Vec<u16>,
}

impl Net {
    /// Delivers every message whose receive is posted; how many.
    pub(crate) fn deliver(&mut self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.msgs.len() {
            let m = &self.msgs[i];
            let hit = self.posted.iter().position(|p| {
                p.rank == m.to && p.src.is_none_or(|s| s == m.from) && p.tag == m.tag
            });
            let Some(j) = hit else {
                i += 1;
                continue;
            };
            let p = self.posted.remove(j);
            let m = self.msgs.remove(i);
            let copy = m.bytes.len().min(p.len);
            // SAFETY: the task keeps the receive's bytes until it completes.
            unsafe { core::ptr::copy_nonoverlapping(m.bytes.as_ptr(), p.ptr as *mut u8, copy) };
            let fault = (m.bytes.len() > p.len).then_some(RecvFault::Truncated {
                len: m.bytes.len() as u32,
                capacity: p.len as u32,
            });
            let st = Status {
                source: m.from,
                tag: m.tag,
                len: copy as u32,
                fault,
            };
            self.done.push((p.rank, p.id, st));
            n += 1;
        }
        n
    }
}

/// One rank of the test's group.
pub(crate) struct Mock<'a> {
    pub(crate) me: u16,
    pub(crate) net: &'a RefCell<Net>,
    /// Requests this rank may have out at once, and has.
    pub(crate) limit: usize,
    pub(crate) out: usize,
    pub(crate) intact: bool,
    pub(crate) watching: i32,
    pub(crate) reduced: usize,
    /// Sends stay out until the test ends them (a peer that never takes
    /// them), and how many the task forgot.
    pub(crate) hold_sends: bool,
    pub(crate) forgotten: usize,
}

impl<'a> Mock<'a> {
    pub(crate) fn new(me: u16, net: &'a RefCell<Net>, limit: usize) -> Self {
        Mock {
            me,
            net,
            limit,
            out: 0,
            intact: true,
            watching: 0,
            reduced: 0,
            hold_sends: false,
            forgotten: 0,
        }
    }

    fn id(&mut self) -> u32 {
        let mut n = self.net.borrow_mut();
        n.next_id += 1;
        n.next_id
    }
}

impl Messages for Mock<'_> {
    type Req = u32;

    unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        _: u16,
        data: *const u8,
        len: usize,
    ) -> Result<u32, SendError> {
        if self.out == self.limit {
            return Err(SendError::RequestTableFull);
        }
        self.out += 1;
        let id = self.id();
        // SAFETY: the caller's contract.
        let bytes = unsafe { core::slice::from_raw_parts(data, len) }.to_vec();
        let mut n = self.net.borrow_mut();
        n.msgs.push(Msg {
            from: self.me,
            to: dest,
            tag,
            bytes,
        });
        let st = Status {
            source: self.me,
            tag,
            len: 0,
            fault: None,
        };
        if !self.hold_sends {
            n.done.push((self.me, id, st));
        }
        Ok(id)
    }

    unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        _: u16,
        ptr: *mut u8,
        len: usize,
    ) -> Result<u32, RecvError> {
        if self.out == self.limit {
            return Err(RecvError::RequestTableFull);
        }
        let TagSel::Tag(tag) = tag else {
            panic!("a task names its tag");
        };
        let src = match src {
            Source::Rank(r) => Some(r),
            Source::Any => None,
        };
        self.out += 1;
        let id = self.id();
        self.net.borrow_mut().posted.push(Posted {
            rank: self.me,
            id,
            src,
            tag,
            ptr: ptr as usize,
            len,
        });
        Ok(id)
    }

    fn test(&mut self, q: u32) -> Result<Status, u32> {
        let mut n = self.net.borrow_mut();
        let me = self.me;
        match n.done.iter().position(|&(r, id, _)| r == me && id == q) {
            Some(i) => {
                self.out -= 1;
                Ok(n.done.remove(i).2)
            }
            None => Err(q),
        }
    }

    fn cancel(&mut self, q: &u32) {
        let mut n = self.net.borrow_mut();
        let me = self.me;
        if let Some(i) = n.posted.iter().position(|p| p.rank == me && p.id == *q) {
            let p = n.posted.remove(i);
            let st = Status {
                source: p.src.unwrap_or(0),
                tag: p.tag,
                len: 0,
                fault: Some(RecvFault::Cancelled),
            };
            n.done.push((me, p.id, st));
            n.cancelled.push(me);
        }
    }

    fn forget(&mut self, _: u32) {
        self.forgotten += 1;
    }

    fn group_intact(&self) -> bool {
        self.intact
    }

    fn watch_all(&mut self, on: bool) {
        self.watching += if on { 1 } else { -1 };
    }

    fn reduced(&mut self, bytes: usize) {
        self.reduced += bytes;
    }
}
