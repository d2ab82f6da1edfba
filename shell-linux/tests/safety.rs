//! What safe code may do with the shell's public types without breaking
//! memory: build ranks on small stacks, name receive buffers it does not
//! hold, drop a rank while the NIC's thread still copies for it.

mod common;

use common::watchdog;
use rmx_core::{Source, TagSel};
use rmx_linux::loopnic::{Fabric, LoopConfig, Sge};
use rmx_linux::rank::{loop_config, Rank};

/// The endpoint is half a megabyte; built by value it took several copies
/// of that on the creating thread's stack (an unoptimised build overflowed
/// the 2 MiB of a rank thread and aborted).
#[test]
fn a_rank_is_built_on_a_thread_with_a_small_stack() {
    let _guard = watchdog("a_rank_is_built_on_a_thread_with_a_small_stack", 120);
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let ports = (f.port(0), f.port(1));
    let t = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut a = Rank::new(ports.0, 2, loop_config()).unwrap();
            let mut b = Rank::new(ports.1, 2, loop_config()).unwrap();
            a.send(1, 3, b"small stack").unwrap();
            let mut buf = [0u8; 16];
            let st = b.recv(Source::Rank(0), TagSel::Tag(3), &mut buf).unwrap();
            buf[..st.len as usize].to_vec()
        })
        .unwrap();
    assert_eq!(t.join().unwrap(), b"small stack");
}

/// `rx_bytes` once read any ring index (a buffer a sender may be writing);
/// `repost` handed back buffers still in the ring. Both now refuse what the
/// port does not hold.
#[test]
fn receive_buffers_the_port_does_not_hold_are_refused() {
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let (mut a, mut b) = (f.port(0), f.port(1));
    assert_eq!(b.rx_bytes(0), None, "nothing polled yet");
    assert_eq!(b.rx_bytes(u32::MAX), None);
    assert!(!b.repost(0), "a buffer still in the ring");
    a.post_send_inline(1, 1, b"hello", b"").unwrap();
    let wc = b.poll_recv().unwrap();
    assert_eq!(b.rx_bytes(wc.buf), Some(&b"hello"[..]));
    assert_eq!(b.rx_bytes(wc.buf + 1), None, "a neighbour not polled");
    assert!(b.repost(wc.buf));
    assert_eq!(b.rx_bytes(wc.buf), None, "reposted: the NIC's again");
    assert!(!b.repost(wc.buf), "reposted twice");
}

/// A second port of one rank polled the same ring: one port could repost a
/// buffer the other was still reading, and a sender would overwrite it.
#[test]
fn each_rank_has_one_port() {
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let a = f.try_port(0).expect("the first port of rank 0");
    assert!(f.try_port(0).is_none(), "a second port of rank 0");
    assert!(f.try_port(2).is_none(), "no rank 2");
    drop(a);
    assert!(f.try_port(0).is_none(), "once per fabric");
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.port(0))).is_err());
}

/// With a synchronous limit below the slot size an eager send completes
/// once copied into a bounce slot and the NIC's thread sends it from there;
/// dropping the rank freed the slots under that copy (a read of freed,
/// unmapped memory). The drop now waits for the NIC's thread.
#[test]
fn dropping_a_rank_waits_for_the_nic_thread_to_copy_its_slots() {
    let _guard = watchdog(
        "dropping_a_rank_waits_for_the_nic_thread_to_copy_its_slots",
        120,
    );
    let nic = LoopConfig {
        sync_max: 64,
        ..LoopConfig::default()
    };
    for round in 0..50 {
        let f = Fabric::new(2, nic).unwrap();
        let mut a = Rank::new(f.port(0), 2, loop_config()).unwrap();
        let mut b = Rank::new(f.port(1), 2, loop_config()).unwrap();
        // No more than the connection's send entries: all are posted now
        // (a send waiting for an entry would leave only while `a` is driven).
        let n = 8;
        let msg = |i: usize| vec![(i * 7 + round) as u8; 8000];
        for i in 0..n {
            a.send(1, i as u32, &msg(i)).unwrap();
        }
        drop(a);
        // Whatever now lives where the slots were is not what arrives.
        let spray: Vec<Vec<u8>> = (0..8).map(|_| vec![0xEE; 1 << 21]).collect();
        let mut buf = vec![0u8; 8192];
        for i in 0..n {
            let st = b
                .recv(Source::Rank(0), TagSel::Tag(i as u32), &mut buf)
                .unwrap();
            assert_eq!(
                buf[..st.len as usize],
                msg(i)[..],
                "round {round} message {i}"
            );
        }
        drop(spray);
    }
}

