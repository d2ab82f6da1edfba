//! `rmx bench pingpong`: one-way latency (half a round trip), beside its
//! floor measured between the same two threads in the same run, alternating
//! size by size: a bare shared-memory copy on `loop`, bare Ethernet frames
//! over the same link on `eth`.

use rmx_core::{Config, Protocol, Source, TagSel};
use serde_json::json;

use super::floor::MemoryFloor;
use super::frame_floor::{Tend, WireFloor, WireSide};
use super::hist::Hist;
use super::report::{Column, Report};
use super::Opts;
use crate::job;
use crate::job::Net;
use crate::rank::Rank;
use crate::transport::Floor;

/// Round trips of `size` bytes with rank 1, exactly as osu_latency loops:
/// rank 0 sends then receives, rank 1 receives then sends, each call blocking.
/// A receive is posted while the other side's message is in flight; one that
/// arrives first takes the unexpected path, and is measured as such.
/// Returns elapsed ns on the calling rank.
pub(crate) fn rmx_rounds(
    r: &mut Rank,
    rounds: u64,
    size: usize,
    sbuf: &[u8],
    rbuf: &mut [u8],
) -> u64 {
    let peer = 1 - r.rank();
    let t0 = crate::clock::now_ns();
    for _ in 0..rounds {
        if r.rank() == 0 {
            r.send(peer, 1, &sbuf[..size]).expect("send");
            r.recv(Source::Rank(peer), TagSel::Tag(1), &mut rbuf[..size])
                .expect("recv");
        } else {
            r.recv(Source::Rank(peer), TagSel::Tag(1), &mut rbuf[..size])
                .expect("recv");
            r.send(peer, 1, &sbuf[..size]).expect("send");
        }
    }
    crate::clock::now_ns() - t0
}

/// Tag of the messages that line the two ranks up between phases.
const SYNC: u32 = 0xFFFF_FF01;

/// Both ranks reach this point before either goes on: an empty message
/// each way (between threads or processes alike). Either may go on
/// before its own message is acknowledged: the floor's rounds that follow
/// tend the rank while they wait (see [`Tend`]).
fn sync(r: &mut Rank) {
    let peer = 1 - r.rank().min(1);
    r.send(peer, SYNC, &[]).expect("sync");
    r.recv(Source::Rank(peer), TagSel::Tag(SYNC), &mut [])
        .expect("sync");
}

/// The floor beside rmx: a shared-memory copy between the two threads on
/// `loop`, bare frames over the same link on `eth`.
enum Bare<'a> {
    Memory {
        side: super::floor::Side<'a>,
        seq: u64,
        buf: Vec<u8>,
    },
    Wire(WireSide),
    /// No floor: two endpoints on one interface of one host.
    None,
}

impl Bare<'_> {
    /// `rounds` round trips of `size` bytes: elapsed ns, or `None` if the
    /// wire lost a frame. A wire's waits `tend` the rank.
    fn rounds(
        &mut self,
        rounds: u64,
        size: usize,
        sbuf: &[u8],
        rbuf: &mut [u8],
        tend: Tend<'_>,
    ) -> Option<u64> {
        match self {
            Bare::Memory { side, seq, buf } => {
                let t = side.run(*seq, rounds, size, buf);
                *seq += rounds;
                Some(t)
            }
            Bare::Wire(w) => w.pingpong(rounds, size, sbuf, rbuf, tend),
            Bare::None => None,
        }
    }
}

/// As [`rmx_rounds`], also recording each round trip's duration.
fn rmx_rounds_timed(
    r: &mut Rank,
    rounds: u64,
    size: usize,
    sbuf: &[u8],
    rbuf: &mut [u8],
    hist: &mut Hist,
) -> u64 {
    let t0 = crate::clock::now_ns();
    let mut last = t0;
    for _ in 0..rounds {
        rmx_rounds(r, 1, size, sbuf, rbuf);
        let now = crate::clock::now_ns();
        hist.record(now - last);
        last = now;
    }
    last - t0
}

