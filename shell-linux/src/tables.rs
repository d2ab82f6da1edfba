//! The core endpoint's tables, on this shell's heap and sized from the job.

use rmx_core::storage::{Alloc, Storage};

/// Tables in `Vec`s: the endpoint itself stays small, so nothing large is
/// ever on a thread's stack.
pub struct Heap;

impl Storage for Heap {
    type Table<E: Copy + 'static> = Vec<E>;
}

impl Alloc for Heap {
    fn table<E: Copy + 'static>(len: usize, fill: E) -> Vec<E> {
        vec![fill; len]
    }
}
