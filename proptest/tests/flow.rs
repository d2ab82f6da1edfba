//! Flow control with a shared receive pool: unexpected messages stay in the
//! buffers they arrived in, credits are lent on request, a receiver waiting
//! for a later message still gets it, and a budget held entirely by
//! messages nobody receives is reported instead of hanging.

use rmx_core::*;
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

/// 64 unexpected messages: budget min(256 - 32, 64) = 64.
type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 16, 64, 64, 64);
const THRESHOLD: u32 = 256;

fn ranks(cfg: Config, n: u16) -> Vec<(Ep, MemNic)> {
    (0..n)
        .map(|me| {
            (
                Ep::new(cfg, me, n, Tables::new(&SIZES)).unwrap(),
                MemNic::new(64, 1024),
            )
        })
        .collect()
}

/// Moves every posted packet to its destination until nothing moves.
fn settle(rs: &mut [(Ep, MemNic)]) {
    loop {
        let mut moved = false;
        for i in 0..rs.len() {
            let out: Vec<_> = rs[i].1.outbox.drain(..).collect();
            for (dst, bytes) in out {
                moved = true;
                let (ep, nic) = &mut rs[dst as usize];
                let b = nic.deliver(bytes);
                ep.on_receive(0, nic, b);
            }
        }
        for (ep, nic) in rs.iter_mut() {
            if ep.poll_timeout().is_some_and(|t| t == 0) {
                ep.poll(0, nic);
            }
        }
        if !moved {
            return;
        }
    }
}

fn recv(rs: &mut [(Ep, MemNic)], at: usize, tag: TagSel) -> (Request, UserBuf) {
    let (ep, nic) = &mut rs[at];
    let d = nic.user_buf(vec![0; 8]);
    let r = ep.irecv(0, nic, Source::Any, tag, 0, d, 8).unwrap();
    (r, d)
}

fn send(rs: &mut [(Ep, MemNic)], from: usize, to: u16, tag: u32, byte: u8) -> Request {
    let (ep, nic) = &mut rs[from];
    let s = nic.user_buf(vec![byte; 8]);
    ep.isend(0, nic, to, tag, 0, s, 8).unwrap()
}

#[test]
fn an_unexpected_message_keeps_its_receive_buffer_until_it_is_received() {
    let mut rs = ranks(Config::reliable(THRESHOLD, 8), 2);
    send(&mut rs, 1, 0, 5, 0xAB);
    settle(&mut rs);
    let (ep, nic) = &rs[0];
    assert_eq!(ep.held_buffers(), 1);
    let held = nic
        .rx
        .iter()
        .position(Option::is_some)
        .expect("kept, not reposted");
    assert!(!nic.reposted.contains(&(held as u32)));
    let (r, d) = recv(&mut rs, 0, TagSel::Tag(5));
    let (ep, nic) = &mut rs[0];
    assert_eq!(ep.test(r).unwrap().unwrap().len, 8);
    assert_eq!(nic.user[d.0 as usize], vec![0xAB; 8]);
    assert_eq!(ep.held_buffers(), 0);
    assert_eq!(
        nic.reposted.last(),
        Some(&(held as u32)),
        "reposted when received"
    );
}

#[test]
fn a_packed_buffer_returns_after_its_last_unexpected_message() {
    let cfg = Config {
        send_wqes: 1,
        ..Config::reliable(THRESHOLD, 8)
    };
    let mut rs = ranks(cfg, 2);
    rs[1].1.later = true;
    // The first send takes the one entry; the next three pack into one packet.
    for k in 0..4 {
        send(&mut rs, 1, 0, k, k as u8);
    }
    // The lone packet arrives; its completion frees the entry for the packed one.
    let first: Vec<_> = rs[1].1.outbox.drain(..).collect();
    assert_eq!(first.len(), 1);
    for (_, b) in first {
        let (ep, nic) = &mut rs[0];
        let rb = nic.deliver(b);
        ep.on_receive(0, nic, rb);
    }
    let Some(WorkId::Send(done)) = rs[1].1.owed.first().copied() else {
        panic!("the first send owes a slot completion");
    };
    let (ep, nic) = &mut rs[1];
    ep.on_send_complete(nic, done);
    settle(&mut rs);
    assert_eq!(rs[0].0.stats().unexpected, 4);
    assert_eq!(rs[0].0.held_buffers(), 2, "one lone packet, one packed");
    for k in [3, 1, 0] {
        let (r, _) = recv(&mut rs, 0, TagSel::Tag(k));
        assert!(rs[0].0.test(r).unwrap().is_some());
    }
    assert_eq!(
        rs[0].0.held_buffers(),
        1,
        "message 2 still holds the packed buffer"
    );
    let (r, _) = recv(&mut rs, 0, TagSel::Tag(2));
    assert!(rs[0].0.test(r).unwrap().is_some());
    assert_eq!(rs[0].0.held_buffers(), 0);
}

