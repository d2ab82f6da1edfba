//! Medium messages: above one packet and up to `Config::medium_max`, sent
//! eagerly as fragments and reassembled by the receiver, scenario by
//! scenario against the in-memory NIC.

use rmx_core::wire::medium::{Fragment, FRAG_HEAD};
use rmx_core::wire::{Header, Kind, HEADER_LEN};
use rmx_core::*;
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 8, 64, 32, 32);
const THRESHOLD: u32 = 256;
/// Bytes of a message per fragment.
const FRAG: usize = THRESHOLD as usize - FRAG_HEAD;
const MEDIUM: u32 = 1000;

fn cfg(credits: u16) -> Config {
    Config {
        medium_max: Some(MEDIUM),
        ..Config::reliable(THRESHOLD, credits)
    }
}

fn pair(cfg: Config) -> (Ep, MemNic, Ep, MemNic) {
    (
        Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap(),
        MemNic::new(16, 1024),
        Ep::new(cfg, 1, 2, Tables::new(&SIZES)).unwrap(),
        MemNic::new(16, 1024),
    )
}

/// Delivers up to `n` packets `from` posted to `to`; returns how many moved.
fn pump_n(n: usize, from: &mut MemNic, to: &mut Ep, to_nic: &mut MemNic) -> usize {
    let k = n.min(from.outbox.len());
    let packets: Vec<_> = from.outbox.drain(..k).collect();
    for (_, p) in &packets {
        let b = to_nic.deliver(p.clone());
        to.on_receive(0, to_nic, b);
    }
    k
}

fn pump(from: &mut MemNic, to: &mut Ep, to_nic: &mut MemNic) -> usize {
    pump_n(usize::MAX, from, to, to_nic)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn a_medium_message_goes_as_fragments_into_a_posted_receive() {
    let (mut a, mut an, mut b, mut bn) = pair(cfg(8));
    let d = bn.user_buf(vec![0; 1000]);
    let r = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Tag(3), 0, d, 1000)
        .unwrap();
    let data = pattern(1000, 1);
    let s = an.user_buf(data.clone());
    assert_eq!(
        a.isend(0, &mut an, 1, 3, 0, s, 1000),
        Ok(Request::COMPLETE),
        "eager: the buffer is free once the fragments are copied"
    );
    let frags = 1000usize.div_ceil(FRAG);
    assert_eq!(an.outbox.len(), frags);
    for (k, (_, p)) in an.outbox.iter().enumerate() {
        assert_eq!(p[1], Kind::Medium as u8);
        let (f, len) = Fragment::decode(&p[HEADER_LEN..], MEDIUM).unwrap();
        assert_eq!((f.total, f.offset), (1000, (k * FRAG) as u32));
        assert_eq!(len as usize, FRAG.min(1000 - k * FRAG));
    }
    pump_n(frags - 1, &mut an, &mut b, &mut bn);
    assert_eq!(b.test(r), Ok(None), "not before the last fragment");
    pump(&mut an, &mut b, &mut bn);
    let st = b.test(r).unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.len, st.fault), (0, 3, 1000, None));
    assert_eq!(bn.user[0], data);
    assert_eq!(b.held_buffers(), 0);
    assert_eq!(
        bn.reposted.len(),
        frags,
        "every fragment's buffer went back"
    );
    assert_eq!(a.stats().fragments_out, frags as u64);
    assert_eq!(b.stats().fragments_in, frags as u64);
    assert_eq!((a.stats().messages_out, b.stats().messages_in), (1, 1));
    assert_eq!(a.stats().rndv_sends, 0);
}

