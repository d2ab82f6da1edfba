//! A peer that dies: given up once silent for the peer timeout (lossy
//! transports) or when the transport reports it down; every request naming
//! it ends with a typed error and later calls naming it are refused; the
//! peer, if it lives, is told, and fails this rank in turn.

use rmx_core::*;
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 16, 64, 32, 64);
const THRESHOLD: u32 = 256;

fn lossy(peer_timeout_ns: u64) -> Config {
    Config {
        reliable: false,
        peer_timeout_ns,
        ..Config::reliable(THRESHOLD, 4)
    }
}

/// Polls at each deadline until `done` or `steps` polls.
fn run_until(
    ep: &mut Ep,
    nic: &mut MemNic,
    mut now: u64,
    steps: usize,
    done: impl Fn(&Ep) -> bool,
) -> u64 {
    for _ in 0..steps {
        if done(ep) {
            break;
        }
        let Some(t) = ep.poll_timeout() else { break };
        now = now.max(t);
        ep.poll(now, nic);
        nic.outbox.clear(); // the peer is gone: nothing arrives anywhere
    }
    now
}

#[test]
fn a_peer_that_stops_acknowledging_is_given_up_and_every_request_naming_it_ends() {
    let cfg = lossy(10_000_000);
    let mut a = Ep::new(cfg, 0, 3, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    let small = nic.user_buf(vec![7; 16]);
    let big = nic.user_buf(vec![9; 1000]);
    let into = nic.user_buf(vec![0; 64]);
    // Eager sends beyond the initial credit wait with requests; a
    // rendezvous waits for its transfer.
    let sends: Vec<Request> = (0..12)
        .map(|k| a.isend(0, &mut nic, 1, k, 0, small, 16).unwrap())
        .collect();
    let waiting: Vec<Request> = sends
        .into_iter()
        .filter(|r| *r != Request::COMPLETE)
        .collect();
    assert!(!waiting.is_empty(), "some sends wait for credit");
    let rndv = a.isend(0, &mut nic, 1, 99, 0, big, 1000).unwrap();
    let from_1 = a
        .irecv(0, &mut nic, Source::Rank(1), TagSel::Any, 0, into, 64)
        .unwrap();
    let from_any = a
        .irecv(0, &mut nic, Source::Any, TagSel::Any, 0, into, 64)
        .unwrap();
    nic.outbox.clear();
    let gave_up = run_until(&mut a, &mut nic, 0, 1000, |a| a.failed(1));
    assert!(a.failed(1) && !a.failed(2));
    let st = a.stats();
    assert_eq!(st.peers_failed, 1);
    assert!(st.timeouts >= 5, "retransmitted meanwhile: {}", st.timeouts);
    // Given up at the first timeout after 10 ms of silence, not before.
    assert!(
        (10_000_000..10_000_000 + cfg.rto_max_ns).contains(&gave_up),
        "given up at {gave_up} ns"
    );
    let fault = |a: &mut Ep, r| a.test(r).unwrap().expect("ended").fault;
    for r in waiting {
        assert_eq!(fault(&mut a, r), Some(RecvFault::PeerFailed));
    }
    assert_eq!(fault(&mut a, rndv), Some(RecvFault::PeerFailed));
    assert_eq!(fault(&mut a, from_1), Some(RecvFault::PeerFailed));
    assert_eq!(
        a.test(from_any),
        Ok(None),
        "another peer may still match it"
    );
    assert_eq!(
        a.isend(0, &mut nic, 1, 0, 0, small, 16),
        Err(SendError::PeerFailed)
    );
    assert_eq!(
        a.irecv(0, &mut nic, Source::Rank(1), TagSel::Any, 0, into, 64),
        Err(RecvError::PeerFailed)
    );
    assert!(a.flushed(), "nothing waits for the failed peer");
    assert_eq!(a.queued_sends(), 0);
    // A packet from the failed peer is dropped and counted; other peers go on.
    let mut b = Ep::new(cfg, 1, 3, Tables::new(&SIZES)).unwrap();
    let mut bn = MemNic::new(32, 1024);
    let s = bn.user_buf(vec![1; 8]);
    b.isend(0, &mut bn, 0, 5, 0, s, 8).unwrap();
    for (_, p) in bn.outbox.drain(..) {
        let buf = nic.deliver(p);
        a.on_receive(0, &mut nic, buf);
    }
    assert_eq!(a.stats().from_failed, 1);
    assert_eq!(a.test(from_any), Ok(None));
    assert!(a.isend(0, &mut nic, 2, 0, 0, small, 16).is_ok());
}

#[test]
fn no_timeout_means_the_peer_is_never_given_up() {
    let mut a = Ep::new(lossy(0), 0, 2, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    let s = nic.user_buf(vec![7; 16]);
    a.isend(0, &mut nic, 1, 0, 0, s, 16).unwrap();
    run_until(&mut a, &mut nic, 0, 200, |_| false);
    assert!(!a.failed(1));
    assert!(a.stats().timeouts >= 100);
}

#[test]
fn a_connection_the_transport_reports_down_fails_its_peer_at_the_next_poll() {
    let cfg = Config::reliable(THRESHOLD, 4);
    let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    let s = nic.user_buf(vec![7; 16]);
    let into = nic.user_buf(vec![0; 16]);
    let r = a
        .irecv(0, &mut nic, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    nic.down.push(1);
    // The send was accepted (its data left the user buffer) before the
    // transport said the connection is gone.
    assert_eq!(a.isend(0, &mut nic, 1, 0, 0, s, 16), Ok(Request::COMPLETE));
    assert!(!a.failed(1), "failed at the next poll, not inside the post");
    assert_eq!(a.poll_timeout(), Some(0));
    a.poll(1, &mut nic);
    assert!(a.failed(1));
    assert_eq!(a.stats().post_down, 1);
    assert_eq!(
        a.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
    assert_eq!(
        a.isend(2, &mut nic, 1, 0, 0, s, 16),
        Err(SendError::PeerFailed)
    );
}

/// A rank that only waits to hear from a peer (a receive naming it) has
/// nothing unacknowledged to time out: the silent peer is pinged after
/// `keepalive_ns`, pinged again backing off, and given up once silent for
/// the peer timeout.
#[test]
fn a_receive_from_a_silent_peer_ends_once_its_pings_go_unanswered() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(20_000_000)
    };
    let mut a = Ep::new(cfg, 0, 3, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    let into = nic.user_buf(vec![0; 16]);
    let r = a
        .irecv(5, &mut nic, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    let any = a
        .irecv(5, &mut nic, Source::Any, TagSel::Any, 0, into, 16)
        .unwrap();
    assert!(
        a.poll_timeout().is_some_and(|t| t <= 5 + 1_000_000),
        "a deadline to check on the peer"
    );
    let mut now = 5;
    let mut pings = Vec::new();
    for _ in 0..100 {
        if a.failed(1) {
            break;
        }
        let Some(t) = a.poll_timeout() else { break };
        now = now.max(t);
        a.poll(now, &mut nic);
        for (to, p) in nic.outbox.drain(..) {
            if p[1] == wire::Kind::Ping as u8 {
                pings.push((to, now));
            }
        }
    }
    assert!(a.failed(1), "given up");
    assert!(now >= 5 + 20_000_000, "not before the timeout: {now}");
    assert!(!a.failed(2), "nothing waited on rank 2: never pinged");
    assert!(pings.len() >= 4, "{pings:?}");
    assert!(pings.iter().all(|&(to, _)| to == 1));
    assert!(pings[0].1 >= 5 + 1_000_000, "not before the silence");
    let gaps: Vec<u64> = pings.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]),
        "backing off: {gaps:?}"
    );
    assert_eq!(a.stats().pings_out, pings.len() as u64);
    assert_eq!(
        a.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
    assert_eq!(a.test(any), Ok(None), "another peer may still match it");
}

/// On a reliable transport (verbs RC) the NIC acknowledges, and only a
/// failed send says a peer's process died: a rank that only waits on a
/// silent peer pings it, the gap doubling up to the peer timeout, the
/// pinged rank sends nothing back, and the ping that fails with the
/// connection ends the receive. Sends in flight to the peer stand in for
/// pings.
#[test]
fn on_a_reliable_transport_a_waiting_rank_pings_and_a_dead_peer_fails_the_ping() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        peer_timeout_ns: 8_000_000,
        ..Config::reliable(THRESHOLD, 4)
    };
    let mut a = Ep::new(cfg, 0, 3, Tables::new(&SIZES)).unwrap();
    let mut b = Ep::new(cfg, 1, 3, Tables::new(&SIZES)).unwrap();
    let (mut an, mut bn) = (MemNic::new(32, 1024), MemNic::new(32, 1024));
    let into = an.user_buf(vec![0; 16]);
    let r = a
        .irecv(5, &mut an, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    let mut now = 5;
    let mut pings = Vec::new();
    for _ in 0..40 {
        let Some(t) = a.poll_timeout() else { break };
        now = now.max(t);
        a.poll(now, &mut an);
        for (to, p) in an.outbox.drain(..) {
            assert_eq!(p[1], wire::Kind::Ping as u8, "only pings");
            pings.push((to, now));
            let buf = bn.deliver(p);
            b.on_receive(now, &mut bn, buf);
        }
        b.poll(now, &mut bn);
        assert!(bn.outbox.is_empty(), "the pinged rank sends nothing back");
    }
    assert!(!a.failed(1), "silence alone fails no peer here");
    assert!(now > 100_000_000, "a long wait: {now}");
    assert!(pings.iter().all(|&(to, _)| to == 1));
    assert!(pings[0].1 >= 5 + 1_000_000, "not before the silence");
    let gaps: Vec<u64> = pings.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert_eq!(gaps[0], 1_000_000, "{gaps:?}");
    assert_eq!(gaps[1], 2_000_000, "{gaps:?}");
    assert_eq!(*gaps.last().unwrap(), 8_000_000, "capped: {gaps:?}");
    assert_eq!(b.stats().pings_out, 0, "b waits on nothing");
    // Sends in flight to the peer: no ping until they complete.
    an.later = true;
    let s = an.user_buf(vec![1; 16]);
    a.isend(now, &mut an, 1, 9, 0, s, 16).unwrap();
    an.outbox.clear();
    let before = a.stats().pings_out;
    for _ in 0..5 {
        now = a.poll_timeout().unwrap().max(now);
        a.poll(now, &mut an);
    }
    assert_eq!(a.stats().pings_out, before, "the send stands in for a ping");
    assert!(an.outbox.is_empty());
    // The peer's process dies: its completion fails with the connection.
    let w = an.owed.remove(0);
    a.on_completion(&mut an, w.wr_id(), Err(RdmaError::Down));
    a.poll(now, &mut an);
    assert!(a.failed(1));
    assert_eq!(
        a.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
    // And a ping refused at its post (the connection already in error)
    // fails the peer just the same.
    let mut c = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut cn = MemNic::new(32, 1024);
    let into = cn.user_buf(vec![0; 16]);
    let r = c
        .irecv(0, &mut cn, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    cn.down.push(1);
    let mut now = 0;
    for _ in 0..10 {
        let Some(t) = c.poll_timeout() else { break };
        now = now.max(t);
        c.poll(now, &mut cn);
    }
    assert!(c.failed(1));
    assert!(now >= 1_000_000, "after the keepalive: {now}");
    assert_eq!(
        c.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
}

/// A peer that answers is never given up, however long the wait; one
/// silent only while nothing waits on it is never pinged.
#[test]
fn a_peer_that_answers_its_pings_is_waited_on_for_ever() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(5_000_000)
    };
    let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut b = Ep::new(cfg, 1, 2, Tables::new(&SIZES)).unwrap();
    let (mut an, mut bn) = (MemNic::new(32, 1024), MemNic::new(32, 1024));
    // Idle: no deadline at all.
    assert_eq!(a.poll_timeout(), None);
    let into = an.user_buf(vec![0; 16]);
    let r = a
        .irecv(0, &mut an, Source::Rank(1), TagSel::Any, 0, into, 16)
        .unwrap();
    let mut now = 0;
    for _ in 0..200 {
        let t = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t else { break };
        now = now.max(t);
        a.poll(now, &mut an);
        b.poll(now, &mut bn);
        for (_, p) in an.outbox.drain(..) {
            let buf = bn.deliver(p);
            b.on_receive(now, &mut bn, buf);
        }
        for (_, p) in bn.outbox.drain(..) {
            let buf = an.deliver(p);
            a.on_receive(now, &mut an, buf);
        }
    }
    assert!(now >= 100_000_000, "a long wait: {now}");
    assert!(!a.failed(1));
    assert!(a.stats().pings_out >= 50, "{}", a.stats().pings_out);
    assert_eq!(b.stats().pings_out, 0, "b waits on nothing");
    // The message comes at last.
    let s = bn.user_buf(b"late".to_vec());
    b.isend(now, &mut bn, 0, 1, 0, s, 4).unwrap();
    for (_, p) in bn.outbox.drain(..) {
        let buf = an.deliver(p);
        a.on_receive(now, &mut an, buf);
    }
    assert_eq!(a.test(r).unwrap().unwrap().len, 4);
    let before = a.stats().pings_out;
    a.poll(now + 10_000_000_000, &mut an);
    assert_eq!(a.stats().pings_out, before, "nothing waits: no ping");
}

/// Copied eager sends complete for the application at once; when the NIC
/// later completes one with `Down` (a reliable connection that broke), the
/// peer fails: sends waiting for credit end with `PeerFailed`, an inline
/// send's error completion does the same, and later calls are refused.
#[test]
fn send_completions_with_errors_fail_the_peer_and_what_waits_for_it() {
    for inline in [false, true] {
        let cfg = Config {
            inline_max: if inline { 64 } else { 0 },
            ..Config::reliable(THRESHOLD, 2)
        };
        let mut a = Ep::new(cfg, 0, 3, Tables::new(&SIZES)).unwrap();
        let mut nic = MemNic::new(32, 1024);
        nic.later = true;
        nic.inline = inline;
        let s = nic.user_buf(vec![7; 16]);
        let reqs: Vec<Request> = (0..6)
            .map(|k| a.isend(0, &mut nic, 1, k, 0, s, 16).unwrap())
            .collect();
        let waiting: Vec<Request> = reqs
            .into_iter()
            .filter(|r| *r != Request::COMPLETE)
            .collect();
        assert!(!waiting.is_empty(), "beyond the credit, sends wait");
        let w = nic.owed.remove(0);
        assert_eq!(matches!(w, WorkId::Inline(1)), inline, "{w:?}");
        a.on_completion(&mut nic, w.wr_id(), Err(RdmaError::Down));
        assert_eq!(a.stats().send_faults, 1);
        a.poll(0, &mut nic);
        assert!(a.failed(1) && !a.failed(2), "inline {inline}");
        for r in waiting {
            let st = a.test(r).unwrap().expect("ended");
            assert_eq!(st.fault, Some(RecvFault::PeerFailed));
        }
        assert_eq!(
            a.isend(0, &mut nic, 1, 0, 0, s, 16),
            Err(SendError::PeerFailed)
        );
    }
}

/// Moves every packet each side posted to the other (`a_hears`: whether
/// what `b` sends reaches `a`).
fn exchange(now: u64, a: &mut (Ep, MemNic), b: &mut (Ep, MemNic), a_hears: bool) {
    for (_, p) in a.1.outbox.drain(..).collect::<Vec<_>>() {
        let buf = b.1.deliver(p);
        b.0.on_receive(now, &mut b.1, buf);
    }
    for (_, p) in b.1.outbox.drain(..).collect::<Vec<_>>() {
        if a_hears {
            let buf = a.1.deliver(p);
            a.0.on_receive(now, &mut a.1, buf);
        }
    }
}

/// Drives both sides at their deadlines until `done` (or `steps`).
fn drive(
    mut now: u64,
    a: &mut (Ep, MemNic),
    b: &mut (Ep, MemNic),
    a_hears: bool,
    steps: usize,
    done: impl Fn(&Ep, &Ep) -> bool,
) -> u64 {
    for _ in 0..steps {
        if done(&a.0, &b.0) {
            break;
        }
        let t = [a.0.poll_timeout(), b.0.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t else { break };
        now = now.max(t);
        a.0.poll(now, &mut a.1);
        b.0.poll(now, &mut b.1);
        exchange(now, a, b, a_hears);
    }
    now
}

/// Ranks 0 and 1 of `n` (configured `ca` and `cb`) after rank 0 sent rank
/// 1 one message, which it received for any source: they have talked.
/// Returns them, rank 1's receive buffer and the time.
fn talked(ca: Config, cb: Config, n: u16) -> ((Ep, MemNic), (Ep, MemNic), UserBuf, u64) {
    let mut a = (
        Ep::new(ca, 0, n, Tables::new(&SIZES)).unwrap(),
        MemNic::new(32, 1024),
    );
    let mut b = (
        Ep::new(cb, 1, n, Tables::new(&SIZES)).unwrap(),
        MemNic::new(32, 1024),
    );
    let s = a.1.user_buf(vec![1; 8]);
    let into = b.1.user_buf(vec![0; 8]);
    let first =
        b.0.irecv(0, &mut b.1, Source::Any, TagSel::Any, 0, into, 8)
            .unwrap();
    a.0.isend(0, &mut a.1, 1, 0, 0, s, 8).unwrap();
    let now = drive(0, &mut a, &mut b, true, 50, |a, _| {
        a.flushed() && a.poll_timeout().is_none()
    });
    assert_eq!(b.0.test(first).unwrap().expect("arrived").len, 8);
    (a, b, into, now)
}

/// A one-way outage: rank 0 hears nothing from rank 1 for longer than the
/// peer timeout and gives it up, while rank 1 hears rank 0 throughout and
/// waits on receives for any source (before: for ever, with no timer).
/// Rank 0 answers rank 1's next packets with a GONE notice; rank 1 fails
/// rank 0 in turn, and with no other peer left its receives end.
#[test]
fn a_peer_given_up_is_told_and_gives_up_in_turn() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(10_000_000)
    };
    // Rank 1 is patient: told, it fails rank 0 long before its own
    // timeout would have passed.
    let patient = Config {
        peer_timeout_ns: 1_000_000_000,
        ..cfg
    };
    // They talk, then rank 1 only listens.
    let (mut a, mut b, into, now) = talked(cfg, patient, 2);
    let any =
        b.0.irecv(now, &mut b.1, Source::Any, TagSel::Any, 0, into, 8)
            .unwrap();
    let from_a = a.1.user_buf(vec![0; 8]);
    let r =
        a.0.irecv(now, &mut a.1, Source::Rank(1), TagSel::Any, 0, from_a, 8)
            .unwrap();
    let now = drive(now, &mut a, &mut b, false, 10_000, |a, _| a.failed(1));
    assert!(a.0.failed(1), "rank 0 gave rank 1 up");
    assert_eq!(
        a.0.test(r).unwrap().expect("ended").fault,
        Some(RecvFault::PeerFailed)
    );
    assert!(!b.0.failed(0));
    // The outage ends; rank 1 still waits on its receive for any source.
    let end = drive(now, &mut a, &mut b, true, 10_000, |_, b| b.failed(0));
    assert!(b.0.failed(0), "rank 1 learnt it was given up");
    assert!(
        end - now < patient.peer_timeout_ns / 10,
        "told, not timed out: {} ns",
        end - now
    );
    assert!(a.0.stats().gone_out >= 1);
    assert_eq!(b.0.stats().gone_in, 1, "{:?}", b.0.stats());
    let st = b.0.test(any).unwrap().expect("no peer is left to match it");
    assert_eq!(st.fault, Some(RecvFault::PeerFailed));
    if let Some(t) = b.0.poll_timeout() {
        b.0.poll(t, &mut b.1);
    }
    assert_eq!(b.0.poll_timeout(), None, "nothing left to wait for");
}

/// Receives for any source wait on the peers a rank has talked with: a
/// peer that dies while the survivor only waits on such a receive is
/// pinged and given up, and with a third rank alive the receive stays.
#[test]
fn receives_for_any_source_are_covered_by_liveness() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(10_000_000)
    };
    let (_, mut b, into, now) = talked(cfg, cfg, 3);
    // Rank 0 dies; rank 1 posts a receive for any source, long after.
    let later = now + 60_000_000_000;
    let any =
        b.0.irecv(later, &mut b.1, Source::Any, TagSel::Any, 0, into, 8)
            .unwrap();
    assert!(
        b.0.poll_timeout().is_some(),
        "a deadline to check on rank 0"
    );
    let mut t = later;
    for _ in 0..1000 {
        if b.0.failed(0) {
            break;
        }
        let Some(d) = b.0.poll_timeout() else { break };
        t = t.max(d);
        b.0.poll(t, &mut b.1);
        b.1.outbox.clear();
    }
    assert!(b.0.failed(0), "rank 0 given up");
    assert!(
        t - later >= cfg.peer_timeout_ns,
        "silence counted from the receive: {}",
        t - later
    );
    assert!(
        !b.0.failed(2),
        "rank 2 never talked: never pinged, never given up"
    );
    assert!(b.0.stats().pings_out > 0);
    assert_eq!(b.0.test(any), Ok(None), "rank 2 may still match it");
}

