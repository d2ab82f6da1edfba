//! What one progress round does: completions and arrivals handed to the
//! core, its timers run, and how long the rank has been idle.

use crate::clock::now_ns;
use crate::monitor::{Monitor, Queue};
use crate::transport::{Completion, Mr, Transport};
use rmx_core::RegError;
use std::any::Any;
use std::sync::Arc;

use super::epochs::Epochs;
use super::running::Running;
use super::spin::Spin;
use super::*;

/// The endpoint and everything it names; whoever drives the rank holds it.
pub(crate) struct Driver<T: Transport> {
    pub(super) ep: Box<CoreEndpoint>,
    pub(crate) nic: ShellNic<T>,
    /// The epochs of this rank's windows, by window number: their RDMA
    /// completions and immediates are handed to them here.
    pub(crate) windows: Epochs,
    /// Zero-copy on: the monitor and this rank's queue of invalidations.
    pub(super) watch: Option<(Arc<Monitor>, Arc<Queue>)>,
    pub(super) now: u64,
    /// Polls in a row that found nothing, and when the first of them read
    /// the clock.
    pub(super) idle: u32,
    pub(super) idle_from: u64,
    /// How long a waiter spins before it sleeps, from the waits that ended.
    pub(super) spin: Spin,
    pub(super) wcs: [Completion; WCS],
    /// The transport may lose packets: arrivals are stamped with a fresh
    /// clock (on a reliable one no timer depends on them).
    pub(super) lossy: bool,
    /// Memory of windows and their operations, registered for remote
    /// access: kept alive here until deregistered, whatever became of the
    /// window, so no NIC operation reaches freed memory.
    pub(super) pinned: Vec<(Mr, Arc<dyn Any + Send + Sync>)>,
    /// Collectives started without waiting, moved on by every round that
    /// found work or ran the timers; and the next one's number.
    pub(super) running: Vec<Running<T>>,
    pub(super) started: u64,
}

/// Completions taken from the port per poll.
pub(super) const WCS: usize = 32;

impl<T: Transport> Driver<T> {
    /// Hands the NIC's send and RDMA completions to the core and windows.
    #[inline]
    pub(super) fn completions(&mut self) -> usize {
        rmx_driver::complete(
            &mut self.ep,
            &mut self.nic,
            &mut self.windows,
            &mut self.wcs,
        )
    }

    /// Polls the NIC once: receives, completions, and (every few idle
    /// rounds) the clock and the core's timers. Returns packets and
    /// completions handled.
    #[inline]
    pub(crate) fn progress(&mut self) -> usize {
        let round = rmx_driver::progress(
            &mut self.ep,
            &mut self.nic,
            &mut self.windows,
            &mut self.wcs,
            &mut self.now,
            self.lossy,
            now_ns,
        );
        let n = round.packets + round.completions;
        if n == 0 {
            self.idle += 1;
        } else {
            if self.idle >= CLOCK_POLLS - 1 {
                // A wait long enough to have read the clock ended in work.
                self.spin.ended(now_ns().saturating_sub(self.idle_from));
            }
            self.idle = 0;
        }
        // Timers are coarse (tens of microseconds): read the clock only every
        // CLOCK_POLLS empty polls, never in the spin right after a packet,
        // where a reply is most likely to land.
        if self.idle % CLOCK_POLLS == CLOCK_POLLS - 1 {
            self.timers();
            if self.idle == CLOCK_POLLS - 1 {
                self.idle_from = self.now;
            }
            // Oversubscribed (more ranks than cores): after ~1024 empty polls,
            // give the core to a rank that may have work for us.
            if self.idle & 1023 == 1023 {
                std::thread::yield_now();
            }
        }
        // Running work can move only once a request of it ended
        // (work found) or a peer was given up (the timers ran).
        if !self.running.is_empty() && (n > 0 || self.idle % CLOCK_POLLS == CLOCK_POLLS - 1) {
            self.poll_running();
        }
        n
    }

    /// Registers `len` bytes at `addr` for local and remote access and
    /// keeps `owner` (what holds those bytes) alive until
    /// [`unpin`](Self::unpin) or the end of the rank.
    ///
    /// # Safety
    /// The bytes stay valid for as long as `owner` lives.
    pub(crate) unsafe fn pin(
        &mut self,
        addr: usize,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Result<Mr, RegError> {
        // SAFETY: the owner is kept alive in `pinned` until deregistered,
        // and `Drop` drains the port first.
        let mr = unsafe { self.nic.port().register_user(addr, len) }?;
        self.pinned.push((mr, owner));
        Ok(mr)
    }

    /// Ends the registration with `key`; the memory goes once its last
    /// holder lets go. The caller knows that no operation names it.
    pub(crate) fn unpin(&mut self, key: u32) {
        if let Some(i) = self.pinned.iter().position(|(mr, _)| mr.key == key) {
            let (mr, _) = self.pinned.swap_remove(i);
            self.nic.port().deregister(mr);
        }
    }

    /// How long polls have found nothing (0 until the clock is first read).
    pub(super) fn idle_ns(&self) -> u64 {
        if self.idle < CLOCK_POLLS - 1 {
            0
        } else {
            self.now.saturating_sub(self.idle_from)
        }
    }

    /// Reads the clock and runs the core's timers if one is due; returns
    /// how long until the next one.
    pub(super) fn timers(&mut self) -> Option<u64> {
        self.now = now_ns();
        if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
            self.ep.poll(self.now, &mut self.nic);
            self.nic.port().doorbell();
        }
        self.ep.poll_timeout().map(|t| t.saturating_sub(self.now))
    }
}

impl<T: Transport> Drop for Driver<T> {
    /// Window memory is deregistered once the port is quiet, before it
    /// can go; the adapter then ends the rest.
    fn drop(&mut self) {
        self.nic.port().drain();
        for (mr, _) in self.pinned.drain(..) {
            self.nic.port().deregister(mr);
        }
        if let Some((m, q)) = &self.watch {
            m.unsubscribe(q);
        }
    }
}
