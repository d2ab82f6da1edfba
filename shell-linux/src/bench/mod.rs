//! The `rmx bench` suite: OSU-style micro-benchmarks on a transport, printed as
//! aligned tables or one JSON document, and plotted as SVG by the suite.

pub mod collectives;
pub mod eager_reuse;
pub mod fence;
pub mod floor;
pub mod frame_floor;
pub mod hist;
pub mod overlap;
pub mod perftest;
pub mod pin;
pub mod pingpong;
pub mod progress;
pub mod rate;
pub mod report;
pub mod sim;
pub mod spectrum;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use rmx_core::Config;

use crate::job::Net;
use crate::rank::Rank;
use crate::reuse::Calibration;

/// Options every benchmark accepts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Opts {
    pub transport: String,
    pub min_size: usize,
    pub max_size: usize,
    pub iters: u64,
    pub warmup: u64,
    /// Zero-copy eager sends of frequently used buffers, with these figures.
    pub eager_reuse: Option<Calibration>,
    /// Quiet: no progress bar (the JSON document is the only output).
    #[serde(skip)]
    pub quiet: bool,
}

impl Opts {
    /// The options of a report that is not a message benchmark (a model, a
    /// calibration): no sizes, no iterations.
    pub fn tool(quiet: bool) -> Opts {
        Opts::tool_on("loop", quiet)
    }

    /// [`tool`](Self::tool) for a tool that measures `transport`'s
    /// own costs (a device's registration or queue pairs).
    pub fn tool_on(transport: &str, quiet: bool) -> Opts {
        Opts {
            transport: transport.into(),
            min_size: 0,
            max_size: 0,
            iters: 0,
            warmup: 0,
            eager_reuse: None,
            quiet,
        }
    }

    /// Message sizes: powers of two from `min_size` to `max_size` (0 is included as is).
    pub fn sizes(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut s = self.min_size;
        if s == 0 {
            v.push(0);
            s = 1;
        }
        while s <= self.max_size {
            v.push(s);
            s *= 2;
        }
        v
    }

    /// The `config` block of every report: the run's options and the
    /// configuration of the core and the NIC it measured.
    pub fn config_json(&self, cfg: &Config, net: &Net) -> serde_json::Value {
        serde_json::json!({
            "iters": self.iters,
            "warmup": self.warmup,
            "min_size": self.min_size,
            "max_size": self.max_size,
            "eager_threshold": cfg.eager_threshold,
            "medium_max": cfg.medium_max,
            "credits": cfg.credits,
            "reliable": cfg.reliable,
            "send_wqes": cfg.send_wqes,
            "coalesce": format!("{:?}", cfg.coalesce),
            "header_cache": cfg.header_cache,
            "eager_reuse": self.eager_reuse.is_some(),
            "transport": net.name(),
            "nic": net.json(),
        })
    }

    /// A progress bar on stderr at a terminal, hidden otherwise.
    pub fn progress(&self, what: &str, steps: usize) -> ProgressBar {
        if self.quiet || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new(steps as u64);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} sizes {msg}")
                .expect("template")
                .progress_chars("=> "),
        );
        pb.set_prefix(what.to_string());
        pb
    }
}

/// A barrier whose waiters spin instead of sleeping, for benchmarks that
/// switch between timed phases often: a thread put to sleep (and its idle
/// vCPU descheduled by the host) comes back slow, which would show up in the
/// next phase's figures.
pub struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub fn new(n: usize) -> SpinBarrier {
        SpinBarrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    /// Waits for the other threads, `r` making progress meanwhile (as
    /// `MPI_Barrier` does): a send `r` buffered may still need it to leave,
    /// such as the first one to a peer, whose connection is made on demand
    /// (verbs), and the peer waiting for it would wait for ever.
    pub fn wait(&self, r: &mut Rank) {
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        // Progress briefly (the peer is usually close), then yield between
        // rounds: on an oversubscribed machine the rank we wait for may
        // need this core.
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            r.progress();
            if spins < 4096 {
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Which side of a transfer a benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Send,
    Recv,
}

impl Side {
    /// The rank that makes the non-blocking call measured: the sender
    /// (rank 0) or the receiver (rank 1).
    pub fn timed_rank(self) -> u16 {
        match self {
            Side::Send => 0,
            Side::Recv => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Send => "send",
            Side::Recv => "recv",
        }
    }
}

/// The application's computation in the overlap and progress benchmarks:
/// `ns` of busy work that makes no call into rmx.
pub fn compute(ns: u64) {
    if ns == 0 {
        return;
    }
    let end = crate::clock::now_ns() + ns;
    while crate::clock::now_ns() < end {
        std::hint::spin_loop();
    }
}

/// Runs `body` on two ranks per rendezvous in `variants` and progress-thread
/// setting in `threads`, one job each (the thread started before `body`,
/// stopped after): the rows of rank `timed` for each setting, in order.
pub fn per_setting<T: Send>(
    cfg: Config,
    net: &Net,
    variants: &[rmx_core::Protocol],
    threads: &[bool],
    timed: u16,
    body: impl Fn(&mut crate::rank::Rank) -> Vec<T> + Sync,
) -> Vec<(rmx_core::Protocol, bool, Vec<T>)> {
    let mut out = Vec::new();
    for &p in variants {
        for &pt in threads {
            let cfg = Config {
                rendezvous: Some(p),
                ..cfg
            };
            let mut rows = crate::job::run(2, cfg, net, |r| {
                r.set_progress_thread(pt);
                let rows = body(r);
                r.set_progress_thread(false);
                rows
            });
            out.push((p, pt, rows.swap_remove(timed as usize)));
        }
    }
    out
}

/// The median of `v` (reordered); 0 when empty.
pub fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}
