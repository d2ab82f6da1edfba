//! `rmx bench spectrum`: a spectrum of buffer reuse. Buffer i of N is sent
//! (ping-pong) i times, so reuse counts run from 1 to N; the buffers lie back
//! to back ("packed": a registration's pages may cover the next buffer) or
//! each on pages of its own ("paged": every buffer pays its own
//! registration). Improvement of zero-copy over copy, per size and layout.

use rmx_core::reuse::TrackerReport;
use rmx_core::{Config, Source, TagSel};
use serde_json::json;

use super::report::{Column, Report};
use super::Opts;
use crate::anon::AnonMap;
use crate::clock::{now_ns, pin_to_cpu};
use crate::loopnic::{Fabric, LoopConfig};
use crate::monitor::Monitor;
use crate::rank::Rank;
use crate::reuse::{Calibration, PAGE};

/// How the N buffers are laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Packed,
    Paged,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Packed => "packed",
            Layout::Paged => "paged",
        }
    }

    fn stride(self, size: usize) -> usize {
        match self {
            Layout::Packed => size,
            Layout::Paged => size.div_ceil(PAGE as usize) * PAGE as usize,
        }
    }
}

/// `n` buffers of `size` bytes in `layout`, in memory of their own.
struct Buffers {
    map: AnonMap,
    stride: usize,
}

impl Buffers {
    fn new(n: usize, size: usize, layout: Layout) -> Buffers {
        let stride = layout.stride(size);
        let len = (n * stride).div_ceil(PAGE as usize) * PAGE as usize;
        Buffers {
            map: AnonMap::new(len),
            stride,
        }
    }

    fn get(&mut self, i: usize, size: usize) -> &mut [u8] {
        self.map.slice_mut(i * self.stride, size)
    }
}

/// What a spectrum run measured on rank 0.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    ns: u64,
    registrations: u64,
    tracker: TrackerReport,
}

/// One spectrum on a fresh pair of ranks.
fn spectrum(
    n: usize,
    size: usize,
    layout: Layout,
    cfg: Config,
    nic: LoopConfig,
    cal: Option<&Calibration>,
) -> Run {
    let fabric = Fabric::new(2, nic);
    let out: Vec<Run> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u16)
            .map(|me| {
                let port = fabric.port(me);
                s.spawn(move || {
                    pin_to_cpu(me as usize);
                    let mut r = match cal {
                        None => Rank::new(port, 2, cfg).expect("rank"),
                        Some(c) => Rank::with_reuse(port, 2, cfg, c).expect("zero-copy rank"),
                    };
                    let mut bufs = Buffers::new(n, size, layout);
                    let mut rbuf = vec![0u8; size];
                    let peer = 1 - me;
                    // Warm-up from a buffer outside the spectrum: fault in the
                    // receive rings and bounce slots before the clock starts.
                    let warm = vec![7u8; size];
                    for _ in 0..2 * nic.srq_depth {
                        if me == 0 {
                            r.send(peer, 2, &warm).expect("send");
                            r.recv(Source::Rank(peer), TagSel::Tag(2), &mut rbuf)
                                .expect("recv");
                        } else {
                            r.recv(Source::Rank(peer), TagSel::Tag(2), &mut rbuf)
                                .expect("recv");
                            r.send(peer, 2, &warm).expect("send");
                        }
                    }
                    let t0 = now_ns();
                    for i in 0..n {
                        for _ in 0..=i {
                            if me == 0 {
                                r.send(peer, 1, bufs.get(i, size)).expect("send");
                                r.recv(Source::Rank(peer), TagSel::Tag(1), &mut rbuf)
                                    .expect("recv");
                            } else {
                                r.recv(Source::Rank(peer), TagSel::Tag(1), &mut rbuf)
                                    .expect("recv");
                                r.send(peer, 1, bufs.get(i, size)).expect("send");
                            }
                        }
                    }
                    let ns = now_ns() - t0;
                    r.reuse().map_or(
                        Run {
                            ns,
                            ..Run::default()
                        },
                        |p| Run {
                            ns,
                            registrations: p.cache().stats().registrations,
                            tracker: p.tracker().report(),
                        },
                    )
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    });
    out[0]
}

/// Runs of each mode per size and layout.
const REPEATS: usize = 3;

pub fn run(opts: &Opts, cfg: Config, nic: LoopConfig, cal: &Calibration, n: usize) -> Report {
    let sizes = opts.sizes();
    let layouts = [Layout::Packed, Layout::Paged];
    let pb = opts.progress("spectrum", sizes.len() * layouts.len());
    let events = || Monitor::global().map_or(0, |m| m.events());
    let events_before = events();
    let mut results = Vec::new();
    for &size in &sizes {
        for layout in layouts {
            // REPEATS runs of each mode, alternating; the median run of each
            // is kept, so one preemption of a shared machine does not decide.
            let mut copies = Vec::new();
            let mut zeros = Vec::new();
            for _ in 0..REPEATS {
                copies.push(spectrum(n, size, layout, cfg, nic, None).ns);
                zeros.push(spectrum(n, size, layout, cfg, nic, Some(cal)));
            }
            copies.sort_unstable();
            zeros.sort_by_key(|r| r.ns);
            let copy = copies[REPEATS / 2] as f64;
            let zero = zeros[REPEATS / 2];
            let t = zero.tracker;
            results.push(json!({
                "size": size,
                "layout": layout.name(),
                "copy_ms": copy / 1e6,
                "zero_copy_ms": zero.ns as f64 / 1e6,
                "improvement_pct": (copy - zero.ns as f64) / copy * 100.0,
                "registrations": zero.registrations,
                "frequent_pct": t.frequent_permille as f64 / 10.0,
                "tracked": t.tracked,
                "chained_buckets": t.chained_buckets,
                "longest_chain": t.longest_chain,
                "tracker_stopped": t.stopped,
            }));
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let mut config = opts.config_json(&cfg, &nic);
    config["buffers"] = json!(n);
    config["round_trips_per_run"] = json!(n * (n + 1) / 2);
    config["runs_per_mode"] = json!(REPEATS);
    config["invalidation_events"] = json!(events() - events_before);
    config["calibration"] = serde_json::to_value(cal).expect("json");
    Report::new(
        "spectrum",
        opts,
        config,
        results,
        vec![
            Column::new("layout", "layout", 0),
            Column::new("copy_ms", "copy_ms", 1),
            Column::new("zero_copy_ms", "zero_copy_ms", 1),
            Column::new("improvement_pct", "improvement_%", 1),
            Column::new("registrations", "registrations", 0),
            Column::new("frequent_pct", "frequent_%", 1),
        ],
    )
}

/// Improvement against size, one curve per layout.
pub fn plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let rows: Vec<_> = r
        .results
        .iter()
        .filter(|x| x["layout"] == "packed")
        .map(|p| {
            let size = &p["size"];
            let paged = r
                .results
                .iter()
                .find(|x| x["layout"] == "paged" && &x["size"] == size)
                .map(|x| x["improvement_pct"].clone());
            json!({"size": size, "packed": p["improvement_pct"], "paged": paged})
        })
        .collect();
    let curves = Report {
        results: rows,
        ..r.clone()
    };
    curves.svg_linear(
        path,
        &[
            ("packed", "packed (back to back)"),
            ("paged", "paged (one per page)"),
        ],
        "improvement over copy (%)",
    )
}
