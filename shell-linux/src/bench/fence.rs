//! `rmx bench fence`: the cost of an epoch closed by a fence, by design and
//! communication pattern, as the fence paper's section 4.2 measures it:
//! `zero` (a fence with no operation, Fig. 7), `single` (one 16-byte put to
//! the next rank, Fig. 8), `neighbours` (16-byte puts to up to 8
//! neighbours, Fig. 9) and `halo4`/`halo8` (puts of each size to 4 or 8
//! neighbours beside a fixed computation, Fig. 10). A bare barrier runs
//! first, as the reference the targets compare with. Ranks are threads; the
//! time per epoch is rank 0's, averaged over the iterations.

use serde_json::{json, Value};

use super::report::{Column, Report};
use super::{compute, Opts};
use crate::clock::now_ns;
use crate::job::{self, Net};
use rmx_core::onesided::Design;
use rmx_core::Config;

/// The communication patterns, as `--pattern` names them.
pub const PATTERNS: [&str; 5] = ["zero", "single", "neighbours", "halo4", "halo8"];

/// Bytes of each put of the fixed-size patterns (the paper's 16 B).
pub const PUT: usize = 16;

/// The computation of an iteration of the halo patterns.
pub const HALO_COMPUTE_NS: u64 = 20_000;

/// Up to `k` distinct neighbours of `me` among `n` ranks: me±1, me±2, ….
pub(super) fn neighbours(me: u16, n: u16, k: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for d in 1..n {
        for t in [(me + d) % n, (me + n - d % n) % n] {
            if t != me && !out.contains(&t) && out.len() < k {
                out.push(t);
            }
        }
    }
    out
}

/// The put sizes of a pattern (the halos' from the options), and whether
/// it computes beside its puts.
pub(super) fn pattern_sizes(pattern: &str, halo_sizes: &[usize]) -> (Vec<usize>, bool) {
    match pattern {
        "zero" => (vec![0], false),
        "single" | "neighbours" => (vec![PUT], false),
        _ => (halo_sizes.to_vec(), true),
    }
}

/// The ranks `me` of `n` puts to in a pattern.
pub(super) fn pattern_targets(pattern: &str, me: u16, n: u16) -> Vec<u16> {
    match pattern {
        "zero" => Vec::new(),
        "single" => vec![(me + 1) % n],
        "halo4" => neighbours(me, n, 4),
        _ => neighbours(me, n, 8),
    }
}

/// One row per (pattern, size) at each group size, plus the barrier.
pub fn run(
    opts: &Opts,
    cfg: Config,
    ranks: &[u16],
    designs: &[Design],
    patterns: &[&str],
    net: &Net,
) -> Report {
    let halo_sizes = opts.sizes();
    let pb = opts.progress("fence", ranks.len() * (designs.len() * patterns.len() + 1));
    let mut rows: Vec<Value> = Vec::new();
    for &n in ranks {
        let per = job::run(n, cfg, net, |r| {
            let me = r.rank();
            let data = vec![7u8; opts.max_size.max(PUT)];
            let mut out = Vec::new();
            let time = |r: &mut crate::rank::Rank, f: &mut dyn FnMut(&mut crate::rank::Rank)| {
                for _ in 0..opts.warmup {
                    f(r);
                }
                r.barrier().expect("barrier");
                let t0 = now_ns();
                for _ in 0..opts.iters {
                    f(r);
                }
                let t = now_ns() - t0;
                r.barrier().expect("barrier");
                t as f64 / opts.iters as f64 / 1000.0
            };
            let us = time(r, &mut |r| r.barrier().expect("barrier"));
            out.push(("barrier", "-", 0usize, us));
            if me == 0 {
                pb.inc(1);
            }
            for &design in designs {
                let len = PUT.max(opts.max_size) * 8;
                let mut w = r.win_create_with(len, 1, design).expect("window");
                w.fence(r).expect("fence");
                for &p in patterns {
                    let (sizes, halo) = pattern_sizes(p, &halo_sizes);
                    let targets = pattern_targets(p, me, n);
                    for size in sizes {
                        let us = time(r, &mut |r| {
                            for (slot, &t) in targets.iter().enumerate() {
                                let disp = (slot * size) as u64;
                                w.put(r, t, disp, &data[..size]).expect("put");
                            }
                            if halo {
                                compute(HALO_COMPUTE_NS);
                            }
                            w.fence(r).expect("fence");
                        });
                        out.push((design.name(), p, size, us));
                    }
                    if me == 0 {
                        pb.inc(1);
                    }
                }
                w.free(r).expect("free");
            }
            out
        });
        for &(design, pattern, size, us) in &per[0] {
            let key = if pattern.starts_with("halo") {
                "iteration_us"
            } else {
                "fence_us"
            };
            let mut row = json!({"design": design, "pattern": pattern, "ranks": n, "size": size});
            row[key] = json!(us);
            rows.push(row);
        }
    }
    pb.finish_and_clear();
    let mut config = opts.config_json(&cfg, net);
    config["halo_compute_ns"] = json!(HALO_COMPUTE_NS);
    Report::new(
        "fence",
        opts,
        config,
        rows,
        vec![
            Column::new("pattern", "pattern", 0),
            Column::new("ranks", "ranks", 0),
            Column::new("size", "size", 0),
            Column::new("fence_us", "fence_us", 2),
            Column::new("iteration_us", "iteration_us", 2),
        ],
    )
    .keyed_by("design", "design")
}

