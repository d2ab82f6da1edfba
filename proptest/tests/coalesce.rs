//! Coalescing against no coalescing: two senders stream messages of random
//! sizes, tags and contexts to one receiver through connections with 1–10
//! send entries; packets arrive and complete in a random interleaving, and the
//! receiver posts receives late or early. Every run must deliver exactly the
//! messages sent, in order per (source, context) — with coalescing on or off.
//! Then malformed packed packets: typed, counted, the good records kept.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;
use rmx_core::wire::packed::{self, Record};
use rmx_core::wire::{Header, Kind, HEADER_LEN};
use rmx_core::*;
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;
use rmx_proptest::rng::Rng;

/// 3 ranks, 64 posted receives, 256 unexpected, 64 slots, 256 requests, 16 credits.
type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 64, 256, 64, 256);
const EAGER: u32 = 512;
const RECEIVER: u16 = 1;
const SENDERS: [u16; 2] = [0, 2];

#[derive(Clone, Debug)]
struct Msg {
    context: u16,
    tag: u32,
    data: Vec<u8>,
}

/// Packets in flight per (from, to): bytes and the completion they owe.
type Wires = BTreeMap<(u16, u16), VecDeque<(Vec<u8>, WorkId)>>;

/// What the receiver got: per (source, context), (tag, bytes) in order.
type Got = BTreeMap<(u16, u16), Vec<(u32, Vec<u8>)>>;

struct Node {
    ep: Ep,
    nic: MemNic,
}

fn node(cfg: Config, me: u16, wqes: u16) -> Node {
    let mut nic = MemNic::new(64, EAGER as usize + 64);
    nic.later = true;
    nic.inline = true;
    nic.sq_depth = Some(wqes as usize);
    Node {
        ep: Ep::new(cfg, me, 3, Tables::new(&SIZES)).unwrap(),
        nic,
    }
}

/// Moves what `n` posted into per-destination wires: (bytes, completion).
fn collect(n: &mut Node, me: u16, wires: &mut Wires) {
    let owed: Vec<WorkId> = n.nic.owed.drain(..).collect();
    for ((dst, bytes), t) in n.nic.outbox.drain(..).zip(owed) {
        wires.entry((me, dst)).or_default().push_back((bytes, t));
    }
}

fn complete(n: &mut Node, t: WorkId, peer: u16) {
    n.nic.completed(peer);
    n.ep.on_completion(&mut n.nic, t.wr_id(), Ok(()));
}