/// A rank nobody drove for longer than the peer timeout (a thread that
/// turned to another rank, a process descheduled on a busy host) could
/// not hear its peer meanwhile: on its return it retransmits and waits,
/// and the peer's answer keeps it alive. A dead peer is still given up,
/// after the peer timeout spent listening.
#[test]
fn a_rank_away_longer_than_the_peer_timeout_gives_no_live_peer_up() {
    let cfg = lossy(10_000_000);
    let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut b = Ep::new(cfg, 1, 2, Tables::new(&SIZES)).unwrap();
    let (mut an, mut bn) = (MemNic::new(32, 1024), MemNic::new(32, 1024));
    let s = an.user_buf(vec![3; 16]);
    let into = bn.user_buf(vec![0; 16]);
    b.irecv(0, &mut bn, Source::Rank(0), TagSel::Any, 0, into, 16)
        .unwrap();
    a.isend(0, &mut an, 1, 1, 0, s, 16).unwrap();
    // The packet is lost; then both ranks are away for 20 timeouts.
    an.outbox.clear();
    let back = 200_000_000;
    a.poll(back, &mut an);
    assert!(!a.failed(1), "given up on its return");
    assert!(a.stats().away_ns >= back - 1_000_000, "{:?}", a.stats());
    // The retransmission reaches b, whose answer reaches a.
    let mut now = back;
    for _ in 0..50 {
        for (_, p) in an.outbox.drain(..) {
            let buf = bn.deliver(p);
            b.on_receive(now, &mut bn, buf);
        }
        b.poll(now, &mut bn);
        for (_, p) in bn.outbox.drain(..) {
            let buf = an.deliver(p);
            a.on_receive(now, &mut an, buf);
        }
        match a.poll_timeout() {
            Some(t) => now = now.max(t),
            None => break,
        }
        a.poll(now, &mut an);
    }
    assert!(!a.failed(1) && !b.failed(0));
    assert_eq!(b.stats().messages_in, 1);
    // Now b is dead: a, driven on time, gives it up after the timeout.
    let s = an.user_buf(vec![4; 16]);
    a.isend(now, &mut an, 1, 2, 0, s, 16).unwrap();
    let start = now;
    let gave_up = run_until(&mut a, &mut an, now, 1000, |a| a.failed(1));
    assert!(a.failed(1));
    assert!(gave_up - start >= 10_000_000, "{}", gave_up - start);
}

