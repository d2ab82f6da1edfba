//! The core's [`Nic`](rmx_core::Nic) for a std rank: the driver layer's
//! [`Adapter`] over any [`Transport`], with tables on the heap sized from
//! the job, copies by rmx's fast copy routines, and registrations watched
//! by the invalidation monitor.

use crate::monitor::Monitor;
use crate::transport::Transport;
use rmx_driver::heap::Heap;
use rmx_driver::{Adapter, Host, UserEntry};
use std::sync::Arc;

/// What the std shell adds to the adapter.
#[derive(Default)]
pub struct ShellHost {
    /// Watches registered memory for changes; without it nothing is
    /// registered for keeps (the registration cache stays empty).
    pub(crate) monitor: Option<Arc<Monitor>>,
}

impl Host for ShellHost {
    #[inline]
    unsafe fn copy(&mut self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { crate::copy::copy_bytes(dst, src, len) }
    }

    fn watch(&mut self, addr: u64, len: u64) -> bool {
        self.monitor
            .as_ref()
            .is_some_and(|m| m.watch(addr, len).is_ok())
    }
}

/// The core's NIC over transport `T`.
pub type ShellNic<T> = Adapter<T, ShellHost, Heap>;

/// A NIC with `nslots` bounce slots for eager messages of `eager` bytes,
/// room to name `users` user buffers at once (one per pending request)
/// and to hold `regs` registrations.
pub(super) fn shell_nic<T: Transport>(
    port: T,
    eager: usize,
    nslots: usize,
    users: usize,
    regs: usize,
) -> ShellNic<T> {
    let slots = vec![0u8; ShellNic::<T>::slot_size(eager) * nslots];
    // SAFETY: a vector's heap buffer never moves, and the adapter owns it.
    unsafe {
        Adapter::new(
            port,
            ShellHost::default(),
            eager,
            slots,
            vec![UserEntry::default(); users],
            vec![None; regs],
        )
    }
    .expect("a fresh protection domain registers the bounce slots")
}
