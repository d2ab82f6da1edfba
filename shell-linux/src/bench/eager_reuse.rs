//! `rmx bench eager-reuse`: ping-pong latency with the eager send copying
//! through a bounce slot and with it gathering straight from the (frequently
//! used, registered) user buffer, alternating size by size in one run, beside
//! the bound the saved copy sets: one copy ÷ copy-path latency.

use rmx_core::Config;
use serde_json::json;

use super::pingpong::rmx_rounds;
use super::report::{Column, Report};
use super::Opts;
use crate::job;
use crate::job::Net;
use crate::reuse::Calibration;

/// Timed slices per size and mode.
const CHUNKS: u64 = 10;

pub fn run(opts: &Opts, cfg: Config, net: &Net, cal: &Calibration) -> Report {
    let sizes = opts.sizes();
    let max = sizes.iter().copied().max().unwrap_or(1).max(1);
    let barrier = super::SpinBarrier::new(2);
    let pb = opts.progress("eager-reuse", sizes.len());
    let rows = job::run_side_by_side(cfg, net, cal, |plain, zc| {
        let me = plain.rank();
        let sbuf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rbuf = vec![0u8; max];
        let mut rows = Vec::new();
        for &size in &sizes {
            for r in [&mut *plain, &mut *zc] {
                barrier.wait(r);
                rmx_rounds(r, opts.warmup, size, &sbuf, &mut rbuf);
            }
            // Timed in CHUNKS, alternating which mode goes first, so drift
            // in the machine falls on both alike.
            let mut ns = [0u64; 2];
            let per = (opts.iters / CHUNKS).max(1);
            for c in 0..CHUNKS {
                for k in [c % 2, 1 - c % 2] {
                    let r = if k == 0 { &mut *plain } else { &mut *zc };
                    barrier.wait(r);
                    ns[k as usize] += rmx_rounds(r, per, size, &sbuf, &mut rbuf);
                }
            }
            let rounds = (per * CHUNKS) as f64 * 2.0;
            barrier.wait(plain);
            if me == 0 {
                let one = crate::calibrate::copy_ns(size, opts.iters.max(1000));
                rows.push((size, ns[0] as f64 / rounds, ns[1] as f64 / rounds, one));
                pb.inc(1);
            }
        }
        rows
    });
    pb.finish_and_clear();
    let results = rows[0]
        .iter()
        .map(|&(size, copy, zero, one)| {
            json!({
                "size": size,
                "copy_us": copy / 1000.0,
                "zero_copy_us": zero / 1000.0,
                "one_copy_us": one / 1000.0,
                "improvement_pct": (copy - zero) / copy * 100.0,
                "theoretical_pct": one / copy * 100.0,
            })
        })
        .collect();
    let mut config = opts.config_json(&cfg, net);
    config["calibration"] = serde_json::to_value(cal).expect("json");
    Report::new(
        "eager-reuse",
        opts,
        config,
        results,
        vec![
            Column::new("copy_us", "copy_us", 3),
            Column::new("zero_copy_us", "zero_copy_us", 3),
            Column::new("one_copy_us", "one_copy_us", 3),
            Column::new("improvement_pct", "improvement_%", 1),
            Column::new("theoretical_pct", "theoretical_%", 1),
        ],
    )
}
