//! `rmx bench overlap`: how much computation a non-blocking send (or
//! receive) hides, by the method of Rashti and Afsahi (section 6).
//!
//! Each iteration m inserts a computation c_m = m · 10% of l0 between the
//! non-blocking call and its wait, until the communication time l_m (call to
//! wait's return, computation included) reaches 1.1 · l0; the last m below
//! that gives the overlap ratio (c_m − (l_m − l0)) / l0. Sends are
//! synchronous, so both ends finish together: above the eager threshold a
//! rendezvous send completes when the receiver has the data; an eager send
//! completes locally in rmx, so the receiver answers it with an empty
//! message, as the ack of an eager `MPI_Issend` does. Timing is at the side
//! measured; each l is the median of `--iters` repetitions (the machines
//! this runs on are shared: a median ignores a descheduled repetition).

use std::sync::atomic::{AtomicU64, Ordering};

use rmx_core::{Config, Protocol, Source, TagSel};
use serde_json::json;

use super::report::{Column, Report};
use super::{compute, median, Opts, Side, SpinBarrier};
use crate::clock::now_ns;
use crate::job::Net;
use crate::rank::Rank;

const DATA: u32 = 11;
const ACK: u32 = 12;
/// The most computation tried: 20 steps of 10% (twice l0).
const MAX_STEPS: u64 = 20;
const STOP: u64 = u64::MAX;

/// One repetition on either side; the measured side returns its l (ns).
fn once(r: &mut Rank, side: Side, size: usize, c: u64, eager: bool, buf: &mut [u8]) -> u64 {
    let me = r.rank();
    let timed = me == side.timed_rank();
    let mut ack = [0u8; 1];
    let t0 = now_ns();
    // SAFETY: every request is waited for before `buf` is touched again.
    unsafe {
        match (side, me) {
            (Side::Send, 0) => {
                let q = r.isend_raw(1, DATA, buf.as_ptr(), size).expect("isend");
                compute(c);
                r.wait(q);
                if eager {
                    r.recv(Source::Rank(1), TagSel::Tag(ACK), &mut ack[..0])
                        .expect("ack");
                }
            }
            (Side::Send, _) => {
                r.recv(Source::Rank(0), TagSel::Tag(DATA), &mut buf[..size])
                    .expect("recv");
                if eager {
                    r.send(0, ACK, &ack[..0]).expect("ack");
                }
            }
            (Side::Recv, 1) => {
                let q = r
                    .irecv_raw(Source::Rank(0), TagSel::Tag(DATA), buf.as_mut_ptr(), size)
                    .expect("irecv");
                compute(c);
                r.wait(q);
                let t = now_ns() - t0;
                if eager {
                    r.send(0, ACK, &ack[..0]).expect("ack");
                }
                return t;
            }
            (Side::Recv, _) => {
                r.send(1, DATA, &buf[..size]).expect("send");
                if eager {
                    r.recv(Source::Rank(1), TagSel::Tag(ACK), &mut ack[..0])
                        .expect("ack");
                }
            }
        }
    }
    if timed {
        now_ns() - t0
    } else {
        0
    }
}

/// One size on one job: l0, then the growing computation. Both ranks call
/// it; the measured side decides each step and shares it through `plan`.
#[allow(clippy::too_many_arguments)]
fn measure(
    r: &mut Rank,
    side: Side,
    size: usize,
    eager: bool,
    reps: u64,
    barrier: &SpinBarrier,
    plan: &AtomicU64,
    buf: &mut [u8],
) -> Option<(f64, f64)> {
    let timed = r.rank() == side.timed_rank();
    search(r, timed, reps, barrier, plan, |r, c| {
        once(r, side, size, c, eager, buf)
    })
}