#[test]
fn above_medium_max_a_message_goes_by_rendezvous_and_at_the_threshold_in_one_packet() {
    let (mut a, mut an, _, _) = pair(cfg(8));
    let s = an.user_buf(vec![1; 1001]);
    let r = a.isend(0, &mut an, 1, 0, 0, s, 1001).unwrap();
    assert_ne!(r, Request::COMPLETE);
    assert_eq!(an.outbox.len(), 1);
    assert_eq!(an.outbox[0].1[1], Kind::Rts as u8);
    an.outbox.clear();
    a.isend(0, &mut an, 1, 0, 0, s, THRESHOLD).unwrap();
    assert_eq!(an.outbox[0].1[1], Kind::Eager as u8);
    // Off: a rendezvous just above one packet.
    let off = Config {
        medium_max: Some(0),
        ..cfg(8)
    };
    let (mut a, mut an, _, _) = pair(off);
    let s = an.user_buf(vec![1; 300]);
    a.isend(0, &mut an, 1, 0, 0, s, 300).unwrap();
    assert_eq!(an.outbox[0].1[1], Kind::Rts as u8);
}

#[test]
fn an_unexpected_medium_message_matched_half_way_gets_the_rest_directly() {
    let (mut a, mut an, mut b, mut bn) = pair(cfg(8));
    let first = pattern(700, 2);
    let second = pattern(900, 3);
    let s1 = an.user_buf(first.clone());
    let s2 = an.user_buf(second.clone());
    a.isend(0, &mut an, 1, 1, 0, s1, 700).unwrap();
    a.isend(0, &mut an, 1, 2, 0, s2, 900).unwrap();
    // The whole first message and two fragments of the second arrive
    // before any receive.
    pump_n(700usize.div_ceil(FRAG) + 2, &mut an, &mut b, &mut bn);
    assert_eq!(b.queue_lens(), (0, 2));
    assert_eq!(b.held_buffers(), 700usize.div_ceil(FRAG) + 2);
    // The second first (by tag): it is part way, the rest goes straight in.
    let d2 = bn.user_buf(vec![0; 900]);
    let r2 = b
        .irecv(0, &mut bn, Source::Any, TagSel::Tag(2), 0, d2, 900)
        .unwrap();
    assert_eq!(b.test(r2), Ok(None));
    assert_eq!(b.cancel(r2), Ok(false), "matched: no longer cancellable");
    let d1 = bn.user_buf(vec![0; 700]);
    let r1 = b
        .irecv(0, &mut bn, Source::Any, TagSel::Any, 0, d1, 700)
        .unwrap();
    let st1 = b.test(r1).unwrap().unwrap();
    assert_eq!((st1.tag, st1.len), (1, 700));
    assert_eq!(bn.user[1], first);
    assert_eq!(b.held_buffers(), 0);
    pump(&mut an, &mut b, &mut bn);
    let st2 = b.test(r2).unwrap().unwrap();
    assert_eq!((st2.tag, st2.len, st2.fault), (2, 900, None));
    assert_eq!(bn.user[0], second);
    assert_eq!(b.held_buffers(), 0);
    assert_eq!(b.stats().unexpected, 2);
}

#[test]
fn a_medium_message_held_whole_is_taken_by_a_later_receive() {
    let (mut a, mut an, mut b, mut bn) = pair(cfg(8));
    let data = pattern(1000, 4);
    let s = an.user_buf(data.clone());
    a.isend(0, &mut an, 1, 9, 4, s, 1000).unwrap();
    pump(&mut an, &mut b, &mut bn);
    assert_eq!(b.held_buffers(), 1000usize.div_ceil(FRAG));
    let d = bn.user_buf(vec![0; 1000]);
    let r = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Tag(9), 4, d, 1000)
        .unwrap();
    let st = b.test(r).unwrap().unwrap();
    assert_eq!((st.len, st.fault), (1000, None));
    assert_eq!(bn.user[0], data);
    assert_eq!(b.held_buffers(), 0);
}

