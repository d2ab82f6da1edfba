//! Endpoint tables on the heap, for every std shell (the simulator and
//! the std shell alike), and table sizes for tests.

use rmx_core::matching::{Envelope, Matcher, Pattern, Slot};
use rmx_core::storage::{Alloc, Sizes, Storage};

/// Tables in `Vec`s, each allocated once at its job's size: the endpoint
/// itself stays small, so nothing large is ever on a thread's stack.
pub struct Heap;

impl Storage for Heap {
    type Table<E: Copy + 'static> = Vec<E>;
}

impl Alloc for Heap {
    fn table<E: Copy + 'static>(len: usize, fill: E) -> Vec<E> {
        vec![fill; len]
    }
}

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
