//! Runs a job: one thread per rank on the `loop` transport, each pinned to a core.

use std::sync::atomic::{AtomicUsize, Ordering};

use rmx_core::Config;

use crate::clock::pin_to_cpu;
use crate::loopnic::{Fabric, LoopConfig};
use crate::rank::Rank;
use crate::reuse::Calibration;

/// MPI's finalize for the ranks of one thread: progress until their buffered
/// sends have left, then keep taking packets until every thread of the job
/// got that far (so that no rank stops while a peer still sends to it).
fn finish(ranks: &mut [&mut Rank], done: &AtomicUsize, threads: usize) {
    let mut counted = false;
    loop {
        for r in ranks.iter_mut() {
            r.progress();
        }
        if !counted && ranks.iter().all(|r| r.flushed()) {
            done.fetch_add(1, Ordering::AcqRel);
            counted = true;
        }
        if counted && done.load(Ordering::Acquire) == threads {
            return;
        }
    }
}

/// The NIC a job runs on: each connection's send queue has the core's
/// `send_wqes` entries, as a verbs queue pair is created with them.
fn queue_for(cfg: Config, nic: LoopConfig) -> LoopConfig {
    LoopConfig {
        sq_depth: cfg.send_wqes as u32,
        ..nic
    }
}

/// Runs `body` on each of `nranks` ranks (threads) and returns their results in
/// rank order. Each thread is pinned to CPU `rank`, modulo the cores.
pub fn run<T, F>(nranks: u16, cfg: Config, nic: LoopConfig, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    run_with(nranks, cfg, nic, None, body)
}

/// [`run`], with zero-copy eager sends of frequently used buffers when
/// `reuse` gives the cost figures. Check [`crate::monitor::Monitor::global`]
/// first: a rank that cannot watch its registrations panics here.
pub fn run_with<T, F>(
    nranks: u16,
    cfg: Config,
    nic: LoopConfig,
    reuse: Option<&Calibration>,
    body: F,
) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    let fabric = Fabric::new(nranks as usize, queue_for(cfg, nic));
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..nranks)
            .map(|r| {
                let port = fabric.port(r);
                let (body, done) = (&body, &done);
                s.spawn(move || {
                    pin_to_cpu(r as usize);
                    let mut rank = match reuse {
                        None => Rank::new(port, nranks, cfg).expect("rank configuration"),
                        Some(cal) => {
                            Rank::with_reuse(port, nranks, cfg, cal).expect("zero-copy rank")
                        }
                    };
                    let out = body(&mut rank);
                    finish(&mut [&mut rank], done, nranks as usize);
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    })
}

/// Two ranks per thread, for comparing copy against zero-copy in one run:
/// each of two pinned threads drives a plain rank (one fabric) and a rank
/// with zero-copy eager sends from `cal` (a second fabric), handed to `body`
/// in that order. Results in rank order.
pub fn run_side_by_side<T, F>(cfg: Config, nic: LoopConfig, cal: &Calibration, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank, &mut Rank) -> T + Sync,
{
    let nic = queue_for(cfg, nic);
    let (plain_fab, zc_fab) = (Fabric::new(2, nic), Fabric::new(2, nic));
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u16)
            .map(|me| {
                let (pp, pz) = (plain_fab.port(me), zc_fab.port(me));
                let (body, done) = (&body, &done);
                s.spawn(move || {
                    pin_to_cpu(me as usize);
                    let mut plain = Rank::new(pp, 2, cfg).expect("rank configuration");
                    let mut zc = Rank::with_reuse(pz, 2, cfg, cal).expect("zero-copy rank");
                    let out = body(&mut plain, &mut zc);
                    finish(&mut [&mut plain, &mut zc], done, 2);
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    })
}
