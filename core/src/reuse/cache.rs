//! The registration cache: registered page ranges with reference counts and
//! lazy deregistration.
//!
//! A released registration stays registered, so the next send of the same
//! buffer costs a lookup instead of a registration; only when the cache is
//! full is the least recently used unreferenced entry deregistered. An
//! invalidated range (memory unmapped or replaced) is never hit again: unused
//! entries are deregistered at once, in-use ones when their last user releases.

use heapless::Vec;

use crate::nic::{MemKey, Nic, RegError};

/// A cache entry, stable while referenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegId(pub u16);

/// Why a range could not be registered; the send falls back to the copy path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// Every entry is in use: nothing can be evicted.
    Full,
    /// The NIC refused the registration.
    Register(RegError),
    /// The page size must be a power of two.
    PageSize,
}

#[derive(Clone, Copy, Debug, Default)]
struct Reg {
    start: u64,
    end: u64,
    key: MemKey,
    refs: u32,
    last_use: u64,
    /// Found by lookups; cleared by invalidation.
    valid: bool,
}

/// Counters of the cache's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub registrations: u64,
    pub deregistrations: u64,
    pub evictions: u64,
    /// Registrations the NIC refused, and misses with nothing evictable.
    pub register_failures: u64,
    pub full: u64,
    /// Entries dropped by invalidation (at once or on release).
    pub invalidated: u64,
    /// Whole-cache flushes (an invalidation queue overflowed).
    pub flushes: u64,
}

/// Up to `N` registered ranges, looked up by address range.
pub struct RegCache<const N: usize> {
    regs: [Reg; N],
    /// Slots holding a registration (valid, or invalid but still referenced).
    live: [bool; N],
    free: Vec<u16, N>,
    /// Valid entries, sorted by start address.
    order: Vec<u16, N>,
    page: u64,
    /// Longest registration ever made: bounds the backward search of a lookup.
    max_span: u64,
    clock: u64,
    /// Bumped by every insertion and removal: a lookup result remembered at
    /// one epoch is still the lookup result at the same epoch.
    epoch: u64,
    stats: CacheStats,
}

impl<const N: usize> RegCache<N> {
    /// An empty cache registering in units of `page` bytes.
    pub fn new(page: u64) -> Result<Self, CacheError> {
        if !page.is_power_of_two() || N > u16::MAX as usize {
            return Err(CacheError::PageSize);
        }
        let mut free = Vec::new();
        for i in (0..N as u16).rev() {
            let _ = free.push(i);
        }
        Ok(RegCache {
            regs: [Reg::default(); N],
            live: [false; N],
            free,
            order: Vec::new(),
            page,
            max_span: 0,
            clock: 0,
            epoch: 0,
            stats: CacheStats::default(),
        })
    }

    /// The page-aligned range registration of `[addr, addr+len)` covers.
    pub fn pages(&self, addr: u64, len: u64) -> (u64, u64) {
        let start = addr & !(self.page - 1);
        let end = addr
            .saturating_add(len.max(1))
            .saturating_add(self.page - 1)
            & !(self.page - 1);
        (start, end)
    }

    /// A valid entry covering all of `[addr, addr+len)`.
    pub fn lookup(&mut self, addr: u64, len: u64) -> Option<RegId> {
        let end = addr.saturating_add(len);
        let mut i = self
            .order
            .partition_point(|&s| self.regs[s as usize].start <= addr);
        while i > 0 {
            i -= 1;
            let r = &self.regs[self.order[i] as usize];
            if r.end >= end {
                self.stats.hits += 1;
                return Some(RegId(self.order[i]));
            }
            if r.start.saturating_add(self.max_span) < end {
                break;
            }
        }
        self.stats.misses += 1;
        None
    }

    /// Takes a reference on `id` (the NIC will read through its key).
    pub fn acquire(&mut self, id: RegId) -> MemKey {
        self.clock += 1;
        let r = &mut self.regs[id.0 as usize];
        r.refs += 1;
        r.last_use = self.clock;
        r.key
    }