/// `rmx bench fence-overlap`: the paper's section 4.2.1 (Fig. 6). Each of
/// two ranks puts `size` bytes to the other between two fences, with a
/// computation inserted after the put and before the closing fence; the
/// overlap ratio is `rmx bench overlap`'s, from the largest computation
/// that keeps the epoch within 1.1× of the epoch without it (rank 0's
/// times, medians of `iters` epochs).
pub fn overlap(opts: &Opts, cfg: Config, designs: &[Design], net: &Net) -> Report {
    use std::sync::atomic::AtomicU64;
    let sizes = opts.sizes();
    let max = sizes.iter().copied().max().unwrap_or(1).max(1);
    let pb = opts.progress("fence-overlap", sizes.len() * designs.len());
    let barrier = super::SpinBarrier::new(2);
    let plan = AtomicU64::new(0);
    let per = job::run(2, cfg, net, |r| {
        let peer = 1 - r.rank();
        let data = vec![3u8; max];
        let mut rows = Vec::new();
        for &design in designs {
            let mut w = r.win_create_with(max, 1, design).expect("window");
            w.fence(r).expect("fence");
            for &size in &sizes {
                let got = super::overlap::search(
                    r,
                    r.rank() == 0,
                    opts.iters,
                    &barrier,
                    &plan,
                    |r, c| {
                        let t0 = now_ns();
                        // As MPI_Put: the NIC reads the origin buffer itself.
                        // SAFETY: `data` is not touched until after the fence.
                        unsafe { w.put_raw(r, peer, 0, data.as_ptr(), size) }.expect("put");
                        compute(c);
                        w.fence(r).expect("fence");
                        now_ns() - t0
                    },
                );
                if let Some((l0, ratio)) = got {
                    rows.push((design.name(), size, l0, ratio));
                    pb.inc(1);
                }
            }
            w.free(r).expect("free");
        }
        rows
    });
    pb.finish_and_clear();
    let rows = per[0]
        .iter()
        .map(|&(design, size, l0, ratio)| {
            json!({"design": design, "size": size, "l0_us": l0, "overlap_ratio": ratio})
        })
        .collect();
    Report::new(
        "fence-overlap",
        opts,
        opts.config_json(&cfg, net),
        rows,
        vec![
            Column::new("design", "design", 0),
            Column::new("l0_us", "l0_us", 3),
            Column::new("overlap_ratio", "overlap", 3),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_are_distinct_and_never_the_rank_itself() {
        assert_eq!(neighbours(0, 2, 8), vec![1]);
        assert_eq!(neighbours(0, 10, 4), vec![1, 9, 2, 8]);
        let all = neighbours(3, 5, 8);
        assert_eq!(all.len(), 4);
        assert!(!all.contains(&3));
    }
}