/// The stall the credit scheme had: rank 1 sends 20 messages with tag 1
/// (more than its share of 8, and more than `credits`), then one with tag 2;
/// rank 0 receives tag 2 first. Rank 1 runs out, asks, is lent credit, and
/// the tag-2 message arrives; then the 20 arrive in order.
#[test]
fn a_receiver_waiting_for_a_later_message_gets_it_past_the_window() {
    for cfg in [
        Config::reliable(THRESHOLD, 8),
        Config::unreliable(THRESHOLD, 8),
    ] {
        let mut rs = ranks(cfg, 2);
        assert_eq!(rs[1].0.credits_left(0), 8, "share min(8, 64 / 2)");
        let (late, _) = recv(&mut rs, 0, TagSel::Tag(2));
        let early: Vec<Request> = (0..20).map(|k| send(&mut rs, 1, 0, 1, k)).collect();
        let last = send(&mut rs, 1, 0, 2, 0xEE);
        settle(&mut rs);
        let st = rs[0]
            .0
            .test(late)
            .unwrap()
            .expect("the later message arrived");
        assert_eq!(st.tag, 2);
        assert!(rs[1].0.stats().credit_requests_out > 0);
        assert!(rs[0].0.stats().credits_lent >= 13);
        assert_eq!(rs[0].0.held_buffers(), 20);
        for k in 0..20u8 {
            let (r, d) = recv(&mut rs, 0, TagSel::Tag(1));
            settle(&mut rs);
            assert!(rs[0].0.test(r).unwrap().is_some());
            assert_eq!(rs[0].1.user[d.0 as usize][0], k, "in order");
        }
        for r in early.into_iter().chain([last]) {
            assert!(rs[1].0.test(r).unwrap().is_some());
        }
        assert_eq!(rs[0].0.stall(), None);
    }
}

/// Three peers flood a receiver that receives nothing, and keep sending:
/// once the budget (64) is spent and peers wait for credit, `stall` reports
/// it; receiving one message lends its credit to a waiting peer. Each of the
/// four ranks starts with a share of min(16, 64 / (2 × 3)) = 10 (the
/// receiver's own is never used), the other 24 are lent: 54 messages held.
#[test]
fn a_budget_held_by_messages_nobody_receives_is_reported() {
    let mut rs = ranks(Config::reliable(THRESHOLD, 16), 4);
    for k in 0..40u8 {
        for from in 1..4 {
            send(&mut rs, from, 0, 9, k);
        }
    }
    settle(&mut rs);
    let ep = &rs[0].0;
    assert_eq!(
        ep.held_buffers(),
        54,
        "the budget less one share, not 3 × 40"
    );
    let stall = ep.stall().expect("a stall is reported");
    assert_eq!(stall.unexpected, 54);
    assert!(stall.waiting_peers >= 1);
    let queued: usize = (1..4).map(|i| rs[i].0.queued_sends()).sum();
    assert_eq!(
        queued,
        3 * 40 - 54,
        "the rest wait at their senders, nothing lost"
    );
    let (r, _) = recv(&mut rs, 0, TagSel::Any);
    settle(&mut rs);
    assert!(rs[0].0.test(r).unwrap().is_some());
    let queued_after: usize = (1..4).map(|i| rs[i].0.queued_sends()).sum();
    assert_eq!(
        queued_after,
        queued - 1,
        "the freed credit carried one more"
    );
    // Receiving everything drains every sender.
    for _ in 0..(3 * 40 - 1) {
        let (r, _) = recv(&mut rs, 0, TagSel::Any);
        settle(&mut rs);
        assert!(rs[0].0.test(r).unwrap().is_some());
    }
    assert_eq!(rs[0].0.stall(), None);
    assert_eq!(rs[0].0.held_buffers(), 0);
    assert!(rs[1..].iter().all(|(ep, _)| ep.queued_sends() == 0));
}