    /// Registers the pages of `[addr, addr+len)`, evicting the least recently
    /// used unreferenced entry if the cache is full.
    pub fn register<Nc: Nic>(
        &mut self,
        nic: &mut Nc,
        addr: u64,
        len: u64,
    ) -> Result<RegId, CacheError> {
        if self.free.is_empty() {
            let victim = (0..N)
                .filter(|&i| self.live[i] && self.regs[i].refs == 0)
                .min_by_key(|&i| self.regs[i].last_use);
            let Some(v) = victim else {
                self.stats.full += 1;
                return Err(CacheError::Full);
            };
            self.stats.evictions += 1;
            self.drop_entry(nic, v as u16);
        }
        // A slot is free now: there was one, or the eviction freed one.
        let Some(s) = self.free.pop() else {
            return Err(CacheError::Full);
        };
        let (start, end) = self.pages(addr, len);
        let key = match nic.register(start, end - start) {
            Ok(k) => k,
            Err(e) => {
                let _ = self.free.push(s);
                self.stats.register_failures += 1;
                return Err(CacheError::Register(e));
            }
        };
        self.stats.registrations += 1;
        self.regs[s as usize] = Reg {
            start,
            end,
            key,
            refs: 0,
            last_use: self.clock,
            valid: true,
        };
        self.live[s as usize] = true;
        self.epoch += 1;
        self.max_span = self.max_span.max(end - start);
        let at = self
            .order
            .partition_point(|&o| self.regs[o as usize].start <= start);
        let _ = self.order.insert(at, s);
        Ok(RegId(s))
    }

    /// Drops a reference; an invalidated entry is deregistered with its last one.
    pub fn release<Nc: Nic>(&mut self, nic: &mut Nc, id: RegId) {
        let i = id.0 as usize;
        if i >= N || !self.live[i] || self.regs[i].refs == 0 {
            return;
        }
        self.regs[i].refs -= 1;
        if self.regs[i].refs == 0 && !self.regs[i].valid {
            self.drop_entry(nic, id.0);
        }
    }

    /// The memory of `[start, start+len)` changed: no entry overlapping it is
    /// hit again. Returns how many entries it dropped or marked.
    pub fn invalidate<Nc: Nic>(&mut self, nic: &mut Nc, start: u64, len: u64) -> u32 {
        let end = start.saturating_add(len);
        let mut n = 0;
        let mut i = self.order.partition_point(|&s| {
            self.regs[s as usize].start.saturating_add(self.max_span) <= start
        });
        while i < self.order.len() {
            let s = self.order[i];
            let r = self.regs[s as usize];
            if r.start >= end {
                break;
            }
            if r.end > start {
                n += 1;
                self.stats.invalidated += 1;
                self.order.remove(i);
                self.epoch += 1;
                self.regs[s as usize].valid = false;
                if r.refs == 0 {
                    self.drop_entry(nic, s);
                }
                continue;
            }
            i += 1;
        }
        n
    }

    /// Invalidates everything (an invalidation was lost: correctness first).
    pub fn flush<Nc: Nic>(&mut self, nic: &mut Nc) {
        self.stats.flushes += 1;
        self.invalidate(nic, 0, u64::MAX);
    }

    fn drop_entry<Nc: Nic>(&mut self, nic: &mut Nc, s: u16) {
        let r = &mut self.regs[s as usize];
        if r.valid {
            r.valid = false;
            if let Some(p) = self.order.iter().position(|&o| o == s) {
                self.order.remove(p);
            }
        }
        self.live[s as usize] = false;
        self.epoch += 1;
        nic.deregister(self.regs[s as usize].key);
        self.stats.deregistrations += 1;
        let _ = self.free.push(s);
    }

    /// Registrations held (valid or awaiting their last release), and of those in use.
    pub fn occupancy(&self) -> (usize, usize) {
        let live = N - self.free.len();
        let used = (0..N)
            .filter(|&i| self.live[i] && self.regs[i].refs > 0)
            .count();
        (live, used)
    }

    /// Changes when any entry is added, invalidated or removed.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }
}
