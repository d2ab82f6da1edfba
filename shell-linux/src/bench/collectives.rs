//! `rmx bench collectives`: the latency of barrier, allreduce and
//! reduce_scatter at each group size, as the fence paper's Table 1 reports
//! them (allreduce and reduce_scatter of 256 bytes): every rank runs the
//! collective `iters` times after a warm-up, and the time per collective
//! is rank 0's, between barriers.

use serde_json::{json, Value};

use super::report::{Column, Report};
use super::Opts;
use crate::clock::now_ns;
use crate::job::{self, Net};
use crate::rank::Rank;
use rmx_core::collective::{Int, Op};
use rmx_core::Config;

/// The collectives measured, in the table's order.
pub const COLLECTIVES: [&str; 4] = ["barrier", "allreduce", "reduce_scatter", "allgather"];

/// Bytes of each rank's contribution (the paper's 256 B) per collective.
pub const SIZE: usize = 256;

fn once(r: &mut Rank, what: &str, buf: &mut [u8]) {
    let n = r.size() as usize;
    let done = match what {
        "barrier" => r.barrier(),
        "allreduce" => r.allreduce(&mut buf[..SIZE], Int::U64, Op::Sum),
        // Each rank's block is its part of a 256-byte vector, as
        // MPI_Reduce_scatter with equal counts divides it.
        "reduce_scatter" => {
            let block = (SIZE / n).max(8) / 8 * 8;
            r.reduce_scatter(&mut buf[..block * n], Int::U64, Op::Sum)
        }
        _ => r.allgather(&mut buf[..SIZE * n]),
    };
    done.expect("collective");
}

/// Latency of each collective at each group size in `ranks`.
pub fn run(opts: &Opts, cfg: Config, ranks: &[u16], net_for: impl Fn(u16) -> Net) -> Report {
    let pb = opts.progress("collectives", ranks.len() * COLLECTIVES.len());
    let mut rows: Vec<Value> = Vec::new();
    for &n in ranks {
        let net = net_for(n);
        let per = job::run(n, cfg, &net, |r| {
            let mut buf = vec![1u8; SIZE * n as usize];
            let mut out = Vec::new();
            for what in COLLECTIVES {
                for _ in 0..opts.warmup {
                    once(r, what, &mut buf);
                }
                r.barrier().expect("barrier");
                let t0 = now_ns();
                for _ in 0..opts.iters {
                    once(r, what, &mut buf);
                }
                let t = now_ns() - t0;
                r.barrier().expect("barrier");
                out.push((what, t as f64 / opts.iters as f64 / 1000.0));
                if r.rank() == 0 {
                    pb.inc(1);
                }
            }
            out
        });
        for (what, us) in &per[0] {
            let size = match *what {
                "barrier" => 0,
                "reduce_scatter" => (SIZE / n as usize).max(8) / 8 * 8 * n as usize,
                _ => SIZE,
            };
            rows.push(json!({"collective": what, "ranks": n, "size": size, "latency_us": us}));
        }
    }
    pb.finish_and_clear();
    let config = opts.config_json(&cfg, &net_for(ranks.first().copied().unwrap_or(2)));
    Report::new(
        "collectives",
        opts,
        config,
        rows,
        vec![
            Column::new("ranks", "ranks", 0),
            Column::new("size", "size", 0),
            Column::new("latency_us", "latency_us", 2),
        ],
    )
    .keyed_by("collective", "collective")
}