/// A credit request that gets a loan is answered by one acknowledgement
/// carrying the new limit, not two.
#[test]
fn a_loan_is_answered_once() {
    let mut rs = ranks(Config::reliable(THRESHOLD, 8), 2);
    for k in 0..9 {
        send(&mut rs, 1, 0, 1, k);
    }
    let out: Vec<_> = rs[1].1.outbox.drain(..).collect();
    assert_eq!(out.last().unwrap().1[1], wire::Kind::Credit as u8);
    for (_, b) in out {
        let (ep, nic) = &mut rs[0];
        let rb = nic.deliver(b);
        ep.on_receive(0, nic, rb);
    }
    let acks = rs[0]
        .1
        .outbox
        .iter()
        .filter(|(_, p)| p[1] == wire::Kind::Ack as u8)
        .count();
    assert_eq!(acks, 1);
    assert_eq!(rs[0].0.stats().credits_lent, 1);
}

/// 130 ranks: every peer's initial share is 0, so every send waits for a
/// loan. `n` endpoints with 130-rank peer tables.
fn big_job(cfg: Config, n: u16) -> Vec<(Ep, MemNic)> {
    const BIG: Sizes = sizes(130, 16, 64, 64, 64);
    (0..n)
        .map(|me| {
            (
                Ep::new(cfg, me, 130, Tables::new(&BIG)).unwrap(),
                MemNic::new(64, 1024),
            )
        })
        .collect()
}

/// Moves what rank 0 posted (dropping what goes to `deaf`) and every
/// answer, until nothing moves.
fn settle_but(rs: &mut [(Ep, MemNic)], deaf: u16) {
    loop {
        let mut moved = false;
        for i in 0..rs.len() {
            let out: Vec<_> = rs[i].1.outbox.drain(..).collect();
            for (dst, bytes) in out {
                if dst == deaf || dst as usize >= rs.len() {
                    continue;
                }
                moved = true;
                let (ep, nic) = &mut rs[dst as usize];
                let b = nic.deliver(bytes);
                ep.on_receive(0, nic, b);
            }
        }
        if !moved {
            return;
        }
    }
}

/// Rank 0 queues sends to ranks 1, 65 and 66; 65 and 66 lend credit, 1
/// never answers. Both sends to 65 and 66 leave: waiting on rank 1 holds
/// back rank 1's sends only (before, peers were blocked by `rank % 64`,
/// and the send to 65 waited for ever although it had its credit).
#[test]
fn a_peer_that_withholds_credit_blocks_no_other_peer() {
    let mut rs = big_job(Config::reliable(THRESHOLD, 8), 67);
    for to in [1, 65, 66] {
        let r = send(&mut rs, 0, to, 7, to as u8);
        assert_ne!(r, Request::COMPLETE, "no share: the send to {to} waits");
    }
    settle_but(&mut rs, 1);
    let (ep, nic) = &mut rs[0];
    ep.poll(0, nic);
    assert_eq!(ep.credits_left(65), 0, "the loan was used");
    assert_eq!(ep.credits_left(66), 0);
    assert_eq!(ep.queued_sends(), 1, "only the send to rank 1 waits");
    settle_but(&mut rs, 1);
    for to in [65, 66] {
        let (r, d) = recv(&mut rs, to as usize, TagSel::Tag(7));
        let (ep, nic) = &mut rs[to as usize];
        assert_eq!(ep.test(r).unwrap().expect("arrived").len, 8);
        assert_eq!(nic.user[d.0 as usize], vec![to as u8; 8]);
    }
}

