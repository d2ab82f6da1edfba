use super::region::{access, KeyError};
use super::*;

fn fabric(sync_max: usize) -> (Port, Port) {
    let f = Fabric::new(
        2,
        LoopConfig {
            srq_depth: 4,
            buf_size: 1 << 20,
            sq_depth: 2,
            sync_max,
            inline_max: 64,
            verify_pages: true,
            max_transfer: 1 << 20,
        },
    )
    .unwrap();
    (f.port(0), f.port(1))
}

/// Sizes whose products wrap (before: `srq_depth` 2²⁰ × `buf_size` 2⁴⁴
/// made a ring far smaller than it believed, and the second inline send
/// wrote past it) or that are 0 are refused; nothing is allocated.
#[test]
fn sizes_that_wrap_or_are_zero_are_refused() {
    let ok = LoopConfig::default();
    let refused = |c: LoopConfig| Fabric::new(2, c).err();
    for (srq_depth, buf_size) in [
        (1 << 20, 1 << 44),
        (usize::MAX, 64),
        (usize::MAX / 2 + 2, 64),
        (4, usize::MAX),
        (4, usize::MAX - 8),
        (1 << 33, 1),
    ] {
        assert_eq!(
            refused(LoopConfig {
                srq_depth,
                buf_size,
                ..ok
            }),
            Some(LoopConfigError::RingTooLarge {
                srq_depth,
                buf_size
            }),
            "{srq_depth} x {buf_size}"
        );
    }
    for zero in [
        LoopConfig { srq_depth: 0, ..ok },
        LoopConfig { buf_size: 0, ..ok },
        LoopConfig { sq_depth: 0, ..ok },
    ] {
        assert_eq!(refused(zero), Some(LoopConfigError::Zero));
    }
    assert!(Fabric::new(2, ok).is_ok());
}

fn sge(p: &Port, v: &mut [u8], rights: u8) -> Sge {
    // SAFETY: each test's buffers outlive every operation it posts.
    let mr = unsafe { p.register_access(v.as_mut_ptr() as usize, v.len(), rights) }.unwrap();
    Sge {
        addr: mr.addr,
        len: mr.len,
        key: mr.key,
    }
}

fn wait_cq(p: &mut Port) -> Wc {
    let mut v = Vec::new();
    for _ in 0..1_000_000 {
        if p.poll_cq(&mut v) > 0 {
            return v[0];
        }
        std::thread::yield_now();
    }
    panic!("no completion");
}

#[test]
fn send_gathers_two_entries_into_one_receive() {
    let (mut a, mut b) = fabric(1 << 16);
    let mut h = *b"head";
    let mut d = *b"-data";
    let sg = [sge(&a, &mut h, 0), sge(&a, &mut d, 0)];
    assert_eq!(a.post_send(1, 9, &sg), Ok(None));
    let mut wcs = Vec::new();
    assert_eq!(
        a.poll_cq(&mut wcs),
        0,
        "not complete before the peer takes it"
    );
    let r = b.poll_recv().unwrap();
    assert!(
        b.poll_recv().is_none(),
        "the ring is empty: taken packets are told"
    );
    let wc = wait_cq(&mut a);
    assert_eq!((wc.wr_id, wc.status, wc.len), (9, WcStatus::Success, 9));
    assert_eq!((r.len, r.src, r.imm), (9, 0, None));
    assert_eq!(b.rx_bytes(r.buf).unwrap(), b"head-data");
    b.repost(r.buf);
    assert!(b.poll_recv().is_none());
}

