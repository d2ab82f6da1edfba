//! The progress thread: sleeps on the port's events and drives the
//! endpoint when one comes, so that a rendezvous moves while the
//! application computes.

use crate::transport::{Events, Transport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::*;

/// A thread that sleeps on the NIC's events (rendezvous control packets and
/// RDMA completions, which the core posts as solicited) and drives the
/// endpoint when one comes, so that a rendezvous moves while the
/// application computes: the paper's independent progress.
pub(super) struct ProgressThread {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) events: Events,
    pub(super) handle: Option<JoinHandle<()>>,
}

/// Empty polls between two readings of the clock (and the core's timers).
pub(super) const CLOCK_POLLS: u32 = 64;
/// The longest a progress thread sleeps without an event: it then runs
/// the core's timers and takes eager packets that raise no event.
pub(super) const PROGRESS_IDLE: Duration = Duration::from_millis(1);
/// The longest [`Rank::wait`] sleeps without an event: bounds the cost of
/// an event missed while arming, and lets it run the core's timers.
pub(super) const WAIT_NAP: Duration = Duration::from_micros(200);
/// The shortest sleep when the core wants a retry at once (a transfer
/// waiting for a bounce slot): yields the core rather than spinning.
pub(super) const PROGRESS_RETRY: Duration = Duration::from_micros(20);

impl ProgressThread {
    pub(super) fn start<T: Transport + 'static>(
        d: Arc<Mutex<Driver<T>>>,
        events: Events,
        rank: u16,
    ) -> ProgressThread {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, ev) = (Arc::clone(&stop), events.clone());
        let handle = std::thread::Builder::new()
            .name(format!("rmx-progress-{rank}"))
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    // Read before draining: an event during the round makes
                    // the wait below return at once.
                    let seen = ev.count();
                    let next = {
                        let mut g = lock(&d);
                        while g.progress() > 0 {}
                        g.timers()
                    };
                    let sleep = match next {
                        Some(0) => PROGRESS_RETRY,
                        Some(ns) => Duration::from_nanos(ns).min(PROGRESS_IDLE),
                        None => PROGRESS_IDLE,
                    };
                    ev.wait(seen, sleep);
                }
            })
            .expect("spawn the progress thread");
        ProgressThread {
            stop,
            events,
            handle: Some(handle),
        }
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.events.kick();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
