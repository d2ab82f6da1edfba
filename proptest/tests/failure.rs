//! A peer that dies: given up after the retransmission limit (lossy
//! transports) or when the transport reports it down; every request naming
//! it ends with a typed error and later calls naming it are refused.

use rmx_core::*;
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 16, 64, 32, 64);
const THRESHOLD: u32 = 256;

fn lossy(retransmits_max: u16) -> Config {
    Config {
        reliable: false,
        retransmits_max,
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
    let cfg = lossy(5);
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
    run_until(&mut a, &mut nic, 0, 1000, |a| a.failed(1));
    assert!(a.failed(1) && !a.failed(2));
    let st = a.stats();
    assert_eq!(
        (st.peers_failed, st.timeouts),
        (1, 5),
        "five timeouts, then given up"
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
fn no_limit_means_the_peer_is_never_given_up() {
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
/// `keepalive_ns`, and given up once its pings go unanswered.
#[test]
fn a_receive_from_a_silent_peer_ends_once_its_pings_go_unanswered() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(5)
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
    assert!(!a.failed(2), "nothing waited on rank 2: never pinged");
    assert_eq!(pings.len(), 5, "{pings:?}");
    assert!(pings.iter().all(|&(to, _)| to == 1));
    assert!(pings[0].1 >= 5 + 1_000_000, "not before the silence");
    assert_eq!(a.stats().pings_out, 5);
    assert_eq!(
        a.test(r).unwrap().unwrap().fault,
        Some(RecvFault::PeerFailed)
    );
    assert_eq!(a.test(any), Ok(None), "another peer may still match it");
}

/// A peer that answers is never given up, however long the wait; one
/// silent only while nothing waits on it is never pinged.
#[test]
fn a_peer_that_answers_its_pings_is_waited_on_for_ever() {
    let cfg = Config {
        keepalive_ns: 1_000_000,
        ..lossy(3)
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
