//! Endpoint behaviour, scenario by scenario, against the in-memory NIC.

use rmx_core::*;
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

// 64 unexpected messages: a two-rank job's initial share is
// min(credits, 64 / 4), so `credits` up to 8 is the window each side starts with.
type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 8, 64, 16, 32);
const THRESHOLD: u32 = 256;

const SLOTS: usize = 16;

fn nic() -> MemNic {
    MemNic::new(SLOTS, 1024)
}

trait Bytes {
    fn buf(&mut self, bytes: &[u8]) -> UserBuf;
}

impl Bytes for MemNic {
    fn buf(&mut self, bytes: &[u8]) -> UserBuf {
        self.user_buf(bytes.to_vec())
    }
}

fn pair(cfg: Config) -> (Ep, MemNic, Ep, MemNic) {
    (
        Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
        Ep::new(cfg, 1, 2, Tables::new(&SIZES)).unwrap(),
        nic(),
    )
}

/// Delivers everything `from` posted to `to`; returns how many packets moved.
fn pump(now: u64, from: &mut MemNic, to: &mut Ep, to_nic: &mut MemNic) -> usize {
    let packets: Vec<_> = from.outbox.drain(..).collect();
    for (_, p) in &packets {
        let b = to_nic.deliver(p.clone());
        to.on_receive(now, to_nic, b);
    }
    packets.len()
}

const ANY: (Source, TagSel) = (Source::Any, TagSel::Any);

#[test]
fn posted_receive_gets_the_bytes_and_status() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let dst = bn.buf(&[0; 16]);
    let r = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Tag(5), 0, dst, 16)
        .unwrap();
    assert_eq!(b.test(r), Ok(None));
    let src = an.buf(b"hello");
    assert_eq!(a.isend(0, &mut an, 1, 5, 0, src, 5), Ok(Request::COMPLETE));
    assert_eq!(pump(0, &mut an, &mut b, &mut bn), 1);
    let st = b.test(r).unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.len, st.fault), (0, 5, 5, None));
    assert_eq!(&bn.user[0][..5], b"hello");
    assert_eq!(bn.reposted, vec![0]);
    assert_eq!(b.test(r), Err(RequestError::Stale));
}

#[test]
fn unexpected_message_waits_for_its_receive() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let s1 = an.buf(b"first");
    let s2 = an.buf(b"second");
    a.isend(0, &mut an, 1, 1, 0, s1, 5).unwrap();
    a.isend(0, &mut an, 1, 2, 0, s2, 6).unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    assert_eq!(b.queue_lens(), (0, 2));
    // tag 2 first: the unexpected queue is searched by pattern, not position.
    let d = bn.buf(&[0; 8]);
    let r = b
        .irecv(0, &mut bn, Source::Any, TagSel::Tag(2), 0, d, 8)
        .unwrap();
    assert_eq!(b.test(r).unwrap().unwrap().len, 6);
    assert_eq!(&bn.user[0][..6], b"second");
    let d = bn.buf(&[0; 8]);
    let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 8).unwrap();
    assert_eq!(b.test(r).unwrap().unwrap().tag, 1);
    assert_eq!(&bn.user[1][..5], b"first");
    assert_eq!(b.stats().unexpected, 2);
}

#[test]
fn truncation_is_an_error_on_the_receive() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let d = bn.buf(&[0; 3]);
    let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 3).unwrap();
    let s = an.buf(b"abcdef");
    a.isend(0, &mut an, 1, 0, 0, s, 6).unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    let st = b.test(r).unwrap().unwrap();
    assert_eq!(
        st.fault,
        Some(RecvFault::Truncated {
            len: 6,
            capacity: 3
        })
    );
    assert_eq!(st.len, 3);
    assert_eq!(&bn.user[0][..], b"abc");
}

#[test]
fn cancel_removes_a_posted_receive() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let d = bn.buf(&[0; 8]);
    let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 8).unwrap();
    assert_eq!(b.cancel(r), Ok(true));
    assert_eq!(
        b.test(r).unwrap().unwrap().fault,
        Some(RecvFault::Cancelled)
    );
    let s = an.buf(b"x");
    a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    assert_eq!(
        b.queue_lens(),
        (0, 1),
        "the cancelled receive must not match"
    );
    assert_eq!(b.cancel(r), Err(RequestError::Stale));
}

