//! `rmx bench bw`: osu_bw style — a window of 64 non-blocking sends, then a
//! small acknowledgement back; bandwidth and message rate at the sender.

use rmx_core::{Config, Source, TagSel};
use serde_json::json;

use super::report::{Column, Report};
use super::Opts;
use crate::job;
use crate::loopnic::LoopConfig;
use crate::rank::{Rank, Req};

/// Messages in flight per window, as osu_bw and osu_mbw_mr use.
pub const WINDOW: usize = 64;
const DATA: u32 = 2;
const ACK: u32 = 3;

fn windows(r: &mut Rank, n: u64, size: usize, sbuf: &[u8], rbufs: &mut [Vec<u8>]) -> u64 {
    let mut ack = [0u8; 4];
    let mut reqs: Vec<Req> = Vec::with_capacity(WINDOW);
    let t0 = crate::clock::now_ns();
    // SAFETY: every request is waited for within the window that posted it.
    unsafe {
        if r.rank() == 0 {
            for _ in 0..n {
                let a = r
                    .irecv_raw(Source::Rank(1), TagSel::Tag(ACK), ack.as_mut_ptr(), 4)
                    .unwrap();
                for _ in 0..WINDOW {
                    reqs.push(r.isend_raw(1, DATA, sbuf.as_ptr(), size).unwrap());
                }
                for q in reqs.drain(..) {
                    r.wait(q);
                }
                r.wait(a);
            }
        } else {
            let post = |r: &mut Rank, rbufs: &mut [Vec<u8>], reqs: &mut Vec<Req>| {
                for b in rbufs.iter_mut() {
                    reqs.push(
                        r.irecv_raw(Source::Rank(0), TagSel::Tag(DATA), b.as_mut_ptr(), size)
                            .unwrap(),
                    );
                }
            };
            post(r, rbufs, &mut reqs);
            for i in 0..n {
                let mut done: Vec<Req> = std::mem::take(&mut reqs);
                for q in done.drain(..) {
                    r.wait(q);
                }
                // Post the next window before acknowledging, so it is expected.
                if i + 1 < n {
                    post(r, rbufs, &mut reqs);
                }
                r.send(0, ACK, &ack).unwrap();
            }
        }
    }
    crate::clock::now_ns() - t0
}

pub fn run(opts: &Opts, cfg: Config, nic: LoopConfig) -> Report {
    let sizes = opts.sizes();
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let pb = opts.progress("bw", sizes.len());
    // Windows per size: the iteration count spread over 64-message windows,
    // at least 100 windows.
    let n = (opts.iters / 10).max(100);
    let warm = (opts.warmup / 10).max(10);
    let rows = job::run(2, cfg, nic, |r| {
        let sbuf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rbufs = vec![vec![0u8; max]; WINDOW];
        let mut rows = Vec::new();
        for &size in &sizes {
            windows(r, warm, size, &sbuf, &mut rbufs);
            let t = windows(r, n, size, &sbuf, &mut rbufs);
            if r.rank() == 0 {
                let msgs = n as f64 * WINDOW as f64;
                let secs = t as f64 / 1e9;
                rows.push((size, msgs * size as f64 / secs / 1e6, msgs / secs));
                pb.inc(1);
            }
        }
        rows
    });
    pb.finish_and_clear();
    let results = rows[0]
        .iter()
        .map(|&(size, mbs, rate)| json!({"size": size, "mb_per_s": mbs, "msg_per_s": rate}))
        .collect();
    let mut config = opts.config_json(&cfg, &nic);
    config["window"] = json!(WINDOW);
    config["windows"] = json!(n);
    Report::new(
        "bw",
        opts,
        config,
        results,
        vec![
            Column::new("mb_per_s", "mb_per_s", 2),
            Column::new("msg_per_s", "msg_per_s", 0),
        ],
    )
}