#[test]
fn a_short_receive_truncates_a_medium_message_posted_or_unexpected() {
    for capacity in [0usize, 100, FRAG, FRAG + 1, 999] {
        for posted_first in [true, false] {
            let (mut a, mut an, mut b, mut bn) = pair(cfg(8));
            let data = pattern(1000, 5);
            let s = an.user_buf(data.clone());
            let d = bn.user_buf(vec![0xEE; capacity]);
            let post = |b: &mut Ep, bn: &mut MemNic| {
                b.irecv(0, bn, Source::Any, TagSel::Any, 0, d, capacity as u32)
                    .unwrap()
            };
            let mut r = None;
            if posted_first {
                r = Some(post(&mut b, &mut bn));
            }
            a.isend(0, &mut an, 1, 0, 0, s, 1000).unwrap();
            pump(&mut an, &mut b, &mut bn);
            let r = r.unwrap_or_else(|| post(&mut b, &mut bn));
            let st = b.test(r).unwrap().unwrap();
            let want = Some(RecvFault::Truncated {
                len: 1000,
                capacity: capacity as u32,
            });
            assert_eq!((st.len as usize, st.fault), (capacity, want));
            assert_eq!(bn.user[0], data[..capacity], "{capacity} {posted_first}");
            assert_eq!(b.held_buffers(), 0);
        }
    }
}

#[test]
fn without_credit_a_medium_message_goes_fragment_by_fragment_and_keeps_its_place() {
    // Two credits: the five fragments cannot go at once.
    let (mut a, mut an, mut b, mut bn) = pair(cfg(2));
    let data = pattern(1000, 6);
    let s = an.user_buf(data.clone());
    let tail = an.user_buf(b"after".to_vec());
    let r = a.isend(0, &mut an, 1, 1, 0, s, 1000).unwrap();
    assert_ne!(r, Request::COMPLETE, "waits for credit with a request");
    let sent = |n: &MemNic, k: Kind| n.outbox.iter().filter(|(_, p)| p[1] == k as u8).count();
    assert_eq!(sent(&an, Kind::Medium), 2, "as many fragments as credits");
    assert_eq!(sent(&an, Kind::Credit), 1, "and a request for more");
    let r2 = a.isend(0, &mut an, 1, 2, 0, tail, 5).unwrap();
    assert_ne!(r2, Request::COMPLETE, "a later message waits behind it");
    let d = bn.user_buf(vec![0; 1000]);
    let rr = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Any, 0, d, 1000)
        .unwrap();
    let d2 = bn.user_buf(vec![0; 5]);
    let rr2 = b
        .irecv(0, &mut bn, Source::Rank(0), TagSel::Any, 0, d2, 5)
        .unwrap();
    for _ in 0..40 {
        let moved = pump(&mut an, &mut b, &mut bn) + pump(&mut bn, &mut a, &mut an);
        if moved == 0 {
            break;
        }
    }
    assert_eq!(a.test(r).unwrap().unwrap().fault, None);
    assert_eq!(a.test(r2).unwrap().unwrap().fault, None);
    let st = b.test(rr).unwrap().unwrap();
    assert_eq!(
        (st.tag, st.len),
        (1, 1000),
        "the medium message matched first"
    );
    assert_eq!(bn.user[0], data);
    assert_eq!(b.test(rr2).unwrap().unwrap().tag, 2);
    assert_eq!(&bn.user[1], b"after");
}

#[test]
fn with_no_request_free_a_medium_message_goes_whole_or_is_refused() {
    let sizes = sizes(4, 8, 64, 32, 1);
    let c = cfg(2);
    let mut a = Ep::new(c, 0, 2, Tables::new(&sizes)).unwrap();
    let mut an = MemNic::new(16, 1024);
    let s = an.user_buf(vec![3; 1000]);
    let small = an.user_buf(vec![3; 400]);
    // The one request is taken by a receive.
    let into = an.user_buf(vec![0; 8]);
    a.irecv(0, &mut an, Source::Any, TagSel::Any, 0, into, 8)
        .unwrap();
    assert_eq!(
        a.isend(0, &mut an, 1, 0, 0, s, 1000),
        Err(SendError::RequestTableFull)
    );
    assert!(an.outbox.is_empty(), "nothing of it left");
    // Two fragments fit two credits: it goes whole, needing no request.
    assert_eq!(
        a.isend(0, &mut an, 1, 0, 0, small, 400),
        Ok(Request::COMPLETE)
    );
    assert_eq!(an.outbox.len(), 2);
}

