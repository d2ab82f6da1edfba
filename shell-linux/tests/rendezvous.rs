//! Large messages over the `loop` transport by each rendezvous, between real
//! threads, with and without a progress thread.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::watchdog;
use rmx_core::{Config, Protocol, RecvFault, Source, TagSel};

use rmx_linux::job;
use rmx_linux::job::Net;
use rmx_linux::loopnic::LoopConfig;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 131 + seed * 7 + i / 251) as u8)
        .collect()
}

fn config(p: Protocol) -> Config {
    Config {
        rendezvous: Some(p),
        ..rmx_linux::rank::loop_config()
    }
}

const WIN: usize = 64;
const PROTOCOLS: [Protocol; 3] = [Protocol::Rput, Protocol::Rget, Protocol::Pull];

/// Random sizes around and above the threshold, into buffers at odd offsets.
#[test]
fn every_protocol_delivers_large_messages_byte_for_byte_from_unaligned_buffers() {
    let _guard = watchdog("every_protocol_delivers_large_messages", 120);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut sizes = vec![8193usize, 8192 * 3, 65536 + 1, 1 << 20, (4 << 20) + 3];
    for _ in 0..12 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        sizes.push(8190 + (seed % 300_000) as usize);
    }
    for p in PROTOCOLS {
        let sizes = sizes.clone();
        let out = job::run(2, config(p), &Net::Loop(LoopConfig::default()), |r| {
            let mut bad = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let off = 1 + i % 7;
                if r.rank() == 0 {
                    let mut buf = vec![0u8; n + off];
                    buf[off..].copy_from_slice(&pattern(i, n));
                    r.send(1, i as u32, &buf[off..]).unwrap();
                } else {
                    let mut buf = vec![0u8; n + off + 5];
                    let st = r
                        .recv(Source::Rank(0), TagSel::Tag(i as u32), &mut buf[off..])
                        .unwrap();
                    if st.len as usize != n || buf[off..off + n] != pattern(i, n)[..] {
                        bad.push(n);
                    }
                    if buf[..off].iter().any(|&b| b != 0) || buf[off + n..].iter().any(|&b| b != 0)
                    {
                        bad.push(n);
                    }
                }
            }
            (bad, r.stats())
        });
        assert!(
            out[1].0.is_empty(),
            "{p:?}: wrong data at sizes {:?}",
            out[1].0
        );
        assert_eq!(out[0].1.rndv_sends, sizes.len() as u64, "{p:?}");
        assert_eq!(out[1].1.rndv_recvs, sizes.len() as u64, "{p:?}");
        let rdma = out[0].1.rdma_ops + out[1].1.rdma_ops;
        match p {
            Protocol::Pull => assert_eq!(rdma, 0),
            // 4 MiB + 3 in operations of at most 1 MiB: five.
            _ => assert!(
                rdma >= sizes.len() as u64 + 4,
                "{p:?}: {rdma} RDMA operations"
            ),
        }
    }
}

/// Sends that arrive before their receives are posted, mixed with eager
/// messages on one tag: matched in order, as eager ones are.
#[test]
fn unexpected_rendezvous_and_eager_messages_keep_their_order() {
    let _guard = watchdog("unexpected_rendezvous_keep_order", 60);
    for p in PROTOCOLS {
        let out = job::run(2, config(p), &Net::Loop(LoopConfig::default()), |r| {
            let sizes = [100usize, 50_000, 8192, 8193, 3, 200_000];
            if r.rank() == 0 {
                let bufs: Vec<Vec<u8>> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| pattern(i, n))
                    .collect();
                let reqs: Vec<_> = bufs
                    .iter()
                    // SAFETY: the buffers outlive the waits below.
                    .map(|b| unsafe { r.isend_raw(1, 9, b.as_ptr(), b.len()).unwrap() })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
                true
            } else {
                // Let every RTS and eager message arrive unexpected.
                std::thread::sleep(Duration::from_millis(50));
                for _ in 0..100 {
                    r.progress();
                }
                let mut ok = true;
                for (i, &n) in sizes.iter().enumerate() {
                    let mut buf = vec![0u8; 300_000];
                    let st = r.recv(Source::Rank(0), TagSel::Tag(9), &mut buf).unwrap();
                    ok &= st.len as usize == n && buf[..n] == pattern(i, n)[..];
                }
                ok
            }
        });
        assert!(out[1], "{p:?}");
    }
}

