//! Runs a job: one thread per rank, each pinned to a core, on the network
//! the job names ([`Net`]): `loop`, or raw Ethernet with each rank's thread
//! in its own network namespace of a lab.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use rmx_core::Config;

use crate::clock::pin_to_cpu;
use crate::eth::{netns, EthOpts, EthPort};
use crate::loopnic::{Fabric, LoopConfig};
use crate::pmi::Pmi;
use crate::rank::Rank;
use crate::reuse::Calibration;
use crate::transport::AnyPort;

/// The network a job's ranks talk over.
#[derive(Clone, Debug)]
pub enum Net {
    /// `loop`, the in-process software NIC.
    Loop(LoopConfig),
    /// Raw Ethernet frames.
    Eth(EthNet),
}

/// Where the ranks of an `eth` job open their endpoints.
#[derive(Clone, Debug)]
pub struct EthNet {
    /// The interface every rank opens (in its namespace).
    pub iface: String,
    /// Rank `r`'s thread enters the network namespace `netns[r]` first (a
    /// lab); empty: every rank opens `iface` where the process is.
    pub netns: Vec<String>,
    pub opts: EthOpts,
    /// This process is one rank of a job a launcher started (`mpiexec`,
    /// `srun`): it runs that rank alone and swaps addresses through PMI.
    pub launch: Option<Launch>,
}

/// One rank per process, bootstrapped through the launcher's PMI server.
#[derive(Clone)]
pub struct Launch {
    /// `None` once finalized.
    pmi: Arc<Mutex<Option<Pmi>>>,
    rank: u16,
    size: u16,
    /// "PMI" (PMI-1) or "PMIx", as reports show it.
    protocol: &'static str,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {} ({})", self.rank, self.size, self.protocol)
    }
}

impl Launch {
    pub fn new(pmi: Pmi) -> Launch {
        Launch {
            rank: pmi.rank(),
            size: pmi.size(),
            protocol: pmi.protocol(),
            pmi: Arc::new(Mutex::new(Some(pmi))),
        }
    }

