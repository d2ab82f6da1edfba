//! `rmx bench progress`: does a pending operation move while the
//! application computes? The method of Rashti and Afsahi (section 7).
//!
//! Send side: the sender starts a non-blocking send, then spends a delay
//! longer than the message's latency in computation before it waits; the
//! receiver's blocking receive is timed from a common start. Receive side:
//! the receiver posts a non-blocking receive, computes for the delay while
//! asking every few microseconds whether the receive completed (the
//! `arrived_during_delay` column), then waits; the sender
//! sends at once. If the operation progressed on its own, the latency is
//! about the delay; what remains after it (the post-delay work) is reported
//! as a fraction of the latency without delay. Each latency is the median
//! of `--iters` repetitions.

use std::sync::atomic::{AtomicU64, Ordering};

use rmx_core::{Config, Protocol, Source, TagSel};
use serde_json::json;

use super::report::{Column, Report};
use super::{compute, median, Opts, Side, SpinBarrier};
use crate::clock::now_ns;
use crate::job::Net;
use crate::rank::Rank;

const DATA: u32 = 21;

/// Delays tried, as multiples of the latency without delay (at least
/// `MIN_DELAY_NS` each, so that small messages see a real computation).
const DELAYS: [u64; 2] = [2, 5];
/// The rank timed on both sides: the receiver, whose receive completes
/// when the transfer has.
const TIMED: u16 = 1;
const MIN_DELAY_NS: u64 = 20_000;

/// How often the receive side asks, during its computation, whether the
/// receive has completed: rarely enough that the asking is not the work.
const CHECK_NS: u64 = 2_000;

/// One repetition; the timed side returns (latency ns, the receive
/// completed during the delay).
fn once(r: &mut Rank, side: Side, size: usize, delay: u64, buf: &mut [u8]) -> (u64, bool) {
    let t0 = now_ns();
    match (side, r.rank()) {
        (Side::Send, 0) => {
            // SAFETY: the request is waited for before `buf` is touched again.
            let q = unsafe { r.isend_raw(1, DATA, buf.as_ptr(), size) }.expect("isend");
            compute(delay);
            r.wait(q);
            (0, false)
        }
        (Side::Send, _) => {
            r.recv(Source::Rank(0), TagSel::Tag(DATA), &mut buf[..size])
                .expect("recv");
            (now_ns() - t0, false)
        }
        (Side::Recv, 1) => {
            // SAFETY: `buf` is not touched until the request completes
            // (`test` or `wait` below).
            let q =
                unsafe { r.irecv_raw(Source::Rank(0), TagSel::Tag(DATA), buf.as_mut_ptr(), size) }
                    .expect("irecv");
            // The computation asks now and then whether the receive is
            // complete (without driving it): reading the buffer itself
            // while the NIC writes it would be a data race.
            let end = now_ns() + delay;
            let mut pending = Some(q);
            let mut next = now_ns();
            loop {
                let now = now_ns();
                if now >= end {
                    break;
                }
                if now >= next {
                    next = now + CHECK_NS;
                    if let Some(q) = pending.take() {
                        pending = r.test(q).err();
                    }
                }
                std::hint::spin_loop();
            }
            let seen = pending.is_none();
            if let Some(q) = pending {
                r.wait(q);
            }
            (now_ns() - t0, seen)
        }
        (Side::Recv, _) => {
            r.send(1, DATA, &buf[..size]).expect("send");
            (0, false)
        }
    }
}

fn series(
    r: &mut Rank,
    side: Side,
    size: usize,
    delay: u64,
    reps: u64,
    barrier: &SpinBarrier,
    buf: &mut [u8],
) -> (u64, u64) {
    let mut ls = Vec::with_capacity(reps as usize);
    let mut seen = 0;
    for _ in 0..reps {
        barrier.wait(r);
        let (l, s) = once(r, side, size, delay, buf);
        ls.push(l);
        seen += s as u64;
    }
    (median(&mut ls), seen)
}