#[test]
fn refuses_bad_ranks_and_sends_large_messages_by_rendezvous() {
    let (mut a, mut an, _, _) = pair(Config::reliable(THRESHOLD, 4));
    let s = an.buf(&[0; 300]);
    assert_eq!(a.isend(0, &mut an, 2, 0, 0, s, 1), Err(SendError::BadRank));
    assert_eq!(
        a.irecv(0, &mut an, Source::Rank(9), TagSel::Any, 0, s, 1),
        Err(RecvError::BadRank)
    );
    assert!(an.outbox.is_empty());
    let r = a.isend(0, &mut an, 1, 0, 0, s, 300).unwrap();
    assert_ne!(r, Request::COMPLETE, "pending until the receiver has it");
    assert_eq!(an.outbox.len(), 1, "the RTS");
    assert_eq!(an.outbox[0].1[1], wire::Kind::Rts as u8);
    assert_eq!(a.test(r), Ok(None));
}

#[test]
fn full_posted_queue_is_a_typed_error() {
    let (mut a, mut an, _, _) = pair(Config::reliable(THRESHOLD, 4));
    let d = an.buf(&[0; 1]);
    for _ in 0..8 {
        a.irecv(0, &mut an, ANY.0, ANY.1, 0, d, 1).unwrap();
    }
    // A refused receive gives its request back: refusals never exhaust the
    // 32-entry request table.
    for _ in 0..40 {
        assert_eq!(
            a.irecv(0, &mut an, ANY.0, ANY.1, 0, d, 1),
            Err(RecvError::PostedQueueFull)
        );
    }
}

#[test]
fn sender_out_of_credits_queues_then_flushes_in_order() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 2));
    let bufs: Vec<UserBuf> = (0..5u8).map(|i| an.buf(&[i])).collect();
    let reqs: Vec<Request> = bufs
        .iter()
        .map(|&s| a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap())
        .collect();
    let kinds: Vec<u8> = an.outbox.iter().map(|(_, p)| p[1]).collect();
    assert_eq!(
        kinds,
        [
            wire::Kind::Eager as u8,
            wire::Kind::Eager as u8,
            wire::Kind::Credit as u8
        ],
        "only two credits, then a request for more"
    );
    assert_eq!(
        an.outbox[2].1[8..12],
        3u32.to_le_bytes(),
        "the limit that lets the waiting message go"
    );
    assert_eq!(a.queued_sends(), 3);
    assert_eq!(a.stats().credit_requests_out, 1);
    assert_eq!(a.test(reqs[2]), Ok(None));
    pump(0, &mut an, &mut b, &mut bn);
    // Receiving consumes the messages: with credit_return 1, credits go back at once.
    let mut got = Vec::new();
    for _ in 0..5 {
        let d = bn.buf(&[9]);
        let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 1).unwrap();
        pump(0, &mut bn, &mut a, &mut an);
        pump(0, &mut an, &mut b, &mut bn);
        assert!(b.test(r).unwrap().is_some());
        got.push(bn.user[d.0 as usize][0]);
    }
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert_eq!(a.queued_sends(), 0);
    assert!(a.test(reqs[4]).unwrap().is_some());
}

#[test]
fn credit_returns_on_a_timer_when_below_the_threshold() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let s = an.buf(b"z");
    for _ in 0..4 {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    assert_eq!(a.credits_left(1), 0);
    let d = bn.buf(&[0]);
    b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 1).unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    assert!(
        bn.outbox.is_empty(),
        "1 owed < credit_return 2: no packet yet"
    );
    let t = b.poll_timeout().expect("credit timer armed");
    b.poll(t, &mut bn);
    assert_eq!(pump(t, &mut bn, &mut a, &mut an), 1);
    assert_eq!(a.credits_left(1), 1);
}

