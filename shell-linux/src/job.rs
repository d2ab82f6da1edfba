//! Runs a job: one thread per rank on the `loop` transport, each pinned to a core.

use rmx_core::Config;

use crate::clock::pin_to_cpu;
use crate::loopnic::{Fabric, LoopConfig};
use crate::rank::Rank;
use crate::reuse::Calibration;

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
    let fabric = Fabric::new(nranks as usize, nic);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..nranks)
            .map(|r| {
                let port = fabric.port(r);
                let body = &body;
                s.spawn(move || {
                    pin_to_cpu(r as usize);
                    let mut rank = match reuse {
                        None => Rank::new(port, nranks, cfg).expect("rank configuration"),
                        Some(cal) => {
                            Rank::with_reuse(port, nranks, cfg, cal).expect("zero-copy rank")
                        }
                    };
                    body(&mut rank)
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
    let (plain_fab, zc_fab) = (Fabric::new(2, nic), Fabric::new(2, nic));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u16)
            .map(|me| {
                let (pp, pz) = (plain_fab.port(me), zc_fab.port(me));
                let body = &body;
                s.spawn(move || {
                    pin_to_cpu(me as usize);
                    let mut plain = Rank::new(pp, 2, cfg).expect("rank configuration");
                    let mut zc = Rank::with_reuse(pz, 2, cfg, cal).expect("zero-copy rank");
                    body(&mut plain, &mut zc)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    })
}
