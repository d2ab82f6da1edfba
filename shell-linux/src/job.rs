//! Runs a job: one thread per rank, on the network
//! the job names ([`Net`]): `loop`, or raw Ethernet with each rank's thread
//! in its own network namespace of a lab.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmx_core::Config;

use crate::clock::{pin_to_cpu, pinning};
use crate::netns;
use crate::rank::Rank;
use crate::reuse::Calibration;
use crate::transport::{AnyPort, SetupError};

pub use crate::transport::Net;

pub use crate::launch::Launch;

/// The launcher's barrier, while `ranks` keep answering their peers (a
/// peer may still wait for an acknowledgement).
fn barrier_progressing(l: &Launch, ranks: &mut [&mut Rank]) -> Result<(), SetupError> {
    let passed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = l.barrier();
            passed.store(true, Ordering::Release);
            r
        });
        while !passed.load(Ordering::Acquire) {
            for r in ranks.iter_mut() {
                r.progress();
            }
        }
        h.join().expect("the barrier thread")
    })
}

/// MPI's finalize for the ranks of one thread: progress until their buffered
/// sends have left, then keep taking packets until every thread of the job
/// got that far (so that no rank stops while a peer still sends to it).
fn finish(ranks: &mut [&mut Rank], done: &AtomicUsize, threads: usize, failed: &AtomicBool) {
    let mut counted = false;
    // A thread that panicked never gets here: the others must not wait for it.
    while !failed.load(Ordering::Acquire) {
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

/// Raises `failed` if its thread unwinds (a rank's body panicked).
struct FailFlag<'a>(&'a AtomicBool);

impl Drop for FailFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Runs `body` on each of `nranks` ranks (threads) and returns their results in
/// rank order. Each thread is pinned to CPU `rank`, modulo the cores.
pub fn run<T, F>(nranks: u16, cfg: Config, net: &Net, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    run_with(nranks, cfg, net, None, body)
}

/// [`run`], with zero-copy eager sends of frequently used buffers when
/// `reuse` gives the cost figures. Check [`crate::monitor::Monitor::global`]
/// first: a rank that cannot watch its registrations panics here.
pub fn run_with<T, F>(
    nranks: u16,
    cfg: Config,
    net: &Net,
    reuse: Option<&Calibration>,
    body: F,
) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    threads(
        nranks,
        &[net.for_config(cfg)],
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
/// each of two threads drives a plain rank (one fabric) and a rank
/// with zero-copy eager sends from `cal` (a second fabric), handed to `body`
/// in that order. Results in rank order.
pub fn run_side_by_side<T, F>(cfg: Config, net: &Net, cal: &Calibration, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut Rank, &mut Rank) -> T + Sync,
{
    let nets = [net.for_config(cfg), net.for_config(cfg)];
    threads(
        2,
        &nets,
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

/// One job per configuration, side by side on two threads: thread
/// `me` drives rank `me` of every job, handed to `body` in the order of
/// `cfgs`, so a benchmark can alternate between configurations in one run.
pub fn run_configs<T, F>(cfgs: &[Config], net: &Net, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(&mut [Rank]) -> T + Sync,
{
    let nets: Vec<Net> = cfgs.iter().map(|&c| net.for_config(c)).collect();
    threads(
        2,
        &nets,
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

/// `n` threads (with `RMX_PIN=1`, thread `me` pinned to CPU `me`, modulo
/// the cores; see [`pinning`]), each
/// entering its namespace if the network names one, building its ranks from
/// its port of every network (one per entry of `nets`), running `body`,
/// then finalizing. Results in thread order.
fn threads<T, M, F>(n: u16, nets: &[Net], make: M, body: F) -> Vec<T>
where
    T: Send,
    M: Fn(u16, Vec<AnyPort>) -> Vec<Rank> + Sync,
    F: Fn(&mut [Rank]) -> T + Sync,
{
    if let Some(l) = nets.iter().find_map(Net::launch) {
        return vec![one_process(l, nets, make, body)];
    }
    let wires = nets
        .iter()
        .map(|net| net.wire(n))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|me| {
                let (make, body, done, wires, failed) = (&make, &body, &done, &wires, &failed);
                let named = std::thread::Builder::new().name(format!("rank {me}"));
                named
                    .spawn_scoped(s, move || {
                        let _flag = FailFlag(failed);
                        if pinning() {
                            pin_to_cpu(me as usize);
                        }
                        let placed = match nets.iter().find_map(|n| n.netns(me)) {
                            Some(ns) => netns::enter(ns).map_err(|e| SetupError::Placement {
                                rank: me,
                                why: format!("rank {me}: cannot enter network namespace {ns}: {e}"),
                            }),
                            None => Ok(()),
                        };
                        let ports = wires
                            .iter()
                            .enumerate()
                            .map(|(k, w)| w.port(me, k, wires.len(), &placed))
                            .collect::<Result<Vec<_>, _>>()
                            .unwrap_or_else(|e| panic!("{e}"));
                        let mut ranks = make(me, ports);
                        let out = blaming_failed_peers(&mut ranks, n, false, body);
                        let mut refs: Vec<&mut Rank> = ranks.iter_mut().collect();
                        finish(&mut refs, done, n as usize, failed);
                        out
                    })
                    .expect("a thread for each rank")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The rank of this process in a launched job: its ports of every network,
/// `body`, then finalizing with the other processes (the launcher's barrier,
/// while this rank keeps answering its peers, then a short linger so that a
/// last lost acknowledgement is sent again).
fn one_process<T, M, F>(l: &Launch, nets: &[Net], make: M, body: F) -> T
where
    M: Fn(u16, Vec<AnyPort>) -> Vec<Rank>,
    F: Fn(&mut [Rank]) -> T,
{
    let me = l.rank();
    let wires = nets
        .iter()
        .map(|net| net.wire(l.size()))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let ports = wires
        .iter()
        .enumerate()
        .map(|(k, w)| w.port(me, k, wires.len(), &Ok(())))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut ranks = make(me, ports);
    let out = blaming_failed_peers(&mut ranks, l.size(), true, body);
    let mut refs: Vec<&mut Rank> = ranks.iter_mut().collect();
    while !refs.iter().all(|r| r.flushed()) {
        for r in refs.iter_mut() {
            r.progress();
        }
    }
    barrier_progressing(l, &mut refs).unwrap_or_else(|e| panic!("{e}"));
    let until = crate::clock::now_ns() + LINGER_NS;
    while crate::clock::now_ns() < until {
        for r in refs.iter_mut() {
            r.progress();
        }
    }
    out
}

/// A stop whose line is printed already: a launcher may end this process
/// as soon as it lets go of the bootstrap, before the line would be.
pub struct Said(pub String);

/// Runs `body`; if it stops (panics) where a peer of its ranks failed,
/// says so instead: the panic is that failure's consequence. `say_now`
/// (a launched process): the line is printed at once, and the panic
/// carries [`Said`].
fn blaming_failed_peers<T>(
    ranks: &mut [Rank],
    size: u16,
    say_now: bool,
    body: impl FnOnce(&mut [Rank]) -> T,
) -> T {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(ranks)));
    out.unwrap_or_else(|e| {
        let gone: Vec<String> = (0..size)
            .filter(|&p| ranks.iter().any(|r| r.failed(p)))
            .map(|p| p.to_string())
            .collect();
        if gone.is_empty() {
            std::panic::resume_unwind(e);
        }
        let why = format!(
            "rank {} stopped answering (its process died, hung or lost its link, or the network dropped every frame): the job cannot go on",
            gone.join(", ")
        );
        if say_now {
            let me = ranks.first().map_or(0, |r| r.rank());
            crate::say::say(format_args!("rank {me}: {why}"));
            std::panic::panic_any(Said(why));
        }
        panic!("{why}")
    })
}

/// How long a finished process keeps answering its peers.
const LINGER_NS: u64 = 20_000_000;