/// Runs the streams; `Err` names the stall. Returns what arrived and the
/// senders' stats. `by_bytes`: senders hand their bytes over
/// (`isend_now`) before they name them by handle.
fn run(
    streams: &[Vec<Msg>; 2],
    wqes: u16,
    coalesce: Coalesce,
    cache: bool,
    by_bytes: bool,
    seed: u64,
) -> Result<(Got, Vec<Stats>), String> {
    let mut cfg = Config::reliable(EAGER, 16);
    cfg.send_wqes = wqes;
    cfg.coalesce = coalesce;
    cfg.header_cache = cache;
    cfg.inline_max = 64;
    let mut nodes: Vec<Node> = (0..3).map(|me| node(cfg, me, wqes)).collect();
    let mut rng = Rng::new(seed);
    let mut next = [0usize; 2];
    let mut wires: Wires = BTreeMap::new();
    let mut recvs: VecDeque<(Request, UserBuf, u16)> = VecDeque::new();
    let mut got: Got = BTreeMap::new();
    let total: usize = streams.iter().map(Vec::len).sum();
    let mut per_context = [0usize; 3];
    for m in streams.iter().flatten() {
        per_context[m.context as usize] += 1;
    }
    let mut received = 0;
    let mut now = 0u64;
    for _ in 0..200_000 {
        now += 100;
        match rng.below(4) {
            // A sender starts its next message.
            0 => {
                let k = rng.below(2) as usize;
                if let Some(m) = streams[k].get(next[k]) {
                    let n = &mut nodes[SENDERS[k] as usize];
                    // As a shell does: bytes handed over are taken during
                    // the call if they can be, else named by handle.
                    let taken = match by_bytes && !m.data.is_empty() {
                        true => {
                            n.ep.isend_now(now, &mut n.nic, RECEIVER, m.tag, m.context, &m.data)
                        }
                        false => None,
                    };
                    let r = taken.map(|r| r.map(|_| ())).unwrap_or_else(|| {
                        let b = n.nic.user_buf(m.data.clone());
                        n.ep.isend(
                            now,
                            &mut n.nic,
                            RECEIVER,
                            m.tag,
                            m.context,
                            b,
                            m.data.len() as u32,
                        )
                        .map(|_| ())
                    });
                    match r {
                        Ok(_) => next[k] += 1,
                        Err(SendError::RequestTableFull) => {}
                        Err(e) => return Err(format!("isend: {e:?}")),
                    }
                }
            }
            // One packet crosses a random wire and completes at its sender.
            1 => {
                for (me, n) in nodes.iter_mut().enumerate() {
                    collect(n, me as u16, &mut wires);
                }
                let busy: Vec<(u16, u16)> = wires
                    .iter()
                    .filter(|(_, q)| !q.is_empty())
                    .map(|(k, _)| *k)
                    .collect();
                if busy.is_empty() {
                    continue;
                }
                let (from, to) = busy[rng.below(busy.len() as u64) as usize];
                let (bytes, t) = wires
                    .get_mut(&(from, to))
                    .and_then(VecDeque::pop_front)
                    .expect("non-empty wire");
                let dst = &mut nodes[to as usize];
                let rx = dst.nic.deliver(bytes);
                dst.ep.on_receive(now, &mut dst.nic, rx);
                complete(&mut nodes[from as usize], t, to);
            }
            // The receiver posts a receive for a random context that still
            // has messages to come.
            2 => {
                let open: Vec<u16> = (0..3u16)
                    .filter(|&c| {
                        let posted = recvs.iter().filter(|r| r.2 == c).count();
                        let done: usize = got
                            .iter()
                            .filter(|(k, _)| k.1 == c)
                            .map(|(_, v)| v.len())
                            .sum();
                        done + posted < per_context[c as usize]
                    })
                    .collect();
                if recvs.len() < 48 && !open.is_empty() {
                    let ctx = open[rng.below(open.len() as u64) as usize];
                    let n = &mut nodes[RECEIVER as usize];
                    let b = n.nic.user_buf(vec![0; EAGER as usize]);
                    let r =
                        n.ep.irecv(now, &mut n.nic, Source::Any, TagSel::Any, ctx, b, EAGER)
                            .map_err(|e| format!("irecv: {e:?}"))?;
                    recvs.push_back((r, b, ctx));
                }
            }
            // Completed receives are read; timers run.
            _ => {
                let n = &mut nodes[RECEIVER as usize];
                let mut left = VecDeque::new();
                while let Some((r, b, ctx)) = recvs.pop_front() {
                    match n.ep.test(r).map_err(|e| format!("test: {e:?}"))? {
                        Some(st) => {
                            if st.fault.is_some() {
                                return Err(format!("receive fault {:?}", st.fault));
                            }
                            let bytes = n.nic.user[b.0 as usize][..st.len as usize].to_vec();
                            got.entry((st.source, ctx))
                                .or_default()
                                .push((st.tag, bytes));
                            received += 1;
                        }
                        None => left.push_back((r, b, ctx)),
                    }
                }
                recvs = left;
                for n in nodes.iter_mut() {
                    if n.ep.poll_timeout().is_some_and(|t| t <= now) {
                        n.ep.poll(now, &mut n.nic);
                    }
                }
            }
        }
        if received == total {
            let stats = SENDERS
                .iter()
                .map(|&s| *nodes[s as usize].ep.stats())
                .collect();
            return Ok((got, stats));
        }
    }
    Err(format!("stalled: {received} of {total} received"))
}

fn expected(streams: &[Vec<Msg>; 2]) -> Got {
    let mut want: Got = BTreeMap::new();
    for (k, s) in streams.iter().enumerate() {
        for m in s {
            want.entry((SENDERS[k], m.context))
                .or_default()
                .push((m.tag, m.data.clone()));
        }
    }
    want
}

fn msg() -> impl Strategy<Value = Msg> {
    // Mostly small (packable), some above half a buffer.
    let size = prop_oneof![4 => 0usize..64, 2 => 64usize..256, 1 => 256usize..=EAGER as usize];
    (0u16..3, 0u32..4, size, any::<u8>()).prop_map(|(context, tag, len, seed)| Msg {
        context,
        tag,
        data: (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect(),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn coalescing_delivers_the_same_messages_in_the_same_order(
        a in proptest::collection::vec(msg(), 1..120),
        b in proptest::collection::vec(msg(), 0..120),
        wqes in 1u16..=10,
        cache: bool,
        by_bytes: bool,
        seed: u64,
    ) {
        let streams = [a, b];
        let want = expected(&streams);
        let (off, _) = run(&streams, wqes, Coalesce::Off, cache, by_bytes, seed).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&off, &want);
        let (on, _) = run(&streams, wqes, Coalesce::WhenFull, cache, by_bytes, seed).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&on, &want);
        let after = Coalesce::Outstanding(wqes.div_ceil(2));
        let (threshold, _) = run(&streams, wqes, after, cache, by_bytes, seed).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&threshold, &want);
    }
}

#[test]
fn few_entries_pack_messages_and_cache_repeated_headers() {
    let same = Msg {
        context: 1,
        tag: 9,
        data: vec![7; 8],
    };
    let streams = [vec![same; 200], Vec::new()];
    let (got, stats) = run(&streams, 2, Coalesce::WhenFull, true, false, 5).unwrap();
    assert_eq!(got, expected(&streams));
    let s = stats[0];
    assert!(s.coalesced > 10, "packed: {s:?}");
    assert_eq!(
        s.cached_headers, s.coalesced,
        "every record after a packet's first repeats its header"
    );
    assert!(s.packets_out < s.messages_out, "fewer sends than messages");
    let (_, no_cache) = run(&streams, 2, Coalesce::WhenFull, false, false, 5).unwrap();
    assert_eq!(no_cache[0].cached_headers, 0);
    let (_, off) = run(&streams, 2, Coalesce::Off, true, false, 5).unwrap();
    assert_eq!((off[0].coalesced, off[0].packets_out), (0, 200));
}