/// Every size for each rendezvous and progress-thread setting: one job each.
pub fn run(
    opts: &Opts,
    cfg: Config,
    net: &Net,
    side: Side,
    variants: &[Protocol],
    threads: &[bool],
) -> Report {
    let sizes = opts.sizes();
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let pb = opts.progress("progress", sizes.len() * variants.len() * threads.len());
    let barrier = SpinBarrier::new(2);
    let shared_l0 = AtomicU64::new(0);
    // Sent without a rendezvous: the send completes at once, in one packet
    // or as fragments.
    let eager_max = net.eager_max(&cfg) as u64;
    let eager = |size: usize| size as u64 <= eager_max;
    let runs = super::per_setting(cfg, net, variants, threads, TIMED, |r| {
        let timed = r.rank() == TIMED;
        let mut buf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rows = Vec::new();
        for &size in &sizes {
            let reps = if eager(size) {
                opts.iters
            } else {
                opts.iters / 2
            }
            .max(5);
            for _ in 0..(reps / 10).max(2) {
                barrier.wait(r);
                once(r, side, size, 0, &mut buf);
            }
            let (l0, _) = series(r, side, size, 0, reps, &barrier, &mut buf);
            if timed {
                shared_l0.store(l0, Ordering::Release);
                rows.push((size, 0, 0, l0, 0, reps));
            }
            barrier.wait(r);
            let l0 = shared_l0.load(Ordering::Acquire);
            for k in DELAYS {
                let d = (k * l0).max(MIN_DELAY_NS);
                let (l, seen) = series(r, side, size, d, reps, &barrier, &mut buf);
                if timed {
                    rows.push((size, k, d, l, seen, reps));
                }
            }
            barrier.wait(r);
            if timed {
                pb.inc(1);
            }
        }
        rows
    });
    let mut results = Vec::new();
    for (p, pt, rows) in runs {
        let mut l0 = 1;
        for (size, k, d, l, seen, reps) in rows {
            if k == 0 {
                l0 = l.max(1);
            }
            let post = (k > 0).then(|| l.saturating_sub(d) as f64 / l0 as f64);
            let mut row = json!({
                "size": size,
                "rndv": if eager(size) { json!(null) } else { json!(p.name()) },
                "progress_thread": pt,
                "delay_us": d as f64 / 1000.0,
                "latency_us": l as f64 / 1000.0,
                "post_delay_fraction": post,
                "setting": super::overlap::setting(p, pt),
                "delay_factor": k,
            });
            if side == Side::Recv {
                row["arrived_during_delay"] = json!(seen as f64 / reps as f64);
            }
            results.push(row);
        }
    }
    pb.finish_and_clear();
    let mut config = opts.config_json(&cfg, net);
    config["side"] = json!(side.name());
    config["statistic"] = json!("median");
    config["delays"] = json!(format!(
        "0, then {:?} x l0 (at least {} us)",
        DELAYS,
        MIN_DELAY_NS / 1000
    ));
    let mut cols = vec![
        Column::new("setting", "setting", 0),
        Column::new("delay_us", "delay_us", 1),
        Column::new("latency_us", "latency_us", 3),
        Column::new("post_delay_fraction", "post_delay", 3),
    ];
    if side == Side::Recv {
        cols.push(Column::new("arrived_during_delay", "data_in_delay", 2));
    }
    Report::new(
        &format!("progress --side {}", side.name()),
        opts,
        config,
        results,
        cols,
    )
}

/// Post-delay work against size at the longest delay, one curve per setting.
pub fn plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let longest = DELAYS[DELAYS.len() - 1];
    let mut only = r.clone();
    only.results
        .retain(|row| row["delay_factor"].as_u64() == Some(longest));
    let (curves, labels) = only.pivot("setting", "post_delay_fraction");
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    curves.svg_linear(
        path,
        &series,
        &format!("work after a {longest} x l0 delay / l0"),
    )
}
