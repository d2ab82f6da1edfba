//! The rendezvous state machines, step by step, against the in-memory NIC.

use rmx_core::*;
use rmx_proptest::memnic::{execute_rdma, MemNic};

type Ep = Endpoint<4, 8, 16, 16, 32, 8>;
const THRESHOLD: u32 = 256;
const LEN: usize = 2500;

fn nic() -> MemNic {
    MemNic::new(16, 1024, 16, THRESHOLD as usize).with_rdma(1000)
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
        ep.on_rdma_complete(me, p.id, r);
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
    let (mut a, mut an) = (Ep::new(cfg(p), 0, 2).unwrap(), nic());
    let (mut b, mut bn) = (Ep::new(cfg(p), 1, 2).unwrap(), nic());
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
    let (mut a, mut an) = (Ep::new(cfg(Protocol::Rget), 0, 2).unwrap(), nic());
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
    assert_eq!(Ep::new(c, 0, 2).err(), Some(ConfigError::PullWindow));
    c.pull_requests = 0;
    assert_eq!(Ep::new(c, 0, 2).err(), Some(ConfigError::PullWindow));
}