/// A fragment header around `data` from rank 0, sequence `seq`.
fn fragment(seq: u32, tag: u32, total: u32, offset: u32, data: &[u8]) -> Vec<u8> {
    let h = Header {
        kind: Kind::Medium,
        src: 0,
        context: 0,
        tag,
        len: (FRAG_HEAD + data.len()) as u32,
        seq,
        ack: 0,
        credit: 8,
    };
    let mut p = vec![0; HEADER_LEN + FRAG_HEAD];
    h.encode(&mut p).unwrap();
    Fragment { total, offset }.encode(&mut p[HEADER_LEN..]);
    p.extend_from_slice(data);
    p
}

#[test]
fn malformed_or_misplaced_fragments_are_counted_and_dropped() {
    let (_, _, mut b, mut bn) = pair(cfg(8));
    let d = bn.user_buf(vec![0; 1000]);
    let r = b
        .irecv(0, &mut bn, Source::Any, TagSel::Any, 0, d, 1000)
        .unwrap();
    let bad = [
        fragment(0, 0, MEDIUM + 1, 0, &[1; 10]), // larger than medium_max
        fragment(0, 0, 500, 496, &[1; 10]),      // past the message's end
        fragment(0, 0, 500, 10, &[1; 10]),       // not the start of one
        fragment(0, 0, 500, 0, &[]),             // no data
    ];
    for p in bad {
        let buf = bn.deliver(p);
        b.on_receive(0, &mut bn, buf);
    }
    assert_eq!(b.stats().malformed, 4);
    assert_eq!(b.test(r), Ok(None), "nothing matched");
    // A good start, then a fragment at the wrong offset, then one of
    // another total: dropped; the right one completes the message.
    for p in [
        fragment(0, 7, 20, 0, &[5; 10]),
        fragment(0, 7, 20, 12, &[6; 8]),
        fragment(0, 7, 30, 10, &[6; 10]),
        fragment(0, 7, 20, 10, &[6; 10]),
    ] {
        let buf = bn.deliver(p);
        b.on_receive(0, &mut bn, buf);
    }
    assert_eq!(b.stats().malformed, 6);
    let st = b.test(r).unwrap().unwrap();
    assert_eq!((st.tag, st.len, st.fault), (7, 20, None));
    assert_eq!(&bn.user[0][..20], &[[5u8; 10], [6u8; 10]].concat()[..]);
    // Every buffer went back to the pool.
    assert_eq!(b.held_buffers(), 0);
    assert_eq!(bn.reposted.len(), 8);
}

#[test]
fn a_peer_failing_part_way_ends_the_receive_its_message_was_filling() {
    for posted_first in [true, false] {
        let (mut a, mut an, mut b, mut bn) = pair(cfg(8));
        let s = an.user_buf(pattern(1000, 7));
        a.isend(0, &mut an, 1, 0, 0, s, 1000).unwrap();
        let d = bn.user_buf(vec![0; 1000]);
        let post = |b: &mut Ep, bn: &mut MemNic| {
            b.irecv(0, bn, Source::Any, TagSel::Any, 0, d, 1000)
                .unwrap()
        };
        let mut r = posted_first.then(|| post(&mut b, &mut bn));
        pump_n(2, &mut an, &mut b, &mut bn);
        // Rank 0's connection goes down: the next control packet to it
        // reports it, and the endpoint gives it up at its next poll.
        bn.down.push(0);
        let s2 = bn.user_buf(vec![0; 4]);
        let _ = b.isend(0, &mut bn, 0, 0, 0, s2, 4);
        let t = b.poll_timeout().unwrap_or(0);
        b.poll(t, &mut bn);
        assert!(b.failed(0));
        let r = r.get_or_insert_with(|| post(&mut b, &mut bn));
        let st = b.test(*r).unwrap().unwrap();
        assert_eq!(st.fault, Some(RecvFault::PeerFailed), "{posted_first}");
        assert_eq!(b.held_buffers(), 0);
        pump(&mut an, &mut b, &mut bn);
        assert_eq!(b.stats().from_failed, 3, "the rest is dropped");
    }
}
