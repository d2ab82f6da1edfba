//! Collectives and fence designs in virtual time, for group sizes this
//! machine cannot run (to 1024 ranks and more): a LogGP-style model of the
//! network — latency `L`, per-message CPU overhead `o` at each end, time per
//! byte `G`, reduction time per byte — driven by the core's own collective
//! schedules ([`Plan`]), round by round, each rank at its own time. The
//! fence designs are composed as the fence paper describes them (section
//! 3): their collectives are these schedules, their other messages are
//! modelled directly. A model shows how designs scale against each other
//! (the paper's shape), not this machine's microseconds.

use rmx_core::collective::{Collective, Plan};
use rmx_core::onesided::Design;

/// The network and CPU costs of the model, in nanoseconds.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Model {
    /// Wire latency of a message.
    pub latency_ns: f64,
    /// CPU time to send or to receive one message.
    pub overhead_ns: f64,
    /// Time per byte on the wire.
    pub per_byte_ns: f64,
    /// Time per byte of a reduction.
    pub reduce_per_byte_ns: f64,
    /// CPU time to poll one RDMA-write-with-immediate completion.
    pub immediate_ns: f64,
}

impl Model {
    /// An InfiniBand DDR cluster of the paper's era: 1.5 µs latency,
    /// 0.3 µs per message, 1.5 GB/s.
    pub const IB_DDR: Model = Model {
        latency_ns: 1_500.0,
        overhead_ns: 300.0,
        per_byte_ns: 0.67,
        reduce_per_byte_ns: 0.5,
        immediate_ns: 100.0,
    };

    fn wire(&self, bytes: usize) -> f64 {
        self.latency_ns + bytes as f64 * self.per_byte_ns
    }
}

/// Each rank's time after running `what` from `start` (one entry per rank).
pub fn collective(m: &Model, what: Collective, start: &[f64]) -> Vec<f64> {
    let n = start.len() as u16;
    let plans: Vec<Plan> = (0..n)
        .map(|me| Plan::new(what, n, me).expect("a valid group"))
        .collect();
    let mut t = start.to_vec();
    for i in 0..plans.first().map_or(0, |p| p.rounds()) {
        let rounds: Vec<_> = plans.iter().map(|p| p.round(i)).collect();
        // When each rank's messages of this round leave (one after another).
        let mut arrive = std::collections::HashMap::new();
        for (me, r) in rounds.iter().enumerate() {
            let Some(r) = r else { continue };
            let mut at = t[me];
            for s in r.sends.iter().flatten() {
                at += m.overhead_ns;
                arrive.insert((me as u16, s.peer, s.part), at + m.wire(s.span.len));
            }
        }
        let mut next = t.clone();
        for (me, r) in rounds.iter().enumerate() {
            let Some(r) = r else { continue };
            let sent = t[me] + m.overhead_ns * r.sends.iter().flatten().count() as f64;
            let mut done = sent;
            for v in r.recvs.iter().flatten() {
                let a = arrive[&(v.peer, me as u16, v.part)];
                done = done.max(a) + m.overhead_ns;
                if r.reduce {
                    done += v.span.len as f64 * m.reduce_per_byte_ns;
                }
            }
            next[me] = done;
        }
        t = next;
    }
    t
}

/// Each rank's puts of one epoch: `targets[r]` are the ranks rank r puts
/// `size` bytes to.
pub struct Epoch {
    pub targets: Vec<Vec<u16>>,
    pub size: usize,
    /// Computation between the puts (issued at time 0) and the fence.
    pub compute_ns: f64,
}

