//! Entries threaded on doubly-linked lists, in storage the caller supplies:
//! each entry sits on at most one *order* list (all entries, or the wildcard
//! receives) and at most one *bin* (entries of one source and context), both
//! kept in the order entries were added. Unlinking is O(1) from either list,
//! so an entry found through one list leaves the other without a search.
//! There are as many bins as entries, and bin `b`'s ends live in entry `b`,
//! so the table is one slice and grows with its capacity only.

pub(super) use crate::fifo::NIL;
use crate::fifo::{Node, Stack};

/// Which of an entry's two links a walk follows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    Order = 0,
    Bin = 1,
}

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u16,
    next: u16,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// The two ends of one list.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ends {
    head: u16,
    tail: u16,
}

impl Ends {
    pub const EMPTY: Ends = Ends {
        head: NIL,
        tail: NIL,
    };

    pub fn head(&self) -> u16 {
        self.head
    }
}

/// One entry of a matching queue's table (storage for [`super::Matcher`]):
/// a receive or a message, its links, and the ends of the bin of the same
/// index. Opaque; make tables of [`Slot::FREE`].
#[derive(Clone, Copy, Debug)]
pub struct Slot<K, T> {
    /// Key and payload; `None` while the entry is free.
    item: Option<(K, T)>,
    /// When the entry was added (wrapping): the older of two candidates wins.
    seq: u32,
    /// Order and bin links; a free entry's order link is the free list.
    links: [Link; 2],
    /// The bin the entry is in, if it is in one (kept so that taking it out
    /// does not hash again).
    bin: u16,
    /// Bin number `index`: the ends of its list.
    ends: Ends,
}

impl<K: Copy, T: Copy> Slot<K, T> {
    /// An unused entry.
    pub const FREE: Self = Slot {
        item: None,
        seq: 0,
        links: [UNLINKED; 2],
        bin: 0,
        ends: Ends::EMPTY,
    };
}

impl<K, T> Node for Slot<K, T> {
    fn next(&self, list: usize) -> u16 {
        self.links[list].next
    }
    fn set_next(&mut self, list: usize, next: u16) {
        self.links[list].next = next;
    }
}

/// The entries in `S`, a free list and the order counter.
#[derive(Debug)]
pub(super) struct Entries<K, T, S> {
    slots: S,
    _of: core::marker::PhantomData<Slot<K, T>>,
    free: Stack,
    seq: u32,
}

impl<K, T, S: AsRef<[Slot<K, T>]> + AsMut<[Slot<K, T>]>> Entries<K, T, S> {
    /// Takes `slots` over, every entry free and every bin empty.
    pub fn new(mut slots: S) -> Self {
        let all = slots.as_mut();
        for s in all.iter_mut() {
            s.item = None;
            s.links = [UNLINKED; 2];
            s.ends = Ends::EMPTY;
        }
        // A free entry's order link is the free list.
        let free = Stack::full(all, Via::Order as usize);
        Entries {
            slots,
            _of: core::marker::PhantomData,
            free,
            seq: 0,
        }
    }

    /// Entries (and bins) usable.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slots.as_ref().len().min(NIL as usize)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.capacity() - self.free.len()
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    #[inline]
    fn at(&self, i: u16) -> &Slot<K, T> {
        &self.slots.as_ref()[i as usize]
    }

    #[inline]
    fn at_mut(&mut self, i: u16) -> &mut Slot<K, T> {
        &mut self.slots.as_mut()[i as usize]
    }

    /// Stores `item`, for bin `bin` if it goes in one; `Err` hands it back
    /// when every entry is taken.
    #[inline]
    pub fn add(&mut self, key: K, t: T, bin: u16) -> Result<u16, (K, T)> {
        let Some(i) = self.free.pop(self.slots.as_ref(), Via::Order as usize) else {
            return Err((key, t));
        };
        let seq = self.seq;
        let e = self.at_mut(i);
        e.item = Some((key, t));
        e.bin = bin;
        e.seq = seq;
        self.seq = seq.wrapping_add(1);
        Ok(i)
    }

