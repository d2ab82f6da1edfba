//! Zero-copy eager sends from frequently used buffers.
//!
//! An eager send normally copies the user's data into a registered bounce
//! slot. When the same buffer is sent from often enough, registering it once
//! and letting the NIC gather the payload straight from it saves that copy on
//! every later send. The [`Tracker`] counts reuse, the [`CostModel`] says how
//! much reuse pays for a registration, and the [`RegCache`] keeps the
//! registrations (lazily deregistered, invalidated when memory changes).
//! [`FrequentBuffers`] ties them together behind the [`SendReuse`] decision
//! the endpoint asks on each send; [`NoReuse`] always copies.
//!
//! Only reliable transports use it: on a lossy one a retransmission would
//! read the user buffer again after the send had completed.

pub mod cache;
pub mod cost;
pub mod pending;
pub mod tracker;

pub use cache::{CacheError, CacheStats, RegCache, RegId};
pub use cost::{CostError, CostModel, CostPoint};
pub use pending::{Invalidation, Pending};
pub use tracker::{size_class, Adaptation, Tracked, Tracker, TrackerError, TrackerReport, Use};

use crate::nic::{MemKey, Nic};

/// A registration the NIC may read a payload through, referenced until released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub id: RegId,
    pub key: MemKey,
}

/// The endpoint's question on every eager send, and the answers it reports back.
pub trait SendReuse {
    /// Should `len` bytes at `addr` go straight from user memory? If so, the
    /// registration to gather through, referenced until [`release`](Self::release).
    fn plan<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned>;
    /// The NIC is done reading through `id`.
    fn release<N: Nic>(&mut self, nic: &mut N, id: RegId);
    /// A registration of `[addr, addr+len)` for a rendezvous, from the cache
    /// whatever the reuse count; `None`: the caller registers for this
    /// transfer alone.
    fn pin<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned> {
        let _ = (nic, addr, len);
        None
    }
    /// Memory changed: never send from a stale registration.
    fn invalidate<N: Nic>(&mut self, nic: &mut N, what: Invalidation);
}

/// Always copy: the eager protocol as it is without this mechanism.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReuse;

impl SendReuse for NoReuse {
    #[inline]
    fn plan<N: Nic>(&mut self, _: &mut N, _: u64, _: u32) -> Option<Pinned> {
        None
    }
    fn release<N: Nic>(&mut self, _: &mut N, _: RegId) {}
    fn invalidate<N: Nic>(&mut self, _: &mut N, _: Invalidation) {}
}

/// Counters of the zero-copy decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReuseStats {
    /// Sends the cost model ruled out by size (V ≥ C).
    pub unprofitable: u64,
    /// Sends of buffers below their threshold (or untracked).
    pub counted: u64,
    /// Sends that went zero-copy.
    pub zero_copy: u64,
    /// Of those, repeats of the previous zero-copy send's buffer, which skip
    /// both lookups.
    pub repeats: u64,
    /// Frequent buffers that still had to be copied (cache full, registration refused).
    pub fallbacks: u64,
}

/// The paper's mechanism: tracker, cost model and registration cache, with
/// storage `B` (buckets) and `E` (tracked buffers) chosen by the embedder,
/// `P` calibrated sizes and `R` registrations.
pub struct FrequentBuffers<B, E, const P: usize, const R: usize> {
    tracker: Tracker<B, E>,
    cost: CostModel<P>,
    cache: RegCache<R>,
    stats: ReuseStats,
    /// The last zero-copy send: (address, length, registration, cache epoch,
    /// tracker resets). The same buffer sent again while neither the cache
    /// nor the tracker changed needs neither lookup.
    last: Option<(u64, u32, RegId, u64, u32)>,
}

impl<B, E, const P: usize, const R: usize> FrequentBuffers<B, E, P, R>
where
    B: AsRef<[u32]> + AsMut<[u32]>,
    E: AsRef<[Tracked]> + AsMut<[Tracked]>,
{
    pub fn new(tracker: Tracker<B, E>, cost: CostModel<P>, cache: RegCache<R>) -> Self {
        FrequentBuffers {
            tracker,
            cost,
            cache,
            stats: ReuseStats::default(),
            last: None,
        }
    }

    pub fn tracker(&self) -> &Tracker<B, E> {
        &self.tracker
    }

    pub fn cost(&self) -> &CostModel<P> {
        &self.cost
    }

    pub fn cache(&self) -> &RegCache<R> {
        &self.cache
    }

    pub fn stats(&self) -> &ReuseStats {
        &self.stats
    }
}

impl<B, E, const P: usize, const R: usize> SendReuse for FrequentBuffers<B, E, P, R>
where
    B: AsRef<[u32]> + AsMut<[u32]>,
    E: AsRef<[Tracked]> + AsMut<[Tracked]>,
{
    #[inline]
    fn plan<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned> {
        if let Some((a, l, id, epoch, resets)) = self.last {
            if a == addr
                && l == len
                && epoch == self.cache.epoch()
                && resets == self.tracker.resets()
            {
                self.stats.zero_copy += 1;
                self.stats.repeats += 1;
                return Some(Pinned {
                    id,
                    key: self.cache.acquire(id),
                });
            }
        }
        if !self.cost.may_profit(len) {
            self.stats.unprofitable += 1;
            return None;
        }
        let cost = &self.cost;
        let threshold = || cost.threshold(len).unwrap_or(u32::MAX);
        if self.tracker.touch(addr, size_class(len), threshold) != Use::Frequent {
            self.stats.counted += 1;
            return None;
        }
        let id = match self.cache.lookup(addr, len as u64) {
            Some(id) => id,
            None => match self.cache.register(nic, addr, len as u64) {
                Ok(id) => id,
                Err(_) => {
                    self.stats.fallbacks += 1;
                    return None;
                }
            },
        };
        self.stats.zero_copy += 1;
        let key = self.cache.acquire(id);
        self.last = Some((addr, len, id, self.cache.epoch(), self.tracker.resets()));
        Some(Pinned { id, key })
    }

    fn release<N: Nic>(&mut self, nic: &mut N, id: RegId) {
        self.cache.release(nic, id);
    }

    fn pin<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned> {
        let id = match self.cache.lookup(addr, len as u64) {
            Some(id) => id,
            None => self.cache.register(nic, addr, len as u64).ok()?,
        };
        Some(Pinned {
            id,
            key: self.cache.acquire(id),
        })
    }

    fn invalidate<N: Nic>(&mut self, nic: &mut N, what: Invalidation) {
        match what {
            Invalidation::Range { start, len } => {
                self.cache.invalidate(nic, start, len);
            }
            Invalidation::All => self.cache.flush(nic),
        }
    }
}

/// A policy chosen at run time: `None` copies, as [`NoReuse`] does.
impl<T: SendReuse> SendReuse for Option<T> {
    #[inline]
    fn plan<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned> {
        self.as_mut()?.plan(nic, addr, len)
    }
    fn release<N: Nic>(&mut self, nic: &mut N, id: RegId) {
        if let Some(r) = self {
            r.release(nic, id);
        }
    }
    fn pin<N: Nic>(&mut self, nic: &mut N, addr: u64, len: u32) -> Option<Pinned> {
        self.as_mut()?.pin(nic, addr, len)
    }
    fn invalidate<N: Nic>(&mut self, nic: &mut N, what: Invalidation) {
        if let Some(r) = self {
            r.invalidate(nic, what);
        }
    }
}
