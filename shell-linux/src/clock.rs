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

/// Whether the ranks of one process are pinned, one thread to a CPU:
/// only when `RMX_PIN=1` asks. Pinned, two ranks never share a core and
/// figures on an idle host are steadier; but a pinned thread cannot move
/// off a CPU that other work holds, and the kernel's group scheduling
/// (autogroup: one group per session) gives a group with little load on
/// that CPU a sliver of it: on a busy two-core host a pinned rank waited
/// over 5 s for its CPU, and its peer gave it up as dead.
pub fn pinning() -> bool {
    std::env::var_os("RMX_PIN").is_some_and(|v| v == "1")
}

/// Pins the calling thread to `cpu` (modulo the CPUs available).
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