/// A medium message of 17 fragments to a peer with no share asks for
/// credit once, for all its fragments (before: once per fragment, a round
/// trip each), and arrives whole.
#[test]
fn a_medium_message_asks_for_all_its_fragments_at_once() {
    let cfg = Config {
        medium_max: Some(8192),
        ..Config::reliable(THRESHOLD, 32)
    };
    let frags = 4000u32.div_ceil(THRESHOLD - 8);
    assert!(frags >= 16, "{frags} fragments");
    let mut rs = big_job(cfg, 2);
    let data: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
    let (ep, nic) = &mut rs[0];
    let s = nic.user_buf(data.clone());
    let r = ep.isend(0, nic, 1, 3, 0, s, 4000).unwrap();
    let (ep, nic) = &mut rs[1];
    let d = nic.user_buf(vec![0; 4000]);
    let rr = ep
        .irecv(0, nic, Source::Any, TagSel::Any, 0, d, 4000)
        .unwrap();
    for _ in 0..4 {
        settle_but(&mut rs, u16::MAX);
        let (ep, nic) = &mut rs[0];
        ep.poll(0, nic);
    }
    let (ep, _) = &mut rs[0];
    assert_eq!(ep.stats().credit_requests_out, 1, "one request for all");
    assert_eq!(ep.stats().fragments_out, frags as u64);
    assert!(ep.test(r).unwrap().is_some());
    let (ep, nic) = &mut rs[1];
    assert_eq!(ep.test(rr).unwrap().expect("arrived").len, 4000);
    assert_eq!(nic.user[d.0 as usize], data);
}

/// A collective's message queued behind a flood the receiver has not
/// received: it goes first, on a credit lent from the receiver's reserve
/// once the budget is spent, and the flood still arrives whole and in
/// order afterwards. Without a priority message waiting, the reserve
/// lends nothing.
#[test]
fn a_collective_message_overtakes_a_flood_on_a_reserve_credit() {
    use rmx_core::wire::context::COLLECTIVE;
    // A budget of 48 - 16 = 32, below the 64 unexpected messages kept.
    let pool = |c: Config| Config {
        rx_buffers: 48,
        rx_reserve: 16,
        rx_low_water: 16,
        ..c
    };
    for cfg in [
        pool(Config::reliable(THRESHOLD, 8)),
        pool(Config::unreliable(THRESHOLD, 8)),
    ] {
        let mut rs = ranks(cfg, 2);
        let flood: Vec<Request> = (0..50).map(|k| send(&mut rs, 1, 0, k, k as u8)).collect();
        settle(&mut rs);
        // The budget less the receiver's own share of 8, which it never uses.
        assert_eq!(rs[0].0.held_buffers(), 24, "the budget, spent");
        assert!(rs[0].0.stall().is_some());
        assert_eq!(rs[0].0.stats().reserve_loans, 0);
        let (ep, nic) = &mut rs[0];
        let d = nic.user_buf(vec![0; 8]);
        let r = ep
            .irecv(0, nic, Source::Rank(1), TagSel::Tag(3), COLLECTIVE, d, 8)
            .unwrap();
        let (ep, nic) = &mut rs[1];
        let s = nic.user_buf(vec![0xC0; 8]);
        let c = ep.isend(0, nic, 0, 3, COLLECTIVE, s, 8).unwrap();
        settle(&mut rs);
        let st = rs[0].0.test(r).unwrap().expect("the collective's message");
        assert_eq!((st.source, st.tag), (1, 3));
        assert_eq!(rs[0].1.user[d.0 as usize], vec![0xC0; 8]);
        assert!(rs[1].0.test(c).unwrap().is_some());
        assert_eq!(rs[0].0.stats().reserve_loans, 1);
        for k in 0..50u8 {
            let (r, d) = recv(&mut rs, 0, TagSel::Any);
            settle(&mut rs);
            let st = rs[0].0.test(r).unwrap().expect("the flood goes on");
            assert_eq!((st.tag, rs[0].1.user[d.0 as usize][0]), (k as u32, k));
        }
        for q in flood {
            assert!(rs[1].0.test(q).unwrap().is_some());
        }
        assert_eq!((rs[0].0.held_buffers(), rs[0].0.stall()), (0, None));
    }
}

/// A pool of 48 buffers, 16 of them the reserve: a budget of 32.
fn small_pool() -> Config {
    Config {
        rx_buffers: 48,
        rx_reserve: 16,
        rx_low_water: 16,
        ..Config::reliable(THRESHOLD, 8)
    }
}

