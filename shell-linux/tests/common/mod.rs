//! Helpers shared by the end-to-end tests.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Fails the whole test run if the calling test is still running after `secs`:
/// a lost message shows up as a hang, which must not stall the suite.
#[must_use]
pub struct Watchdog(Arc<AtomicBool>);

pub fn watchdog(test: &'static str, secs: u64) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&done);
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(secs));
        if !seen.load(Ordering::Acquire) {
            // Straight to the stream: the test harness captures eprintln!.
            let _ = writeln!(
                std::io::stderr(),
                "{test}: no completion within {secs} s: a message was lost or a rank deadlocked"
            );
            std::process::exit(1);
        }
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}
