//! One context's regions (one open of the device): a table of slots the
//! glue supplies, descriptors that name a slot and its use (so a stale or
//! invented one is refused), the pin schedule under a pinned-page limit,
//! the notifier's invalidations, and the page userspace reads without a
//! system call: word 0 the context's pinned pages, word `1 + slot` that
//! slot's generation, which changes whenever the region is invalidated,
//! undeclared or declared anew.
//!
//! Pinning is split around the kernel's calls, which may fault or wait for
//! an invalidation and so run without the lock the notifier takes:
//! [`Regions::begin_pin`] (under the lock) says what to pin; the glue takes
//! the notifier's sequence and pins ([`Job::run`]); [`Regions::end_pin`]
//! (under the lock again) keeps the pages, or gives them back if an
//! invalidation ran meanwhile.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::error::Error;
use crate::kernel::Kernel;
use crate::region::{Piece, Region, Segment};
use crate::schedule;

/// A region's descriptor: its slot (low 16 bits) and the slot's use
/// count when it was declared (high 16 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc(pub u32);

impl Desc {
    fn new(slot: u16, uses: u16) -> Desc {
        Desc(u32::from(uses) << 16 | u32::from(slot))
    }

    pub fn slot(self) -> u16 {
        self.0 as u16
    }

    fn uses(self) -> u16 {
        (self.0 >> 16) as u16
    }
}

/// One row of a context's table.
#[derive(Clone, Debug, Default)]
pub struct Slot {
    region: Option<Region>,
    /// Declarations so far (the descriptor's high half).
    uses: u16,
    /// What userspace reads for this slot.
    generation: u32,
    /// The generation last reported by [`Regions::changes`].
    reported: u32,
}

/// Pages to pin for a region, as [`Regions::begin_pin`] asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub desc: Desc,
    /// Where they go in the slot's page array, their user address, how many.
    pub first: u32,
    pub addr: u64,
    pub count: u32,
}

impl Job {
    /// What runs between [`Regions::begin_pin`] and [`Regions::end_pin`],
    /// without the lock: the notifier's sequence (which may wait for an
    /// invalidation in progress, and that takes the lock), then the pin.
    pub fn run<K: Kernel>(&self, k: &mut K) -> (u64, Result<u32, i32>) {
        let seq = k.read_begin(self.desc.slot());
        (
            seq,
            k.pin(self.desc.slot(), self.first, self.addr, self.count),
        )
    }
}

/// What to do next for a region's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Pin these, then [`Regions::end_pin`].
    Pin(Job),
    /// Another pin of it is in flight: wait for it.
    Wait,
    /// Every page is pinned.
    Done,
}

/// How far a region is pinned after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinned {
    /// Every page.
    All,
    /// A prefix (or nothing, after an invalidation raced the pin).
    Part,
}

/// One context's regions over slots `S` and the shared page `G`.
pub struct Regions<S, G> {
    slots: S,
    shared: G,
    /// Pages pinned in all, pages of pins in flight, and the most
    /// allowed of both.
    pinned: u64,
    reserved: u64,
    limit: u64,
    /// Uses so far (eviction order).
    tick: u64,
}