#[test]
fn malformed_packets_are_counted_and_reposted() {
    let (_, _, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let garbage = bn.deliver(vec![7; 40]);
    b.on_receive(0, &mut bn, garbage);
    let mut h = [0u8; wire::HEADER_LEN];
    wire::Header {
        kind: wire::Kind::Eager,
        src: 3, // a rank that does not exist in this job of 2
        context: 0,
        tag: 0,
        len: 0,
        seq: 0,
        ack: 0,
        credit: 0,
    }
    .encode(&mut h)
    .unwrap();
    let bad_src = bn.deliver(h.to_vec());
    b.on_receive(0, &mut bn, bad_src);
    assert_eq!(b.stats().malformed, 2);
    assert_eq!(
        bn.reposted.len(),
        2,
        "every buffer goes back, even a bad one"
    );
    assert!(bn.rx.iter().all(Option::is_none));
    assert_eq!(b.queue_lens(), (0, 0));
}

#[test]
fn credit_limits_beyond_any_window_are_rejected() {
    let (_, _, mut b, mut bn) = pair(Config::reliable(THRESHOLD, 4));
    let mut h = [0u8; wire::HEADER_LEN];
    let hdr = wire::Header {
        kind: wire::Kind::Ack,
        src: 0,
        context: 0,
        tag: 0,
        len: 0,
        seq: 0,
        ack: 0,
        // No pool lends more than 65535 credits past what was sent.
        credit: 70_000,
    };
    hdr.encode(&mut h).unwrap();
    let p = bn.deliver(h.to_vec());
    b.on_receive(0, &mut bn, p);
    assert_eq!(b.stats().malformed, 1);
    assert_eq!(b.credits_left(0), 4);
    // A lent window past `credits` is accepted.
    let lent = wire::Header { credit: 40, ..hdr };
    lent.encode(&mut h).unwrap();
    let p = bn.deliver(h.to_vec());
    b.on_receive(0, &mut bn, p);
    assert_eq!(b.stats().malformed, 1);
    assert_eq!(b.credits_left(0), 40);
}

#[test]
fn lost_packet_is_retransmitted_after_the_timeout() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::unreliable(THRESHOLD, 4));
    let s = an.buf(b"data");
    let d = bn.buf(&[0; 4]);
    let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 4).unwrap();
    a.isend(0, &mut an, 1, 0, 0, s, 4).unwrap();
    an.outbox.clear(); // lost
    let t = a.poll_timeout().unwrap();
    a.poll(t - 1, &mut an);
    assert!(an.outbox.is_empty(), "no retransmission before the timeout");
    a.poll(t, &mut an);
    assert_eq!(a.stats().retransmits, 1);
    pump(t, &mut an, &mut b, &mut bn);
    assert!(b.test(r).unwrap().is_some());
    assert_eq!(&bn.user[0][..], b"data");
    // The ack frees the sender's slot and stops its timer.
    let t2 = b.poll_timeout().unwrap();
    b.poll(t2, &mut bn);
    pump(t2, &mut bn, &mut a, &mut an);
    a.poll(t2 + 10_000_000, &mut an);
    assert!(an.outbox.is_empty(), "acknowledged: nothing to resend");
}

#[test]
fn duplicates_are_suppressed_and_gaps_re_requested() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::unreliable(THRESHOLD, 4));
    let bufs: Vec<UserBuf> = (0..3u8).map(|i| an.buf(&[i])).collect();
    for &s in &bufs {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    let p0 = an.outbox.remove(0).1;
    let _lost = an.outbox.remove(0);
    let p2 = an.outbox.remove(0).1;
    for p in [p0.clone(), p0, p2] {
        let rb = bn.deliver(p);
        b.on_receive(0, &mut bn, rb);
    }
    assert_eq!(b.stats().duplicates, 1);
    assert_eq!(b.stats().out_of_order, 1);
    assert_eq!(b.stats().messages_in, 1);
    // The NACK makes the sender go back to sequence 1 at once.
    assert_eq!(b.stats().nacks_out, 1);
    pump(0, &mut bn, &mut a, &mut an);
    assert_eq!(a.stats().nacks_in, 1);
    pump(0, &mut an, &mut b, &mut bn);
    assert_eq!(b.stats().messages_in, 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        let d = bn.buf(&[9]);
        let r = b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 1).unwrap();
        assert!(b.test(r).unwrap().is_some());
        got.push(bn.user[d.0 as usize][0]);
    }
    assert_eq!(got, vec![0, 1, 2]);
}

#[test]
fn busy_nic_keeps_the_packet_and_posts_it_later() {
    let (mut a, mut an, _, _) = pair(Config::reliable(THRESHOLD, 4));
    let s = an.buf(b"q");
    an.busy = true;
    a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    assert!(an.outbox.is_empty());
    assert_eq!(a.poll_timeout(), Some(0));
    an.busy = false;
    a.poll(1, &mut an);
    assert_eq!(an.outbox.len(), 1);
    assert_eq!(a.stats().post_busy, 1);
}

