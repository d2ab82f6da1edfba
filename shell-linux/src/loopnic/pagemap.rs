//! Which physical pages back a virtual range, from `/proc/self/pagemap`.
//!
//! A real NIC reads the pages pinned at registration, whatever is mapped at
//! the address later; the software NIC reads through the address. With page
//! checking on, it records the page frames at registration and fails a work
//! request whose memory is no longer those frames — the case where a real NIC
//! would silently send stale data. Needs CAP_SYS_ADMIN (frames read as 0
//! otherwise, and checking is unavailable).

use std::fs::File;
use std::os::unix::fs::FileExt;

const PAGE: usize = 4096;
const PFN_MASK: u64 = (1 << 55) - 1;
const PRESENT: u64 = 1 << 63;

/// The frame number of each page of `[addr, addr+len)`, or `None` if the
/// kernel hides frame numbers from this process or a page is not present.
pub fn frames(addr: usize, len: usize) -> Option<Vec<u64>> {
    let f = File::open("/proc/self/pagemap").ok()?;
    let first = addr / PAGE;
    let last = (addr + len.max(1) - 1) / PAGE;
    let mut raw = vec![0u8; (last - first + 1) * 8];
    f.read_exact_at(&mut raw, (first * 8) as u64).ok()?;
    raw.chunks_exact(8)
        .map(|c| {
            let e = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            let pfn = e & PFN_MASK;
            (e & PRESENT != 0 && pfn != 0).then_some(pfn)
        })
        .collect()
}

/// Whether this process can see frame numbers (root, or CAP_SYS_ADMIN).
pub fn available() -> bool {
    let probe = vec![1u8; PAGE];
    frames(probe.as_ptr() as usize, 1).is_some()
}