    /// The bin entry `i` was added for.
    #[inline]
    pub fn bin(&self, i: u16) -> u16 {
        self.at(i).bin
    }

    #[inline]
    pub fn key(&self, i: u16) -> Option<&K> {
        self.at(i).item.as_ref().map(|(k, _)| k)
    }

    /// What entry `i` holds, if it is live.
    #[inline]
    pub fn get(&self, i: u16) -> Option<(&K, &T)> {
        self.at(i).item.as_ref().map(|(k, t)| (k, t))
    }

    /// `a` was added before `b` (live entries are fewer than 2^31 apart).
    #[inline]
    pub fn older(&self, a: u16, b: u16) -> bool {
        let (sa, sb) = (self.at(a).seq, self.at(b).seq);
        (sb.wrapping_sub(sa) as i32) > 0
    }

    #[inline]
    pub fn next(&self, i: u16, via: Via) -> u16 {
        self.at(i).links[via as usize].next
    }

    /// The first entry of bin `b`.
    #[inline]
    pub fn bin_head(&self, b: u16) -> u16 {
        self.at(b).ends.head
    }

    /// Appends entry `i` to bin `b`.
    #[inline]
    pub fn push_bin(&mut self, b: u16, i: u16) {
        let mut ends = self.at(b).ends;
        self.push_back(&mut ends, i, Via::Bin);
        self.at_mut(b).ends = ends;
    }

    /// Takes entry `i` out of the bin it was added for.
    #[inline]
    pub fn unlink_bin(&mut self, i: u16) {
        let b = self.bin(i);
        let mut ends = self.at(b).ends;
        self.unlink(&mut ends, i, Via::Bin);
        self.at_mut(b).ends = ends;
    }

    /// Appends entry `i` to the list `ends`.
    #[inline]
    pub fn push_back(&mut self, ends: &mut Ends, i: u16, via: Via) {
        let v = via as usize;
        self.at_mut(i).links[v] = Link {
            prev: ends.tail,
            next: NIL,
        };
        if ends.tail == NIL {
            ends.head = i;
        } else {
            let t = ends.tail;
            self.at_mut(t).links[v].next = i;
        }
        ends.tail = i;
    }

    /// Takes entry `i` off the list `ends` (it must be on it).
    #[inline]
    pub fn unlink(&mut self, ends: &mut Ends, i: u16, via: Via) {
        let v = via as usize;
        let Link { prev, next } = self.at(i).links[v];
        if prev == NIL {
            ends.head = next;
        } else {
            self.at_mut(prev).links[v].next = next;
        }
        if next == NIL {
            ends.tail = prev;
        } else {
            self.at_mut(next).links[v].prev = prev;
        }
    }

    /// Frees entry `i` (already off both lists) and returns what it held.
    #[inline]
    pub fn remove(&mut self, i: u16) -> Option<(K, T)> {
        let item = self.at_mut(i).item.take()?;
        self.free.push(self.slots.as_mut(), Via::Order as usize, i);
        Some(item)
    }

    /// The first live entry whose key `which` selects, in index order (rare).
    pub fn find_key(&self, which: impl Fn(&K) -> bool) -> Option<u16> {
        self.slots.as_ref()[..self.capacity()]
            .iter()
            .position(|e| e.item.as_ref().is_some_and(|(k, _)| which(k)))
            .map(|i| i as u16)
    }

    /// The first live entry `which` selects, in index order (cancel: rare).
    pub fn find(&self, which: impl Fn(&T) -> bool) -> Option<u16> {
        self.slots.as_ref()[..self.capacity()]
            .iter()
            .position(|e| e.item.as_ref().is_some_and(|(_, t)| which(t)))
            .map(|i| i as u16)
    }
}