/// A NIC that stayed busy made `poll_timeout` answer "now" on every poll,
/// so a driver sleeping until it spun. The retry now backs off: at once,
/// then 1 µs, doubling up to the delayed-ack time, and at once again after
/// a post goes through.
#[test]
fn a_nic_that_stays_busy_is_retried_later_and_later() {
    let cfg = Config::reliable(THRESHOLD, 4);
    let (mut a, mut an, _, _) = pair(cfg);
    let s = an.buf(b"q");
    an.busy = true;
    let mut now = 1_000_000;
    a.isend(now, &mut an, 1, 0, 0, s, 1).unwrap();
    assert_eq!(a.poll_timeout(), Some(now), "the first retry is at once");
    let mut waits = Vec::new();
    for _ in 0..8 {
        now = a.poll_timeout().unwrap();
        a.poll(now, &mut an);
        waits.push(a.poll_timeout().unwrap() - now);
    }
    assert_eq!(waits[..5], [1_000, 2_000, 4_000, 8_000, 16_000]);
    assert!(waits[5..].iter().all(|&w| w == cfg.ack_delay_ns));
    assert!(an.outbox.is_empty());
    an.busy = false;
    now = a.poll_timeout().unwrap();
    a.poll(now, &mut an);
    assert_eq!((an.outbox.len(), a.poll_timeout()), (1, None));
    // The next busy spell starts again at once.
    an.busy = true;
    a.isend(now, &mut an, 1, 0, 0, s, 1).unwrap();
    assert_eq!(a.poll_timeout(), Some(now));
}