/// A send the NIC refuses for good is never reported sent. Inline (the
/// user's bytes unreadable): `isend` says so, nothing was sequenced and
/// the connection goes on. From a bounce slot (sequenced, counted against
/// credit): `isend` says so and the connection fails, so a rendezvous
/// whose RTS was refused ends `PeerFailed` at the next poll and a lossy
/// wire does not re-post it until the peer timeout. Before, each was
/// reported sent and the rendezvous waited with no timer.
#[test]
fn a_send_the_nic_refuses_is_never_reported_sent() {
    let mut cfg = Config {
        inline_max: 64,
        ..Config::reliable(THRESHOLD, 4)
    };
    // Inline, refused with an access error.
    let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    nic.inline = true;
    let s = nic.user_buf(vec![1; 16]);
    nic.refuse = Some(PostError::Access);
    assert_eq!(
        a.isend(0, &mut nic, 1, 1, 0, s, 16),
        Err(SendError::Refused(PostError::Access))
    );
    assert!(nic.outbox.is_empty());
    a.poll(1, &mut nic);
    assert!(!a.failed(1), "the connection goes on");
    nic.refuse = None;
    assert_eq!(a.isend(2, &mut nic, 1, 1, 0, s, 16), Ok(Request::COMPLETE));
    assert_eq!(nic.outbox.len(), 1);
    assert_eq!(a.stats().post_refused, 1);
    // From a bounce slot, refused as unsupported.
    cfg.inline_max = 0;
    for reliable in [true, false] {
        let cfg = Config { reliable, ..cfg };
        let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
        let mut nic = MemNic::new(32, 1024);
        let s = nic.user_buf(vec![1; 16]);
        nic.refuse = Some(PostError::Unsupported);
        assert_eq!(
            a.isend(0, &mut nic, 1, 1, 0, s, 16),
            Err(SendError::Refused(PostError::Unsupported)),
            "reliable {reliable}"
        );
        let until = run_until(&mut a, &mut nic, 1, 100, |a| a.failed(1));
        assert!(a.failed(1), "reliable {reliable}");
        assert!(until < cfg.peer_timeout_ns / 100, "failed at once: {until}");
        assert_eq!(a.stats().retransmits, 0, "never re-posted");
    }
    // A rendezvous whose RTS is refused ends at the next poll.
    let mut a = Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap();
    let mut nic = MemNic::new(32, 1024);
    let big = nic.user_buf(vec![9; 1000]);
    nic.refuse = Some(PostError::Access);
    let r = a.isend(0, &mut nic, 1, 5, 0, big, 1000).unwrap();
    assert_ne!(r, Request::COMPLETE);
    assert_eq!(a.test(r), Ok(None));
    a.poll(1, &mut nic);
    assert_eq!(
        a.test(r).unwrap().expect("ended").fault,
        Some(RecvFault::PeerFailed)
    );
}
