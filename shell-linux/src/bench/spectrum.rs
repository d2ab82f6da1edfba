//! `rmx bench spectrum`: a spectrum of buffer reuse. Buffer i of N is sent
//! (ping-pong) i times, so reuse counts run from 1 to N; the buffers lie back
//! to back ("packed": a registration's pages may cover the next buffer) or
//! each on pages of its own ("paged": every buffer pays its own
//! registration). Improvement of zero-copy over copy, per size and layout.

use rmx_core::reuse::TrackerReport;
use rmx_core::Config;
use serde_json::json;

use super::pingpong::rmx_rounds;
use super::report::{Column, Report};
use super::Opts;
use crate::anon::AnonMap;
use crate::job;
use crate::job::Net;
use crate::monitor::Monitor;
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
        let len = n
            .checked_mul(stride)
            .and_then(|b| b.checked_next_multiple_of(PAGE as usize))
            .expect("the command line bounds the buffers");
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
    copy_ns: u64,
    zero_copy_ns: u64,
    registrations: u64,
    tracker: TrackerReport,
}

/// One spectrum, copy and zero-copy interleaved buffer by buffer: each
/// thread drives a plain rank and a zero-copy rank (each pair on its own
/// fabric, each with its own buffers), so a slow spell of a shared machine
/// falls on both modes alike.
fn spectrum(
    n: usize,
    size: usize,
    layout: Layout,
    cfg: Config,
    net: &Net,
    cal: &Calibration,
) -> Run {
    let out = job::run_side_by_side(cfg, net, cal, |plain, zc| {
        let mut bufs = [Buffers::new(n, size, layout), Buffers::new(n, size, layout)];
        let mut rbuf = vec![0u8; size];
        // Warm-up from a buffer outside the spectrum: fault in the receive
        // rings and bounce slots before the clock starts.
        let warm = vec![7u8; size];
        for r in [&mut *plain, &mut *zc] {
            rmx_rounds(r, 2 * net.rx_buffers() as u64, size, &warm, &mut rbuf);
        }
        let mut ns = [0u64; 2];
        for i in 0..n {
            for (k, r) in [&mut *plain, &mut *zc].into_iter().enumerate() {
                ns[k] += rmx_rounds(r, i as u64 + 1, size, bufs[k].get(i, size), &mut rbuf);
            }
        }
        let (registrations, tracker) = zc.reuse(|p| {
            let p = p.expect("zero-copy policy");
            (p.cache().stats().registrations, p.tracker().report())
        });
        Run {
            copy_ns: ns[0],
            zero_copy_ns: ns[1],
            registrations,
            tracker,
        }
    });
    out[0]
}

pub fn run(opts: &Opts, cfg: Config, net: &Net, cal: &Calibration, n: usize) -> Report {
    let sizes = opts.sizes();
    let layouts = [Layout::Packed, Layout::Paged];
    let pb = opts.progress("spectrum", sizes.len() * layouts.len());
    let events = || Monitor::global().map_or(0, |m| m.events());
    let events_before = events();
    let mut results = Vec::new();
    for &size in &sizes {
        for layout in layouts {
            let run = spectrum(n, size, layout, cfg, net, cal);
            let (copy, zero) = (run.copy_ns as f64, run.zero_copy_ns as f64);
            let t = run.tracker;
            results.push(json!({
                "size": size,
                "layout": layout.name(),
                "copy_ms": copy / 1e6,
                "zero_copy_ms": zero / 1e6,
                "improvement_pct": (copy - zero) / copy * 100.0,
                "registrations": run.registrations,
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
    let mut config = opts.config_json(&cfg, net);
    config["buffers"] = json!(n);
    config["round_trips_per_run"] = json!(n * (n + 1) / 2);
    config["interleaved"] = json!("per buffer");
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
    let (curves, _) = r.pivot("layout", "improvement_pct");
    curves.svg_linear(
        path,
        &[
            ("packed", "packed (back to back)"),
            ("paged", "paged (one per page)"),
        ],
        "improvement over copy (%)",
    )
}
