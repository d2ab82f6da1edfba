//! Selective signalling: which inline sends ask for a completion of their
//! own (`Config::cq_moderation`), and that a send posted without one never
//! leaves anything waiting on it, liveness included.

use rmx_core::*;
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 16, 64, 32, 64);

fn cfg(send_wqes: u16, cq_moderation: u16, coalesce: Coalesce) -> Config {
    Config {
        inline_max: 64,
        send_wqes,
        cq_moderation,
        coalesce,
        keepalive_ns: 1_000_000,
        peer_timeout_ns: 8_000_000,
        ..Config::reliable(256, 64)
    }
}

/// A NIC that takes inline sends, completes later, and holds an
/// unsignalled send's completion until the next signalled post.
fn nic() -> MemNic {
    let mut n = MemNic::new(32, 1024);
    n.later = true;
    n.inline = true;
    n.unsignalled = true;
    n
}

/// Sends `n` 8-byte messages from `a` to rank 1 with nothing completing;
/// returns how many completions the NIC owed after each post.
fn stream(a: &mut Ep, an: &mut MemNic, n: usize) -> Vec<usize> {
    let buf = an.user_buf(vec![3; 8]);
    (0..n)
        .map(|i| {
            a.isend(i as u64, an, 1, 0, 0, buf, 8).unwrap();
            an.owed.len()
        })
        .collect()
}

/// Completes what the NIC owes, successfully, polling `a` after each
/// batch from `now` on, until nothing is owed; `false` if that took more
/// than a thousand rounds.
fn complete_all(a: &mut Ep, an: &mut MemNic, mut now: u64) -> bool {
    for _ in 0..1000 {
        if an.owed.is_empty() {
            return true;
        }
        for w in std::mem::take(&mut an.owed) {
            a.on_completion(an, w.wr_id(), Ok(()));
        }
        now += 1_000;
        a.poll(now, an);
    }
    an.owed.is_empty()
}