/// The overlap search of one size, for any operation `once(r, c)` that
/// inserts a computation of `c` ns and returns its time on the timed rank:
/// warm-up, l0 (the median of `reps` runs without computation), then
/// computations growing by 10% of l0 until the time reaches 1.1 l0. Every
/// rank of the job calls it; the timed one decides each step and shares it
/// through `plan`. Returns (l0 in µs, overlap ratio) on the timed rank.
pub(super) fn search(
    r: &mut Rank,
    timed: bool,
    reps: u64,
    barrier: &SpinBarrier,
    plan: &AtomicU64,
    mut once: impl FnMut(&mut Rank, u64) -> u64,
) -> Option<(f64, f64)> {
    for _ in 0..(reps / 10).max(2) {
        barrier.wait(r);
        once(r, 0);
    }
    let mut run = |r: &mut Rank, c: u64| -> u64 {
        let mut ls = Vec::with_capacity(reps as usize);
        for _ in 0..reps {
            barrier.wait(r);
            ls.push(once(r, c));
        }
        median(&mut ls)
    };
    let l0 = run(r, 0);
    let step = (l0 / 10).max(1);
    let mut best = (0u64, l0);
    let mut over = false;
    for m in 1..=MAX_STEPS {
        // The measured side decides; every rank learns it between two barriers.
        if timed {
            plan.store(if over { STOP } else { m * step }, Ordering::Release);
        }
        barrier.wait(r);
        let c = plan.load(Ordering::Acquire);
        barrier.wait(r);
        if c == STOP {
            break;
        }
        let lm = run(r, c);
        if timed {
            // The last iteration is the largest m with l_m < 1.1 l0.
            over = lm * 10 >= l0 * 11;
            if !over {
                best = (c, lm);
            }
        }
    }
    timed.then(|| {
        let (c, lm) = best;
        let ratio = (c as f64 - (lm as f64 - l0 as f64)) / l0 as f64;
        (l0 as f64 / 1000.0, ratio)
    })
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
    let pb = opts.progress("overlap", sizes.len() * variants.len() * threads.len());
    let barrier = SpinBarrier::new(2);
    let plan = AtomicU64::new(0);
    // Sent without a rendezvous: the send completes at once, in one packet
    // or as fragments.
    let eager_max = net.eager_max(&cfg) as u64;
    let eager = |size: usize| size as u64 <= eager_max;
    let runs = super::per_setting(cfg, net, variants, threads, side.timed_rank(), |r| {
        let mut buf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rows = Vec::new();
        for &size in &sizes {
            let reps = if eager(size) {
                opts.iters
            } else {
                opts.iters / 2
            }
            .max(5);
            let got = measure(r, side, size, eager(size), reps, &barrier, &plan, &mut buf);
            if let Some((l0, ratio)) = got {
                rows.push((size, l0, ratio));
                pb.inc(1);
            }
        }
        rows
    });
    let mut results = Vec::new();
    for (p, pt, rows) in runs {
        for (size, l0, ratio) in rows {
            results.push(json!({
                "size": size,
                "rndv": if eager(size) { json!(null) } else { json!(p.name()) },
                "progress_thread": pt,
                "l0_us": l0,
                "overlap_ratio": ratio,
                "setting": setting(p, pt),
            }));
        }
    }
    pb.finish_and_clear();
    let mut config = opts.config_json(&cfg, net);
    config["side"] = json!(side.name());
    config["statistic"] = json!("median");
    Report::new(
        &format!("overlap --side {}", side.name()),
        opts,
        config,
        results,
        vec![
            Column::new("setting", "setting", 0),
            Column::new("l0_us", "l0_us", 3),
            Column::new("overlap_ratio", "overlap", 3),
        ],
    )
}

/// How tables and plots name a rendezvous with or without a progress thread.
pub fn setting(p: Protocol, thread: bool) -> String {
    format!(
        "{}{}",
        p.name(),
        if thread { " + progress thread" } else { "" }
    )
}

/// Overlap ratio against size, one curve per setting.
pub fn plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let (curves, labels) = r.pivot("setting", "overlap_ratio");
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    curves.svg_linear(path, &series, "overlap ratio")
}