/// Registration is the one door to the NIC's accesses: it is `unsafe`, and
/// every access through a key is checked against the live registration,
/// so safe code with a port reaches only memory someone vouched for.
#[test]
fn rdma_through_unregistered_or_stale_keys_touches_nothing() {
    let f = Fabric::new(2, LoopConfig::default()).unwrap();
    let (mut a, b) = (f.port(0), f.port(1));
    let mut local = vec![1u8; 64];
    let mut remote = vec![0u8; 64];
    // SAFETY: both vectors outlive the ports' operations (all synchronous).
    let (lmr, rmr) = unsafe {
        (
            a.register_access(local.as_mut_ptr() as usize, 64, 0)
                .unwrap(),
            b.register_access(remote.as_mut_ptr() as usize, 64, 2)
                .unwrap(),
        )
    };
    let sge = Sge {
        addr: lmr.addr,
        len: 64,
        key: lmr.key,
    };
    let ok = a.post_write(1, 1, sge, rmr.addr, rmr.key, None).unwrap();
    assert!(ok.is_some_and(|wc| wc.status == rmx_linux::loopnic::WcStatus::Success));
    assert_eq!(remote, local);
    b.deregister_checked(rmr).unwrap();
    local.fill(9);
    for (addr, key) in [(rmr.addr, rmr.key), (rmr.addr, rmr.key + 1), (0x1000, 0)] {
        let wc = a.post_write(1, 2, sge, addr, key, None).unwrap().unwrap();
        assert_ne!(wc.status, rmx_linux::loopnic::WcStatus::Success);
    }
    assert_eq!(remote, vec![1u8; 64], "nothing written");
}

/// A peer's puts still queued on the NIC's thread when a rank drops its
/// window and itself (safe code, no fence): before, the NIC checked the
/// target's key when the put was posted and wrote into the freed window
/// later, over the rank's next allocations. The key is now checked as
/// the bytes move, under the lock its deregistration takes.
#[test]
fn dropping_a_rank_while_a_peers_puts_are_queued_writes_nothing_after() {
    use rmx_core::onesided::Design;
    use std::sync::mpsc;
    let _guard = watchdog(
        "dropping_a_rank_while_a_peers_puts_are_queued_writes_nothing_after",
        300,
    );
    const LEN: usize = 64 << 10;
    const PUTS: usize = 64;
    for round in 0..4 {
        let f = Fabric::new(2, LoopConfig::default()).unwrap();
        let (p0, p1) = (f.port(0), f.port(1));
        let (started, wait_started) = mpsc::channel();
        let origin = std::thread::spawn(move || {
            let mut r = Rank::new(p1, 2, loop_config()).unwrap();
            let mut w = r.win_create_with(LEN, 1, Design::ImmNaive).unwrap();
            w.fence(&mut r).unwrap();
            let data = vec![0xC5u8; LEN];
            for i in 0..PUTS {
                if w.put(&mut r, 0, 0, &data).is_err() {
                    break;
                }
                if i == 0 {
                    started.send(()).unwrap();
                }
            }
            // Rank 0 is gone: no fence; dropping drains what is in flight.
            drop(w);
            drop(r);
        });
        let mut r = Rank::new(p0, 2, loop_config()).unwrap();
        let mut w = r.win_create_with(LEN, 1, Design::ImmNaive).unwrap();
        w.fence(&mut r).unwrap();
        wait_started.recv().unwrap();
        drop(w);
        drop(r);
        // Fresh memory of this rank's, likely where the window was.
        let fresh: Vec<Vec<u8>> = (0..64).map(|_| vec![0x11u8; LEN]).collect();
        origin.join().unwrap();
        for (i, v) in fresh.iter().enumerate() {
            assert!(
                v.iter().all(|&b| b == 0x11),
                "round {round}: allocation {i} written after the rank dropped"
            );
        }
    }
}