    /// Tells the launcher this rank is done (once; later calls do nothing).
    pub fn finalize(&self) -> Result<(), String> {
        match lock(&self.pmi).take() {
            Some(p) => p.finalize().map_err(|e| format!("PMI: {e}")),
            None => Ok(()),
        }
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut Pmi) -> Result<R, crate::pmi::PmiError>,
    ) -> Result<R, String> {
        match lock(&self.pmi).as_mut() {
            Some(p) => f(p).map_err(|e| format!("PMI: {e}")),
            None => Err("PMI was finalized".into()),
        }
    }

    pub fn rank(&self) -> u16 {
        self.rank
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    /// Every rank's value of `what`, this one's being `mine`.
    fn exchange(&self, what: &str, mine: &str) -> Result<Vec<String>, String> {
        self.with(|p| p.exchange(what, mine))
    }

    /// The launcher's barrier, while `ranks` keep answering their peers (a
    /// peer may still wait for an acknowledgement).
    fn barrier_progressing(&self, ranks: &mut [&mut Rank]) -> Result<(), String> {
        let passed = AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let r = self.with(|p| p.barrier());
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
}

impl Net {
    /// The transport's name, as `--transport` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Net::Loop(_) => crate::loopnic::ENTRY.name,
            Net::Eth(_) => crate::eth::ENTRY.name,
        }
    }

    /// The network's settings, for a report's `config` block.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Net::Loop(c) => serde_json::json!(c),
            Net::Eth(e) => serde_json::json!({
                "iface": e.iface,
                "netns": e.netns,
                "ethertype": e.opts.ethertype,
                "rx_buffers": e.opts.rx_buffers,
                "max_packet": e.opts.max_packet,
                "batch": e.opts.batch,
                "bypass_qdisc": e.opts.bypass_qdisc,
                "loss_ppm": e.opts.faults.loss_ppm,
                "dup_ppm": e.opts.faults.dup_ppm,
                "reorder_ppm": e.opts.faults.reorder_ppm,
                "rx_ring": e.opts.rx_ring,
                "launch": e.launch.as_ref().map(|l| format!("{l:?}")),
            }),
        }
    }

    /// The launch this process is one rank of, if a launcher started it.
    pub fn launch(&self) -> Option<&Launch> {
        match self {
            Net::Eth(e) => e.launch.as_ref(),
            Net::Loop(_) => None,
        }
    }

    /// The largest message ranks on this network send without a
    /// rendezvous ([`Config::eager_max`] of `cfg` fitted to what the
    /// transport can do). An interface's MTU is known only once a port
    /// opens, so the one-packet threshold is the configured one.
    pub fn eager_max(&self, cfg: &Config) -> u32 {
        cfg.fit(&self.caps()).eager_max()
    }

    /// What this network's transport can do, as far as protocol choices
    /// go (limits such as the MTU are known once a port opens).
    pub fn caps(&self) -> rmx_core::Caps {
        match self {
            Net::Loop(_) => rmx_core::Caps {
                rdma_read: true,
                rdma_write: true,
                write_imm: true,
                ..rmx_core::Caps::default()
            },
            Net::Eth(_) => crate::eth::CAPS,
        }
    }

    /// The network with `faults` injected on receive; `Err` where the
    /// transport's core runs without its reliability layer (`loop` is
    /// reliable, so lost packets would be lost messages).
    pub fn with_faults(&self, faults: crate::transport::Faults) -> Result<Net, String> {
        match self {
            Net::Eth(e) => Ok(Net::Eth(EthNet {
                opts: EthOpts { faults, ..e.opts },
                ..e.clone()
            })),
            Net::Loop(_) => {
                Err("faults need a lossy transport's reliability layer: use --transport eth".into())
            }
        }
    }

    /// The fence designs this network's transport carries.
    pub fn designs(&self) -> Vec<rmx_core::onesided::Design> {
        let caps = self.caps();
        rmx_core::onesided::Design::ALL
            .into_iter()
            .filter(|d| d.offered(&caps))
            .collect()
    }

    /// Receive buffers per rank: what a benchmark keeps in flight at most.
    pub fn rx_buffers(&self) -> usize {
        match self {
            Net::Loop(c) => c.srq_depth,
            Net::Eth(e) => e.opts.rx_buffers as usize,
        }
    }

    /// The network as one connection's send queue must be for `cfg`: on
    /// `loop`, `send_wqes` entries, as a verbs queue pair is created with them.
    fn for_config(&self, cfg: Config) -> Net {
        match self {
            Net::Loop(c) => Net::Loop(LoopConfig {
                sq_depth: cfg.send_wqes as u32,
                ..*c
            }),
            n => n.clone(),
        }
    }
}

/// One network of a running job, handing each rank's thread its port.
enum Wire {
    Loop(Fabric),
    Eth {
        net: EthNet,
        swap: Swap,
        /// The first endpoint number of this job's ports (see [`endpoints`]).
        base: u16,
    },
}

/// Endpoint numbers for a new job's ports: different for every job of
/// this process and, through the process id, for jobs of other processes,
/// so that two jobs sharing an interface (tests on `lo`, two launches on
/// one host) do not take each other's frames.
fn endpoints() -> u16 {
    static JOBS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let job = JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Spread the ids apart (odd multipliers permute u16), leaving room for
    // the ports of one job above each base.
    (std::process::id() as u16).wrapping_mul(40_503) ^ job.wrapping_mul(4_099).rotate_left(7)
}

/// How a job's ranks swap their ports' addresses, whatever the transport:
/// opaque bytes, through shared memory for threads of one process or the
/// launcher's key-value space (as hex) for processes.
enum Swap {
    Threads {
        addrs: Mutex<Vec<Option<Vec<u8>>>>,
        met: Barrier,
    },
    Launched(Launch),
}

impl Swap {
    fn new(n: u16, launch: Option<&Launch>) -> Swap {
        match launch {
            Some(l) => Swap::Launched(l.clone()),
            None => Swap::Threads {
                addrs: Mutex::new(vec![None; n as usize]),
                met: Barrier::new(n as usize),
            },
        }
    }

    /// Every rank's address of network `k`, rank `me`'s being `mine`
    /// (`None`: its port did not open). Every rank of the job calls this
    /// at once, even one whose port failed, so that none waits for ever.
    fn swap(&self, me: u16, k: usize, mine: Option<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        let all: Vec<Option<Vec<u8>>> = match self {
            Swap::Threads { addrs, met } => {
                lock(addrs)[me as usize] = mine;
                met.wait();
                lock(addrs).clone()
            }
            Swap::Launched(l) => {
                let hexed = mine.as_deref().map_or_else(|| "none".into(), hex);
                l.exchange(&format!("rmx-net{k}"), &hexed)?
                    .iter()
                    .map(|v| unhex(v))
                    .collect()
            }
        };
        all.into_iter()
            .enumerate()
            .map(|(r, a)| a.ok_or_else(|| format!("rank {me}: rank {r} could not open its port")))
            .collect()
    }
}