/// When the slowest rank leaves each design's closing fence, for an epoch
/// whose puts were issued at time 0 and whose fence begins after the
/// computation. The deferred design moves the data inside the fence; the
/// immediate ones while the computation runs.
pub fn fence(m: &Model, design: Design, e: &Epoch) -> f64 {
    let n = e.targets.len();
    let zero = vec![e.compute_ns; n];
    let counts = Collective::ReduceScatter { block: 4 };
    // Who puts to whom.
    let mut from: Vec<Vec<u16>> = vec![Vec::new(); n];
    for (o, ts) in e.targets.iter().enumerate() {
        for &t in ts {
            from[t as usize].push(o as u16);
        }
    }
    // Puts issued at once as RDMA writes: when each lands at its target.
    let landed = |k: usize| (k + 1) as f64 * m.overhead_ns + m.wire(e.size);
    let end = match design {
        Design::Def => {
            // Counts, then the operations as messages inside the fence.
            let t = collective(m, counts, &zero);
            (0..n)
                .map(|r| {
                    let sent = t[r] + e.targets[r].len() as f64 * m.overhead_ns;
                    let mut done = sent;
                    for (j, &o) in from[r].iter().enumerate() {
                        let k = e.targets[o as usize]
                            .iter()
                            .position(|&x| x as usize == r)
                            .unwrap_or(j);
                        let arrive =
                            t[o as usize] + (k + 1) as f64 * m.overhead_ns + m.wire(32 + e.size);
                        done = done.max(arrive) + m.overhead_ns;
                    }
                    done
                })
                .collect::<Vec<f64>>()
        }
        Design::ImmNaive | Design::ImmOpt => {
            // Counts, then a finish message on every channel used; a target
            // waits for the finishes of the ranks that put to it.
            let t = collective(m, counts, &zero);
            let finished: Vec<f64> = (0..n)
                .map(|r| {
                    let puts_done = e.targets[r].len() as f64 * m.overhead_ns;
                    // The puts left before the computation began.
                    let sent = t[r].max(puts_done) + e.targets[r].len() as f64 * m.overhead_ns;
                    let mut done = sent;
                    for &o in &from[r] {
                        let k = e.targets[o as usize]
                            .iter()
                            .position(|&x| x as usize == r)
                            .unwrap_or(0);
                        let after_puts = landed(k);
                        let finish = t[o as usize] + (k + 1) as f64 * m.overhead_ns + m.wire(8);
                        done = done.max(finish.max(after_puts)) + m.overhead_ns;
                    }
                    done
                })
                .collect();
            if design == Design::ImmOpt {
                collective(m, Collective::Barrier, &finished)
            } else {
                // Every rank flags every other one that the next epoch may
                // begin, and waits for all of theirs.
                (0..n)
                    .map(|r| {
                        let sent = finished[r] + (n - 1) as f64 * m.overhead_ns;
                        let last_in = (0..n)
                            .filter(|&o| o != r)
                            .map(|o| finished[o] + n as f64 * m.overhead_ns / 2.0 + m.wire(8))
                            .fold(0.0f64, f64::max);
                        sent.max(last_in) + (n - 1) as f64 * m.overhead_ns
                    })
                    .collect()
            }
        }
        Design::ImmRi => {
            // Puts as RDMA writes with immediate; an allreduce of the
            // per-target counts; each target polls that many immediates;
            // then a barrier, unless the allreduce showed no operation
            // anywhere.
            let t = collective(m, Collective::Allreduce { len: 4 * n }, &zero);
            if e.targets.iter().all(Vec::is_empty) {
                return t.into_iter().fold(0.0, f64::max);
            }
            let polled: Vec<f64> = (0..n)
                .map(|r| {
                    let mut done = t[r];
                    for &o in &from[r] {
                        let k = e.targets[o as usize]
                            .iter()
                            .position(|&x| x as usize == r)
                            .unwrap_or(0);
                        done = done.max(landed(k)) + m.immediate_ns;
                    }
                    done
                })
                .collect();
            collective(m, Collective::Barrier, &polled)
        }
    };
    end.into_iter().fold(0.0, f64::max)
}

/// `rmx bench collectives --sim`: each collective's time (the slowest
/// rank's) at each group size, in the model.
pub fn collectives_report(opts: &super::Opts, m: &Model, ranks: &[u16]) -> super::report::Report {
    use super::collectives::{COLLECTIVES, SIZE};
    let mut rows = Vec::new();
    for &n in ranks {
        let zero = vec![0.0; n as usize];
        for what in COLLECTIVES {
            let block = (SIZE / n as usize).max(8) / 8 * 8;
            let (c, size) = match what {
                "barrier" => (Collective::Barrier, 0),
                "allreduce" => (Collective::Allreduce { len: SIZE }, SIZE),
                "reduce_scatter" => (Collective::ReduceScatter { block }, block * n as usize),
                _ => (Collective::Allgather { block: SIZE }, SIZE),
            };
            let t = collective(m, c, &zero).into_iter().fold(0.0, f64::max);
            rows.push(
                serde_json::json!({"collective": what, "ranks": n, "size": size,
                "latency_us": t / 1000.0, "model": true}),
            );
        }
    }
    super::report::Report::new(
        "collectives",
        opts,
        serde_json::json!({"model": m}),
        rows,
        vec![
            super::report::Column::new("ranks", "ranks", 0),
            super::report::Column::new("size", "size", 0),
            super::report::Column::new("latency_us", "latency_us", 2),
        ],
    )
    .keyed_by("collective", "collective")
    .modelled()
}