#[test]
fn bad_keys_and_bounds_complete_with_errors_and_touch_nothing() {
    let (mut a, b) = fabric(1 << 16);
    let mut local = [1u8; 16];
    let mut remote = [0u8; 16];
    let l = sge(&a, &mut local, access::LOCAL_WRITE);
    let r = sge(&b, &mut remote, access::REMOTE_WRITE);
    let bad = Sge {
        key: l.key ^ 0x100,
        ..l
    };
    let wc = a.post_send(1, 1, &[bad]).unwrap().unwrap();
    assert_eq!(wc.status, WcStatus::LocalProtection(KeyError::BadKey));
    let wc = a
        .post_write(1, 2, l, r.addr + 8, r.key, None)
        .unwrap()
        .unwrap();
    assert_eq!(wc.status, WcStatus::RemoteAccess(KeyError::OutOfBounds));
    let wc = a.post_read(1, 3, l, r.addr, r.key).unwrap().unwrap();
    assert_eq!(
        wc.status,
        WcStatus::RemoteAccess(KeyError::Access),
        "no REMOTE_READ right"
    );
    assert_eq!(remote, [0u8; 16]);
    assert_eq!(local, [1u8; 16]);
}

#[test]
fn write_read_and_write_with_immediate() {
    let (mut a, mut b) = fabric(1 << 16);
    let mut local = *b"0123456789abcdef";
    let mut remote = [0u8; 16];
    let l = sge(&a, &mut local, access::LOCAL_WRITE);
    let r = sge(&b, &mut remote, access::REMOTE_WRITE | access::REMOTE_READ);
    let wc = a
        .post_write(1, 1, l, r.addr, r.key, Some(42))
        .unwrap()
        .unwrap();
    assert_eq!(wc.status, WcStatus::Success);
    let rc = b.poll_recv().unwrap();
    assert_eq!((rc.imm, rc.len), (Some(42), 0));
    assert_eq!(&remote, b"0123456789abcdef");
    std::hint::black_box(&mut remote)[0] = b'X';
    let half = Sge { len: 8, ..l };
    a.post_read(1, 2, half, r.addr, r.key).unwrap().unwrap();
    assert_eq!(&local[..8], b"X1234567");
}

#[test]
fn large_transfers_run_on_the_nic_thread_and_complete_in_the_cq() {
    let (mut a, b) = fabric(1024);
    let mut local: Vec<u8> = (0..1 << 20).map(|i| i as u8).collect();
    let mut remote = vec![0u8; 1 << 20];
    let l = sge(&a, &mut local, 0);
    let r = sge(&b, &mut remote, access::REMOTE_WRITE);
    let mut small = *b"small";
    let s = sge(&a, &mut small, 0);
    assert!(!a.nic_working());
    // A small SEND the peer has not taken holds an entry, not the NIC thread.
    assert_eq!(a.post_send(1, 6, &[s]), Ok(None));
    assert!(!a.nic_working());
    assert_eq!(a.post_write(1, 7, l, r.addr, r.key, None), Ok(None));
    assert!(
        a.nic_working(),
        "the NIC thread copies until its CQE is polled"
    );
    let wc = wait_cq(&mut a);
    assert_eq!(
        (wc.wr_id, wc.status, wc.len),
        (7, WcStatus::Success, 1 << 20)
    );
    assert!(!a.nic_working());
    assert!(remote == local);
}

