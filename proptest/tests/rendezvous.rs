//! The rendezvous state machines, step by step, against the in-memory NIC.

use rmx_core::wire::rendezvous;
use rmx_core::*;
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::{execute_rdma, MemNic};

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 8, 16, 16, 32);
const THRESHOLD: u32 = 256;
const LEN: usize = 2500;

fn nic() -> MemNic {
    MemNic::new(16, 1024).with_rdma(1000)
}

fn cfg(p: Protocol) -> Config {
    Config {
        rendezvous: Some(p),
        ..Config::reliable(THRESHOLD, 4)
    }
}

fn data() -> Vec<u8> {
    (0..LEN).map(|i| (i * 7 + 3) as u8).collect()
}

/// Delivers every packet `from` posted to `to`; returns their kinds.
fn pump(from: &mut MemNic, to: &mut Ep, to_nic: &mut MemNic) -> Vec<u8> {
    let packets: Vec<_> = from.outbox.drain(..).collect();
    let mut kinds = Vec::new();
    for (_, p) in packets {
        kinds.push(p[1]);
        let b = to_nic.deliver(p);
        to.on_receive(0, to_nic, b);
    }
    kinds
}

/// Runs every RDMA operation `me` posted against `peer`, completing each.
fn rdma(ep: &mut Ep, me: &mut MemNic, peer: &mut MemNic) -> usize {
    let posts: Vec<_> = me.rdma_out.drain(..).collect();
    for p in &posts {
        let r = execute_rdma(me, peer, p);
        let rmx_core::WorkId::Rdma(id) = p.work else {
            panic!("the endpoint posted {:?}", p.work)
        };
        ep.on_rdma_complete(me, id, r);
    }
    posts.len()
}

struct Pair {
    a: Ep,
    an: MemNic,
    b: Ep,
    bn: MemNic,
    send: Request,
    recv: Request,
    dst: UserBuf,
}

