//! Two-sided messaging end to end over the `loop` transport, between real threads.

mod common;

use common::watchdog;
use rmx_core::{RecvFault, Source, TagSel};

use rmx_linux::job;
use rmx_linux::job::Net;
use rmx_linux::loopnic::LoopConfig;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7) as u8).collect()
}

#[test]
fn thousands_of_messages_arrive_intact_and_in_order() {
    let _guard = watchdog("thousands_of_messages_arrive_intact_and_in_order", 60);
    let sizes = [0usize, 1, 7, 28, 63, 64, 65, 1000, 4096, 8192];
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let n = 3000;
            if r.rank() == 0 {
                for i in 0..n {
                    let d = pattern(i, sizes[i % sizes.len()]);
                    r.send(1, (i % 5) as u32, &d).unwrap();
                }
                0
            } else {
                let mut bad = 0;
                let mut buf = vec![0u8; 8192];
                for i in 0..n {
                    let st = r.recv(Source::Rank(0), TagSel::Any, &mut buf).unwrap();
                    let want = pattern(i, sizes[i % sizes.len()]);
                    if st.tag != (i % 5) as u32 || buf[..st.len as usize] != want[..] {
                        bad += 1;
                    }
                }
                bad
            }
        },
    );
    assert_eq!(out[1], 0);
}

#[test]
fn windows_beyond_the_credits_flow_without_loss() {
    let _guard = watchdog("windows_beyond_the_credits_flow_without_loss", 60);
    // 64 credits, 200 outstanding sends: the rest queue and flow as credits return.
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let n = 200usize;
            let data: Vec<Vec<u8>> = (0..n).map(|i| pattern(i, 100)).collect();
            if r.rank() == 0 {
                let reqs: Vec<_> = data
                    .iter()
                    // SAFETY: the buffer outlives the request, which is waited for before it is touched.
                    .map(|d| unsafe { r.isend_raw(1, 9, d.as_ptr(), d.len()).unwrap() })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
                r.stats().send_stalls
            } else {
                let mut bufs = vec![vec![0u8; 100]; n];
                // Receive in reverse posting order of tags? No: post all, in order.
                let reqs: Vec<_> = bufs
                    .iter_mut()
                    // SAFETY: the buffer outlives the request, which is waited for before it is read.
                    .map(|b| unsafe {
                        r.irecv_raw(Source::Any, TagSel::Tag(9), b.as_mut_ptr(), 100)
                            .unwrap()
                    })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
                bufs.iter().zip(&data).filter(|(a, b)| a != b).count() as u64
            }
        },
    );
    assert!(out[0] > 0, "the window must have exceeded the credits");
    assert_eq!(out[1], 0);
}

#[test]
fn truncation_and_wildcards_across_threads() {
    let _guard = watchdog("truncation_and_wildcards_across_threads", 60);
    let out = job::run(
        3,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| match r.rank() {
            0 => {
                let mut small = [0u8; 4];
                let st = r.recv(Source::Rank(1), TagSel::Tag(1), &mut small).unwrap();
                let mut any = [0u8; 16];
                let st2 = r.recv(Source::Any, TagSel::Any, &mut any).unwrap();
                (st.fault
                    == Some(RecvFault::Truncated {
                        len: 10,
                        capacity: 4,
                    })
                    && &small == b"0123"
                    && st2.source == 2
                    && &any[..3] == b"two") as u8
            }
            1 => {
                r.send(0, 1, b"0123456789").unwrap();
                1
            }
            _ => {
                r.send(0, 77, b"two").unwrap();
                1
            }
        },
    );
    assert_eq!(out, vec![1, 1, 1]);
}

#[test]
fn all_to_all_with_four_ranks_shares_each_receive_queue() {
    let _guard = watchdog("all_to_all_with_four_ranks_shares_each_receive_queue", 60);
    // Three senders fill each rank's shared receive queue concurrently, on 2
    // cores; 900 receives stay within the 1024 posted-receive capacity.
    let n = 300usize;
    let out = job::run(
        4,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let me = r.rank();
            let peers: Vec<u16> = (0..4).filter(|&p| p != me).collect();
            let data: Vec<Vec<u8>> = (0..n)
                .map(|i| pattern(i + me as usize * n, 1 + i % 300))
                .collect();
            let mut bufs = vec![vec![0u8; 300]; n * 3];
            // Post every receive first (one per message, tagged by source), then send.
            let recvs: Vec<_> = bufs
                .iter_mut()
                .enumerate()
                // SAFETY: the buffer outlives the request, which is waited for before it is read.
                .map(|(k, b)| unsafe {
                    r.irecv_raw(
                        Source::Rank(peers[k % 3]),
                        TagSel::Tag(peers[k % 3] as u32),
                        b.as_mut_ptr(),
                        300,
                    )
                    .unwrap()
                })
                .collect();
            let mut sends = Vec::new();
            for (i, d) in data.iter().enumerate() {
                for &p in &peers {
                    // SAFETY: the buffer outlives the request, which is waited for before it is touched.
                    sends.push(unsafe { r.isend_raw(p, me as u32, d.as_ptr(), d.len()).unwrap() });
                }
                if i % 16 == 0 {
                    r.progress();
                }
            }
            let statuses: Vec<_> = recvs.into_iter().map(|q| r.wait(q)).collect();
            for q in sends {
                r.wait(q);
            }
            // Receive k got source peers[k % 3]'s message number k / 3, in order.
            let mut bad = 0;
            for (k, st) in statuses.iter().enumerate() {
                let src = peers[k % 3] as usize;
                let i = k / 3;
                let want = pattern(i + src * n, 1 + i % 300);
                if st.source as usize != src || bufs[k][..st.len as usize] != want[..] {
                    bad += 1;
                }
            }
            bad
        },
    );
    assert_eq!(out, vec![0, 0, 0, 0]);
}