#[test]
fn one_inline_send_in_half_the_entries_is_signalled_at_most() {
    // Ten entries, no moderation below them: every fifth is signalled and
    // owes the four before it with its own.
    let mut a = Ep::new(cfg(10, 64, Coalesce::WhenFull), 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    let owed = stream(&mut a, &mut an, 10);
    assert_eq!(owed, [0, 0, 0, 0, 5, 5, 5, 5, 5, 10]);
    assert_eq!(an.quiet(1), 0);
    assert_eq!(a.stats().unsignalled, 8);
    assert_eq!(an.inline_sent, 10, "all ten went inline");

    // A moderation of 3 signals every third.
    let mut a = Ep::new(cfg(10, 3, Coalesce::WhenFull), 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    assert_eq!(stream(&mut a, &mut an, 7), [0, 0, 3, 3, 3, 6, 6]);
    assert_eq!(an.quiet(1), 1);

    // 1: every send signalled, as before selective signalling.
    let mut a = Ep::new(cfg(10, 1, Coalesce::WhenFull), 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    assert_eq!(stream(&mut a, &mut an, 4), [1, 2, 3, 4]);
    assert_eq!(a.stats().unsignalled, 0);

    // A coalescing threshold of 4 is what sends wait for: every second.
    let cfg4 = cfg(10, 64, Coalesce::Outstanding(4));
    let mut a = Ep::new(cfg4, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    assert_eq!(stream(&mut a, &mut an, 4), [0, 2, 2, 4]);

    // Three entries or fewer: half rounds to one, every send signalled.
    let mut a = Ep::new(cfg(3, 64, Coalesce::WhenFull), 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    assert_eq!(stream(&mut a, &mut an, 3), [1, 2, 3]);
}

/// Messages that wait for a send entry wait for a signalled send: when
/// the entries are full, the owed completions free them, and what waited
/// goes, packed.
#[test]
fn a_full_connection_always_has_a_signalled_send_to_wait_for() {
    for wqes in 1..=12u16 {
        let c = cfg(wqes, 64, Coalesce::WhenFull);
        let mut a = Ep::new(c, 0, 2, Tables::new(&SIZES)).unwrap();
        let mut an = nic();
        let buf = an.user_buf(vec![5; 8]);
        let mut reqs = Vec::new();
        // Within the credit a peer starts with (32 here).
        for _ in 0..2 * wqes as usize + 4 {
            reqs.push(a.isend(0, &mut an, 1, 0, 0, buf, 8).unwrap());
        }
        assert!(complete_all(&mut a, &mut an, 0), "{wqes} entries: no end");
        assert!(
            reqs.iter().all(|&r| a.test(r).unwrap().is_some()),
            "{wqes} entries: every send went: {:?} quiet {}",
            a.stats(),
            an.quiet(1)
        );
        assert!(
            an.quiet(1) < (wqes / 2).max(1) as usize,
            "{wqes} entries: {} unsignalled left over",
            an.quiet(1)
        );
    }
}

/// Messages that waited for a send entry leave inline once one frees, as
/// a message that found one at once does: from their bounce slots (free
/// again as soon as they are copied out), and unsignalled in runs, so a
/// window of them costs the device a completion per run rather than one
/// each.
#[test]
fn queued_messages_leave_inline_and_complete_in_runs() {
    let c = cfg(4, 64, Coalesce::Off);
    let mut a = Ep::new(c, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    let buf = an.user_buf(vec![5; 8]);
    let n = 12;
    let reqs: Vec<_> = (0..n)
        .map(|i| a.isend(0, &mut an, 1, i, 0, buf, 8).unwrap())
        .collect();
    assert_eq!(an.inline_sent, 4, "four entries");
    assert!(a.stats().backlogged > 0, "{:?}", a.stats());
    assert!(complete_all(&mut a, &mut an, 0), "no end");
    assert!(a.flushed());
    assert!(reqs.iter().all(|&r| a.test(r).unwrap().is_some()));
    assert_eq!(an.inline_sent, n as usize, "every message inline");
    assert_eq!(an.outbox.len(), n as usize);
    // Tags in order: nothing overtook what waited.
    let tags: Vec<u32> = an
        .outbox
        .iter()
        .map(|(_, p)| wire::Header::decode(p).unwrap().tag)
        .collect();
    assert_eq!(tags, (0..n).collect::<Vec<_>>());
    // Every second send of four entries asks for a completion; the
    // others complete with it.
    assert_eq!(a.stats().unsignalled, n as u64 / 2);
    assert_eq!(an.quiet(1), 0, "none left owed");
    assert_eq!(a.stats().unknown_completions, 0);
}

/// Unsignalled sends in flight do not stand in for a ping: nothing would
/// complete them, so a dead peer would never be found. The ping is a
/// signalled send, and its failure completes them and fails the peer.
#[test]
fn unsignalled_sends_in_flight_do_not_stand_in_for_pings() {
    let c = cfg(10, 64, Coalesce::WhenFull);
    let mut a = Ep::new(c, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut an = nic();
    let into = an.user_buf(vec![0; 16]);
    let r = a
        .irecv(0, &mut an, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    let buf = an.user_buf(vec![1; 8]);
    a.isend(0, &mut an, 1, 9, 0, buf, 8).unwrap();
    a.isend(0, &mut an, 1, 9, 0, buf, 8).unwrap();
    assert_eq!((an.quiet(1), an.owed.len()), (2, 0));
    an.outbox.clear();
    let mut now = 0;
    for _ in 0..5 {
        now = a
            .poll_timeout()
            .expect("a receive waits on rank 1")
            .max(now);
        a.poll(now, &mut an);
        if a.stats().pings_out > 0 {
            break;
        }
    }
    assert_eq!(a.stats().pings_out, 1, "pinged after the keepalive");
    assert!(now >= 1_000_000, "{now}");
    assert_eq!(an.outbox.len(), 1);
    assert_eq!(an.outbox[0].1[1], wire::Kind::Ping as u8);
    // The peer is dead: the two sends before the ping completed (no entry
    // of their own), the ping fails with the connection.
    let owed = std::mem::take(&mut an.owed);
    assert_eq!(owed.len(), 3, "{owed:?}");
    for (i, w) in owed.iter().enumerate() {
        let result = if i == 2 { Err(RdmaError::Down) } else { Ok(()) };
        a.on_completion(&mut an, w.wr_id(), result);
    }
    a.poll(now, &mut an);
    assert!(a.failed(1));
    assert_eq!(a.stats().unknown_completions, 0);
    assert_eq!(
        a.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
}
