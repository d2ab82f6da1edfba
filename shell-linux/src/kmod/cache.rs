//! The region cache above rmx.ko: a communication names a buffer by
//! address; the cache finds a declared region covering it (declaring one
//! over its pages on a miss, undeclaring the least recently used past
//! its capacity) and moves the data through the module. Declared regions
//! stay valid whatever happens to the memory — the module pins again
//! after an invalidation — so the cache never checks or flushes anything.
//!
//! [`Mode::Synchronous`] is what decoupled pinning is compared with:
//! every communication pins its region whole first and unpins it after.

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
}

/// Declared regions of one [`Device`], looked up by address range.
pub struct RegionCache<'d> {
    dev: &'d Device,
    mode: Mode,
    capacity: usize,
    entries: Vec<Entry>,
    tick: u64,
    stats: Stats,
}

impl<'d> RegionCache<'d> {
    /// A cache of at most `capacity` regions (1 … 255: the module's table
    /// holds 256 per context).
    pub fn new(dev: &'d Device, mode: Mode, capacity: usize) -> io::Result<RegionCache<'d>> {
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
                .min_by_key(|&i| self.entries[i].used)
                .expect("full, so not empty");
            let old = self.entries.swap_remove(lru);
            self.dev.undeclare(old.desc)?;
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
        let desc = unsafe { self.dev.declare(&[seg]) }?;
        self.stats.declared += 1;
        self.entries.push(Entry {
            desc,
            start,
            end,
            used: self.tick,
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
        if self.mode == Mode::Synchronous {
            self.dev.pin(d, true)?;
        }
        let r = f(self.dev, d, off);
        if self.mode == Mode::Synchronous {
            self.dev.unpin(d)?;
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

impl Drop for RegionCache<'_> {
    fn drop(&mut self) {
        for e in self.entries.drain(..) {
            let _ = self.dev.undeclare(e.desc);
        }
    }
}