/// Rank 0 sends LEN bytes to rank 1, which has a receive of `cap` posted;
/// the RTS has been delivered.
fn started(p: Protocol, cap: usize) -> Pair {
    let (mut a, mut an) = (Ep::new(cfg(p), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(cfg(p), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let dst = bn.user_buf(vec![0; cap]);
    let recv = b
        .irecv(
            0,
            &mut bn,
            Source::Rank(0),
            TagSel::Tag(4),
            0,
            dst,
            cap as u32,
        )
        .unwrap();
    let src = an.user_buf(data());
    let send = a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    assert_eq!(pump(&mut an, &mut b, &mut bn), vec![wire::Kind::Rts as u8]);
    Pair {
        a,
        an,
        b,
        bn,
        send,
        recv,
        dst,
    }
}

#[test]
fn rput_moves_no_data_until_the_sender_sees_the_cts() {
    let mut t = started(Protocol::Rput, LEN);
    // The receiver answered with a CTS; the sender makes no call.
    assert_eq!(t.bn.outbox.len(), 1);
    assert_eq!(t.bn.outbox[0].1[1], wire::Kind::Cts as u8);
    assert!(t.an.rdma_out.is_empty() && t.bn.rdma_out.is_empty());
    assert_eq!(t.b.test(t.recv), Ok(None));
    assert_eq!(t.a.test(t.send), Ok(None));
    assert!(
        t.bn.user[t.dst.0 as usize].iter().all(|&x| x == 0),
        "no data moved"
    );
    // The sender sees the CTS: writes of at most 1000 bytes, then a FIN.
    assert_eq!(
        pump(&mut t.bn, &mut t.a, &mut t.an),
        vec![wire::Kind::Cts as u8]
    );
    assert_eq!(t.an.rdma_out.len(), 3);
    assert!(t.an.rdma_out.iter().all(|p| p.op == RdmaOp::Write));
    assert_eq!(rdma(&mut t.a, &mut t.an, &mut t.bn), 3);
    assert_eq!(t.a.test(t.send).unwrap().unwrap().fault, None);
    assert_eq!(t.b.test(t.recv), Ok(None), "complete only with the FIN");
    assert_eq!(
        pump(&mut t.an, &mut t.b, &mut t.bn),
        vec![wire::Kind::Fin as u8]
    );
    let st = t.b.test(t.recv).unwrap().unwrap();
    assert_eq!((st.len, st.fault), (LEN as u32, None));
    assert_eq!(t.bn.user[t.dst.0 as usize], data());
    assert_eq!(t.an.regs.len() + t.bn.regs.len(), 0, "registrations ended");
}

#[test]
fn rget_reads_at_the_rts_and_the_sender_ends_with_the_fin() {
    let mut t = started(Protocol::Rget, LEN);
    assert!(t.bn.outbox.is_empty(), "no CTS: one-way handshake");
    assert_eq!(t.bn.rdma_out.len(), 3);
    assert!(t.bn.rdma_out.iter().all(|p| p.op == RdmaOp::Read));
    assert_eq!(rdma(&mut t.b, &mut t.bn, &mut t.an), 3);
    assert_eq!(t.b.test(t.recv).unwrap().unwrap().len, LEN as u32);
    assert_eq!(t.bn.user[t.dst.0 as usize], data());
    assert_eq!(t.a.test(t.send), Ok(None));
    assert_eq!(
        pump(&mut t.bn, &mut t.a, &mut t.an),
        vec![wire::Kind::Fin as u8]
    );
    assert_eq!(t.a.test(t.send).unwrap().unwrap().fault, None);
    assert_eq!(t.an.regs.len() + t.bn.regs.len(), 0, "registrations ended");
}

#[test]
fn pull_asks_for_frames_and_the_bitmap_completes_the_receive() {
    let mut t = started(Protocol::Pull, LEN);
    let mut rounds = 0;
    while t.b.test(t.recv) == Ok(None) {
        pump(&mut t.bn, &mut t.a, &mut t.an);
        pump(&mut t.an, &mut t.b, &mut t.bn);
        rounds += 1;
        assert!(rounds < 20, "pull stalled");
    }
    assert_eq!(t.bn.user[t.dst.0 as usize], data());
    assert_eq!(
        pump(&mut t.bn, &mut t.a, &mut t.an),
        vec![wire::Kind::Fin as u8]
    );
    assert_eq!(t.a.test(t.send).unwrap().unwrap().fault, None);
    assert_eq!(t.an.rdma_out.len() + t.bn.rdma_out.len(), 0);
}

#[test]
fn an_rdma_access_error_completes_both_requests_with_the_error() {
    // RGET: the read fails (the sender's key no longer valid).
    let mut t = started(Protocol::Rget, LEN);
    for r in t.an.regs.values_mut() {
        r.1 = 0;
    }
    rdma(&mut t.b, &mut t.bn, &mut t.an);
    let st = t.b.test(t.recv).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    assert_eq!(st.len, 0);
    pump(&mut t.bn, &mut t.a, &mut t.an);
    let st = t.a.test(t.send).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    assert_eq!(t.a.stats().rdma_faults + t.b.stats().rdma_faults, 1);

    // RPUT: the write fails (the receiver's key no longer valid).
    let mut t = started(Protocol::Rput, LEN);
    for r in t.bn.regs.values_mut() {
        r.1 = 0;
    }
    pump(&mut t.bn, &mut t.a, &mut t.an);
    rdma(&mut t.a, &mut t.an, &mut t.bn);
    let st = t.a.test(t.send).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    pump(&mut t.an, &mut t.b, &mut t.bn);
    let st = t.b.test(t.recv).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
}

#[test]
fn a_short_receive_truncates_each_protocol_and_the_sender_completes() {
    for p in [Protocol::Rput, Protocol::Rget, Protocol::Pull] {
        let mut t = started(p, 1234);
        for _ in 0..20 {
            rdma(&mut t.a, &mut t.an, &mut t.bn);
            rdma(&mut t.b, &mut t.bn, &mut t.an);
            pump(&mut t.bn, &mut t.a, &mut t.an);
            pump(&mut t.an, &mut t.b, &mut t.bn);
        }
        let st = t.b.test(t.recv).unwrap().unwrap();
        assert_eq!(
            (st.len, st.fault),
            (
                1234,
                Some(RecvFault::Truncated {
                    len: LEN as u32,
                    capacity: 1234
                })
            ),
            "{p:?}"
        );
        assert_eq!(t.bn.user[t.dst.0 as usize][..], data()[..1234], "{p:?}");
        assert_eq!(t.a.test(t.send).unwrap().unwrap().fault, None, "{p:?}");
    }
}

#[test]
fn a_buffer_that_cannot_be_registered_goes_by_pull() {
    let (mut a, mut an) = (
        Ep::new(cfg(Protocol::Rget), 0, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
    );
    an.refuse_registration = true;
    let src = an.user_buf(data());
    a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    let rts = &an.outbox[0].1[wire::HEADER_LEN..];
    assert_eq!(rendezvous::Rts::decode(rts).unwrap().proto, Protocol::Pull);
    assert_eq!(a.stats().rndv_register_failures, 1);
}

#[test]
fn stray_and_malformed_rendezvous_packets_are_counted_and_dropped() {
    let mut t = started(Protocol::Rput, LEN);
    let cts = t.bn.outbox[0].1.clone();
    // A CTS naming a transfer that does not exist.
    let mut stray = cts.clone();
    stray[wire::HEADER_LEN] ^= 0x55;
    let b = t.an.deliver(stray);
    t.a.on_receive(0, &mut t.an, b);
    assert_eq!(t.a.stats().rndv_stray, 1);
    // A CTS body one byte short (the header declares it).
    let mut short = cts.clone();
    short.pop();
    short[12] -= 1;
    let b = t.an.deliver(short);
    t.a.on_receive(0, &mut t.an, b);
    assert_eq!(t.a.stats().malformed, 2);
    assert_eq!(
        t.a.stats().rndv_stray,
        1,
        "a bad body is malformed, not stray"
    );
    assert!(t.an.rdma_out.is_empty(), "nothing moved for them");
    // The real one still works, once; a repeat is stray.
    pump(&mut t.bn, &mut t.a, &mut t.an);
    assert_eq!(t.an.rdma_out.len(), 3);
    let b = t.an.deliver(cts);
    t.a.on_receive(0, &mut t.an, b);
    assert_eq!(t.a.stats().rndv_stray, 2);
    assert_eq!(t.an.rdma_out.len(), 3);
}

#[test]
fn configurations_the_pull_window_cannot_honour_are_refused() {
    let mut c = cfg(Protocol::Pull);
    c.pull_frames = 16;
    c.pull_requests = 8;
    assert_eq!(
        Ep::new(c, 0, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::PullWindow)
    );
    c.pull_requests = 0;
    assert_eq!(
        Ep::new(c, 0, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::PullWindow)
    );
}

/// Delivers packets both ways until none is left, at `now`; `drop` decides
/// which packets the network loses (by sender rank and bytes).
fn exchange(
    a: &mut Ep,
    an: &mut MemNic,
    b: &mut Ep,
    bn: &mut MemNic,
    now: u64,
    mut drop: impl FnMut(u16, &[u8]) -> bool,
) {
    for _ in 0..1000 {
        let ab: Vec<_> = an.outbox.drain(..).collect();
        let ba: Vec<_> = bn.outbox.drain(..).collect();
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        for (_, p) in ab {
            if !drop(0, &p) {
                let r = bn.deliver(p);
                b.on_receive(now, bn, r);
            }
        }
        for (_, p) in ba {
            if !drop(1, &p) {
                let r = an.deliver(p);
                a.on_receive(now, an, r);
            }
        }
    }
    panic!("packets never stopped");
}

fn lossy() -> Config {
    Config {
        medium_max: Some(0),
        ..Config::unreliable(THRESHOLD, 4)
    }
}

/// A PULL receive whose FIN was lost, followed by many more finished
/// receives: the sender's probe still gets the FIN again (a bounded history
/// of finished receives was outrun after 16, and the send never completed).
#[test]
fn a_lost_fin_is_recovered_by_a_probe_however_many_receives_finished_since() {
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let mut now = 0;
    let mut first = None;
    for k in 0..25 {
        let dst = bn.user_buf(vec![0; LEN]);
        let recv = b
            .irecv(
                now,
                &mut bn,
                Source::Rank(0),
                TagSel::Any,
                0,
                dst,
                LEN as u32,
            )
            .unwrap();
        let src = an.user_buf(data());
        let send = a.isend(now, &mut an, 1, k, 0, src, LEN as u32).unwrap();
        // The first transfer's FIN is lost; every later one's arrives.
        exchange(&mut a, &mut an, &mut b, &mut bn, now, |from, p| {
            k == 0 && from == 1 && p[1] == wire::Kind::Fin as u8
        });
        assert_eq!(b.test(recv).unwrap().unwrap().len, LEN as u32);
        assert_eq!(bn.user[dst.0 as usize], data());
        if k == 0 {
            first = Some(send);
        } else {
            assert!(a.test(send).unwrap().is_some(), "transfer {k}");
        }
        now += 1_000;
    }
    let send = first.unwrap();
    assert_eq!(a.test(send), Ok(None), "its FIN was lost");
    // The sender's timer fires: a probe, answered by the FIN.
    now += a.config().rto_ns * 2;
    a.poll(now, &mut an);
    assert!(
        an.outbox
            .iter()
            .any(|(_, p)| p[1] == wire::Kind::Probe as u8),
        "the sender probes"
    );
    exchange(&mut a, &mut an, &mut b, &mut bn, now, |_, _| false);
    assert_eq!(a.test(send).unwrap().unwrap().fault, None);
    assert_eq!((a.stats().rndv_probes, b.stats().rndv_fin_repeats), (1, 1));
}

/// A PULL sender whose FIN never comes probes less and less often (each
/// probe waits twice as long as the one before, up to the longest
/// retransmission timeout), and probes again at once after serving a
/// frame. Before, every transfer of a window probed at every timeout: 64
/// transfers flooded a peer that was only away.
#[test]
fn a_sender_without_its_fin_backs_off_its_probes() {
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let dst = bn.user_buf(vec![0; LEN]);
    b.irecv(0, &mut bn, Source::Rank(0), TagSel::Any, 0, dst, LEN as u32)
        .unwrap();
    let src = an.user_buf(data());
    let send = a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    // Every frame arrives; the FIN does not, and the receiver then falls
    // silent.
    exchange(&mut a, &mut an, &mut b, &mut bn, 0, |from, p| {
        from == 1 && p[1] == wire::Kind::Fin as u8
    });
    assert_eq!(a.test(send), Ok(None), "its FIN was lost");
    let rto = a.config().rto_ns;
    let span = 64 * rto;
    let mut now = 0;
    while now < span {
        now += rto / 4;
        a.poll(now, &mut an);
        an.outbox.clear();
    }
    let probes = a.stats().rndv_probes;
    // 1 + 2 + 4 + 8 + 16 + 32 timeouts: six probes in 64, not 64.
    assert!((4..=7).contains(&probes), "{probes} probes in 64 timeouts");
}

/// A probe naming a receive that is still live is not answered with a FIN
/// (the receiver finishes by itself); on a reliable transport a probe is stray.
#[test]
fn a_probe_for_a_live_receive_gets_no_fin_and_is_stray_on_a_reliable_transport() {
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let dst = bn.user_buf(vec![0; LEN]);
    b.irecv(0, &mut bn, Source::Any, TagSel::Any, 0, dst, LEN as u32)
        .unwrap();
    let src = an.user_buf(data());
    a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    // RTS to the receiver; its PULLs (naming its receive) go nowhere.
    exchange(&mut a, &mut an, &mut b, &mut bn, 0, |from, _| from == 1);
    let pull = {
        // The receiver asks again after its timeout: capture a PULL.
        b.poll(b.config().rto_ns * 2, &mut bn);
        let p = bn
            .outbox
            .iter()
            .find(|(_, p)| p[1] == wire::Kind::Pull as u8)
            .expect("the receiver asks again")
            .1
            .clone();
        bn.outbox.clear();
        rendezvous::Pull::decode(&p[wire::HEADER_LEN..]).unwrap()
    };
    let probe = |kind_ok: bool| {
        let body = rendezvous::Probe {
            sender: pull.sender,
            receiver: if kind_ok { pull.receiver } else { 0 },
        };
        let mut bytes = [0u8; rendezvous::Probe::LEN];
        body.encode(&mut bytes);
        let h = wire::Header {
            kind: wire::Kind::Probe,
            src: 0,
            context: 0,
            tag: 0,
            len: rendezvous::Probe::LEN as u32,
            seq: 0,
            ack: 0,
            credit: 0,
        };
        let mut p = vec![0u8; wire::HEADER_LEN];
        h.encode(&mut p).unwrap();
        p.extend_from_slice(&bytes);
        p
    };
    let r = bn.deliver(probe(true));
    b.on_receive(0, &mut bn, r);
    assert!(
        bn.outbox.iter().all(|(_, p)| p[1] != wire::Kind::Fin as u8),
        "no FIN for a live receive"
    );
    assert_eq!(b.stats().rndv_fin_repeats, 0);
    let r = bn.deliver(probe(false));
    b.on_receive(0, &mut bn, r);
    assert_eq!(b.stats().rndv_stray, 1, "receiver id 0 names nothing");
    // Reliable: a probe is never sent, so one is stray.
    let (mut c, mut cn) = (
        Ep::new(cfg(Protocol::Pull), 1, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
    );
    let r = cn.deliver(probe(true));
    c.on_receive(0, &mut cn, r);
    assert_eq!(c.stats().rndv_stray, 1);
    assert!(cn.outbox.is_empty());
}

/// Lossy transports never offer RDMA rendezvous (a lost CTS or FIN would
/// never be sent again): configuring one is a typed error, the automatic
/// choice is PULL even on an RDMA-capable NIC, and a receiver offered RGET
/// there pulls instead.
#[test]
fn lossy_transports_refuse_rdma_rendezvous_and_pull_instead() {
    for p in [Protocol::Rput, Protocol::Rget] {
        let c = Config {
            rendezvous: Some(p),
            ..lossy()
        };
        assert_eq!(
            Ep::new(c, 0, 2, Tables::new(&SIZES)).err(),
            Some(ConfigError::RendezvousNeedsReliable)
        );
    }
    let c = Config {
        rendezvous: Some(Protocol::Pull),
        ..lossy()
    };
    assert!(Ep::new(c, 0, 2, Tables::new(&SIZES)).is_ok());
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let src = an.user_buf(data());
    a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    let rts = &an.outbox[0].1[wire::HEADER_LEN..];
    assert_eq!(rendezvous::Rts::decode(rts).unwrap().proto, Protocol::Pull);
    assert!(an.regs.is_empty(), "PULL registers nothing");
    // A peer that offers RGET on a lossy transport is pulled from.
    let mut rts = an.outbox[0].1.clone();
    rts[wire::HEADER_LEN] = Protocol::Rget as u8;
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let dst = bn.user_buf(vec![0; LEN]);
    b.irecv(0, &mut bn, Source::Any, TagSel::Any, 0, dst, LEN as u32)
        .unwrap();
    let r = bn.deliver(rts);
    b.on_receive(0, &mut bn, r);
    assert!(bn.rdma_out.is_empty(), "no RDMA read on a lossy transport");
    assert!(bn
        .outbox
        .iter()
        .any(|(_, p)| p[1] == wire::Kind::Pull as u8));
}

/// An address from the wire whose range runs past the end of the address
/// space is an access error on both sides, never an overflow (it panicked
/// in a debug build and wrapped in release).
#[test]
fn a_remote_range_past_the_address_space_is_an_access_error_on_both_sides() {
    let near_end = (u64::MAX - 100).to_le_bytes();
    // RGET: the RTS carries the sender's address.
    let (mut a, mut an) = (
        Ep::new(cfg(Protocol::Rget), 0, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
    );
    let (mut b, mut bn) = (
        Ep::new(cfg(Protocol::Rget), 1, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
    );
    let dst = bn.user_buf(vec![0; LEN]);
    let recv = b
        .irecv(0, &mut bn, Source::Any, TagSel::Any, 0, dst, LEN as u32)
        .unwrap();
    let src = an.user_buf(data());
    let send = a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    let mut rts = an.outbox.remove(0).1;
    rts[wire::HEADER_LEN + 16..wire::HEADER_LEN + 24].copy_from_slice(&near_end);
    let r = bn.deliver(rts);
    b.on_receive(0, &mut bn, r);
    assert!(
        bn.rdma_out.is_empty(),
        "nothing posted for a wrapping range"
    );
    let st = b.test(recv).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    pump(&mut bn, &mut a, &mut an);
    let st = a.test(send).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));

    // RPUT: the CTS carries the receiver's address.
    let mut t = started(Protocol::Rput, LEN);
    let cts = &mut t.bn.outbox[0].1;
    cts[wire::HEADER_LEN + 16..wire::HEADER_LEN + 24].copy_from_slice(&near_end);
    pump(&mut t.bn, &mut t.a, &mut t.an);
    assert!(
        t.an.rdma_out.is_empty(),
        "nothing posted for a wrapping range"
    );
    let st = t.a.test(t.send).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    pump(&mut t.an, &mut t.b, &mut t.bn);
    let st = t.b.test(t.recv).unwrap().unwrap();
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    assert_eq!(t.an.regs.len() + t.bn.regs.len(), 0, "registrations ended");
}

/// A threshold too small for a send slot to hold an RTS is refused when
/// the endpoint is made (it was accepted, and the first large send panicked);
/// the smallest accepted one carries large messages.
#[test]
fn an_eager_threshold_below_the_largest_control_body_is_refused() {
    let min = rendezvous::MAX_BODY as u32;
    for t in [0, 1, min - 1] {
        let c = Config::reliable(t, 4);
        assert_eq!(
            Ep::new(c, 0, 2, Tables::new(&SIZES)).err(),
            Some(ConfigError::EagerThreshold {
                min,
                max: 65535 - wire::HEADER_LEN as u32
            }),
            "threshold {t}"
        );
    }
    for p in [Protocol::Rput, Protocol::Rget, Protocol::Pull] {
        let c = Config {
            rendezvous: Some(p),
            ..Config::reliable(min, 4)
        };
        let mk = || MemNic::new(16, wire::HEADER_LEN + min as usize).with_rdma(64);
        let (mut a, mut an) = (Ep::new(c, 0, 2, Tables::new(&SIZES)).unwrap(), mk());
        let (mut b, mut bn) = (Ep::new(c, 1, 2, Tables::new(&SIZES)).unwrap(), mk());
        let dst = bn.user_buf(vec![0; 300]);
        let recv = b
            .irecv(0, &mut bn, Source::Any, TagSel::Any, 0, dst, 300)
            .unwrap();
        let src = an.user_buf(data()[..300].to_vec());
        let send = a.isend(0, &mut an, 1, 4, 0, src, 300).unwrap();
        for _ in 0..100 {
            rdma(&mut a, &mut an, &mut bn);
            rdma(&mut b, &mut bn, &mut an);
            pump(&mut an, &mut b, &mut bn);
            pump(&mut bn, &mut a, &mut an);
        }
        assert_eq!(b.test(recv).unwrap().unwrap().len, 300, "{p:?}");
        assert_eq!(bn.user[dst.0 as usize], data()[..300], "{p:?}");
        assert!(a.test(send).unwrap().is_some(), "{p:?}");
    }
}

/// Many PULL receives at once ask for no more frames, all together, than
/// two transfers' windows (the receive pool must hold what arrives); those
/// that found the budget spent ask as frames arrive, every one completes,
/// and nothing is asked for twice when nothing is lost.
#[test]
fn concurrent_pull_receives_share_one_budget_of_frames_and_all_complete() {
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let budget = 2 * lossy().pull_frames as u32 * lossy().pull_requests as u32;
    let n = 7u32;
    let per = (LEN as u32).div_ceil(THRESHOLD);
    assert!(
        n * per > budget,
        "the receives together want more than the budget"
    );
    let mut recvs = Vec::new();
    for k in 0..n {
        let dst = bn.user_buf(vec![0; LEN]);
        let r = b
            .irecv(
                0,
                &mut bn,
                Source::Rank(0),
                TagSel::Tag(k),
                0,
                dst,
                LEN as u32,
            )
            .unwrap();
        recvs.push((r, dst));
        let src = an.user_buf(data());
        a.isend(0, &mut an, 1, k, 0, src, LEN as u32).unwrap();
    }
    // The RTSs arrive; the receiver's first PULLs stay within the budget.
    pump(&mut an, &mut b, &mut bn);
    let asked: u32 = bn
        .outbox
        .iter()
        .filter(|(_, p)| p[1] == wire::Kind::Pull as u8)
        .map(|(_, p)| {
            rendezvous::Pull::decode(&p[wire::HEADER_LEN..])
                .unwrap()
                .count
        })
        .sum();
    assert!(
        asked > 0 && asked <= budget,
        "asked {asked} of budget {budget}"
    );
    exchange(&mut a, &mut an, &mut b, &mut bn, 0, |_, _| false);
    for (r, dst) in recvs {
        assert_eq!(b.test(r).unwrap().unwrap().len, LEN as u32);
        assert_eq!(bn.user[dst.0 as usize], data());
    }
    assert_eq!(b.stats().retransmits, 0);
    assert_eq!(b.stats().duplicates, 0);
}

/// Where registering is free and sends gather (raw Ethernet), a PULL
/// sender sends every frame straight from its buffer: no frame is copied
/// into a bounce slot, the data arrives intact, and the registration ends
/// with the transfer.
#[test]
fn pull_frames_are_gathered_from_the_senders_buffer_where_that_is_cheap() {
    let (mut a, mut an) = (Ep::new(lossy(), 0, 2, Tables::new(&SIZES)).unwrap(), nic());
    an.caps.cheap_gather = true;
    let (mut b, mut bn) = (Ep::new(lossy(), 1, 2, Tables::new(&SIZES)).unwrap(), nic());
    let dst = bn.user_buf(vec![0; LEN]);
    let recv = b
        .irecv(
            0,
            &mut bn,
            Source::Rank(0),
            TagSel::Tag(4),
            0,
            dst,
            LEN as u32,
        )
        .unwrap();
    let src = an.user_buf(data());
    let send = a.isend(0, &mut an, 1, 4, 0, src, LEN as u32).unwrap();
    assert_eq!(an.regs.len(), 1, "the buffer is registered for the gathers");
    exchange(&mut a, &mut an, &mut b, &mut bn, 0, |_, _| false);
    assert_eq!(b.test(recv).unwrap().unwrap().len, LEN as u32);
    assert_eq!(bn.user[dst.0 as usize], data());
    assert!(a.test(send).unwrap().is_some());
    let frames = (LEN as u32).div_ceil(THRESHOLD) as usize;
    assert_eq!(an.gathered, frames, "every frame gathered");
    assert!(an.regs.is_empty(), "the registration ended with the send");
}

/// The RDMA side of a transfer whose peer died (its write or read fails
/// with the connection): the request ends `PeerFailed`, as every request
/// naming a failed peer does, not `Rdma(Down)`; the peer is failed at the
/// next poll.
#[test]
fn a_transfer_whose_peer_died_ends_peer_failed() {
    for p in [Protocol::Rput, Protocol::Rget] {
        let mut t = started(p, LEN);
        pump(&mut t.bn, &mut t.a, &mut t.an);
        let (ep, nic) = match p {
            Protocol::Rput => (&mut t.a, &mut t.an),
            _ => (&mut t.b, &mut t.bn),
        };
        let req = match p {
            Protocol::Rput => t.send,
            _ => t.recv,
        };
        let posts: Vec<_> = nic.rdma_out.drain(..).collect();
        assert!(!posts.is_empty(), "{p:?}");
        for q in &posts {
            let WorkId::Rdma(id) = q.work else { panic!() };
            ep.on_rdma_complete(nic, id, Err(RdmaError::Down));
        }
        ep.poll(1, nic);
        let st = ep.test(req).unwrap().expect("ended");
        assert_eq!(st.fault, Some(RecvFault::PeerFailed), "{p:?}");
        assert!(ep.failed(1 - ep.rank()), "{p:?}");
    }
}
