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

/// Longest a measuring loop's one sample runs: 4 ms, several times what
/// the largest sample of `rmx calibrate` takes in a release build, so
/// there it never binds; in a debug build or under an emulator, where one
/// copy may take a thousand times longer, it keeps a calibration to
/// seconds instead of minutes (fewer repetitions of a slow call measure
/// it as well as many of a fast one).
pub const SAMPLE_NS: u64 = 4_000_000;

/// Repetitions for one sample: `reps`, or fewer when `probe` (one call,
/// timed) says they would run past [`SAMPLE_NS`]; at least one.
pub fn reps_within(reps: u64, mut probe: impl FnMut()) -> u64 {
    let t0 = now_ns();
    probe();
    let one = (now_ns() - t0).max(1);
    reps.min(SAMPLE_NS / one).max(1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_call_is_repeated_only_as_often_as_a_sample_allows() {
        let slow = || std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(reps_within(1_000_000, slow) <= 2);
        let slower = || std::thread::sleep(std::time::Duration::from_millis(10));
        assert_eq!(reps_within(1_000_000, slower), 1);
        assert_eq!(reps_within(0, || ()), 1);
    }
}
