//! Tables on the heap, for shells that allocate (the std shell, the
//! simulator, tests): the core's endpoint tables and the adapter's, each
//! a `Vec` allocated once at its job's size, so that nothing large sits
//! in a thread's stack and nothing grows while the network runs. Behind
//! the `alloc` feature; a kernel shell supplies tables of its own.

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;

use rmx_core::storage::{Alloc, Storage};

use crate::{AdapterTables, Mr, UserEntry};

/// Every table in a `Vec`.
pub struct Heap;

impl Storage for Heap {
    type Table<E: Copy + 'static> = Vec<E>;
}

impl Alloc for Heap {
    fn table<E: Copy + 'static>(len: usize, fill: E) -> Vec<E> {
        vec![fill; len]
    }
}

impl AdapterTables for Heap {
    type Bytes = Vec<u8>;
    type Users = Vec<UserEntry>;
    type Regs = Vec<Option<Mr>>;
}
