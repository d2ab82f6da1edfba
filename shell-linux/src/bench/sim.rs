//! `rmx bench collectives --sim` and `rmx bench fence --sim`: the shipped
//! collectives and fence designs run in virtual time by [`rmx_sim`], for
//! group sizes this machine cannot run (to 1024 ranks and more). Every
//! simulated rank runs rmx-core's endpoint, epochs and collective runs;
//! the network is a LogGP model of an InfiniBand DDR cluster (latency,
//! per-message CPU overhead, time per byte, reduction time per byte), so
//! the figures show how designs scale against each other (the paper's
//! shape), not this machine's microseconds. Every window is checked
//! against the reference after every fence, every collective's result on
//! every rank: a row is only reported from a run that was right.

use rmx_core::collective::Collective;
use rmx_core::onesided::Design;
use rmx_core::Config;
use rmx_sim::fence::Kind;
use rmx_sim::job::{Action, Fence, Job, OpSpec, Spec, WinSpec};
use rmx_sim::model::{Model, NetFaults};
use serde_json::{json, Value};

use super::report::{Column, Report};
use super::Opts;

/// The network every `--sim` row is simulated on.
pub const MODEL: Model = Model::IB_DDR;

/// The model's parameters and the endpoints' settings, as the reports
/// give them.
fn model_json(m: &Model, cfg: &Config) -> Value {
    json!({
        "eager_threshold": cfg.eager_threshold,
        "credits": cfg.credits,
        "rx_buffers": cfg.rx_buffers,
        "credits_per_peer_at_start": SHARE,
        "latency_ns": m.latency_ns as f64,
        "overhead_ns": m.overhead_ns as f64,
        "per_byte_ns": m.byte_ps as f64 / 1000.0,
        "reduce_per_byte_ns": m.reduce_byte_ps as f64 / 1000.0,
        "immediate_ns": m.immediate_ns as f64,
        "simulator": "rmx-core's endpoints, epochs and collective runs in virtual time (rmx-sim)",
    })
}

/// Runs a job of `programs` (a barrier first); for each group of timed
/// steps (first, how many), the mean virtual µs per step, from when the
/// last rank finished the step before to when the last finished each.
fn run_job(
    spec: Spec,
    programs: Vec<Vec<Action>>,
    groups: &[(usize, usize)],
) -> Result<Vec<f64>, String> {
    let ends = Job::new(spec, programs)?.run()?.ends;
    Ok(groups
        .iter()
        .map(|&(first, count)| {
            let span = ends[first + count - 1] - ends[first - 1];
            span as f64 / count as f64 / 1000.0
        })
        .collect())
}

/// Credits each peer starts with in a simulated job (see [`pooled`]).
pub const SHARE: u32 = 2;

/// `cfg` with a receive pool that starts every peer of `ranks` with
/// [`SHARE`] credits, as an MPI library sizes its buffers to the job.
/// With the 256-buffer default, from 64 ranks a peer's share is at most
/// one credit and from 128 none: most messages first borrow credit, a
/// round trip more (a barrier of 1024 ranks takes three times as long).
pub fn pooled(cfg: Config, ranks: u16) -> Config {
    let peers = u32::from(ranks.max(2)) - 1;
    let need = cfg.rx_reserve + 2 * peers * SHARE.min(u32::from(cfg.credits));
    if cfg.rx_buffers >= need {
        return cfg;
    }
    Config {
        rx_buffers: need,
        rx_low_water: cfg.rx_reserve + (need - cfg.rx_reserve) / 4,
        ..cfg
    }
}

/// A job's settings: `ranks` ranks under `cfg` (its pool [`pooled`]) on
/// the model's perfect wire.
fn spec(ranks: u16, cfg: Config, windows: Vec<(usize, Design)>) -> Spec {
    Spec {
        model: MODEL,
        config: pooled(cfg, ranks),
        windows: windows
            .into_iter()
            .map(|(len, d)| WinSpec::same(len, d, ranks))
            .collect(),
        ..Spec::new(ranks, NetFaults::NONE, 1)
    }
}