#[test]
fn send_queue_depth_and_receiver_readiness_are_enforced() {
    // Every send holds one of the 2 send-queue entries until the peer takes
    // it: offloaded 4 KiB sends and 4-byte sends alike.
    let (mut a, mut b) = fabric(1024);
    let mut big = vec![3u8; 4096];
    let s = sge(&a, &mut big, 0);
    assert_eq!(a.post_send(1, 1, &[s]), Ok(None));
    assert_eq!(a.post_send(1, 2, &[s]), Ok(None));
    assert_eq!(a.post_send(1, 3, &[s]), Err(PostErr::SqFull));
    let mut wcs = Vec::new();
    while wcs.len() < 2 {
        a.poll_cq(&mut wcs);
    }
    let mut small = [0u8; 4];
    let t = sge(&a, &mut small, 0);
    assert_eq!(a.post_send(1, 4, &[t]), Ok(None));
    assert_eq!(a.post_send(1, 5, &[t]), Ok(None));
    assert_eq!(a.post_send(1, 6, &[t]), Err(PostErr::SqFull));
    assert_eq!(a.post_send_inline(1, 9, b"x", &[]), Err(PostErr::SqFull));
    // The peer takes the packets; the small ones free their entries, in
    // order, once it tells what it took (when its ring is empty, or every 16
    // packets). The offloaded ones completed when the NIC thread delivered them.
    let mut taken = Vec::new();
    while taken.len() < 4 {
        if let Some(r) = b.poll_recv() {
            taken.push(r.buf);
        }
    }
    assert_eq!(a.poll_cq(&mut Vec::new()), 0, "not told yet");
    assert!(b.poll_recv().is_none());
    let mut wcs = Vec::new();
    while wcs.len() < 2 {
        a.poll_cq(&mut wcs);
    }
    assert_eq!((wcs[0].wr_id, wcs[1].wr_id), (4, 5));
    // Four receive buffers, none reposted: the next send finds no buffer (RNR).
    assert_eq!(a.post_send(1, 0, &[t]), Err(PostErr::Rnr));
    b.repost(taken[0]);
    assert_eq!(
        a.post_send(1, 0, &[t]),
        Ok(None),
        "a reposted buffer is usable again"
    );
    assert_eq!(a.post_send(9, 0, &[t]), Err(PostErr::BadPeer));
}

#[test]
fn inline_sends_gather_without_keys_up_to_the_limit() {
    let (mut a, mut b) = fabric(1 << 16);
    // Unregistered memory is fine for an inline send.
    let head = b"hdr:".to_vec();
    let body = b"payload".to_vec();
    a.post_send_inline(1, 9, &head, &body).unwrap();
    let r = b.poll_recv().unwrap();
    assert_eq!(b.rx_bytes(r.buf).unwrap(), b"hdr:payload");
    assert!(b.poll_recv().is_none());
    assert_eq!(wait_cq(&mut a).wr_id, 9);
    let big = vec![0u8; 65];
    assert_eq!(a.post_send_inline(1, 9, &big, &[]), Err(PostErr::TooLong));
    assert_eq!(a.post_send_inline(5, 9, &head, &[]), Err(PostErr::BadPeer));
}

/// A fresh private anonymous page range (caller unmaps), or one replacing `at`.
fn map(len: usize, at: Option<usize>) -> usize {
    // SAFETY: MAP_FIXED is only used over the test's own range.
    unsafe { crate::anon::map(len, at, false) }
}

#[test]
fn user_registrations_pin_and_stale_pages_fail_the_send() {
    if !pagemap::available() {
        eprintln!("skipped: page frames are hidden from this process (needs CAP_SYS_ADMIN)");
        return;
    }
    let (mut a, mut b) = fabric(1 << 20);
    let a_mem = map(8192, None);
    // SAFETY: freshly mapped, 8 KiB.
    unsafe { std::ptr::write_bytes(a_mem as *mut u8, 1, 8192) };
    // SAFETY: the mapping outlives the registration's operations.
    let mr = unsafe { a.register_pages(a_mem, 8192) }.expect("mapped memory registers");
    let send = |a: &mut Port| {
        let r = a.post_send(
            1,
            7,
            &[Sge {
                addr: a_mem,
                len: 100,
                key: mr.key,
            }],
        );
        r.unwrap().map_or(WcStatus::Success, |wc| wc.status)
    };
    assert_eq!(send(&mut a), WcStatus::Success);
    let got = b.poll_recv().unwrap();
    assert_eq!(b.rx_bytes(got.buf).unwrap()[..100], [1u8; 100]);
    b.repost(got.buf);
    // The memory is replaced at the same address: a real NIC would still
    // read the pinned old pages. This one refuses.
    // SAFETY: our own mapping.
    unsafe { libc::munmap(a_mem as *mut libc::c_void, 8192) };
    assert_eq!(map(8192, Some(a_mem)), a_mem);
    // SAFETY: mapped again just above.
    unsafe { std::ptr::write_bytes(a_mem as *mut u8, 2, 8192) };
    assert_eq!(send(&mut a), WcStatus::StaleRegistration);
    assert!(b.poll_recv().is_none(), "nothing delivered");
    a.deregister_pages(mr).unwrap();
    // SAFETY: as above.
    let mr2 = unsafe { a.register_pages(a_mem, 8192) }.unwrap();
    let r = a.post_send(
        1,
        8,
        &[Sge {
            addr: a_mem,
            len: 100,
            key: mr2.key,
        }],
    );
    assert_eq!(r, Ok(None), "posted, completes when taken");
    let got = b.poll_recv().unwrap();
    assert_eq!(b.rx_bytes(got.buf).unwrap()[..100], [2u8; 100]);
    // SAFETY: our own mapping; the send that read it has been taken.
    unsafe { libc::munmap(a_mem as *mut libc::c_void, 8192) };
}

