//! Receive buffers kept for unexpected eager messages. A message nobody has
//! asked for stays in the shared-pool buffer it arrived in, as MVAPICH keeps
//! unexpected vbufs; the buffer goes back to the pool when the last message
//! held in it has been received (a packed packet may hold several).

use crate::fifo::{Node, Stack, NIL};
use crate::nic::RxBuf;

/// One entry of the held-buffer table (storage for an endpoint): a receive
/// buffer and how many unexpected messages it still holds. Opaque; make
/// tables of [`HoldEntry::UNUSED`].
#[derive(Clone, Copy, Debug)]
pub struct HoldEntry {
    buf: RxBuf,
    refs: u16,
    /// The next free entry, while this one is free; while held, the next
    /// fragment of its medium message.
    next: u16,
}

impl HoldEntry {
    pub const UNUSED: HoldEntry = HoldEntry {
        buf: RxBuf(0),
        refs: 0,
        next: NIL,
    };
}

impl Node for HoldEntry {
    fn next(&self, _list: usize) -> u16 {
        self.next
    }
    fn set_next(&mut self, _list: usize, next: u16) {
        self.next = next;
    }
}

/// Held buffers in the table `T`, with their counts of messages still held.
pub(crate) struct Holds<T> {
    table: T,
    free: Stack,
}

impl<T: AsRef<[HoldEntry]> + AsMut<[HoldEntry]>> Holds<T> {
    pub fn new(mut table: T) -> Self {
        let all = table.as_mut();
        all.fill(HoldEntry::UNUSED);
        let free = Stack::full(all, 0);
        Holds { table, free }
    }

    /// Buffers held now.
    pub fn len(&self) -> usize {
        self.table.as_ref().len().min(NIL as usize) - self.free.len()
    }

    /// Whether one more buffer can be held.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// One more message held in `buf`; `current` is the hold already made
    /// for the packet being handled, if any. `None`: no room.
    pub fn hold(&mut self, buf: RxBuf, current: &mut Option<u16>) -> Option<u16> {
        let h = match *current {
            Some(h) => h,
            None => {
                let h = self.free.pop(self.table.as_ref(), 0)?;
                let e = &mut self.table.as_mut()[h as usize];
                *e = HoldEntry {
                    buf,
                    ..HoldEntry::UNUSED
                };
                *current = Some(h);
                h
            }
        };
        let e = &mut self.table.as_mut()[h as usize];
        e.refs = e.refs.saturating_add(1);
        Some(h)
    }

    /// The buffer behind hold `h`.
    pub fn buf(&self, h: u16) -> RxBuf {
        self.table.as_ref()[h as usize].buf
    }

    /// Chains hold `next` after `h`: the fragments of one medium message,
    /// each in a buffer of its own. A hold is made unchained.
    pub fn chain(&mut self, h: u16, next: u16) {
        self.table.as_mut()[h as usize].next = next;
    }

    /// The hold chained after `h`, if any. Read it before releasing `h`.
    pub fn chained(&self, h: u16) -> Option<u16> {
        let n = self.table.as_ref()[h as usize].next;
        (n != NIL).then_some(n)
    }

    /// A message held in `h` was received; the buffer, once none is left in it.
    pub fn release(&mut self, h: u16) -> Option<RxBuf> {
        let e = &mut self.table.as_mut()[h as usize];
        if e.refs == 0 {
            return None; // not held: nothing to give back twice
        }
        e.refs -= 1;
        if e.refs > 0 {
            return None;
        }
        let buf = e.buf;
        self.free.push(self.table.as_mut(), 0, h);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_returns_with_its_last_message() {
        let mut h = Holds::new([HoldEntry::UNUSED; 2]);
        let mut cur = None;
        let a = h.hold(RxBuf(7), &mut cur).unwrap();
        let b = h.hold(RxBuf(7), &mut cur).unwrap();
        assert_eq!(a, b, "two messages of one packet share a hold");
        let mut cur2 = None;
        let c = h.hold(RxBuf(9), &mut cur2).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h.hold(RxBuf(11), &mut None).is_none(), "no room");
        assert_eq!(h.release(a), None);
        assert_eq!(h.release(b), Some(RxBuf(7)));
        assert_eq!(h.release(c), Some(RxBuf(9)));
        assert_eq!(h.len(), 0);
    }
}