/// `warmup` untimed then `iters` timed copies of `a`, appended to every
/// program; the timed group, for [`run_job`].
fn repeat(programs: &mut [Vec<Action>], opts: &Opts, a: impl Fn(u16) -> Action) -> (usize, usize) {
    let iters = opts.iters.max(1) as usize;
    for (r, p) in programs.iter_mut().enumerate() {
        for _ in 0..opts.warmup as usize + iters {
            p.push(a(r as u16));
        }
    }
    (programs[0].len() - iters, iters)
}

/// The collective a `bench collectives` row names at `n` ranks, and the
/// size its row reports.
fn collective(what: &str, n: u16) -> (Collective, usize) {
    use super::collectives::SIZE;
    let block = (SIZE / n as usize).max(8) / 8 * 8;
    match what {
        "barrier" => (Collective::Barrier, 0),
        "allreduce" => (Collective::Allreduce { len: SIZE }, SIZE),
        "reduce_scatter" => (Collective::ReduceScatter { block }, block * n as usize),
        _ => (Collective::Allgather { block: SIZE }, SIZE),
    }
}

/// `rmx bench collectives --sim`: each collective's time at each group
/// size, `opts.iters` runs after `opts.warmup`, every rank's endpoint
/// under `cfg` (a reliable transport's).
pub fn collectives_report(opts: &Opts, cfg: Config, ranks: &[u16]) -> Result<Report, String> {
    use super::collectives::COLLECTIVES;
    let pb = opts.progress("collectives", ranks.len());
    let mut rows = Vec::new();
    for &n in ranks {
        let mut programs = vec![vec![Action::Collective(Collective::Barrier)]; n as usize];
        let groups: Vec<_> = COLLECTIVES
            .iter()
            .map(|w| {
                repeat(&mut programs, opts, |_| {
                    Action::Collective(collective(w, n).0)
                })
            })
            .collect();
        let times = run_job(spec(n, cfg, Vec::new()), programs, &groups)?;
        for (what, us) in COLLECTIVES.iter().zip(times) {
            let size = collective(what, n).1;
            rows.push(json!({"collective": what, "ranks": n, "size": size,
                "latency_us": us, "model": true, "rx_buffers": pooled(cfg, n).rx_buffers}));
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(Report::new(
        "collectives",
        opts,
        json!({"model": model_json(&MODEL, &cfg)}),
        rows,
        vec![
            Column::new("ranks", "ranks", 0),
            Column::new("size", "size", 0),
            Column::new("latency_us", "latency_us", 2),
        ],
    )
    .keyed_by("collective", "collective")
    .modelled())
}

/// `rmx bench fence --sim`: each design's epoch for each pattern and group
/// size, beside a bare barrier, as the threads' benchmark runs them: each
/// rank puts to its pattern's targets (slot k of the window for its k-th
/// target), computes in the halo patterns, and fences; every endpoint
/// under `cfg` (a reliable transport's).
pub fn fence_report(
    opts: &Opts,
    cfg: Config,
    designs: &[Design],
    patterns: &[&str],
    ranks: &[u16],
) -> Result<Report, String> {
    use super::fence::{pattern_sizes, pattern_targets, HALO_COMPUTE_NS, PUT};
    let pb = opts.progress("fence", ranks.len() * (designs.len() + 1));
    let mut rows = Vec::new();
    let sizes = opts.sizes();
    for &n in ranks {
        let mut programs = vec![vec![Action::Collective(Collective::Barrier)]; n as usize];
        let g = repeat(&mut programs, opts, |_| {
            Action::Collective(Collective::Barrier)
        });
        let bar = run_job(spec(n, cfg, Vec::new()), programs, &[g])?[0];
        let rx_buffers = pooled(cfg, n).rx_buffers;
        rows.push(
            json!({"design": "barrier", "pattern": "-", "ranks": n, "size": 0,
            "fence_us": bar, "model": true, "rx_buffers": rx_buffers}),
        );
        pb.inc(1);
        for &design in designs {
            let len = PUT.max(opts.max_size) * 8;
            let mut programs = vec![vec![Action::Collective(Collective::Barrier)]; n as usize];
            let mut groups = Vec::new();
            for &p in patterns {
                let (put_sizes, halo) = pattern_sizes(p, &sizes);
                for size in put_sizes {
                    let epoch = |r: u16| Action::Epoch {
                        window: 0,
                        ops: pattern_targets(p, r, n)
                            .into_iter()
                            .enumerate()
                            .map(|(slot, target)| OpSpec {
                                target,
                                disp: (slot * size) as u64,
                                kind: Kind::Put,
                                len: size as u32,
                            })
                            .collect(),
                        compute_ns: if halo { HALO_COMPUTE_NS } else { 0 },
                        fence: Fence::Plain,
                    };
                    groups.push((p, size, halo, repeat(&mut programs, opts, epoch)));
                }
            }
            let spans: Vec<_> = groups.iter().map(|g| g.3).collect();
            let times = run_job(spec(n, cfg, vec![(len, design)]), programs, &spans)?;
            for ((p, size, halo, _), us) in groups.into_iter().zip(times) {
                let key = if halo { "iteration_us" } else { "fence_us" };
                let mut row = json!({"design": design.name(), "pattern": p, "ranks": n,
                    "size": size, "model": true, "rx_buffers": rx_buffers});
                row[key] = json!(us);
                rows.push(row);
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    Ok(Report::new(
        "fence",
        opts,
        json!({"model": model_json(&MODEL, &cfg), "halo_compute_ns": HALO_COMPUTE_NS}),
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
    .modelled())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Opts {
        Opts {
            iters: 2,
            warmup: 1,
            min_size: 16,
            max_size: 64,
            ..Opts::tool(true)
        }
    }

    fn fence_us(r: &Report, design: &str, pattern: &str, n: u16) -> f64 {
        let row = r
            .results
            .iter()
            .find(|x| x["design"] == design && x["pattern"] == pattern && x["ranks"] == n)
            .expect("a row");
        row["fence_us"].as_f64().expect("a time")
    }

    #[test]
    fn a_two_rank_barrier_costs_one_message_each_way() {
        let r = collectives_report(&opts(), crate::rank::loop_config(), &[2]).expect("runs");
        let row = &r.results[0];
        assert_eq!(row["collective"], "barrier");
        let header = rmx_core::wire::HEADER_LEN;
        let one = 2 * MODEL.overhead_ns + MODEL.latency_ns + MODEL.wire_ns(header);
        assert_eq!(row["latency_us"].as_f64(), Some(one as f64 / 1000.0));
    }

    #[test]
    fn collectives_grow_with_the_logarithm_of_the_group() {
        let r = collectives_report(&opts(), crate::rank::loop_config(), &[2, 4, 64, 128]);
        let r = r.expect("runs");
        let at = |n: u16| {
            r.results
                .iter()
                .find(|x| x["collective"] == "allreduce" && x["ranks"] == n)
                .and_then(|x| x["latency_us"].as_f64())
                .expect("a row")
        };
        assert!(at(4) > at(2) && at(128) > at(64));
        // Doubling the group adds about one round, not twice the time.
        assert!(at(128) < at(64) * 1.3, "{} {}", at(64), at(128));
    }

    #[test]
    fn designs_order_as_the_paper_finds_at_scale() {
        let n = 128;
        let r = fence_report(
            &opts(),
            crate::rank::loop_config(),
            &Design::ALL,
            &["zero", "neighbours"],
            &[n],
        )
        .expect("runs");
        let z = |d| fence_us(&r, d, "zero", n);
        assert!(z("naive") > z("opt"), "all-pairs flags cost the most");
        assert!(z("def") < z("opt"), "no second collective");
        assert!(
            z("ri") < z("opt"),
            "no barrier after an allreduce showing nothing in flight"
        );
        let e = |d| fence_us(&r, d, "neighbours", n);
        assert!(e("ri") < e("opt"), "no finish messages");
        let bar = fence_us(&r, "barrier", "-", n);
        assert!(z("def") > bar, "a fence is at least a collective");
    }
}