#[test]
fn an_armed_nic_raises_one_event_for_a_plain_packet_or_a_taken_send() {
    let (mut a, mut b) = fabric(1 << 16);
    let (ea, eb) = (a.events(), b.events());
    let mut d = *b"data";
    let sg = [sge(&a, &mut d, 0)];
    // Unarmed: a plain SEND raises nothing, a solicited one does.
    let n = eb.count();
    assert_eq!(a.post_send(1, 1, &sg), Ok(None));
    assert_eq!(eb.count(), n, "a plain packet is silent unless armed");
    assert_eq!(a.post_send_solicited(1, 2, &sg), Ok(None));
    assert_eq!(eb.count(), n + 1);
    // Armed: the next plain packet raises one event, and disarms.
    eb.arm();
    let mut wcs = Vec::new();
    for _ in 0..2 {
        let r = b.poll_recv().unwrap();
        b.repost(r.buf);
    }
    assert!(b.poll_recv().is_none());
    while a.poll_cq(&mut wcs) > 0 {}
    assert_eq!(a.post_send(1, 3, &sg), Ok(None));
    assert_eq!(eb.count(), n + 2);
    assert_eq!(a.post_send(1, 4, &sg), Ok(None));
    assert_eq!(eb.count(), n + 2, "one event per arming");
    // A sender armed while its SENDs wait to be taken hears the taking.
    let m = ea.count();
    ea.arm();
    assert!(b.poll_recv().is_some());
    assert!(b.poll_recv().is_some());
    assert!(
        b.poll_recv().is_none(),
        "an empty ring tells what was taken"
    );
    assert_eq!(ea.count(), m + 1);
    assert_eq!(
        ea.wait(m, Duration::from_secs(5)),
        m + 1,
        "no sleep once counted"
    );
}

/// Taking packets wakes the ranks that sent them and no other: a rank
/// armed to sleep is not woken by packets of its neighbours.
#[test]
fn taking_packets_wakes_only_their_senders() {
    let f = Fabric::new(3, LoopConfig::default()).unwrap();
    let (mut a, mut b, mut c) = (f.port(0), f.port(1), f.port(2));
    let (eb, ec) = (b.events(), c.events());
    let taken = |a: &mut Port| {
        while let Some(r) = a.poll_recv() {
            assert!(a.repost(r.buf));
        }
    };
    // One sender: only it hears the taking.
    let (nb, nc) = (eb.count(), ec.count());
    eb.arm();
    ec.arm();
    b.post_send_inline(0, 1, b"b", &[]).unwrap();
    taken(&mut a);
    assert_eq!(eb.count(), nb + 1);
    assert_eq!(ec.count(), nc, "rank 2 sent nothing: left asleep");
    // Two senders: both hear it.
    eb.arm();
    b.post_send_inline(0, 2, b"b", &[]).unwrap();
    c.post_send_inline(0, 3, b"c", &[]).unwrap();
    taken(&mut a);
    assert_eq!((eb.count(), ec.count()), (nb + 2, nc + 1));
}

