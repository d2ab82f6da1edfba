//! One declared region: its user segments, in order, and how far it is
//! pinned. Its bytes are the segments' concatenated; its pages are each
//! segment's pages in turn (a page two segments share counts twice), so
//! the pinned part is always a prefix and a byte range maps to pages
//! monotonically.

use heapless::Vec;

use crate::error::Error;
use crate::schedule;

/// Bytes per page.
pub const PAGE: u64 = 4096;

/// Segments a region may have (Open-MX's limit is lower).
pub const MAX_SEGMENTS: usize = 64;

/// The first address userspace cannot name (x86-64 with 4-level paging:
/// `TASK_SIZE_MAX`); a segment reaching it is refused.
pub const USER_END: u64 = (1 << 47) - PAGE;

/// A range of user memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub addr: u64,
    pub len: u64,
}

impl Segment {
    /// Its end, checked: `None` past user memory or on overflow.
    fn end(self) -> Option<u64> {
        self.addr.checked_add(self.len).filter(|&e| e <= USER_END)
    }

    /// Pages it touches.
    fn pages(self) -> u64 {
        let end = self.addr + self.len;
        end.div_ceil(PAGE) - self.addr / PAGE
    }
}

/// Bytes of a region inside one of its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The page, in the region's page array.
    pub page: u32,
    /// The first byte's offset in the page, and how many bytes.
    pub at: u32,
    pub len: u32,
}

/// A declared region and its pin state.
#[derive(Clone, Debug)]
pub struct Region {
    segments: Vec<Segment, MAX_SEGMENTS>,
    /// Bytes and pages in all.
    bytes: u64,
    pages: u32,
    /// Pages pinned, from the first: the pinned prefix.
    pub(crate) pinned: u32,
    /// The next chunk of the progressive schedule.
    pub(crate) chunk: u32,
    /// A pin is in flight (between [`crate::Regions::begin_pin`] and
    /// [`crate::Regions::end_pin`]).
    pub(crate) pinning: bool,
    /// Communications using it: it is neither undeclared nor evicted
    /// meanwhile.
    pub(crate) users: u32,
    /// When it was last used, in the context's ticks (eviction order).
    pub(crate) used: u64,
}

impl Region {
    /// A region over `segments`: at least one, at most [`MAX_SEGMENTS`],
    /// none empty, none past user memory, at most `u32::MAX` pages. The
    /// memory need not be mapped: pinning fails later if it is not, as
    /// the paper specifies.
    pub fn new(segments: &[Segment]) -> Result<Region, Error> {
        if segments.is_empty() || segments.len() > MAX_SEGMENTS {
            return Err(Error::Invalid);
        }
        let (mut bytes, mut pages) = (0u64, 0u64);
        for s in segments {
            if s.len == 0 || s.end().is_none() {
                return Err(Error::Invalid);
            }
            bytes += s.len;
            pages += s.pages();
        }
        let pages = u32::try_from(pages).map_err(|_| Error::Invalid)?;
        Ok(Region {
            segments: Vec::from_slice(segments).map_err(|_| Error::Invalid)?,
            bytes,
            pages,
            pinned: 0,
            chunk: schedule::FIRST,
            pinning: false,
            users: 0,
            used: 0,
        })
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Pages pinned, from the first.
    pub fn pinned(&self) -> u32 {
        self.pinned
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The lowest and past-the-highest address of its segments (what its
    /// notifier watches).
    pub fn hull(&self) -> (u64, u64) {
        let lo = self.segments.iter().map(|s| s.addr).min().unwrap_or(0);
        let hi = self
            .segments
            .iter()
            .map(|s| s.addr + s.len)
            .max()
            .unwrap_or(0);
        (lo, hi)
    }

    /// Whether a segment overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.segments
            .iter()
            .any(|s| s.addr < end && start < s.addr + s.len)
    }

    /// Page `page`'s user address and how many pages from it on are
    /// contiguous in its segment; `None` past the last page.
    pub fn page_run(&self, page: u32) -> Option<(u64, u32)> {
        let mut first = 0u64;
        for s in &self.segments {
            let n = s.pages();
            if u64::from(page) < first + n {
                let k = u64::from(page) - first;
                let addr = (s.addr / PAGE + k) * PAGE;
                return Some((addr, (n - k) as u32));
            }
            first += n;
        }
        None
    }

    /// The region's pages holding bytes `[offset, offset + len)` (of the
    /// concatenated segments): the first and past the last; `None` if the
    /// range is empty or passes the region's end.
    pub fn pages_of(&self, offset: u64, len: u64) -> Option<(u32, u32)> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.bytes && len > 0)?;
        let first = self.page_at(offset);
        let last = self.page_at(end - 1);
        Some((first, last + 1))
    }

    /// Where byte `offset` lies: its page, its offset in the page, and the
    /// bytes from it that stay in that page and segment (what one mapped
    /// page copies at once); `None` at or past the end.
    pub fn locate(&self, mut offset: u64) -> Option<Piece> {
        let mut first = 0u64;
        for s in &self.segments {
            if offset < s.len {
                let addr = s.addr + offset;
                let at = addr % PAGE;
                let page = first + addr / PAGE - s.addr / PAGE;
                return Some(Piece {
                    page: page as u32,
                    at: at as u32,
                    len: (PAGE - at).min(s.len - offset) as u32,
                });
            }
            offset -= s.len;
            first += s.pages();
        }
        None
    }

    /// The page holding byte `offset` (< bytes).
    fn page_at(&self, mut offset: u64) -> u32 {
        let mut first = 0u64;
        for s in &self.segments {
            if offset < s.len {
                let page = (s.addr + offset) / PAGE - s.addr / PAGE;
                return (first + page) as u32;
            }
            offset -= s.len;
            first += s.pages();
        }
        self.pages
    }
}

#[cfg(test)]
mod tests;
