//! Zero-copy eager sends end to end on `loop`: data integrity, and
//! invalidation when registered memory is unmapped or released.

mod common;

use common::watchdog;
use rmx_core::{Source, TagSel};
use rmx_linux::job;
use rmx_linux::job::Net;
use rmx_linux::loopnic::{pagemap, LoopConfig};
use rmx_linux::monitor::Monitor;
use rmx_linux::rank::loop_config;
use rmx_linux::reuse::{Calibration, Row};

/// Figures that register a buffer on its first eager send from 16 B up.
fn eager_cal() -> Calibration {
    Calibration {
        lookup_ns: 1,
        speculate_permille: 250,
        rows: vec![Row {
            size: 16,
            copy_ns: 100,
            reg_ns: 100,
        }],
        copy: Vec::new(),
    }
}

/// Why this machine cannot run these tests, if it cannot.
fn unavailable(need_frames: bool) -> Option<String> {
    if let Err(e) = Monitor::global() {
        return Some(e);
    }
    if need_frames && !pagemap::available() {
        return Some("page frames are hidden from this process (needs CAP_SYS_ADMIN)".into());
    }
    None
}

/// A fresh private anonymous page range (caller unmaps), or one replacing `at`.
fn map(len: usize, at: Option<usize>) -> *mut u8 {
    // SAFETY: MAP_FIXED is only used over the test's own range.
    unsafe { rmx_linux::anon::map(len, at, false) as *mut u8 }
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 * 131 + seed * 17) as u8)
        .collect()
}

#[test]
fn random_sizes_and_offsets_arrive_byte_identical() {
    if let Some(why) = unavailable(false) {
        eprintln!("skipped: {why}");
        return;
    }
    let _guard = watchdog("random_sizes_and_offsets_arrive_byte_identical", 60);
    let cal = eager_cal();
    let out = job::run_with(
        2,
        loop_config(),
        &Net::Loop(LoopConfig::default()),
        Some(&cal),
        |r| {
            // One arena reused for every send: offsets are unaligned and cross pages.
            let arena = pattern(9, 3 * 8192);
            let mut x = 12345u64;
            let mut zc = 0;
            for i in 0..600u32 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = 1 + (x >> 33) as usize % 8192;
                let off = (x >> 13) as usize % (2 * 8192);
                let want = &arena[off..off + len];
                if r.rank() == 0 {
                    r.send(1, i, want).unwrap();
                } else {
                    let mut got = vec![0u8; 8192];
                    let st = r.recv(Source::Rank(0), TagSel::Tag(i), &mut got).unwrap();
                    assert_eq!(st.len as usize, len);
                    assert!(
                        got[..len] == *want,
                        "message {i}: {len} B at offset {off} differs"
                    );
                }
                zc = r.stats().zero_copy_sends;
            }
            zc
        },
    );
    assert!(out[0] > 100, "only {} of 600 sends went zero-copy", out[0]);
}

/// Sends `buf` 20 times then checks the receiver got `want` each time.
fn exchange(r: &mut rmx_linux::rank::Rank, buf: *mut u8, want: &[u8], tag: u32) {
    for k in 0..20 {
        if r.rank() == 0 {
            // SAFETY: `buf` is a live mapping of at least want.len() bytes.
            let data = unsafe { std::slice::from_raw_parts(buf, want.len()) };
            r.send(1, tag + k, data).unwrap();
        } else {
            let mut got = vec![0u8; want.len()];
            r.recv(Source::Rank(0), TagSel::Tag(tag + k), &mut got)
                .unwrap();
            assert!(got == want, "send {k} of tag {tag}: stale contents");
        }
    }
}

#[test]
fn unmapped_and_released_memory_is_never_sent_from_a_stale_registration() {
    if let Some(why) = unavailable(true) {
        eprintln!("skipped: {why}");
        return;
    }
    let _guard = watchdog(
        "unmapped_and_released_memory_is_never_sent_from_a_stale_registration",
        60,
    );
    let cal = eager_cal();
    // The NIC checks that gathered pages are still the registered ones; a
    // stale registration fails the send, which this test sees as a hang.
    let nic = LoopConfig {
        verify_pages: true,
        ..LoopConfig::default()
    };
    let len = 6000;
    let out = job::run_with(2, loop_config(), &Net::Loop(nic), Some(&cal), |r| {
        let buf = map(2 * 4096, None);
        let me = r.rank();
        let fill = |seed| {
            let p = pattern(seed, len);
            if me == 0 {
                // SAFETY: `buf` maps 8 KiB.
                unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), buf, len) };
            }
            p
        };
        let first = fill(1);
        exchange(r, buf, &first, 0);
        let before = r.reuse(|p| p.map(|p| p.cache().stats().registrations).unwrap_or(0));
        // New memory with new contents at the same address: the old pages
        // are unmapped by the mapping that replaces them, in one call. (An
        // munmap first left a hole that a sibling test could map into, and
        // MAP_FIXED then silently replaced the sibling's memory.)
        if r.rank() == 0 {
            assert_eq!(map(2 * 4096, Some(buf as usize)), buf);
        }
        let second = fill(2);
        exchange(r, buf, &second, 100);
        // madvise(DONTNEED): the pages are released; they read as zeros.
        if r.rank() == 0 {
            // SAFETY: our own mapping.
            unsafe { libc::madvise(buf.cast(), 2 * 4096, libc::MADV_DONTNEED) };
        }
        exchange(r, buf, &vec![0u8; len], 200);
        let after = r.reuse(|p| p.map(|p| p.cache().stats().registrations).unwrap_or(0));
        if r.rank() == 0 {
            // SAFETY: our own mapping.
            unsafe { libc::munmap(buf.cast(), 2 * 4096) };
        }
        (r.stats().zero_copy_sends, before, after)
    });
    let (zc, before, after) = out[0];
    assert_eq!(zc, 60, "every send went zero-copy");
    assert_eq!(
        (before, after),
        (1, 3),
        "registered again after each change"
    );
}

/// Jobs that come and go while their heap buffers — registered, so watched
/// by the monitor — are freed: the allocator unmaps or trims watched pages
/// while other ranks subscribe and send. Nothing may wait for the monitor
/// while the monitor waits for it.
#[test]
fn jobs_freeing_watched_heap_memory_never_deadlock_the_monitor() {
    if let Some(why) = unavailable(false) {
        eprintln!("skipped: {why}");
        return;
    }
    let _guard = watchdog(
        "jobs_freeing_watched_heap_memory_never_deadlock_the_monitor",
        120,
    );
    let cal = eager_cal();
    for round in 0..40u32 {
        job::run_with(
            2,
            loop_config(),
            &Net::Loop(LoopConfig::default()),
            Some(&cal),
            |r| {
                for k in 0..20u32 {
                    // Heap buffers of many sizes, freed at once: some are returned
                    // to the system (munmap, trim) while registered pages are watched.
                    let len = 1 + ((round * 7919 + k * 104_729) % 8192) as usize;
                    let big = vec![k as u8; 64 * 1024 + len * 8];
                    let data = pattern(round + k, len);
                    if r.rank() == 0 {
                        r.send(1, k, &data).unwrap();
                        r.send(1, k + 100, &big[..len]).unwrap();
                    } else {
                        let mut got = vec![0u8; len];
                        r.recv(Source::Rank(0), TagSel::Tag(k), &mut got).unwrap();
                        assert!(got == data);
                        r.recv(Source::Rank(0), TagSel::Tag(k + 100), &mut got)
                            .unwrap();
                        assert!(got == big[..len]);
                    }
                    drop(big);
                }
            },
        );
    }
}
