//! What one progress round does: completions and arrivals handed to the
//! core, its timers run, and how long the rank has been idle.

use crate::clock::now_ns;
use crate::monitor::{Monitor, Queue};
use crate::transport::{Completion, Transport};
use crate::window::Epochs;
use rmx_core::onesided::imm_window;
use rmx_core::{RxBuf, WorkId};
use std::sync::Arc;

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
    pub(super) wcs: [Completion; WCS],
    /// The transport may lose packets: arrivals are stamped with a fresh
    /// clock (on a reliable one no timer depends on them).
    pub(super) lossy: bool,
}

/// Completions taken from the port per poll.
pub(super) const WCS: usize = 32;

impl<T: Transport> Driver<T> {
    /// Hands the NIC's send and RDMA completions to the core.
    #[inline]
    pub(super) fn completions(&mut self) -> usize {
        let mut total = 0;
        loop {
            let n = self.nic.port.poll_cq(&mut self.wcs);
            for i in 0..n {
                let c = self.wcs[i];
                match WorkId::from_wr_id(c.wr_id) {
                    Some(WorkId::Window {
                        window,
                        target,
                        imm,
                    }) => {
                        let mine = self.windows.get_mut(window);
                        if !mine.is_some_and(|e| e.on_completion(target, imm, c.result)) {
                            // A window freed with its operations drained: stray.
                            self.ep.on_completion(&mut self.nic, c.wr_id, c.result);
                        }
                    }
                    _ => self.ep.on_completion(&mut self.nic, c.wr_id, c.result),
                }
            }
            total += n;
            if n < WCS {
                return total;
            }
        }
    }

    /// Polls the NIC once: receives, completions, and (every few idle
    /// rounds) the clock and the core's timers. Returns packets and
    /// completions handled.
    #[inline]
    pub(super) fn progress(&mut self) -> usize {
        let mut n = 0;
        while let Some(rx) = self.nic.port.poll_recv() {
            n += 1;
            if let Some(imm) = rx.imm {
                // A window's put landed; its buffer goes straight back to
                // the shared receive queue (the paper's replenishment on
                // each RDMA write completion).
                if let Some(e) = self.windows.get_mut(imm_window(imm)) {
                    e.on_immediate(imm);
                }
                self.nic.port.repost(rx.buf);
                continue;
            }
            if n == 1 && self.lossy {
                // The core times retransmissions from when packets came:
                // a clock read per batch, not the idle poll's stale one.
                self.now = now_ns();
            }
            self.ep.on_receive(self.now, &mut self.nic, RxBuf(rx.buf));
        }
        n += self.completions();
        // What the core posted while handling them leaves now, in one batch.
        self.nic.port.doorbell();
        self.idle = if n > 0 { 0 } else { self.idle + 1 };
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
        n
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
            self.nic.port.doorbell();
        }
        self.ep.poll_timeout().map(|t| t.saturating_sub(self.now))
    }
}

impl<T: Transport> Drop for Driver<T> {
    fn drop(&mut self) {
        if let Some((m, q)) = &self.watch {
            m.unsubscribe(q);
        }
    }
}
