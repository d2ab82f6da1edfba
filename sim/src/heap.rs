//! Table sizes and heap-backed matchers for tests; the tables
//! themselves are the driver's [`Heap`].

use rmx_core::matching::{Envelope, Matcher, Pattern, Slot};
use rmx_core::storage::Sizes;

pub use rmx_driver::heap::Heap;

/// Table sizes for `peers` ranks, with as many held buffers as unexpected
/// messages.
pub const fn sizes(
    peers: usize,
    posted: usize,
    unexpected: usize,
    slots: usize,
    requests: usize,
) -> Sizes {
    Sizes {
        peers,
        posted,
        unexpected,
        holds: unexpected,
        slots,
        requests,
    }
}

/// A matcher whose queues are `Vec`s.
pub type HeapMatcher<P, U> = Matcher<P, U, Vec<Slot<Pattern, P>>, Vec<Slot<Envelope, U>>>;

/// A matcher of `posted` receives and `unexpected` messages.
pub fn matcher<P: Copy, U: Copy>(posted: usize, unexpected: usize) -> HeapMatcher<P, U> {
    Matcher::new(vec![Slot::FREE; posted], vec![Slot::FREE; unexpected])
}