/// Completions come out at most as many as the caller's array holds,
/// oldest first; the rest wait for the next poll (as `ibv_poll_cq`).
#[test]
fn a_completion_poll_fills_at_most_the_callers_array() {
    use crate::transport::Completion;
    let (mut a, mut b) = fabric(1 << 16);
    let mut d = *b"data";
    let s = sge(&a, &mut d, 0);
    let none = Completion {
        wr_id: u64::MAX,
        result: Ok(()),
    };
    let mut ids = Vec::new();
    // Two sends at a time: the send queue's depth.
    for first in [0, 2] {
        for id in first..first + 2 {
            assert_eq!(a.post_send(1, id, &[s]), Ok(None), "{id} after {ids:?}");
        }
        let mut got = 0;
        while got < 2 {
            if let Some(r) = b.poll_recv() {
                assert!(b.repost(r.buf));
                got += 1;
            }
        }
        // An empty poll tells the sender what was taken.
        assert!(b.poll_recv().is_none());
        let mut out = [none; 1];
        for _ in 0..1_000_000 {
            let n = rmx_driver::Port::poll_cq(&mut a, &mut out);
            ids.extend(out[..n].iter().map(|c| c.wr_id));
            if ids.len() == first as usize + 2 {
                break;
            }
            std::thread::yield_now();
        }
    }
    assert_eq!(ids, [0, 1, 2, 3], "one at a time, oldest first");
    assert_eq!(rmx_driver::Port::poll_cq(&mut a, &mut [none; 4]), 0);
}

/// Takes every packet waiting at `b` (reposting each), then tells its
/// senders with the empty poll after them.
fn take_all(b: &mut Port) -> usize {
    let mut n = 0;
    while let Some(r) = b.poll_recv() {
        assert!(b.repost(r.buf));
        n += 1;
    }
    n
}

#[test]
fn unsignalled_inline_sends_complete_with_the_next_signalled_one() {
    let f = Fabric::new(
        2,
        LoopConfig {
            srq_depth: 16,
            sq_depth: 8,
            ..LoopConfig::default()
        },
    )
    .unwrap();
    let (mut a, mut b) = (f.port(0), f.port(1));
    // Three unsignalled, then a signalled one: one completion for four.
    for id in 1..=3 {
        a.post_send_inline_unsignalled(1, id, b"q", &[]).unwrap();
    }
    assert_eq!(take_all(&mut b), 3);
    let mut wcs = Vec::new();
    assert_eq!(a.poll_cq(&mut wcs), 0, "taken, but not complete alone");
    a.post_send_inline(1, 4, b"s", &[]).unwrap();
    assert_eq!(take_all(&mut b), 1);
    assert_eq!(a.poll_cq(&mut wcs), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].sends), (4, 4));
    // Unsignalled ones before a send from memory: their own completion
    // (the last one's id, counting both) comes first, then the send's.
    let mut d = *b"data";
    let s = sge(&a, &mut d, 0);
    a.post_send_inline_unsignalled(1, 5, b"q", &[]).unwrap();
    a.post_send_inline_unsignalled(1, 6, b"q", &[]).unwrap();
    assert_eq!(a.post_send(1, 7, &[s]), Ok(None));
    assert_eq!(take_all(&mut b), 3);
    wcs.clear();
    assert_eq!(a.poll_cq(&mut wcs), 2);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.sends)).collect();
    assert_eq!(got, [(6, 2), (7, 1)]);
    // With room for one completion at a time, the send's waits for the
    // next poll, and nothing is reported twice.
    a.post_send_inline_unsignalled(1, 8, b"q", &[]).unwrap();
    assert_eq!(a.post_send(1, 9, &[s]), Ok(None));
    assert_eq!(take_all(&mut b), 2);
    let mut one = Vec::new();
    assert_eq!(a.poll_cq_each(1, |w| one.push((w.wr_id, w.sends))), 1);
    assert_eq!(a.poll_cq_each(1, |w| one.push((w.wr_id, w.sends))), 1);
    assert_eq!(a.poll_cq_each(1, |w| one.push((w.wr_id, w.sends))), 0);
    assert_eq!(one, [(8, 1), (9, 1)]);
}

