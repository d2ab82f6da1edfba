//! Fixed-capacity entries threaded on doubly-linked lists: each entry sits on
//! at most one *order* list (all entries, or the wildcard receives) and at
//! most one *bin* (entries of one source and context), both kept in the
//! order entries were added. Unlinking is O(1) from either list, so an entry
//! found through one list leaves the other without a search.

/// End of a list.
pub(super) const NIL: u16 = u16::MAX;

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

#[derive(Debug)]
struct Entry<K, T> {
    /// Key and payload; `None` while the entry is free.
    item: Option<(K, T)>,
    /// When the entry was added (wrapping): the older of two candidates wins.
    seq: u32,
    links: [Link; 2],
    /// The bin the entry is in, if it is in one (kept so that taking it out
    /// does not hash again).
    bin: u16,
}

/// `N` entries, a free list and the order counter. The lists' ends live
/// with their owner (one order list; one bin per hash bucket).
#[derive(Debug)]
pub(super) struct Entries<K, T, const N: usize> {
    entries: [Entry<K, T>; N],
    free: heapless::Vec<u16, N>,
    seq: u32,
}

impl<K, T, const N: usize> Entries<K, T, N> {
    pub fn new() -> Self {
        let mut free = heapless::Vec::new();
        // Capacities above u16::MAX - 1 entries could not be named by a link.
        for i in (0..N.min(NIL as usize) as u16).rev() {
            let _ = free.push(i);
        }
        Entries {
            entries: core::array::from_fn(|_| Entry {
                item: None,
                seq: 0,
                links: [UNLINKED; 2],
                bin: 0,
            }),
            free,
            seq: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        N.min(NIL as usize) - self.free.len()
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    /// Stores `item`, for bin `bin` if it goes in one; `Err` hands it back
    /// when every entry is taken.
    #[inline]
    pub fn add(&mut self, key: K, t: T, bin: u16) -> Result<u16, (K, T)> {
        let Some(i) = self.free.pop() else {
            return Err((key, t));
        };
        let e = &mut self.entries[i as usize];
        e.item = Some((key, t));
        e.bin = bin;
        e.seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        Ok(i)
    }

    /// The bin entry `i` was added for.
    #[inline]
    pub fn bin(&self, i: u16) -> usize {
        self.entries[i as usize].bin as usize
    }

    #[inline]
    pub fn key(&self, i: u16) -> Option<&K> {
        self.entries[i as usize].item.as_ref().map(|(k, _)| k)
    }

    /// `a` was added before `b` (live entries are fewer than 2^31 apart).
    #[inline]
    pub fn older(&self, a: u16, b: u16) -> bool {
        let (sa, sb) = (self.entries[a as usize].seq, self.entries[b as usize].seq);
        (sb.wrapping_sub(sa) as i32) > 0
    }

    #[inline]
    pub fn next(&self, i: u16, via: Via) -> u16 {
        self.entries[i as usize].links[via as usize].next
    }

    /// Appends entry `i` to the list `ends`.
    #[inline]
    pub fn push_back(&mut self, ends: &mut Ends, i: u16, via: Via) {
        let v = via as usize;
        self.entries[i as usize].links[v] = Link {
            prev: ends.tail,
            next: NIL,
        };
        if ends.tail == NIL {
            ends.head = i;
        } else {
            self.entries[ends.tail as usize].links[v].next = i;
        }
        ends.tail = i;
    }

    /// Takes entry `i` off the list `ends` (it must be on it).
    #[inline]
    pub fn unlink(&mut self, ends: &mut Ends, i: u16, via: Via) {
        let v = via as usize;
        let Link { prev, next } = self.entries[i as usize].links[v];
        if prev == NIL {
            ends.head = next;
        } else {
            self.entries[prev as usize].links[v].next = next;
        }
        if next == NIL {
            ends.tail = prev;
        } else {
            self.entries[next as usize].links[v].prev = prev;
        }
    }

    /// Frees entry `i` (already off both lists) and returns what it held.
    #[inline]
    pub fn remove(&mut self, i: u16) -> Option<(K, T)> {
        let item = self.entries[i as usize].item.take()?;
        let _ = self.free.push(i);
        Some(item)
    }

    /// The first live entry `which` selects, in index order (cancel: rare).
    pub fn find(&self, which: impl Fn(&T) -> bool) -> Option<u16> {
        self.entries
            .iter()
            .position(|e| e.item.as_ref().is_some_and(|(_, t)| which(t)))
            .map(|i| i as u16)
    }
}