impl Wire {
    fn new(n: u16, net: &Net) -> Result<Wire, String> {
        Ok(match net {
            Net::Loop(c) => Wire::Loop(Fabric::new(n as usize, *c).map_err(|e| e.to_string())?),
            Net::Eth(e) => Wire::Eth {
                base: endpoints(),
                swap: Swap::new(n, e.launch.as_ref()),
                net: e.clone(),
            },
        })
    }

    /// Rank `me`'s port of network `k` of `nets`. On `eth` every rank of
    /// the job calls this at once: the addresses are swapped here.
    /// `placed`: whether the thread got into its namespace.
    fn port(
        &self,
        me: u16,
        k: usize,
        nets: usize,
        placed: &Result<(), String>,
    ) -> Result<AnyPort, String> {
        match self {
            Wire::Loop(f) => Ok(f.port(me).into()),
            Wire::Eth { net, swap, base } => {
                let endpoint = base.wrapping_add((me as usize * nets + k) as u16);
                let opened = placed.clone().and_then(|()| {
                    EthPort::open(&net.iface, endpoint, net.opts)
                        .map_err(|e| format!("rank {me}: cannot open {}: {e}", net.iface))
                });
                let mine = opened.as_ref().ok().map(EthPort::address);
                let all = swap.swap(me, k, mine);
                let mut port = opened?;
                port.join(me, &all?)?;
                Ok(AnyPort::from(port).with_faults(net.opts.faults))
            }
        }
    }

    /// The namespace rank `me`'s thread runs in, if the network names one.
    fn netns(&self, me: u16) -> Option<&str> {
        match self {
            Wire::Eth { net, .. } => net.netns.get(me as usize).map(String::as_str),
            Wire::Loop(_) => None,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes from their hex form, if it is one.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
/// each of two pinned threads drives a plain rank (one fabric) and a rank
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

/// One job per configuration, side by side on two pinned threads: thread
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

/// `n` pinned threads (thread `me` on CPU `me`, modulo the cores), each
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
        .map(|net| Wire::new(n, net))
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
                        pin_to_cpu(me as usize);
                        let placed = match wires.iter().find_map(|w| w.netns(me)) {
                            Some(ns) => netns::enter(ns).map_err(|e| {
                                format!("rank {me}: cannot enter network namespace {ns}: {e}")
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
        .map(|net| Wire::new(l.size(), net))
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
    l.barrier_progressing(&mut refs)
        .unwrap_or_else(|e| panic!("{e}"));
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
            eprintln!("rmx: rank {me}: {why}");
            std::panic::panic_any(Said(why));
        }
        panic!("{why}")
    })
}

/// How long a finished process keeps answering its peers.
const LINGER_NS: u64 = 20_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads swap opaque addresses; a rank whose port did not open is
    /// named to every rank, and none waits for it.
    #[test]
    fn ranks_swap_addresses_and_a_missing_one_is_named_to_all() {
        let swap = Swap::new(3, None);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3u16)
                .map(|me| {
                    let swap = &swap;
                    s.spawn(move || swap.swap(me, 0, Some(vec![me as u8; me as usize + 1])))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for o in out {
            assert_eq!(o.unwrap(), [vec![0], vec![1, 1], vec![2, 2, 2]]);
        }
        let swap = Swap::new(2, None);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u16)
                .map(|me| {
                    let swap = &swap;
                    s.spawn(move || swap.swap(me, 0, (me == 0).then(|| vec![7])))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, o) in out.into_iter().enumerate() {
            assert_eq!(
                o.unwrap_err(),
                format!("rank {me}: rank 1 could not open its port")
            );
        }
    }

    #[test]
    fn bytes_travel_as_hex_and_anything_else_is_no_address() {
        assert_eq!(hex(&[0, 0xAB, 0x7F]), "00ab7f");
        assert_eq!(unhex("00ab7f"), Some(vec![0, 0xAB, 0x7F]));
        assert_eq!(unhex(""), Some(vec![]));
        for bad in ["none", "abc", "zz", "é1"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