/// Through the driver's port seam, unsignalled inline sends of the core
/// come back as one `WorkId::Inlines` completion counting them.
#[test]
fn the_transport_reports_unsignalled_inline_sends_as_one_counted_completion() {
    use crate::transport::{Completion, Work};
    use rmx_core::WorkId;
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let (mut a, mut b) = (f.port(0), f.port(1));
    let id = WorkId::Inline(1).wr_id();
    for signal in [false, false, true] {
        let work = Work::Inline {
            head: b"h",
            body: b"b",
            signal,
        };
        assert_eq!(rmx_driver::Port::post(&mut a, 1, id, work), Ok(None));
    }
    assert_eq!(take_all(&mut b), 3);
    let none = Completion {
        wr_id: 0,
        result: Ok(()),
    };
    let mut out = [none; 4];
    assert_eq!(rmx_driver::Port::poll_cq(&mut a, &mut out), 1);
    assert_eq!(
        WorkId::from_wr_id(out[0].wr_id),
        Some(WorkId::Inlines { peer: 1, count: 3 })
    );
    assert_eq!(out[0].result, Ok(()));
}

/// Consecutive unsignalled sends are kept as one run, which never joins
/// the signalled send or the send from memory before it: each completion
/// counts exactly the unsignalled sends between it and the one before.
#[test]
fn a_run_of_unsignalled_sends_counts_only_those_after_the_last_completion() {
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let (mut a, mut b) = (f.port(0), f.port(1));
    let mut d = *b"data";
    let s = sge(&a, &mut d, 0);
    a.post_send_inline(1, 1, b"s", &[]).unwrap();
    a.post_send_inline_unsignalled(1, 2, b"q", &[]).unwrap();
    a.post_send_inline_unsignalled(1, 3, b"q", &[]).unwrap();
    assert_eq!(a.post_send(1, 4, &[s]), Ok(None));
    a.post_send_inline_unsignalled(1, 5, b"q", &[]).unwrap();
    a.post_send_inline(1, 6, b"s", &[]).unwrap();
    assert_eq!(take_all(&mut b), 6);
    let mut wcs = Vec::new();
    while a.poll_cq(&mut wcs) > 0 {}
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.sends)).collect();
    assert_eq!(got, [(1, 1), (3, 2), (4, 1), (6, 2)]);
    // Every entry came free: a full queue of sends fits again.
    let depth = LoopConfig::default().sq_depth;
    for id in 0..depth as u64 {
        assert_eq!(
            a.post_send_inline_unsignalled(1, 10 + id, b"q", &[]),
            Ok(())
        );
    }
    assert_eq!(
        a.post_send_inline_unsignalled(1, 99, b"q", &[]),
        Err(PostErr::SqFull)
    );
}

/// Taken unsignalled sends keep their send-queue entries until a later
/// completion is polled, as in verbs, or until the queue is half full:
/// then the next poll frees them, so unsignalled sends alone never find
/// the queue full for good.
#[test]
fn unsignalled_sends_free_their_entries_by_half_a_queue() {
    let f = Fabric::new(
        2,
        LoopConfig {
            srq_depth: 64,
            sq_depth: 8,
            ..LoopConfig::default()
        },
    )
    .unwrap();
    let (mut a, mut b) = (f.port(0), f.port(1));
    for id in 0..4 {
        a.post_send_inline_unsignalled(1, id, b"q", &[]).unwrap();
    }
    assert_eq!(take_all(&mut b), 4);
    assert_eq!(a.poll_cq(&mut Vec::new()), 0, "nothing reported");
    // The four entries came free: seven more fit a queue of eight.
    for id in 4..11 {
        assert_eq!(
            a.post_send_inline_unsignalled(1, id, b"q", &[]),
            Ok(()),
            "{id}"
        );
    }
    assert_eq!(take_all(&mut b), 7);
    // A signalled one reports every unsignalled one taken before it.
    a.post_send_inline(1, 11, b"s", &[]).unwrap();
    assert_eq!(take_all(&mut b), 1);
    let mut wcs = Vec::new();
    assert_eq!(a.poll_cq(&mut wcs), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].sends), (11, 12));
}
