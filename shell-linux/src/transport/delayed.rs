//! The driver layer's [`Delayed`](rmx_driver::delayed::Delayed) test
//! device on the std shell: RDMA writes land late, timed by the shell's
//! clock, their bytes held in an arena of the heap.

use rmx_driver::delayed;

use super::{Counters, Events, Transport};
use crate::clock::now_ns;

/// Bytes of writes held at once.
const ARENA: usize = 1 << 20;

/// `T` with its RDMA writes landing late.
pub type Delayed<T> = delayed::Delayed<T, fn() -> u64, Box<[u8]>>;

/// Delays every write of `inner` by up to `max_delay_ns` (drawn from `seed`).
pub fn delayed<T: Transport>(inner: T, max_delay_ns: u64, seed: u64) -> Delayed<T> {
    let arena = vec![0u8; ARENA].into_boxed_slice();
    // SAFETY: a boxed arena stays where it is however the device moves.
    unsafe { delayed::Delayed::new(inner, arena, max_delay_ns, seed, now_ns as fn() -> u64) }
        .expect("a transport registers a megabyte of the heap")
}

impl<T: Transport> Transport for Delayed<T> {
    fn rank(&self) -> u16 {
        self.inner().rank()
    }

    fn events(&self) -> Events {
        self.inner().events()
    }

    fn busy(&self) -> bool {
        self.inner().busy() || self.holding() > 0
    }

    fn counters(&self) -> Counters {
        self.inner().counters()
    }
}
