//! Send bounce slots: what each one is doing, and the pool that hands them
//! out and takes them back. A slot is free when nothing holds it: not in the
//! NIC, not awaiting an acknowledgement, not waiting in a backlog.

use crate::fifo::{Node, Stack, NIL};
use crate::request::Request;
use crate::reuse::RegId;
use crate::wire::packed::Record;

/// The lists of a peer's slots, as indices of a slot's links.
pub(super) const BACKLOG: usize = 0;
pub(super) const UNACKED: usize = 1;

/// One send bounce slot's state (an entry of the slot table an endpoint is
/// given). Opaque; make tables of [`SlotEntry::UNUSED`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotEntry {
    pub(super) peer: u16,
    /// Bytes to post: header and payload (or records).
    pub(super) len: u32,
    /// Sequence of the (first) message.
    pub(super) seq: u32,
    /// Messages in the packet: 1, or the records of a packed packet.
    pub(super) msgs: u16,
    pub(super) in_nic: bool,
    pub(super) awaiting_ack: bool,
    /// In its peer's backlog, waiting for a send entry.
    pub(super) unposted: bool,
    /// Posted at least once: no record may be added any more.
    pub(super) sealed: bool,
    /// A packed packet's newest record (for the header cache); `None` for a
    /// packet of one eager message.
    pub(super) last: Option<Record>,
    /// Posted as a solicited event: wakes the peer's progress thread.
    pub(super) wake: bool,
    /// Next slot of the peer's backlog (`BACKLOG`) and of its
    /// unacknowledged packets (`UNACKED`, lossy transports); a free slot's
    /// `BACKLOG` link is the pool's free list.
    pub(super) links: [u16; 2],
    /// A zero-copy send: the NIC reads the user buffer through this
    /// registration, and the send's request completes with the slot.
    pub(super) pin: Option<RegId>,
    pub(super) req: Option<Request>,
    /// On the pool's free list.
    pub(super) pooled: bool,
}

impl SlotEntry {
    /// An unused slot.
    pub const UNUSED: SlotEntry = SlotEntry {
        peer: 0,
        len: 0,
        seq: 0,
        msgs: 0,
        in_nic: false,
        awaiting_ack: false,
        unposted: false,
        sealed: false,
        last: None,
        wake: false,
        links: [NIL; 2],
        pin: None,
        req: None,
        pooled: false,
    };

    pub(super) fn busy(&self) -> bool {
        self.in_nic || self.awaiting_ack || self.unposted
    }
}

impl Node for SlotEntry {
    fn next(&self, list: usize) -> u16 {
        self.links[list]
    }
    fn set_next(&mut self, list: usize, next: u16) {
        self.links[list] = next;
    }
}

/// The slots in table `T` and the free ones among them (a stack: the slot
/// freed last is reused first, while its bytes are still in cache).
pub(super) struct SlotPool<T> {
    table: T,
    free: Stack,
}

impl<T: AsRef<[SlotEntry]> + AsMut<[SlotEntry]>> SlotPool<T> {
    /// Takes `table` over, every slot free.
    pub fn new(mut table: T) -> Self {
        let all = table.as_mut();
        all.fill(SlotEntry {
            pooled: true,
            ..SlotEntry::UNUSED
        });
        let free = Stack::full(all, BACKLOG);
        SlotPool { table, free }
    }

    /// Free slots.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Takes a free slot.
    pub fn take(&mut self) -> Option<u16> {
        let s = self.free.pop(self.table.as_ref(), BACKLOG)?;
        self.table.as_mut()[s as usize].pooled = false;
        Some(s)
    }

    /// Takes a free slot for data, unless it is the last one: that one is
    /// kept for control packets, so acknowledgements can never deadlock.
    pub fn take_spare(&mut self) -> Option<u16> {
        if self.free() < 2 {
            return None;
        }
        self.take()
    }

    /// Gives slot `s` back unless something still holds it (or it is
    /// already free); `true` if it went back.
    pub fn put(&mut self, s: u16) -> bool {
        let e = &mut self.table.as_mut()[s as usize];
        if e.pooled || e.busy() {
            return false;
        }
        e.pooled = true;
        self.free.push(self.table.as_mut(), BACKLOG, s);
        true
    }

    /// Every slot, for the lists threaded through them.
    pub fn all(&self) -> &[SlotEntry] {
        self.table.as_ref()
    }

    pub fn all_mut(&mut self) -> &mut [SlotEntry] {
        self.table.as_mut()
    }

    pub fn get_mut(&mut self, s: usize) -> Option<&mut SlotEntry> {
        self.table.as_mut().get_mut(s).filter(|e| !e.pooled)
    }
}

impl<T: AsRef<[SlotEntry]>> core::ops::Index<usize> for SlotPool<T> {
    type Output = SlotEntry;
    fn index(&self, s: usize) -> &SlotEntry {
        &self.table.as_ref()[s]
    }
}

impl<T: AsRef<[SlotEntry]> + AsMut<[SlotEntry]>> core::ops::IndexMut<usize> for SlotPool<T> {
    fn index_mut(&mut self, s: usize) -> &mut SlotEntry {
        &mut self.table.as_mut()[s]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_goes_back_once_and_only_when_nothing_holds_it() {
        let mut pool = SlotPool::new([SlotEntry::UNUSED; 3]);
        assert_eq!(pool.free(), 3);
        let a = pool.take().unwrap();
        pool[a as usize].in_nic = true;
        assert!(!pool.put(a), "still in the NIC");
        pool[a as usize].in_nic = false;
        assert!(pool.put(a));
        assert!(!pool.put(a), "a second give-back is refused");
        assert_eq!(pool.free(), 3);
        let taken: [Option<u16>; 4] = core::array::from_fn(|_| pool.take());
        assert_eq!(taken[3], None);
        assert_eq!(taken[0], Some(a), "the slot freed last is reused first");
    }
}