#[test]
fn a_rank_can_send_to_itself() {
    let _guard = watchdog("a_rank_can_send_to_itself", 60);
    let out = job::run(
        1,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let mut buf = [0u8; 5];
            // SAFETY: the buffer outlives the request, which is waited for before it is read.
            let q = unsafe {
                r.irecv_raw(Source::Rank(0), TagSel::Tag(3), buf.as_mut_ptr(), 5)
                    .unwrap()
            };
            r.send(0, 3, b"selfy").unwrap();
            let st = r.wait(q);
            (st.source, st.len, buf)
        },
    );
    assert_eq!(out[0], (0, 5, *b"selfy"));
}

#[test]
fn a_cancelled_receive_completes_as_cancelled_and_never_matches() {
    let _guard = watchdog(
        "a_cancelled_receive_completes_as_cancelled_and_never_matches",
        60,
    );
    let out = job::run(
        1,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let mut first = [0u8; 4];
            let mut second = [0u8; 4];
            // SAFETY: the buffer outlives the request, which is waited for before it is read.
            let q = unsafe {
                r.irecv_raw(Source::Any, TagSel::Any, first.as_mut_ptr(), 4)
                    .unwrap()
            };
            let cancelled = r.cancel(&q);
            let st = r.wait(q);
            r.send(0, 1, b"data").unwrap();
            let got = r.recv(Source::Any, TagSel::Any, &mut second).unwrap();
            (cancelled, st.fault, first, got.len, second)
        },
    );
    assert_eq!(
        out[0],
        (true, Some(RecvFault::Cancelled), [0; 4], 4, *b"data"),
        "the cancelled buffer stays untouched; the message goes to the next receive"
    );
}

/// A send of more bytes than one message carries (4 GiB) is refused with
/// `SendError::TooLong` (before, its length was cut to 32 bits and a
/// short message went out as if whole); a receive buffer past 4 GiB takes
/// a message whole. The 4 GiB buffer is zeroed by the allocator's fresh
/// mapping and never touched, so it costs no memory.
#[test]
fn a_send_longer_than_a_message_carries_is_refused_not_cut() {
    let _guard = watchdog(
        "a_send_longer_than_a_message_carries_is_refused_not_cut",
        60,
    );
    let huge = (1usize << 32) + 1;
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            let big = vec![0u8; huge];
            if r.rank() == 0 {
                let refused = r.send(1, 1, &big);
                r.send(1, 2, b"after").unwrap();
                (refused == Err(rmx_core::SendError::TooLong), 0)
            } else {
                let mut big = big;
                let st = r.recv(Source::Rank(0), TagSel::Any, &mut big).unwrap();
                (st.tag == 2 && &big[..5] == b"after", st.len)
            }
        },
    );
    assert!(out[0].0, "the long send was refused");
    assert_eq!(out[1], (true, 5), "only the next message arrived, whole");
}

/// A probe finds the oldest message a receive would take — eager or by
/// rendezvous, by sender, by tag or by neither — with its whole length,
/// and leaves it for that receive; it finds nothing that does not match,
/// and nothing once the receive took it.
#[test]
fn a_probe_finds_what_the_next_receive_takes_and_leaves_it() {
    let _guard = watchdog(
        "a_probe_finds_what_the_next_receive_takes_and_leaves_it",
        60,
    );
    let sizes = [0usize, 5, 8192, 8193, 100_000];
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        &Net::Loop(LoopConfig::default()),
        |r| {
            if r.rank() == 0 {
                for (i, &len) in sizes.iter().enumerate() {
                    r.send(1, 40 + i as u32, &pattern(i, len)).unwrap();
                }
                r.barrier().unwrap();
                return true;
            }
            for (i, &len) in sizes.iter().enumerate() {
                let tag = 40 + i as u32;
                // Blocking: the message may not have come yet.
                let st = r.probe(Source::Any, TagSel::Tag(tag)).unwrap();
                assert_eq!((st.source, st.tag, st.len as usize), (0, tag, len));
                let again = r.iprobe(Source::Rank(0), TagSel::Any).unwrap();
                assert_eq!(again.map(|s| s.tag), Some(tag), "the oldest, left in place");
                assert_eq!(r.iprobe(Source::Rank(0), TagSel::Tag(999)).unwrap(), None);
                let mut buf = vec![0u8; len];
                let got = r.recv(Source::Rank(0), TagSel::Tag(tag), &mut buf).unwrap();
                assert_eq!(got.len as usize, len);
                assert_eq!(buf, pattern(i, len));
                assert_eq!(
                    r.iprobe(Source::Any, TagSel::Tag(tag)).unwrap(),
                    None,
                    "taken"
                );
            }
            assert!(matches!(
                r.iprobe(Source::Rank(2), TagSel::Any),
                Err(rmx_core::RecvError::BadRank)
            ));
            r.barrier().unwrap();
            true
        },
    );
    assert_eq!(out, vec![true, true]);
}
