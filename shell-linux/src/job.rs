//! Runs a job: one thread per rank on the `loop` transport, each pinned to a core.

use std::sync::atomic::{AtomicUsize, Ordering};

use rmx_core::Config;

use crate::clock::pin_to_cpu;
use crate::loopnic::{Fabric, LoopConfig, Port};
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
    threads(
        nranks,
        &[queue_for(cfg, nic)],
        |_, mut ports| {
            let port = ports.pop().expect("one port");
            let rank = match reuse {
                None => Rank::new(port, nranks, cfg).expect("rank configuration"),
                Some(cal) => Rank::with_reuse(port, nranks, cfg, cal).expect("zero-copy rank"),
            };
            vec![rank]
        },
        |ranks| body(&mut ranks[0]),
    )
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
    let nics = [queue_for(cfg, nic); 2];
    threads(
        2,
        &nics,
        |_, mut ports| {
            let zc = ports.pop().expect("two ports");
            let plain = ports.pop().expect("two ports");
            vec![
                Rank::new(plain, 2, cfg).expect("rank configuration"),
                Rank::with_reuse(zc, 2, cfg, cal).expect("zero-copy rank"),
            ]
        },
        |ranks| match ranks {
            [plain, zc] => body(plain, zc),
            _ => unreachable!("two ranks per thread"),
        },
    )
}

/// One job per configuration, side by side on two pinned threads: thread
/// `me` drives rank `me` of every job, handed to `body` in the order of
/// `cfgs`, so a benchmark can alternate between configurations in one run.
pub fn run_configs<T, F>(cfgs: &[Config], nic: LoopConfig, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut [Rank]) -> T + Sync,
{
    let nics: Vec<LoopConfig> = cfgs.iter().map(|&c| queue_for(c, nic)).collect();
    threads(
        2,
        &nics,
        |_, ports| {
            ports
                .into_iter()
                .zip(cfgs)
                .map(|(p, &c)| Rank::new(p, 2, c).expect("rank configuration"))
                .collect()
        },
        body,
    )
}

/// `n` pinned threads (thread `me` on CPU `me`, modulo the cores), each
/// building its ranks from its port of every fabric (one per entry of `nics`),
/// running `body`, then finalizing. Results in thread order.
fn threads<T, M, F>(n: u16, nics: &[LoopConfig], make: M, body: F) -> Vec<T>
where
    T: Send,
    M: Fn(u16, Vec<Port>) -> Vec<Rank> + Sync,
    F: Fn(&mut [Rank]) -> T + Sync,
{
    let fabrics: Vec<Fabric> = nics.iter().map(|&c| Fabric::new(n as usize, c)).collect();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|me| {
                let ports = fabrics.iter().map(|f| f.port(me)).collect();
                let (make, body, done) = (&make, &body, &done);
                s.spawn(move || {
                    pin_to_cpu(me as usize);
                    let mut ranks = make(me, ports);
                    let out = body(&mut ranks);
                    let mut refs: Vec<&mut Rank> = ranks.iter_mut().collect();
                    finish(&mut refs, done, n as usize);
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