/// `rmx bench fence --sim`: each design's epoch for each pattern and group
/// size in the model, beside a bare barrier.
pub fn fence_report(
    opts: &super::Opts,
    m: &Model,
    designs: &[Design],
    patterns: &[&str],
    ranks: &[u16],
) -> super::report::Report {
    use super::fence::HALO_COMPUTE_NS;
    let mut rows = Vec::new();
    for &n in ranks {
        let bar = collective(m, Collective::Barrier, &vec![0.0; n as usize]);
        let bar = bar.into_iter().fold(0.0, f64::max);
        rows.push(
            serde_json::json!({"design": "barrier", "pattern": "-", "ranks": n, "size": 0,
            "fence_us": bar / 1000.0, "model": true}),
        );
        for &p in patterns {
            let (sizes, halo) = super::fence::pattern_sizes(p, &opts.sizes());
            for size in sizes {
                let targets = (0..n)
                    .map(|r| super::fence::pattern_targets(p, r, n))
                    .collect();
                let compute_ns = if halo { HALO_COMPUTE_NS as f64 } else { 0.0 };
                let e = Epoch {
                    targets,
                    size,
                    compute_ns,
                };
                for &d in designs {
                    let t = fence(m, d, &e) / 1000.0;
                    let key = if halo { "iteration_us" } else { "fence_us" };
                    let mut row = serde_json::json!({"design": d.name(), "pattern": p, "ranks": n,
                        "size": size, "model": true});
                    row[key] = serde_json::json!(t);
                    rows.push(row);
                }
            }
        }
    }
    super::report::Report::new(
        "fence",
        opts,
        serde_json::json!({"model": m, "halo_compute_ns": HALO_COMPUTE_NS}),
        rows,
        vec![
            super::report::Column::new("pattern", "pattern", 0),
            super::report::Column::new("ranks", "ranks", 0),
            super::report::Column::new("size", "size", 0),
            super::report::Column::new("fence_us", "fence_us", 2),
            super::report::Column::new("iteration_us", "iteration_us", 2),
        ],
    )
    .keyed_by("design", "design")
    .modelled()
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Model = Model::IB_DDR;

    #[test]
    fn a_two_rank_barrier_costs_one_message_each_way() {
        let t = collective(&M, Collective::Barrier, &[0.0, 0.0]);
        let one = 2.0 * M.overhead_ns + M.latency_ns;
        assert_eq!(t, vec![one, one]);
    }

    #[test]
    fn collectives_grow_with_the_logarithm_of_the_group() {
        let at = |n: usize| {
            let t = collective(&M, Collective::Allreduce { len: 256 }, &vec![0.0; n]);
            t.into_iter().fold(0.0, f64::max)
        };
        assert!(at(4) > at(2) && at(1024) > at(512));
        // Doubling the group adds about one round, not twice the time.
        assert!(at(1024) < at(512) * 1.3, "{} {}", at(512), at(1024));
    }

    #[test]
    fn designs_order_as_the_paper_finds_at_scale() {
        let n = 256;
        let zero = Epoch {
            targets: vec![Vec::new(); n],
            size: 16,
            compute_ns: 0.0,
        };
        let f = |d| fence(&M, d, &zero);
        assert!(
            f(Design::ImmNaive) > f(Design::ImmOpt),
            "all-pairs flags cost the most"
        );
        assert!(f(Design::Def) < f(Design::ImmOpt), "no second collective");
        assert!(
            f(Design::ImmRi) < f(Design::ImmOpt),
            "no barrier after an allreduce that shows nothing in flight"
        );
        let eight = Epoch {
            targets: (0..n as u16)
                .map(|r| (1..=8).map(|d| (r + d) % n as u16).collect())
                .collect(),
            size: 16,
            compute_ns: 0.0,
        };
        let g = |d| fence(&M, d, &eight);
        assert!(g(Design::ImmRi) < g(Design::ImmOpt), "no finish messages");
        // With computation the immediate designs' data has landed; the
        // deferred design still moves it.
        let busy = Epoch {
            compute_ns: 50_000.0,
            size: 65536,
            ..eight
        };
        let h = |d| fence(&M, d, &busy) - 50_000.0;
        assert!(
            h(Design::ImmRi) < h(Design::Def),
            "{} {}",
            h(Design::ImmRi),
            h(Design::Def)
        );
    }
}