#[test]
fn slots_posted_later_are_freed_by_completion() {
    // Send entries beyond the slots, so that only the slots limit.
    let cfg = Config {
        send_wqes: 64,
        ..Config::reliable(THRESHOLD, 8)
    };
    let (mut a, mut an, mut b, mut bn) = pair(cfg);
    an.later = true;
    let s = an.buf(b"q");
    // Eight sends leave; their slots stay with the NIC until completed.
    for _ in 0..8 {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    pump(0, &mut an, &mut b, &mut bn);
    for _ in 0..8 {
        let d = bn.buf(&[0]);
        b.irecv(0, &mut bn, ANY.0, ANY.1, 0, d, 1).unwrap();
    }
    pump(0, &mut bn, &mut a, &mut an);
    assert_eq!(
        a.credits_left(1),
        8,
        "credits are back: only slots limit now"
    );
    // 16 slots, 8 still in the NIC, one kept for control: 7 of 8 sends go.
    for _ in 0..8 {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    assert_eq!((an.outbox.len(), a.queued_sends()), (7, 1));
    a.on_send_complete(&mut an, SlotId(999)); // out of range: ignored
    assert_eq!(a.queued_sends(), 1);
    a.on_send_complete(&mut an, SlotId(0));
    assert_eq!(
        a.poll_timeout(),
        Some(0),
        "a freed slot makes the queued send due"
    );
    a.poll(1, &mut an);
    assert_eq!((an.outbox.len(), a.queued_sends()), (8, 0));
}

#[test]
fn a_full_request_table_refuses_sends_and_queues_nothing() {
    let (mut a, mut an, _, _) = pair(Config::reliable(THRESHOLD, 1));
    let s = an.buf(b"q");
    assert_eq!(a.isend(0, &mut an, 1, 0, 0, s, 1), Ok(Request::COMPLETE));
    // No credit left: each further send waits in the queue and holds a request.
    for _ in 0..32 {
        assert_ne!(
            a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap(),
            Request::COMPLETE
        );
    }
    assert_eq!(
        a.isend(0, &mut an, 1, 0, 0, s, 1),
        Err(SendError::RequestTableFull)
    );
    assert_eq!(a.queued_sends(), 32);
    let d = an.buf(&[0]);
    assert_eq!(
        a.irecv(0, &mut an, ANY.0, ANY.1, 0, d, 1),
        Err(RecvError::RequestTableFull)
    );
}

#[test]
fn configuration_is_validated_against_capacities() {
    assert_eq!(
        Ep::new(Config::reliable(64, 8), 0, 5, Tables::new(&SIZES)).err(),
        Some(ConfigError::TooManyPeers { max: 4 })
    );
    assert_eq!(
        Ep::new(Config::reliable(64, 0), 0, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::Credits)
    );
    // Peers x credits may exceed the unexpected capacity: credits are lent
    // from the pool, not reserved per peer.
    assert!(Ep::new(Config::reliable(64, 8), 0, 4, Tables::new(&SIZES)).is_ok());
    for (buffers, reserve, low) in [(32, 32, 32), (32, 8, 4), (32, 8, 32), (0, 0, 0)] {
        let cfg = Config {
            rx_buffers: buffers,
            rx_reserve: reserve,
            rx_low_water: low,
            ..Config::reliable(64, 8)
        };
        assert_eq!(
            Ep::new(cfg, 0, 2, Tables::new(&SIZES)).err(),
            Some(ConfigError::RxPool),
            "pool {buffers}, reserve {reserve}, low water {low}"
        );
    }
    assert_eq!(
        Ep::new(Config::reliable(64, 8), 2, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::RankOutOfRange)
    );
    assert!(matches!(
        Ep::new(Config::reliable(70_000, 8), 0, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::EagerThreshold { .. })
    ));
}

// The per-peer target (1 KiB before buffers) and the figures' consistency are
// checked at compile time: a regression fails the build.
const _: () = assert!(Ep::PEER_BYTES > 0 && Ep::PEER_BYTES < SIZES.shared_bytes());
const _: () = assert!(Ep::PEER_BYTES <= 1024);

fn inline_cfg() -> Config {
    Config {
        inline_max: 16,
        ..Config::reliable(THRESHOLD, 4)
    }
}

#[test]
fn small_sends_go_inline_and_larger_ones_through_a_slot() {
    let (mut a, mut an, mut b, mut bn) = pair(inline_cfg());
    an.inline = true;
    let small = an.buf(b"tiny");
    let large = an.buf(&[5; 100]);
    a.isend(0, &mut an, 1, 1, 0, small, 4).unwrap();
    a.isend(0, &mut an, 1, 2, 0, large, 100).unwrap();
    assert_eq!(an.inline_sent, 1, "only the 4-byte message fits inline");
    let d1 = bn.buf(&[0; 4]);
    let d2 = bn.buf(&[0; 100]);
    let r1 = b
        .irecv(0, &mut bn, ANY.0, TagSel::Tag(1), 0, d1, 4)
        .unwrap();
    let r2 = b
        .irecv(0, &mut bn, ANY.0, TagSel::Tag(2), 0, d2, 100)
        .unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    assert_eq!(b.test(r1).unwrap().unwrap().len, 4);
    assert_eq!(b.test(r2).unwrap().unwrap().len, 100);
    assert_eq!(&bn.user[0][..], b"tiny");
    assert_eq!(bn.user[1], vec![5; 100]);
}

#[test]
fn inline_falls_back_to_a_slot_when_the_nic_cannot() {
    let (mut a, mut an, _, _) = pair(inline_cfg());
    let small = an.buf(b"tiny");
    a.isend(0, &mut an, 1, 1, 0, small, 4).unwrap();
    assert_eq!((an.inline_sent, an.outbox.len()), (0, 1));
}

#[test]
fn inline_to_a_busy_receiver_is_buffered_and_retried() {
    let (mut a, mut an, mut b, mut bn) = pair(inline_cfg());
    an.inline = true;
    an.busy = true;
    let small = an.buf(b"tiny");
    let r = a.isend(0, &mut an, 1, 1, 0, small, 4).unwrap();
    assert_eq!(r, Request::COMPLETE, "copied into the backlog");
    assert_eq!(a.stats().backlogged, 1);
    assert!(!a.flushed());
    assert_eq!(a.poll_timeout(), Some(0), "a retry is due");
    an.busy = false;
    a.poll(1, &mut an);
    assert!(a.flushed());
    assert_eq!(
        (an.inline_sent, an.outbox.len()),
        (1, 1),
        "posted inline from its slot"
    );
    let d = bn.buf(&[0; 4]);
    let rr = b.irecv(0, &mut bn, ANY.0, TagSel::Tag(1), 0, d, 4).unwrap();
    pump(0, &mut an, &mut b, &mut bn);
    assert_eq!(b.test(rr).unwrap().unwrap().len, 4);
    assert_eq!(&bn.user[0][..], b"tiny");
}

#[test]
fn lossy_transports_never_send_inline() {
    let mut cfg = Config::unreliable(THRESHOLD, 4);
    cfg.inline_max = 64;
    let (mut a, mut an, _, _) = pair(cfg);
    an.inline = true;
    let small = an.buf(b"tiny");
    a.isend(0, &mut an, 1, 1, 0, small, 4).unwrap();
    assert_eq!(an.inline_sent, 0, "a retransmission needs the bounce slot");
    assert_eq!(an.outbox.len(), 1);
}

/// Two send entries per connection, no coalescing, sends that complete
/// later: rank 0, its NIC, a one-byte buffer there, and the configuration.
fn two_entries() -> (Ep, MemNic, UserBuf, Config) {
    let cfg = Config {
        send_wqes: 2,
        coalesce: Coalesce::Off,
        ..Config::reliable(THRESHOLD, 8)
    };
    let (a, mut an, _, _) = pair(cfg);
    an.later = true;
    let s = an.buf(b"q");
    (a, an, s, cfg)
}

#[test]
fn send_entries_bound_outstanding_sends_and_completions_post_the_backlog() {
    let (mut a, mut an, s, cfg) = two_entries();
    for _ in 0..5 {
        assert_eq!(a.isend(0, &mut an, 1, 0, 0, s, 1), Ok(Request::COMPLETE));
    }
    assert_eq!(an.outbox.len(), 2, "two entries, two posts");
    assert_eq!(a.stats().backlogged, 3);
    assert!(!a.flushed());
    let first = an.owed.remove(0);
    let WorkId::Send(slot) = first else {
        panic!("a slot send");
    };
    a.on_completion(&mut an, first.wr_id(), Ok(()));
    assert_eq!(
        an.outbox.len(),
        3,
        "a completion posts the oldest waiting send"
    );
    a.on_send_complete(&mut an, slot);
    assert_eq!(an.outbox.len(), 3, "a repeated completion frees nothing");
    a.on_completion(&mut an, 42, Ok(()));
    assert_eq!(
        a.stats().unknown_completions,
        2,
        "the repeat and an id the core never made"
    );
    for t in an.owed.drain(..).collect::<Vec<_>>() {
        if let WorkId::Send(s) = t {
            a.on_send_complete(&mut an, s);
        }
    }
    assert!(a.flushed());
    assert_eq!(an.outbox.len(), 5);
    assert_eq!(
        Ep::new(
            Config {
                send_wqes: 0,
                ..cfg
            },
            0,
            2,
            Tables::new(&SIZES)
        )
        .err(),
        Some(ConfigError::SendWqes)
    );
    let threshold = Config {
        coalesce: Coalesce::Outstanding(3),
        ..cfg
    };
    assert_eq!(
        Ep::new(threshold, 0, 2, Tables::new(&SIZES)).err(),
        Some(ConfigError::SendWqes)
    );
}

/// A completion for an inline send never posted names nothing: it is
/// counted and frees no send entry (before, four such completions let six
/// posts be outstanding on two entries).
#[test]
fn a_completion_for_an_inline_send_never_posted_frees_no_send_entry() {
    let (mut a, mut an, s, _) = two_entries();
    for _ in 0..2 {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    assert_eq!(an.outbox.len(), 2, "both entries in use");
    for _ in 0..4 {
        a.on_completion(&mut an, WorkId::Inline(1).wr_id(), Ok(()));
    }
    a.on_completion(&mut an, WorkId::Inline(9).wr_id(), Ok(()));
    assert_eq!(a.stats().unknown_completions, 5);
    for _ in 0..4 {
        a.isend(0, &mut an, 1, 0, 0, s, 1).unwrap();
    }
    assert_eq!(an.outbox.len(), 2, "still two posts on two entries");
    // A completion for a slot the NIC does not hold is counted as well.
    a.on_completion(
        &mut an,
        WorkId::Send(SlotId(SLOTS as u16 - 1)).wr_id(),
        Ok(()),
    );
    assert_eq!(a.stats().unknown_completions, 6);
    assert_eq!(an.outbox.len(), 2);
}

/// Real inline sends that complete later hold their entry until their
/// completion, which frees it; one completion more is stray.
#[test]
fn inline_completions_free_the_entries_of_inline_sends() {
    let cfg = Config {
        send_wqes: 1,
        coalesce: Coalesce::Off,
        inline_max: 64,
        ..Config::reliable(THRESHOLD, 8)
    };
    let (mut a, mut an, _, _) = pair(cfg);
    an.later = true;
    an.inline = true;
    let s = an.buf(b"tiny");
    a.isend(0, &mut an, 1, 0, 0, s, 4).unwrap();
    a.isend(0, &mut an, 1, 0, 0, s, 4).unwrap();
    assert_eq!((an.inline_sent, an.outbox.len()), (1, 1));
    let w = an.owed.remove(0);
    assert_eq!(w, WorkId::Inline(1));
    a.on_completion(&mut an, w.wr_id(), Ok(()));
    assert_eq!(an.outbox.len(), 2, "the entry freed: the waiting send goes");
    assert_eq!(a.stats().unknown_completions, 0);
    let w = an.owed.remove(0);
    a.on_completion(&mut an, w.wr_id(), Ok(()));
    a.on_completion(&mut an, w.wr_id(), Ok(()));
    assert_eq!(a.stats().unknown_completions, 1, "the repeat is stray");
}

/// One completion counting several inline sends frees as many entries;
/// a count above the inline sends in the NIC (or of 0, which no port
/// makes) names sends never posted: counted, and it frees none.
#[test]
fn a_counted_inline_completion_frees_that_many_entries_and_no_more() {
    let cfg = Config {
        send_wqes: 3,
        coalesce: Coalesce::Off,
        inline_max: 64,
        ..Config::reliable(THRESHOLD, 8)
    };
    let (mut a, mut an, _, _) = pair(cfg);
    an.later = true;
    an.inline = true;
    let s = an.buf(b"tiny");
    for _ in 0..5 {
        a.isend(0, &mut an, 1, 0, 0, s, 4).unwrap();
    }
    assert_eq!((an.inline_sent, an.outbox.len()), (3, 3), "three entries");
    let too_many = WorkId::Inlines { peer: 1, count: 4 };
    a.on_completion(&mut an, too_many.wr_id(), Ok(()));
    assert_eq!(a.stats().unknown_completions, 1);
    assert_eq!(an.outbox.len(), 3, "no entry freed");
    a.on_completion(&mut an, 5 << 60 | 1, Ok(()));
    assert_eq!(a.stats().unknown_completions, 2, "a count of 0 is foreign");
    let two = WorkId::Inlines { peer: 1, count: 2 };
    a.on_completion(&mut an, two.wr_id(), Ok(()));
    assert!(a.flushed(), "two entries freed: the waiting sends went");
    assert!(an.outbox.len() > 3);
    assert_eq!(a.stats().unknown_completions, 2);
}

/// Bytes handed to `isend_now` while the connection's send entries are all
/// in use are copied into its backlog during the call (the caller's buffer
/// is free at once) and leave in order as completions free the entries.
/// Once no bounce slot is spare (or no credit is left), or when it could
/// be packed with the waiting ones, or does not fit a slot, it does
/// nothing and says so (the shell goes by handle), and no message already
/// taken is lost.
#[test]
fn isend_now_copies_into_the_backlog_behind_held_entries_and_loses_none() {
    let cfg = Config {
        send_wqes: 2,
        coalesce: Coalesce::Off,
        inline_max: 16,
        ..Config::reliable(THRESHOLD, 64)
    };
    let (mut a, mut an, mut b, mut bn) = pair(cfg);
    an.inline = true;
    an.later = true;
    let mut taken = Vec::new();
    for i in 0..2u8 {
        assert_eq!(
            a.isend_now(0, &mut an, 1, 5, 0, &[i; 4]),
            Some(Ok(Taken::Sent))
        );
        taken.push(i);
    }
    // Every entry in use: the next ones wait, copied, until no slot is spare.
    let mut bytes = [2u8; 4];
    loop {
        let before = (*a.stats(), an.outbox.len());
        match a.isend_now(0, &mut an, 1, 5, 0, &bytes) {
            Some(Ok(Taken::Queued)) => taken.push(bytes[0]),
            None => {
                assert_eq!((*a.stats(), an.outbox.len()), before, "nothing done");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
        // The caller reuses its buffer at once: the copy is what leaves.
        bytes = [bytes[0] + 1; 4];
    }
    assert!(taken.len() > 3, "some waited in the backlog: {taken:?}");
    assert!(!a.flushed());
    assert_eq!(an.outbox.len(), 2, "only the first two left");
    // The receiver takes every message, in order, as entries come free.
    let mut got = Vec::new();
    while got.len() < taken.len() {
        let dst = bn.buf(&[0; 16]);
        let r = b
            .irecv(0, &mut bn, Source::Rank(0), TagSel::Tag(5), 0, dst, 16)
            .unwrap();
        while b.test(r).unwrap().is_none() {
            pump(0, &mut an, &mut b, &mut bn);
            pump(0, &mut bn, &mut a, &mut an);
            if !an.owed.is_empty() {
                let w = an.owed.remove(0);
                a.on_completion(&mut an, w.wr_id(), Ok(()));
            }
        }
        got.push(bn.user[dst.0 as usize][0]);
    }
    assert_eq!(got, taken);
    assert!(a.flushed());
    // A message that could be packed with the waiting ones is left to
    // `isend`, which packs it.
    let (mut c, mut cn, _, _) = pair(Config {
        coalesce: Coalesce::WhenFull,
        ..cfg
    });
    cn.inline = true;
    cn.later = true;
    for _ in 0..2 {
        assert_eq!(
            c.isend_now(0, &mut cn, 1, 5, 0, b"x"),
            Some(Ok(Taken::Sent))
        );
    }
    let before = (*c.stats(), cn.outbox.len());
    assert_eq!(c.isend_now(0, &mut cn, 1, 5, 0, b"x"), None);
    assert_eq!((*c.stats(), cn.outbox.len()), before, "nothing done");
    // Bytes that do not fit a bounce slot (a NIC with slots shorter than
    // a header and `inline_max`) go by handle too, and the slot taken for
    // them goes back: as many fit afterwards as without the attempt.
    let queued_until_full = |misfit_first: bool| {
        let (mut e, _, _, _) = pair(cfg);
        let mut en = MemNic::new(SLOTS, wire::HEADER_LEN + 8);
        en.inline = true;
        en.later = true;
        for _ in 0..2 {
            assert_eq!(
                e.isend_now(0, &mut en, 1, 5, 0, b"x"),
                Some(Ok(Taken::Sent))
            );
        }
        if misfit_first {
            let before = (*e.stats(), en.outbox.len());
            assert_eq!(e.isend_now(0, &mut en, 1, 5, 0, &[1; 9]), None);
            assert_eq!((*e.stats(), en.outbox.len()), before, "nothing done");
        }
        let mut n = 0;
        while e.isend_now(0, &mut en, 1, 5, 0, &[1; 8]) == Some(Ok(Taken::Queued)) {
            n += 1;
        }
        n
    };
    assert!(queued_until_full(false) > 0);
    assert_eq!(
        queued_until_full(true),
        queued_until_full(false),
        "no slot lost"
    );
}

/// `isend_now` sends bytes handed over, inline, when nothing stands in the
/// way, and otherwise does nothing at all and says so (the shell then goes
/// by handle): too long for inline, no such peer, no credit left, an
/// unreliable transport.
#[test]
fn isend_now_sends_at_once_or_leaves_everything_as_it_was() {
    let cfg = Config {
        send_wqes: 2,
        coalesce: Coalesce::Off,
        inline_max: 16,
        ..Config::reliable(THRESHOLD, 3)
    };
    let (mut a, mut an, mut b, mut bn) = pair(cfg);
    an.inline = true;
    let got = a.isend_now(0, &mut an, 1, 5, 0, b"hello");
    assert_eq!(got, Some(Ok(Taken::Sent)));
    assert_eq!(an.bytes_inline, 1);
    let dst = bn.buf(&[0; 16]);
    let r = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Tag(5), 0, dst, 16)
        .unwrap();
    assert_eq!(pump(0, &mut an, &mut b, &mut bn), 1);
    let st = b.test(r).unwrap().unwrap();
    assert_eq!((st.source, st.len), (0, 5));
    assert_eq!(&bn.user[0][..5], b"hello");
    let before = (*a.stats(), an.outbox.len());
    let refused = [
        a.isend_now(0, &mut an, 1, 5, 0, &[7; 17]),
        a.isend_now(0, &mut an, 2, 5, 0, b"x"),
        a.isend_now(0, &mut an, u16::MAX, 5, 0, b"x"),
    ];
    assert_eq!(refused, [None, None, None]);
    assert_eq!((*a.stats(), an.outbox.len()), before, "nothing done");
    // Two more use the other credits; the fourth finds none left.
    for _ in 0..2 {
        assert_eq!(
            a.isend_now(0, &mut an, 1, 5, 0, b"x"),
            Some(Ok(Taken::Sent))
        );
    }
    assert_eq!(a.isend_now(0, &mut an, 1, 5, 0, b"x"), None);
    assert_eq!(an.bytes_inline, 3);
    // Without inline sends at the NIC, or on a lossy transport, never.
    let (mut c, mut cn, _, _) = pair(cfg);
    assert_eq!(c.isend_now(0, &mut cn, 1, 5, 0, b"x"), None);
    let (mut d, mut dn, _, _) = pair(Config {
        inline_max: 16,
        ..Config::unreliable(THRESHOLD, 3)
    });
    dn.inline = true;
    assert_eq!(d.isend_now(0, &mut dn, 1, 5, 0, b"x"), None);
    assert_eq!((cn.outbox.len(), dn.outbox.len()), (0, 0));
}
