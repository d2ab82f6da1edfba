//! What the logic asks of the kernel: the module's C glue implements it
//! over `pin_user_pages_fast`, `unpin_user_pages` and one
//! `mmu_interval_notifier` per region; tests implement it over a mock
//! address space.

/// The kernel's services for one context. Regions are named by their
/// slot in the context's table; the glue keeps each slot's page array.
pub trait Kernel {
    /// Pins up to `count` pages of the calling process from user address
    /// `addr` (page-aligned) for writing, long-term, as pages `first..` of
    /// slot `slot`'s array; how many it pinned (at least one), or a
    /// negative errno with none pinned.
    fn pin(&mut self, slot: u16, first: u32, addr: u64, count: u32) -> Result<u32, i32>;

    /// Unpins pages `first..first + count` of slot `slot`'s array.
    fn unpin(&mut self, slot: u16, first: u32, count: u32);

    /// Starts the notifier of slot `slot` over `[start, start + len)`.
    fn watch(&mut self, slot: u16, start: u64, len: u64) -> Result<(), i32>;

    /// Ends slot `slot`'s notifier.
    fn unwatch(&mut self, slot: u16);

    /// `mmu_interval_read_begin` of slot `slot`'s notifier: taken before
    /// pinning.
    fn read_begin(&mut self, slot: u16) -> u64;

    /// `mmu_interval_read_retry`: an invalidation ran since `seq`, so the
    /// pages just pinned may be stale (asked under the lock the notifier
    /// takes).
    fn read_retry(&mut self, slot: u16, seq: u64) -> bool;
}
