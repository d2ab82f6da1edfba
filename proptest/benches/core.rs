//! Core micro-benchmarks (divan): the CPU cost of the protocol core's hot
//! operations, without any NIC. `cargo bench -p rmx-proptest --bench core`.

use divan::{black_box, Bencher};
use rmx_core::matching::{Envelope, Pattern, Source, TagSel};
use rmx_core::wire::{decode_packet, Header, Kind, HEADER_LEN};
use rmx_core::{Config, Endpoint, UserBuf};
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{matcher, HeapMatcher};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::linear::LinearMatcher;
use rmx_proptest::memnic::MemNic;

fn main() {
    divan::main();
}

fn header() -> Header {
    Header {
        kind: Kind::Eager,
        src: 1,
        context: 0,
        tag: 42,
        len: 8,
        seq: 7,
        ack: 3,
        credit: 5,
    }
}

#[divan::bench]
fn wire_encode(b: Bencher) {
    let mut out = [0u8; HEADER_LEN];
    b.bench_local(|| black_box(header()).encode(black_box(&mut out)));
}

#[divan::bench]
fn wire_decode(b: Bencher) {
    let mut pkt = vec![0u8; HEADER_LEN + 8];
    header().encode(&mut pkt).unwrap();
    b.bench_local(|| decode_packet(black_box(&pkt)).map(|(h, _)| h.tag));
}

/// Posted receives in the matching benchmarks, spread over 1024 sources.
const POSTED: [usize; 3] = [1, 256, 4096];

/// Receives posted for sources 1..=1024 in turn, each for its own tag.
fn spread(k: usize) -> Pattern {
    Pattern {
        source: Source::Rank((k % 1024) as u16 + 1),
        tag: TagSel::Tag(k as u32 + 1000),
        context: 0,
    }
}

/// The receive the measured arrival matches: posted last, behind every other.
const MINE: Pattern = Pattern {
    source: Source::Rank(0),
    tag: TagSel::Tag(7),
    context: 0,
};
const ARRIVAL: Envelope = Envelope {
    src: 0,
    tag: 7,
    context: 0,
};

/// An arrival that matches the newest of `n` posted receives, the others
/// posted for other sources: binned matching searches only its source's bin.
#[divan::bench(args = POSTED)]
fn match_binned(b: Bencher, n: usize) {
    let mut m: HeapMatcher<u32, u32> = matcher(4096, 16);
    for k in 0..n - 1 {
        m.post(spread(k), k as u32).unwrap();
    }
    b.bench_local(|| {
        m.post(MINE, 0).unwrap();
        black_box(m.arrive(black_box(&ARRIVAL)))
    });
}

/// The same with the posted receives in one ordered list (the queues before
/// binning): the arrival walks every receive posted before its own.
#[divan::bench(args = POSTED)]
fn match_linear(b: Bencher, n: usize) {
    let mut m: LinearMatcher<u32, u32> = LinearMatcher::default();
    for k in 0..n - 1 {
        m.post(spread(k), k as u32);
    }
    b.bench_local(|| {
        m.post(MINE, 0);
        black_box(m.arrive(black_box(&ARRIVAL)))
    });
}

/// An ANY_SOURCE receive among `n` receives for specific sources: every
/// arrival also checks the wildcard list, and the older receive wins.
#[divan::bench(args = POSTED)]
fn match_binned_behind_a_wildcard(b: Bencher, n: usize) {
    let mut m: HeapMatcher<u32, u32> = matcher(4096, 16);
    let any = Pattern {
        source: Source::Any,
        tag: TagSel::Tag(3),
        context: 0,
    };
    m.post(any, 0).unwrap();
    for k in 0..n.saturating_sub(2) {
        m.post(spread(k), k as u32).unwrap();
    }
    b.bench_local(|| {
        m.post(MINE, 0).unwrap();
        black_box(m.arrive(black_box(&ARRIVAL)))
    });
}

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(2, 64, 128, 16, 128);

