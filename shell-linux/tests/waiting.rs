//! How a rank waits: it sleeps when nothing comes (the cores are shared
//! with the peer and the `loop` NIC's thread), and a thread driving ranks of
//! several jobs flushes one before it turns to the next.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::watchdog;
use rmx_core::{Config, Source, TagSel};

use rmx_linux::job;
use rmx_linux::job::Net;
use rmx_linux::loopnic::LoopConfig;

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn a_rank_waiting_for_a_late_message_sleeps_instead_of_spinning() {
    let _guard = watchdog("a_rank_waiting_sleeps", 60);
    let delay = Duration::from_millis(400);
    let cfg = rmx_linux::rank::loop_config();
    let out = job::run(2, cfg, &Net::Loop(LoopConfig::default()), |r| {
        let mut buf = [0u8; 8];
        if r.rank() == 0 {
            let (t0, c0) = (Instant::now(), thread_cpu());
            let st = r.recv(Source::Rank(1), TagSel::Tag(5), &mut buf).unwrap();
            let (wall, cpu) = (t0.elapsed(), thread_cpu() - c0);
            assert_eq!((st.len, &buf), (8, b"the late"));
            Some((wall, cpu))
        } else {
            std::thread::sleep(delay);
            r.send(0, 5, b"the late").unwrap();
            None
        }
    });
    let (wall, cpu) = out[0].unwrap();
    // The ranks start together, give or take the thread start-up.
    assert!(wall >= delay / 2, "received before it was sent: {wall:?}");
    // A spinning waiter burns the whole wait; a sleeping one wakes at most
    // every 200 us to run its timers.
    assert!(
        cpu < wall / 4,
        "the waiting thread used {cpu:?} of CPU in {wall:?}"
    );
}

/// The pattern of a benchmark comparing setups: each thread drives one rank
/// of every job, in turn. Rank 1's last send of job A completes for it once
/// copied but waits in its queue for the one send entry, held by a packet
/// rank 0 has not taken yet; unless rank 1 flushes before it turns to job B,
/// rank 0 waits in A for that send while rank 1 waits in B for rank 0.
#[test]
fn a_thread_flushes_a_rank_before_turning_to_another_job() {
    let _guard = watchdog("a_thread_flushes_a_rank", 60);
    let one_entry = Config {
        send_wqes: 1,
        ..rmx_linux::rank::loop_config()
    };
    let cfgs = [one_entry, one_entry];
    let queued = AtomicBool::new(false);
    let out = job::run_configs(&cfgs, &Net::Loop(LoopConfig::default()), |ranks| {
        let (a, b) = ranks.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut b[0]);
        let mut buf = [0u8; 4];
        if a.rank() == 1 {
            // SAFETY: both are waited for before the literals could move.
            let first = unsafe { a.isend_raw(0, 1, b"one!".as_ptr(), 4).unwrap() };
            // SAFETY: the buffer outlives the request, which is waited for before it is touched.
            let last = unsafe { a.isend_raw(0, 2, b"two!".as_ptr(), 4).unwrap() };
            let copied = a.test(last).is_ok();
            let was_flushed = a.flushed();
            queued.store(true, Ordering::Release);
            a.wait(first);
            a.flush();
            let now_flushed = a.flushed();
            b.recv(Source::Rank(0), TagSel::Tag(3), &mut buf).unwrap();
            assert_eq!(&buf, b"go-b");
            vec![copied, !was_flushed, now_flushed]
        } else {
            while !queued.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            a.recv(Source::Rank(1), TagSel::Tag(1), &mut buf).unwrap();
            assert_eq!(&buf, b"one!");
            a.recv(Source::Rank(1), TagSel::Tag(2), &mut buf).unwrap();
            assert_eq!(&buf, b"two!");
            b.send(1, 3, b"go-b").unwrap();
            vec![]
        }
    });
    assert_eq!(
        out[1],
        [true, true, true],
        "[last send complete once copied, queued then, flushed after flush()]"
    );
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is valid; the call writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size is the set's.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0);
    // SAFETY: reads the set written above.
    unsafe { libc::CPU_COUNT(&set) as usize }
}

/// The ranks of one process run where the kernel puts them: a thread
/// pinned to one CPU waited over 5 s for it on a busy host (its group's
/// share of that CPU was a sliver) and its peer gave it up. `RMX_PIN=1`
/// pins them (before, they always were).
#[test]
fn ranks_of_one_process_are_pinned_only_when_asked() {
    let _guard = watchdog("ranks_pinned_only_when_asked", 60);
    let here = allowed_cpus();
    let pinned = rmx_linux::clock::pinning();
    let cfg = rmx_linux::rank::loop_config();
    let out = job::run(2, cfg, &Net::Loop(LoopConfig::default()), |_| {
        allowed_cpus()
    });
    let want = if pinned { 1 } else { here };
    assert_eq!(out, vec![want, want], "RMX_PIN=1 set: {pinned}");
}