#[test]
fn messages_above_half_a_buffer_are_never_packed() {
    let big = Msg {
        context: 0,
        tag: 1,
        data: vec![3; EAGER as usize / 2 + 1],
    };
    let streams = [vec![big; 30], Vec::new()];
    let (got, stats) = run(&streams, 1, Coalesce::WhenFull, true, false, 9).unwrap();
    assert_eq!(got, expected(&streams));
    assert_eq!(stats[0].coalesced, 0);
    assert!(stats[0].backlogged > 0, "they waited for the one entry");
}

/// A packed packet from rank 0 with `records`, as bytes; `count` is declared.
fn packed_packet(count: u32, body: &[u8]) -> Vec<u8> {
    let h = Header {
        kind: Kind::Packed,
        src: 0,
        context: 0,
        tag: count,
        len: body.len() as u32,
        seq: 0,
        ack: 0,
        credit: 0,
    };
    let mut out = vec![0u8; HEADER_LEN];
    h.encode(&mut out).unwrap();
    out.extend_from_slice(body);
    out
}

fn record(prev: Option<Record>, r: Record, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; packed::record_len(prev, r, true)];
    let h = packed::write_head(&mut v, prev, r, true);
    v[h..].copy_from_slice(payload);
    v
}

#[test]
fn malformed_packed_packets_keep_the_records_before_the_fault() {
    let r = Record {
        context: 0,
        tag: 4,
        len: 3,
    };
    let good = [record(None, r, b"abc"), record(Some(r), r, b"def")].concat();
    let cases: Vec<(&str, u32, Vec<u8>)> = vec![
        (
            "unknown marker",
            3,
            [good.clone(), vec![0x55, 1, 2]].concat(),
        ),
        (
            "truncated record",
            3,
            [good.clone(), vec![packed::FULL, 0, 0]].concat(),
        ),
        (
            "inner length beyond the packet",
            3,
            [
                good.clone(),
                record(None, Record { len: 9, ..r }, &[1; 9])[..11].to_vec(),
                vec![1, 2],
            ]
            .concat(),
        ),
        ("declared count too large", 3, good.clone()),
        (
            "trailing bytes after the count",
            2,
            [good.clone(), vec![packed::CACHED]].concat(),
        ),
    ];
    for (what, count, body) in cases {
        let mut n = node(Config::reliable(EAGER, 16), RECEIVER, 4);
        let mut reqs = Vec::new();
        for _ in 0..3 {
            let b = n.nic.user_buf(vec![0; 16]);
            let q =
                n.ep.irecv(0, &mut n.nic, Source::Any, TagSel::Any, 0, b, 16)
                    .unwrap();
            reqs.push((q, b));
        }
        let rx = n.nic.deliver(packed_packet(count, &body));
        n.ep.on_receive(0, &mut n.nic, rx);
        let s = *n.ep.stats();
        assert_eq!((s.malformed, s.malformed_packed), (1, 1), "{what}: counted");
        assert_eq!(s.messages_in, 2, "{what}: both good records delivered");
        let (r0, b0) = reqs[0];
        let (r1, b1) = reqs[1];
        assert_eq!(n.ep.test(r0).unwrap().unwrap().len, 3, "{what}");
        assert_eq!(n.ep.test(r1).unwrap().unwrap().len, 3, "{what}");
        assert_eq!(&n.nic.user[b0.0 as usize][..3], b"abc");
        assert_eq!(&n.nic.user[b1.0 as usize][..3], b"def");
        assert_eq!(n.ep.test(reqs[2].0).unwrap(), None, "{what}: nothing more");
        assert_eq!(n.nic.reposted.len(), 1, "{what}: the buffer went back");
    }
    // A cached marker with nothing before it to repeat.
    let mut n = node(Config::reliable(EAGER, 16), RECEIVER, 4);
    let rx = n.nic.deliver(packed_packet(1, &[packed::CACHED, 1, 2, 3]));
    n.ep.on_receive(0, &mut n.nic, rx);
    assert_eq!(
        (n.ep.stats().malformed_packed, n.ep.stats().messages_in),
        (1, 0)
    );
}

#[test]
fn a_lossy_transport_takes_a_malformed_packed_packet_whole_or_not_at_all() {
    let r = Record {
        context: 0,
        tag: 4,
        len: 3,
    };
    let body = [record(None, r, b"abc"), vec![0x55]].concat();
    let mut n = node(Config::unreliable(EAGER, 16), RECEIVER, 4);
    let rx = n.nic.deliver(packed_packet(2, &body));
    n.ep.on_receive(0, &mut n.nic, rx);
    let s = *n.ep.stats();
    assert_eq!((s.malformed_packed, s.messages_in, s.unexpected), (1, 0, 0));
}