/// One eager message of 8 bytes: `isend` on one endpoint, `on_receive` and the
/// completed `irecv` on the other, through the in-memory NIC (whose packet
/// vectors add an allocation per message).
#[divan::bench]
fn eager_send_and_receive(b: Bencher) {
    let cfg = Config::reliable(256, 64);
    let (mut a, mut z) = (
        Ep::new(cfg, 0, 2, Tables::new(&SIZES)).unwrap(),
        Ep::new(cfg, 1, 2, Tables::new(&SIZES)).unwrap(),
    );
    let (mut an, mut zn) = (MemNic::new(16, 512), MemNic::new(16, 512));
    let src = an.user_buf(vec![1; 8]);
    let dst: UserBuf = zn.user_buf(vec![0; 8]);
    b.bench_local(|| {
        let r = z
            .irecv(0, &mut zn, Source::Rank(0), TagSel::Tag(1), 0, dst, 8)
            .unwrap();
        a.isend(0, &mut an, 1, 1, 0, src, 8).unwrap();
        let (_, pkt) = an.outbox.pop().unwrap();
        let buf = zn.deliver(pkt);
        z.on_receive(0, &mut zn, buf);
        // Credits flow back on the control packets the receiver emits.
        for (_, p) in zn.outbox.drain(..) {
            let rb = an.deliver(p);
            a.on_receive(0, &mut an, rb);
        }
        black_box(z.test(r).unwrap())
    });
}

/// `poll` on an idle endpoint of a lossy job with `ranks` ranks, one peer
/// of which has a packet awaiting acknowledgement (its retransmission timer
/// armed far ahead): what a driver pays per poll while nothing is due.
#[divan::bench(args = [2, 1024, 8192])]
fn poll_idle(b: Bencher, ranks: u16) {
    let cfg = Config {
        reliable: false,
        ..Config::reliable(256, 64)
    };
    let s = Sizes::for_job(ranks, &cfg);
    let mut a = Ep::new(cfg, 0, ranks, Tables::new(&s)).unwrap();
    let mut an = MemNic::new(256, 512);
    let src = an.user_buf(vec![1; 8]);
    a.isend(0, &mut an, 1, 1, 0, src, 8).unwrap();
    let now = 1_000;
    b.bench_local(|| {
        a.poll(black_box(now), &mut an);
        black_box(a.poll_timeout())
    });
}

/// Buffers tracked in the lookup benchmarks (the paper's Figure 3 spans 1 … 1M).
const TRACKED: [usize; 6] = [1, 16, 256, 4096, 65536, 1 << 20];

/// `n` distinct buffer addresses, spread as heap allocations are.
fn addresses(n: usize) -> Vec<u64> {
    (0..n as u64).map(|k| 0x5555_0000_0000 + k * 4160).collect()
}

/// Lookup (and count) of a tracked buffer in the reuse tracker — 2^20
/// buckets, multiplicative hash, chained in an arena — with `n` buffers tracked.
#[divan::bench(args = TRACKED)]
fn reuse_lookup_tracker(b: Bencher, n: usize) {
    use rmx_core::reuse::{Adaptation, Tracked, Tracker};
    let never = Adaptation {
        min_frequent_permille: 0,
        resume_after: 0,
    };
    let mut t = Tracker::new(vec![0u32; 1 << 20], vec![Tracked::default(); n], never).unwrap();
    let addrs = addresses(n);
    for &a in &addrs {
        t.touch(a, 12, || u32::MAX);
    }
    let mut i = 0;
    b.bench_local(|| {
        i = (i + 7919) % n;
        t.touch(black_box(addrs[i]), 12, || u32::MAX)
    });
}

/// The same lookup in a balanced tree (the registration cache's structure in MVAPICH2).
#[divan::bench(args = TRACKED)]
fn reuse_lookup_btreemap(b: Bencher, n: usize) {
    let addrs = addresses(n);
    let mut t: std::collections::BTreeMap<(u64, u8), u32> =
        addrs.iter().map(|&a| ((a, 12), 1)).collect();
    let mut i = 0;
    b.bench_local(|| {
        i = (i + 7919) % n;
        if let Some(c) = t.get_mut(&(black_box(addrs[i]), 12)) {
            *c += 1;
        }
    });
}

/// The same lookup in std's HashMap (SipHash).
#[divan::bench(args = TRACKED)]
fn reuse_lookup_hashmap(b: Bencher, n: usize) {
    let addrs = addresses(n);
    let mut t: std::collections::HashMap<(u64, u8), u32> =
        addrs.iter().map(|&a| ((a, 12), 1)).collect();
    let mut i = 0;
    b.bench_local(|| {
        i = (i + 7919) % n;
        if let Some(c) = t.get_mut(&(black_box(addrs[i]), 12)) {
            *c += 1;
        }
    });
}
