//! Runs a job: one thread per rank on the `loop` transport, each pinned to a core.

use rmx_core::Config;

use crate::clock::pin_to_cpu;
use crate::loopnic::{Fabric, LoopConfig};
use crate::rank::Rank;

/// Runs `body` on each of `nranks` ranks (threads) and returns their results in
/// rank order. Each thread is pinned to CPU `rank`, modulo the cores.
pub fn run<T, F>(nranks: u16, cfg: Config, nic: LoopConfig, body: F) -> Vec<T>
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
                    let mut rank = Rank::new(port, nranks, cfg).expect("rank configuration");
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