/// A correct program a bounded pool cannot carry: rank 1 sends 50
/// messages rank 0 receives only after a later one. Past the budget the
/// later one queues behind them for good; once that has lasted twice the
/// peer timeout, the receive waiting for it ends with `NoBuffers` (the
/// setting to raise), and nothing accepted is lost: the flood and the
/// later message are still received afterwards.
#[test]
fn a_stall_that_outlasts_the_peer_timeout_ends_its_receive_with_no_buffers() {
    let cfg = small_pool();
    let timeout = 2 * cfg.peer_timeout_ns;
    let mut rs = ranks(cfg, 2);
    let (late, _) = recv(&mut rs, 0, TagSel::Tag(2));
    let flood: Vec<Request> = (0..50).map(|k| send(&mut rs, 1, 0, 1, k)).collect();
    let last = send(&mut rs, 1, 0, 2, 0xEE);
    settle(&mut rs);
    assert!(rs[0].0.stall().is_some());
    // Driven as a shell drives a rank that waits: a poll a millisecond.
    let (ep, nic) = &mut rs[0];
    let step = 1_000_000;
    let mut now = 0;
    while now + step < timeout {
        now += step;
        ep.poll(now, nic);
        assert_eq!(
            ep.test(late).unwrap(),
            None,
            "not before twice the peer timeout"
        );
    }
    ep.poll(now + step, nic);
    let st = ep.test(late).unwrap().expect("ended by the stall");
    assert_eq!((st.source, st.fault), (1, Some(RecvFault::NoBuffers)));
    assert_eq!(ep.stats().stalls_ended, 1);
    for k in 0..50u8 {
        let (r, d) = recv(&mut rs, 0, TagSel::Tag(1));
        settle(&mut rs);
        assert!(rs[0].0.test(r).unwrap().is_some());
        assert_eq!(rs[0].1.user[d.0 as usize][0], k);
    }
    let (r, d) = recv(&mut rs, 0, TagSel::Tag(2));
    settle(&mut rs);
    assert!(rs[0].0.test(r).unwrap().is_some());
    assert_eq!(rs[0].1.user[d.0 as usize][0], 0xEE);
    for q in flood.into_iter().chain([last]) {
        assert!(rs[1].0.test(q).unwrap().is_some());
    }
}

/// A budget lent out is not a stall: rank 0 has received every message
/// that arrived and lent the freed credits again, but the grants and the
/// messages they pay for are still on the wire (a slow transport, a send
/// queue busy for seconds). Nothing unexpected holds a buffer, so the
/// receive waiting for the next message waits, however long, and gets it.
#[test]
fn credits_in_flight_are_no_stall_however_long_they_take() {
    let cfg = small_pool();
    let timeout = 2 * cfg.peer_timeout_ns;
    let mut rs = ranks(cfg, 2);
    let _flood: Vec<Request> = (0..50).map(|k| send(&mut rs, 1, 0, 1, k)).collect();
    settle(&mut rs);
    assert!(rs[0].0.stall().is_some(), "the budget is held");
    // Rank 0 receives what arrived; its grants stay in its outbox.
    let mut got = 0u8;
    while rs[0].0.held_buffers() > 0 {
        let (r, d) = recv(&mut rs, 0, TagSel::Tag(1));
        assert!(rs[0].0.test(r).unwrap().is_some());
        assert_eq!(rs[0].1.user[d.0 as usize][0], got);
        got += 1;
    }
    assert!(got < 50);
    let (next, d) = recv(&mut rs, 0, TagSel::Tag(1));
    let (ep, nic) = &mut rs[0];
    let step = 1_000_000;
    let mut now = 0;
    while now < 2 * timeout {
        now += step;
        ep.poll(now, nic);
        assert_eq!(ep.test(next).unwrap(), None, "still waiting at {now} ns");
    }
    assert_eq!(ep.stats().stalls_ended, 0);
    settle(&mut rs);
    let st = rs[0].0.test(next).unwrap().expect("the next message");
    assert_eq!((st.tag, st.fault), (1, None));
    assert_eq!(rs[0].1.user[d.0 as usize][0], got);
}
