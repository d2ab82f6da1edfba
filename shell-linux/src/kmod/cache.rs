//! The region cache above rmx.ko: a communication names a buffer by
//! address; the cache finds a declared region covering it (declaring one
//! over its pages on a miss, undeclaring the least recently used past
//! its capacity) and moves the data through the module. Declared regions
//! stay valid whatever happens to the memory — the module pins again
//! after an invalidation — so the cache never checks or flushes anything.
//!
//! [`Mode::Synchronous`] is what decoupled pinning is compared with:
//! every communication pins its region whole first and unpins it after.
//!
//! A transport holds the region of each buffer it registered
//! ([`acquire`](RegionCache::acquire)) until it deregisters it
//! ([`release`](RegionCache::release)): a held region is never undeclared
//! to make room, and in synchronous mode stays pinned while held.

use std::borrow::Borrow;
use std::io;

use super::{Desc, Device};
use rmx_kernel::Segment;

const PAGE: u64 = 4096;

/// When pages are pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// By the module, on demand and progressively; kept until the memory
    /// changes or the pinned-page limit needs them.
    Decoupled,
    /// Whole before each communication, unpinned after it.
    Synchronous,
}

/// What the cache did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub declared: u64,
    pub undeclared: u64,
}

struct Entry {
    desc: Desc,
    start: u64,
    end: u64,
    used: u64,
    /// Registrations holding the region.
    holds: u32,
}

/// Declared regions of one [`Device`] (borrowed, or owned by a transport),
/// looked up by address range.
pub struct RegionCache<D: Borrow<Device>> {
    dev: D,
    mode: Mode,
    capacity: usize,
    entries: Vec<Entry>,
    tick: u64,
    stats: Stats,
}

impl<D: Borrow<Device>> RegionCache<D> {
    /// A cache of at most `capacity` regions (1 … 255: the module's table
    /// holds 256 per context).
    pub fn new(dev: D, mode: Mode, capacity: usize) -> io::Result<RegionCache<D>> {
        if !(1..=255).contains(&capacity) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a region cache holds 1 to 255 regions (asked for {capacity})"),
            ));
        }
        Ok(RegionCache {
            dev,
            mode,
            capacity,
            entries: Vec::with_capacity(capacity),
            tick: 0,
            stats: Stats::default(),
        })
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The device the regions are declared on.
    pub fn device(&self) -> &Device {
        self.dev.borrow()
    }

    /// [`region`](Self::region), held until [`release`](Self::release)
    /// (as long as a transport's registration of the buffer lives): never
    /// undeclared meanwhile, and in synchronous mode pinned whole until
    /// the last hold ends. A cache whose every region is held refuses a
    /// miss (`ENOSPC`).
    ///
    /// # Safety
    /// As [`region`](Self::region).
    pub unsafe fn acquire(&mut self, addr: u64, len: u64) -> io::Result<(Desc, u64)> {
        // SAFETY: the caller's contract.
        let (d, off) = unsafe { self.region(addr, len) }?;
        let e = self.entry(d).expect("just found or declared");
        e.holds += 1;
        if e.holds == 1 && self.mode == Mode::Synchronous {
            if let Err(err) = self.dev.borrow().pin(d, true) {
                self.release(d);
                return Err(err);
            }
        }
        Ok((d, off))
    }

    /// Ends one hold of `d` taken by [`acquire`](Self::acquire); nothing
    /// for a region not held.
    pub fn release(&mut self, d: Desc) {
        let mode = self.mode;
        let Some(e) = self.entry(d).filter(|e| e.holds > 0) else {
            return;
        };
        e.holds -= 1;
        if e.holds == 0 && mode == Mode::Synchronous {
            // Unpinning fails only for a region the module no longer has.
            let _ = self.dev.borrow().unpin(d);
        }
    }

    fn entry(&mut self, d: Desc) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.desc == d)
    }

    /// The region covering `[addr, addr + len)` and the buffer's offset
    /// in it, declared over the buffer's pages on a miss.
    ///
    /// # Safety
    /// As [`Device::declare`]: while cached, [`write`](Self::write)s
    /// store into this memory.
    pub unsafe fn region(&mut self, addr: u64, len: u64) -> io::Result<(Desc, u64)> {
        let end = addr
            .checked_add(len.max(1))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        self.tick += 1;
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.start <= addr && end <= e.end)
        {
            e.used = self.tick;
            self.stats.hits += 1;
            return Ok((e.desc, addr - e.start));
        }
        if self.entries.len() == self.capacity {
            let lru = (0..self.entries.len())
                .filter(|&i| self.entries[i].holds == 0)
                .min_by_key(|&i| self.entries[i].used)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSPC))?;
            let old = self.entries.swap_remove(lru);
            self.dev.borrow().undeclare(old.desc)?;
            self.stats.undeclared += 1;
        }
        let start = addr / PAGE * PAGE;
        let end = end
            .checked_next_multiple_of(PAGE)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let seg = Segment {
            addr: start,
            len: end - start,
        };
        // SAFETY: the caller's contract.
        let desc = unsafe { self.dev.borrow().declare(&[seg]) }?;
        self.stats.declared += 1;
        self.entries.push(Entry {
            desc,
            start,
            end,
            used: self.tick,
            holds: 0,
        });
        Ok((desc, addr - start))
    }

    /// Runs `f` on the region of `[addr, addr + len)` as the mode says.
    ///
    /// # Safety
    /// As [`region`](Self::region).
    unsafe fn communicate(
        &mut self,
        addr: u64,
        len: u64,
        f: impl FnOnce(&Device, Desc, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        // SAFETY: the caller's contract.
        let (d, off) = unsafe { self.region(addr, len) }?;
        let dev = self.dev.borrow();
        if self.mode == Mode::Synchronous {
            dev.pin(d, true)?;
        }
        let r = f(dev, d, off);
        if self.mode == Mode::Synchronous {
            dev.unpin(d)?;
        }
        r
    }

    /// Sends: copies the `out.len()` bytes at `addr` into `out` through
    /// the module.
    ///
    /// # Safety
    /// As [`region`](Self::region).
    pub unsafe fn read(&mut self, addr: u64, out: &mut [u8]) -> io::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.communicate(addr, out.len() as u64, |dev, d, off| dev.read(d, off, out)) }
    }

    /// Receives: copies `data` to `addr` through the module.
    ///
    /// # Safety
    /// As [`region`](Self::region); `addr` is memory the caller may have
    /// written (no Rust reference to it is live).
    pub unsafe fn write(&mut self, addr: u64, data: &[u8]) -> io::Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            self.communicate(addr, data.len() as u64, |dev, d, off| {
                dev.write(d, off, data)
            })
        }
    }
}

impl<D: Borrow<Device>> Drop for RegionCache<D> {
    fn drop(&mut self) {
        for e in self.entries.drain(..) {
            let _ = self.dev.borrow().undeclare(e.desc);
        }
    }
}
