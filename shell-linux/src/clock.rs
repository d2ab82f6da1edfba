//! The shell's clock: monotonic nanoseconds since the process first asked.

use std::sync::OnceLock;
use std::time::Instant;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Nanoseconds since an arbitrary process-wide origin.
#[inline]
pub fn now_ns() -> u64 {
    origin().elapsed().as_nanos() as u64
}

/// Pins the calling thread to `cpu` (modulo the CPUs available); benchmarks pin
/// each rank so the figures measure the protocol, not the scheduler.
pub fn pin_to_cpu(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