/// A receive smaller than the message: the receive reports the truncation
/// and holds the message's first bytes; the sender completes normally.
#[test]
fn a_short_receive_truncates_and_the_sender_still_completes() {
    let _guard = watchdog("short_receive_truncates", 60);
    for p in PROTOCOLS {
        let out = job::run(2, config(p), &Net::Loop(LoopConfig::default()), |r| {
            let n = 100_000usize;
            if r.rank() == 0 {
                let st = {
                    let b = pattern(1, n);
                    // SAFETY: waited for before `b` drops.
                    let q = unsafe { r.isend_raw(1, 1, b.as_ptr(), n).unwrap() };
                    r.wait(q)
                };
                (st.fault, true)
            } else {
                let mut buf = vec![0u8; 30_001];
                let st = r.recv(Source::Rank(0), TagSel::Tag(1), &mut buf).unwrap();
                (st.fault, buf[..] == pattern(1, n)[..30_001])
            }
        });
        assert_eq!(
            out[0].0, None,
            "{p:?}: the sender completes without a fault"
        );
        assert_eq!(
            out[1].0,
            Some(RecvFault::Truncated {
                len: 100_000,
                capacity: 30_001
            }),
            "{p:?}"
        );
        assert!(out[1].1, "{p:?}: the first bytes arrived");
    }
}

/// The paper's finding, as behaviour: with RPUT the data waits for the
/// sender to see the CTS. A sender that makes no call for a while leaves
/// the receive incomplete (no data moved); with a progress thread the
/// receive completes while the sender's thread still makes no call.
#[test]
fn rput_moves_data_during_a_computation_only_with_a_progress_thread() {
    let _guard = watchdog("rput_progress_thread", 60);
    for thread in [false, true] {
        let computing = AtomicBool::new(false);
        let out = job::run(
            2,
            config(Protocol::Rput),
            &Net::Loop(LoopConfig::default()),
            |r| {
                let n = 1 << 20;
                if r.rank() == 0 {
                    r.set_progress_thread(thread);
                    let b = pattern(3, n);
                    // SAFETY: waited for before `b` drops.
                    let q = unsafe { r.isend_raw(1, 1, b.as_ptr(), n).unwrap() };
                    computing.store(true, Ordering::Release);
                    // The computation: no call into rmx for 300 ms.
                    std::thread::sleep(Duration::from_millis(300));
                    computing.store(false, Ordering::Release);
                    r.wait(q);
                    r.set_progress_thread(false);
                    true
                } else {
                    while !computing.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    let mut buf = vec![0u8; n];
                    let st = r.recv(Source::Rank(0), TagSel::Tag(1), &mut buf).unwrap();
                    // Done while the sender still computes?
                    let during = computing.load(Ordering::Acquire);
                    st.len as usize == n && buf == pattern(3, n) && during
                }
            },
        );
        assert_eq!(
            out[1], thread,
            "progress thread {thread}: the receive completed during the sender's computation"
        );
    }
}

/// A window of 64 large messages in flight at once (osu_bw's pattern).
#[test]
fn a_window_of_large_messages_completes_by_each_protocol() {
    let _guard = watchdog("window_of_large_messages", 60);
    for p in PROTOCOLS {
        let out = job::run(2, config(p), &Net::Loop(LoopConfig::default()), |r| {
            let n = 1 << 20;
            let mut ok = true;
            for round in 0..2 {
                if r.rank() == 0 {
                    let b = pattern(round, n);
                    // SAFETY: every request is waited for before `b` drops.
                    let qs: Vec<_> = (0..WIN)
                        .map(|_| unsafe { r.isend_raw(1, 5, b.as_ptr(), n).unwrap() })
                        .collect();
                    for q in qs {
                        r.wait(q);
                    }
                } else {
                    let mut bufs = vec![vec![0u8; n]; WIN];
                    // SAFETY: every request is waited for before `bufs` drops.
                    let qs: Vec<_> = bufs
                        .iter_mut()
                        .map(|b| unsafe {
                            r.irecv_raw(Source::Rank(0), TagSel::Tag(5), b.as_mut_ptr(), n)
                                .unwrap()
                        })
                        .collect();
                    for q in qs {
                        r.wait(q);
                    }
                    let want = pattern(round, n);
                    ok &= bufs.iter().all(|b| *b == want);
                }
            }
            ok
        });
        assert!(out[1], "{p:?}");
    }
}