/// Latency per size; sizes sent without a rendezvous (in one packet or as
/// fragments) with `--iters`, larger ones once per rendezvous
/// in `variants` (the transport's choice when empty), with a tenth of the
/// iterations there, as osu_latency does for large messages.
pub fn run(opts: &Opts, cfg: Config, net: &Net, variants: &[Protocol]) -> Report {
    let all = opts.sizes();
    let eager_max = net.eager_max(&cfg) as u64;
    let (eager, large): (Vec<usize>, Vec<usize>) =
        all.iter().partition(|&&s| s as u64 <= eager_max);
    let mut results = Vec::new();
    let pb = opts.progress(
        "pingpong",
        eager.len() + large.len() * variants.len().max(1),
    );
    if !eager.is_empty() {
        results.extend(measure(opts, cfg, net, &eager, opts.iters, None, &pb));
    }
    if !large.is_empty() {
        let iters = (opts.iters / 10).max(10);
        if variants.is_empty() {
            results.extend(measure(opts, cfg, net, &large, iters, None, &pb));
        }
        for &p in variants {
            let c = Config {
                rendezvous: Some(p),
                ..cfg
            };
            results.extend(measure(opts, c, net, &large, iters, Some(p), &pb));
        }
    }
    pb.finish_and_clear();
    let mut config = opts.config_json(&cfg, net);
    config["large_iters"] = serde_json::json!((opts.iters / 10).max(10));
    let mut columns = vec![
        Column::new("rndv", "rndv", 0),
        Column::new("latency_us", "latency_us", 3),
    ];
    if matches!(net.floor(), Floor::Frames { .. }) {
        columns.push(Column::new("p50_us", "p50_us", 3));
        columns.push(Column::new("p99_us", "p99_us", 3));
    }
    columns.push(Column::new("floor_us", "floor_us", 3));
    columns.push(Column::new("ratio", "x_floor", 2));
    Report::new("pingpong", opts, config, results, columns)
}

fn measure(
    opts: &Opts,
    cfg: Config,
    net: &Net,
    sizes: &[usize],
    iters: u64,
    rndv: Option<Protocol>,
    pb: &indicatif::ProgressBar,
) -> Vec<serde_json::Value> {
    let warmup = opts.warmup.min(iters);
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let memory = MemoryFloor::new(max);
    // The floor beside rmx: memory between threads on `loop`, bare frames
    // on `eth`; none on a transport whose ranks may be processes with no
    // floor of rmx's own (verbs: its anchors are perftest's).
    let (wire, memory_floor) = match net.floor() {
        Floor::Frames { iface } => (Some(WireFloor::new(&iface)), false),
        Floor::Memory => (None, true),
        Floor::None => (None, false),
    };
    let rows = job::run_with(2, cfg, net, opts.eager_reuse.as_ref(), |r| {
        let me = r.rank();
        let sbuf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rbuf = vec![0u8; max];
        let mut bare = match &wire {
            Some(w) => match w.side(r, true).expect("the floor's raw socket") {
                Some(side) => Bare::Wire(side),
                None => Bare::None,
            },
            None if memory_floor => Bare::Memory {
                side: memory.side(me).expect("one thread per side"),
                seq: 0,
                buf: vec![0u8; 2 * max],
            },
            None => Bare::None,
        };
        let mut rows = Vec::new();
        for &size in sizes {
            sync(r);
            bare.rounds(warmup, size, &sbuf, &mut rbuf, &mut || r.tend());
            sync(r);
            let f = bare.rounds(iters, size, &sbuf, &mut rbuf, &mut || r.tend());
            sync(r);
            rmx_rounds(r, warmup, size, &sbuf, &mut rbuf);
            sync(r);
            // On a lossy wire the spread matters: percentiles of the
            // round trips there (stamping each costs a clock read).
            let mut hist = Hist::default();
            let t = if !memory_floor {
                rmx_rounds_timed(r, iters, size, &sbuf, &mut rbuf, &mut hist)
            } else {
                rmx_rounds(r, iters, size, &sbuf, &mut rbuf)
            };
            if me == 0 {
                let lat = t as f64 / iters as f64 / 2.0 / 1000.0;
                let fl = f.map(|f| f as f64 / iters as f64 / 2.0 / 1000.0);
                let pct = |p| hist.percentile(p).map(|ns| ns as f64 / 2.0 / 1000.0);
                rows.push((size, lat, fl, pct(0.5), pct(0.99)));
                pb.inc(1);
            }
        }
        rows
    });
    let name = rndv.map(|p| p.name());
    rows[0]
        .iter()
        .map(|&(size, lat, fl, p50, p99)| {
            json!({"size": size, "rndv": name, "latency_us": lat, "p50_us": p50, "p99_us": p99,
                   "floor_us": fl, "ratio": fl.map(|f| lat / f)})
        })
        .collect()
}