impl<S, G> Regions<S, G>
where
    S: AsRef<[Slot]> + AsMut<[Slot]>,
    G: AsRef<[AtomicU32]>,
{
    /// A context over `slots` (at most 65536), publishing to `shared` (one
    /// word more than slots), holding at most `limit` pages pinned.
    pub fn new(slots: S, shared: G, limit: u64) -> Result<Self, Error> {
        let n = slots.as_ref().len();
        if n > 1 << 16 || shared.as_ref().len() <= n {
            return Err(Error::Invalid);
        }
        Ok(Regions {
            slots,
            shared,
            pinned: 0,
            reserved: 0,
            limit,
            tick: 0,
        })
    }

    /// Starts every slot's declaration count at `seed`: contexts seeded
    /// apart give different descriptors for their first regions, so one
    /// context's descriptor used on another is refused (`EBADF`) rather
    /// than naming that context's region in the same slot.
    pub fn seeded(mut self, seed: u16) -> Self {
        for s in self.slots.as_mut() {
            if s.region.is_none() {
                s.uses = seed;
            }
        }
        self
    }

    /// Pages pinned in the context.
    pub fn pinned(&self) -> u64 {
        self.pinned
    }

    /// Declares a region over `segments` and starts its notifier; nothing
    /// is pinned yet.
    pub fn declare<K: Kernel>(&mut self, k: &mut K, segments: &[Segment]) -> Result<Desc, Error> {
        let region = Region::new(segments)?;
        let slot = self
            .slots
            .as_ref()
            .iter()
            .position(|s| s.region.is_none())
            .ok_or(Error::Full)? as u16;
        let (lo, hi) = region.hull();
        k.watch(slot, lo, hi - lo).map_err(Error::Pin)?;
        let s = &mut self.slots.as_mut()[slot as usize];
        s.uses = s.uses.wrapping_add(1);
        s.region = Some(region);
        let d = Desc::new(slot, s.uses);
        self.bump(slot);
        Ok(d)
    }

    /// Undeclares `d`: its pages unpinned, its notifier ended.
    pub fn undeclare<K: Kernel>(&mut self, k: &mut K, d: Desc) -> Result<(), Error> {
        self.idle(d)?;
        self.drop_slot(k, d.slot());
        Ok(())
    }

    /// `d` names a region no communication uses and no pin is in flight
    /// for: its pages may go.
    fn idle(&mut self, d: Desc) -> Result<(), Error> {
        let r = self.get(d)?;
        if r.users > 0 || r.pinning {
            return Err(Error::Busy);
        }
        Ok(())
    }

    /// The region `d` names.
    pub fn region(&self, d: Desc) -> Result<&Region, Error> {
        let s = self
            .slots
            .as_ref()
            .get(d.slot() as usize)
            .ok_or(Error::BadDescriptor)?;
        match &s.region {
            Some(r) if s.uses == d.uses() => Ok(r),
            _ => Err(Error::BadDescriptor),
        }
    }

    fn get(&mut self, d: Desc) -> Result<&mut Region, Error> {
        let s = self
            .slots
            .as_mut()
            .get_mut(d.slot() as usize)
            .ok_or(Error::BadDescriptor)?;
        match &mut s.region {
            Some(r) if s.uses == d.uses() => Ok(r),
            _ => Err(Error::BadDescriptor),
        }
    }

    /// A communication starts using `d`: it is not evicted or undeclared
    /// until [`release`](Self::release).
    pub fn acquire(&mut self, d: Desc) -> Result<(), Error> {
        self.tick += 1;
        let tick = self.tick;
        let r = self.get(d)?;
        r.users = r.users.checked_add(1).ok_or(Error::Busy)?;
        r.used = tick;
        Ok(())
    }

    /// A communication on `d` ended.
    pub fn release(&mut self, d: Desc) -> Result<(), Error> {
        let r = self.get(d)?;
        r.users = r.users.checked_sub(1).ok_or(Error::Invalid)?;
        Ok(())
    }

    /// The pages holding bytes `[offset, offset + len)` of `d` if they are
    /// pinned (first and past the last, in the slot's page array); `None`
    /// is an overlap miss: the data came before its pages were pinned (the
    /// paper drops the packet and lets it be sent again).
    pub fn span(&self, d: Desc, offset: u64, len: u64) -> Result<Option<(u32, u32)>, Error> {
        let r = self.region(d)?;
        let (first, end) = r.pages_of(offset, len).ok_or(Error::Invalid)?;
        Ok((end <= r.pinned).then_some((first, end)))
    }

    /// Where byte `offset` of `d` lies if its page is pinned; `None` is an
    /// overlap miss.
    pub fn piece(&self, d: Desc, offset: u64) -> Result<Option<Piece>, Error> {
        let r = self.region(d)?;
        let p = r.locate(offset).ok_or(Error::Invalid)?;
        Ok((p.page < r.pinned).then_some(p))
    }

    /// What to pin next of `d` (the next chunk of the schedule, within
    /// one segment's run of pages, within the pinned-page limit: regions
    /// no communication uses give their pages back first, least recently
    /// used first).
    pub fn begin_pin<K: Kernel>(&mut self, k: &mut K, d: Desc) -> Result<Step, Error> {
        let r = self.get(d)?;
        if r.pinning {
            return Ok(Step::Wait);
        }
        let first = r.pinned;
        let Some((addr, run)) = r.page_run(first) else {
            return Ok(Step::Done);
        };
        let want = u64::from(r.chunk.min(run));
        let room = self.make_room(k, d.slot(), want);
        if room == 0 {
            return Err(Error::Limit);
        }
        let r = self.get(d)?;
        r.pinning = true;
        let count = room as u32;
        self.reserved += room;
        Ok(Step::Pin(Job {
            desc: d,
            first,
            addr,
            count,
        }))
    }

    /// The glue pinned `job` (`pinned`: how many, or the errno) after
    /// taking the notifier's sequence `seq`: the pages are kept unless an
    /// invalidation ran since (then they go back, and the caller pins
    /// again).
    pub fn end_pin<K: Kernel>(
        &mut self,
        k: &mut K,
        job: Job,
        seq: u64,
        pinned: Result<u32, i32>,
    ) -> Result<Pinned, Error> {
        let slot = job.desc.slot();
        let raced = k.read_retry(slot, seq);
        self.reserved -= u64::from(job.count).min(self.reserved);
        let r = match self.get(job.desc) {
            Ok(r) => r,
            Err(e) => {
                // Undeclared meanwhile: nothing may keep the pages.
                if let Ok(n) = pinned {
                    k.unpin(slot, job.first, n.min(job.count));
                }
                return Err(e);
            }
        };
        r.pinning = false;
        let n = match pinned {
            Ok(n) => n.min(job.count),
            Err(e) => return Err(Error::Pin(e)),
        };
        if raced || r.pinned != job.first {
            k.unpin(slot, job.first, n);
            return Ok(Pinned::Part);
        }
        r.pinned += n;
        r.chunk = schedule::next(r.chunk);
        let all = r.pinned == r.pages();
        self.pinned += u64::from(n);
        self.publish_pinned();
        Ok(if all { Pinned::All } else { Pinned::Part })
    }

    /// Pins the next chunk of `d` through `k` in one go: begin, pin, end.
    pub fn pin_step<K: Kernel>(&mut self, k: &mut K, d: Desc) -> Result<Pinned, Error> {
        match self.begin_pin(k, d)? {
            Step::Done => Ok(Pinned::All),
            Step::Wait => Ok(Pinned::Part),
            Step::Pin(job) => {
                let (seq, got) = job.run(k);
                self.end_pin(k, job, seq, got)
            }
        }
    }

    /// Pins all of `d` now (the synchronous mode the paper compares with).
    pub fn pin_all<K: Kernel>(&mut self, k: &mut K, d: Desc) -> Result<(), Error> {
        // Each step pins at least one page or reports a race; a region
        // invalidated on every step is refused rather than spun on.
        let tries = 4 * u64::from(self.region(d)?.pages()) + 64;
        for _ in 0..tries {
            if self.pin_step(k, d)? == Pinned::All {
                return Ok(());
            }
        }
        Err(Error::Busy)
    }

    /// Unpins every page of `d` now; it stays declared and is pinned
    /// again on next use (the synchronous mode the paper compares with
    /// unpins after every communication).
    pub fn unpin<K: Kernel>(&mut self, k: &mut K, d: Desc) -> Result<(), Error> {
        self.idle(d)?;
        self.unpin_region(k, d.slot());
        Ok(())
    }

    /// The notifier of `slot` reports `[start, end)` invalidated: if the
    /// region there overlaps it, its pages are unpinned and its generation
    /// changes; it stays declared and is pinned again on next use.
    pub fn invalidate<K: Kernel>(&mut self, k: &mut K, slot: u16, start: u64, end: u64) {
        let Some(r) = self
            .slots
            .as_mut()
            .get_mut(slot as usize)
            .and_then(|s| s.region.as_mut())
        else {
            return;
        };
        if r.overlaps(start, end) {
            self.unpin_region(k, slot);
        }
    }

    /// The context ends (its file closed, its process gone): every region
    /// unpinned and undeclared.
    pub fn close<K: Kernel>(&mut self, k: &mut K) {
        for slot in 0..self.slots.as_ref().len() {
            if self.slots.as_ref()[slot].region.is_some() {
                self.drop_slot(k, slot as u16);
            }
        }
    }

    fn drop_slot<K: Kernel>(&mut self, k: &mut K, slot: u16) {
        if self.slots.as_ref()[slot as usize].region.is_none() {
            return;
        }
        self.unpin_region(k, slot);
        self.slots.as_mut()[slot as usize].region = None;
        k.unwatch(slot);
    }

    /// Gives back every page of the region in `slot` (declared): it stays
    /// declared, its schedule starts again, and userspace sees the change.
    fn unpin_region<K: Kernel>(&mut self, k: &mut K, slot: u16) {
        let Some(r) = self.slots.as_mut()[slot as usize].region.as_mut() else {
            return;
        };
        let n = core::mem::take(&mut r.pinned);
        r.chunk = schedule::FIRST;
        if n > 0 {
            k.unpin(slot, 0, n);
        }
        self.pinned -= u64::from(n);
        self.bump(slot);
        self.publish_pinned();
    }

    /// Makes room for up to `want` more pinned pages, unpinning unused
    /// regions other than `keep`, least recently used first; how many
    /// pages may be pinned.
    fn make_room<K: Kernel>(&mut self, k: &mut K, keep: u16, want: u64) -> u64 {
        while self.pinned + self.reserved + want > self.limit {
            let victim = self
                .slots
                .as_ref()
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != keep as usize)
                .filter_map(|(i, s)| s.region.as_ref().map(|r| (i, r)))
                .filter(|(_, r)| r.users == 0 && !r.pinning && r.pinned > 0)
                .min_by_key(|(_, r)| r.used)
                .map(|(i, _)| i as u16);
            let Some(v) = victim else {
                break;
            };
            self.unpin_region(k, v);
        }
        want.min(self.limit.saturating_sub(self.pinned + self.reserved))
    }

    /// Slot `slot`'s view changed: userspace must look again.
    fn bump(&mut self, slot: u16) {
        let s = &mut self.slots.as_mut()[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        let g = s.generation;
        self.shared.as_ref()[1 + slot as usize].store(g, Ordering::Release);
    }

    fn publish_pinned(&self) {
        let n = u32::try_from(self.pinned).unwrap_or(u32::MAX);
        self.shared.as_ref()[0].store(n, Ordering::Release);
    }

    /// Whether a slot's generation moved since [`changes`](Self::changes)
    /// last reported it (the device is readable).
    pub fn changed(&self) -> bool {
        self.slots
            .as_ref()
            .iter()
            .any(|s| s.generation != s.reported)
    }

    /// Reports into `out` the slots whose generation moved since last
    /// reported — the descriptor of the slot's latest declaration and its
    /// generation now — as many as fit, lowest slot first; how many. What
    /// an evictor thread reads from the device instead of scanning the
    /// page of generations.
    pub fn changes(&mut self, out: &mut [(Desc, u32)]) -> usize {
        let mut n = 0;
        for (i, s) in self.slots.as_mut().iter_mut().enumerate() {
            if n == out.len() {
                break;
            }
            if s.generation != s.reported {
                s.reported = s.generation;
                out[n] = (Desc::new(i as u16, s.uses), s.generation);
                n += 1;
            }
        }
        n
    }

    /// What userspace reads for `slot` (for tests and the glue's `read`).
    pub fn generation(&self, slot: u16) -> Option<u32> {
        self.slots.as_ref().get(slot as usize).map(|s| s.generation)
    }
}

#[cfg(test)]
mod tests;
