//! A mock kernel for host tests (feature `mock`): an address space of
//! mapped pages, pins recorded per slot and page (a page pinned twice, or
//! unpinned when not pinned, panics), notifiers watched, and a notifier
//! sequence a test moves as an invalidation would.

extern crate std;

use std::collections::{BTreeMap, BTreeSet};
use std::vec::Vec;

use crate::kernel::Kernel;
use crate::region::PAGE;

#[derive(Default)]
pub struct Mock {
    pub mapped: BTreeSet<u64>,
    /// (slot, page in its array) -> user address pinned there.
    pub pins: BTreeMap<(u16, u32), u64>,
    pub watched: BTreeMap<u16, (u64, u64)>,
    seq: BTreeMap<u16, u64>,
    /// Every pin call's page count, in order.
    pub calls: Vec<u32>,
}

impl Mock {
    pub fn map(&mut self, addr: u64, pages: u64) {
        for p in 0..pages {
            self.mapped.insert(addr + p * PAGE);
        }
    }

    /// Unmaps `pages` pages from `addr`.
    pub fn unmap(&mut self, addr: u64, pages: u64) {
        for p in 0..pages {
            self.mapped.remove(&(addr + p * PAGE));
        }
    }

    /// The kernel invalidates `slot`'s range: its sequence moves on.
    pub fn fire(&mut self, slot: u16) {
        *self.seq.entry(slot).or_default() += 2;
    }
}

impl Kernel for Mock {
    fn pin(&mut self, slot: u16, first: u32, addr: u64, count: u32) -> Result<u32, i32> {
        self.calls.push(count);
        let mut n = 0;
        while n < count && self.mapped.contains(&(addr + u64::from(n) * PAGE)) {
            let old = self
                .pins
                .insert((slot, first + n), addr + u64::from(n) * PAGE);
            assert!(
                old.is_none(),
                "page {} of slot {slot} pinned twice",
                first + n
            );
            n += 1;
        }
        if n == 0 {
            return Err(-14);
        }
        Ok(n)
    }

    fn unpin(&mut self, slot: u16, first: u32, count: u32) {
        for p in first..first + count {
            assert!(
                self.pins.remove(&(slot, p)).is_some(),
                "page {p} of slot {slot} unpinned but not pinned"
            );
        }
    }

    fn watch(&mut self, slot: u16, start: u64, len: u64) -> Result<(), i32> {
        assert!(self.watched.insert(slot, (start, len)).is_none());
        Ok(())
    }

    fn unwatch(&mut self, slot: u16) {
        assert!(self.watched.remove(&slot).is_some());
    }

    fn read_begin(&mut self, slot: u16) -> u64 {
        *self.seq.entry(slot).or_default()
    }

    fn read_retry(&mut self, slot: u16, seq: u64) -> bool {
        self.seq.get(&slot).copied().unwrap_or(0) != seq
    }
}
