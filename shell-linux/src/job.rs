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

/// Why a job could not run to its end, for callers that handle it (a C
/// API returns its kind); [`run`] and its kin panic with its `Display`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobError {
    /// Its network, ports or bootstrap could not be set up.
    Setup(SetupError),
    /// The configuration is not one a rank can run.
    Config(rmx_core::ConfigError),
    /// Zero-copy sends were asked for where they cannot run (no monitor,
    /// no calibration).
    Reuse(String),
    /// Ranks `ranks` stopped answering while the body ran, and the body
    /// stopped (panicked) because of it.
    PeerFailed { ranks: Vec<u16> },
    /// No launcher started this process ([`attach`]).
    NotLaunched,
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(e) => e.fmt(f),
            Self::Config(e) => write!(f, "rank configuration: {e:?}"),
            Self::Reuse(why) => write!(f, "zero-copy rank: {why}"),
            Self::PeerFailed { ranks } => {
                let gone: Vec<String> = ranks.iter().map(u16::to_string).collect();
                write!(
                    f,
                    "rank {} stopped answering (its process died, hung or lost its link, or the network dropped every frame): the job cannot go on",
                    gone.join(", ")
                )
            }
            Self::NotLaunched => f.write_str(
                "no launcher started this process: start it under mpiexec (hydra), srun or mpirun, or run its ranks as threads",
            ),
        }
    }
}

impl std::error::Error for JobError {}

impl From<SetupError> for JobError {
    fn from(e: SetupError) -> JobError {
        JobError::Setup(e)
    }
}

/// A job's result as [`run`] and its kin hand it back: a setup's or a
/// configuration's error as a panic with its words (a failure of peers
/// stopped the rank's own thread already).
fn or_panic<T>(r: Result<T, JobError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

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

/// [`run`], its failures returned rather than raised: the setup's, the
/// configuration's, and peers that stopped answering while `body` ran (a
/// panic of `body` for any other reason still unwinds).
pub fn try_run<T, F>(nranks: u16, cfg: Config, net: &Net, body: F) -> Result<Vec<T>, JobError>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    try_run_with(nranks, cfg, net, None, body)
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
    let r = one_rank_each(nranks, cfg, net, reuse, Peers::Raise, body);
    or_panic(r)
}

/// [`run_with`], its failures returned as [`try_run`]'s are.
pub fn try_run_with<T, F>(
    nranks: u16,
    cfg: Config,
    net: &Net,
    reuse: Option<&Calibration>,
    body: F,
) -> Result<Vec<T>, JobError>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    one_rank_each(nranks, cfg, net, reuse, Peers::Return, body)
}

/// What a rank's thread does when its body stopped because peers failed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Peers {
    /// Stops with that failure's words in place of the body's, in the
    /// rank's own thread (the command line prints the first thread's
    /// stop); a launched process says them at once.
    Raise,
    /// Returns [`JobError::PeerFailed`].
    Return,
}

/// [`try_run_with`], with `peers` saying how a failure of peers ends it.
fn one_rank_each<T, F>(
    nranks: u16,
    cfg: Config,
    net: &Net,
    reuse: Option<&Calibration>,
    peers: Peers,
    body: F,
) -> Result<Vec<T>, JobError>
where
    T: Send,
    F: Fn(&mut Rank) -> T + Sync,
{
    threads(
        nranks,
        &[net.for_config(cfg)],
        peers,
        |_, mut ports| {
            let port = ports.pop().expect("one port per network");
            let rank = match reuse {
                None => Rank::new(port, nranks, cfg).map_err(JobError::Config)?,
                Some(cal) => Rank::with_reuse(port, nranks, cfg, cal).map_err(JobError::Reuse)?,
            };
            Ok(vec![rank])
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
    let r = threads(
        2,
        &nets,
        Peers::Raise,
        |_, mut ports| {
            let zc = ports.pop().expect("one port per network");
            let plain = ports.pop().expect("one port per network");
            Ok(vec![
                Rank::new(plain, 2, cfg).map_err(JobError::Config)?,
                Rank::with_reuse(zc, 2, cfg, cal).map_err(JobError::Reuse)?,
            ])
        },
        |ranks| match ranks {
            [plain, zc] => body(plain, zc),
            _ => unreachable!("two ranks per thread"),
        },
    );
    or_panic(r)
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
    let r = threads(
        2,
        &nets,
        Peers::Raise,
        |_, ports| {
            ports
                .into_iter()
                .zip(cfgs)
                .map(|(p, &c)| Rank::new(p, 2, c).map_err(JobError::Config))
                .collect()
        },
        body,
    );
    or_panic(r)
}

/// `n` threads (with `RMX_PIN=1`, thread `me` pinned to CPU `me`, modulo
/// the cores; see [`pinning`]), each
/// entering its namespace if the network names one, building its ranks from
/// its port of every network (one per entry of `nets`), running `body`,
/// then finalizing. Results in thread order; the first thread's error,
/// if any failed (every thread fails alike: a rank whose port did not
/// open is named to the others).
fn threads<T, M, F>(
    n: u16,
    nets: &[Net],
    peers: Peers,
    make: M,
    body: F,
) -> Result<Vec<T>, JobError>
where
    T: Send,
    M: Fn(u16, Vec<AnyPort>) -> Result<Vec<Rank>, JobError> + Sync,
    F: Fn(&mut [Rank]) -> T + Sync,
{
    if let Some(l) = nets.iter().find_map(Net::launch) {
        return one_process(l, nets, peers, make, body).map(|out| vec![out]);
    }
    let wires = nets
        .iter()
        .map(|net| net.wire(n))
        .collect::<Result<Vec<_>, _>>()?;
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
                            .collect::<Result<Vec<_>, _>>();
                        let made = ports.map_err(JobError::from).and_then(|p| make(me, p));
                        let mut ranks = match made {
                            Ok(ranks) => ranks,
                            Err(e) => {
                                // The others must not wait for this thread.
                                failed.store(true, Ordering::Release);
                                return Err(e);
                            }
                        };
                        let out = blaming_failed_peers(&mut ranks, n, peers, false, body);
                        if out.is_err() {
                            failed.store(true, Ordering::Release);
                            return out;
                        }
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
            .collect::<Result<Vec<T>, JobError>>()
    })
}

/// The rank of this process in a launched job: its ports of every network,
/// `body`, then finalizing with the other processes (the launcher's barrier,
/// while this rank keeps answering its peers, then a short linger so that a
/// last lost acknowledgement is sent again).
fn one_process<T, M, F>(
    l: &Launch,
    nets: &[Net],
    peers: Peers,
    make: M,
    body: F,
) -> Result<T, JobError>
where
    M: Fn(u16, Vec<AnyPort>) -> Result<Vec<Rank>, JobError>,
    F: Fn(&mut [Rank]) -> T,
{
    let me = l.rank();
    let wires = nets
        .iter()
        .map(|net| net.wire(l.size()))
        .collect::<Result<Vec<_>, _>>()?;
    let ports = wires
        .iter()
        .enumerate()
        .map(|(k, w)| w.port(me, k, wires.len(), &Ok(())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ranks = make(me, ports)?;
    let out = blaming_failed_peers(&mut ranks, l.size(), peers, true, body)?;
    let mut refs: Vec<&mut Rank> = ranks.iter_mut().collect();
    wind_down(l, &mut refs)?;
    Ok(out)
}

/// A launched process's ranks are done: progress until their buffered
/// sends left, then through the launcher's barrier (while they keep
/// answering their peers), then a short linger so that a last lost
/// acknowledgement is sent again.
fn wind_down(l: &Launch, ranks: &mut [&mut Rank]) -> Result<(), SetupError> {
    while !ranks.iter().all(|r| r.flushed()) {
        for r in ranks.iter_mut() {
            r.progress();
        }
    }
    barrier_progressing(l, ranks)?;
    let until = crate::clock::now_ns() + LINGER_NS;
    while crate::clock::now_ns() < until {
        for r in ranks.iter_mut() {
            r.progress();
        }
    }
    Ok(())
}

/// This process's rank of a launched job, for a runtime that starts and
/// ends it with calls of its own (a C API's init and finalize) rather
/// than handing [`run`] a body.
pub struct Attached {
    rank: Rank,
    launch: Launch,
}

/// Sets up this process's rank of the job a launcher started on `net`
/// (opened as launched): its port, joined to its peers', and its rank.
pub fn attach(net: &Net, cfg: Config) -> Result<Attached, JobError> {
    let Some(l) = net.launch() else {
        return Err(JobError::NotLaunched);
    };
    let net = net.for_config(cfg);
    let wire = net.wire(l.size())?;
    let port = wire.port(l.rank(), 0, 1, &Ok(()))?;
    let rank = Rank::new(port, l.size(), cfg).map_err(JobError::Config)?;
    Ok(Attached {
        rank,
        launch: l.clone(),
    })
}

impl Attached {
    pub fn rank(&mut self) -> &mut Rank {
        &mut self.rank
    }

    /// Ends the rank as [`run`] ends a launched one (its sends delivered,
    /// every process through the launcher's barrier), then tells the
    /// launcher this process is done.
    pub fn detach(mut self) -> Result<(), JobError> {
        wind_down(&self.launch, &mut [&mut self.rank])?;
        Ok(self.launch.finalize()?)
    }
}

/// A stop whose line is printed already: a launcher may end this process
/// as soon as it lets go of the bootstrap, before the line would be.
pub struct Said(pub String);

/// Runs `body`; if it stops (panics) where a peer of its ranks failed,
/// that failure is the stop ([`JobError::PeerFailed`]), raised or returned
/// as `peers` says: the panic is its consequence. `launched`: a raised
/// failure is said at once, and the panic carries [`Said`].
fn blaming_failed_peers<T>(
    ranks: &mut [Rank],
    size: u16,
    peers: Peers,
    launched: bool,
    body: impl FnOnce(&mut [Rank]) -> T,
) -> Result<T, JobError> {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(ranks)));
    out.map_err(|e| {
        let gone: Vec<u16> = (0..size)
            .filter(|&p| ranks.iter().any(|r| r.failed(p)))
            .collect();
        if gone.is_empty() {
            std::panic::resume_unwind(e);
        }
        let e = JobError::PeerFailed { ranks: gone };
        match (peers, launched) {
            (Peers::Return, _) => e,
            (Peers::Raise, false) => panic!("{e}"),
            (Peers::Raise, true) => {
                let me = ranks.first().map_or(0, |r| r.rank());
                crate::say::say(format_args!("rank {me}: {e}"));
                std::panic::panic_any(Said(e.to_string()))
            }
        }
    })
}

/// How long a finished process keeps answering its peers.
const LINGER_NS: u64 = 20_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eth::{EthNet, EthOpts};

    /// A configuration no rank can run comes back by kind, from every
    /// thread at once (none waits for another that never started).
    #[test]
    fn a_bad_configuration_is_returned_not_raised() {
        let cfg = Config {
            credits: 0,
            ..crate::rank::loop_config()
        };
        let net = Net::Loop(Default::default());
        let r = try_run(3, cfg, &net, |r| r.rank());
        assert_eq!(
            r,
            Err(JobError::Config(rmx_core::ConfigError::Credits)),
            "{r:?}"
        );
        let ok = try_run(3, crate::rank::loop_config(), &net, |r| r.rank());
        assert_eq!(ok, Ok(vec![0, 1, 2]));
    }

    /// A port that cannot open is the setup's error, named for the rank
    /// and the interface; its peers are told which rank failed rather than
    /// wait for it.
    #[test]
    fn a_port_that_does_not_open_is_a_setup_error() {
        let net = Net::Eth(EthNet {
            iface: "rmx-no-such-if".into(),
            netns: Vec::new(),
            opts: EthOpts::default(),
            launch: None,
        });
        let r = try_run(2, crate::rank::loop_config(), &net, |r| r.rank());
        match r {
            Err(JobError::Setup(SetupError::Port { rank: 0, what, .. })) => {
                assert_eq!(what, "rmx-no-such-if")
            }
            other => panic!("{other:?}"),
        }
        let said = std::panic::catch_unwind(|| run(2, crate::rank::loop_config(), &net, |_| ()));
        let msg = said
            .expect_err("run raises it")
            .downcast::<String>()
            .expect("text");
        assert!(
            msg.starts_with("rank 0: cannot open rmx-no-such-if"),
            "{msg}"
        );
    }

    /// Ranks whose every frame is lost give each other up; the bodies'
    /// stops are their consequence, returned as the peers that failed
    /// (`run` raises the same words in the rank's thread instead).
    #[test]
    fn peers_that_stop_answering_are_returned_by_kind() {
        use crate::transport::Faults;
        use rmx_core::{Source, TagSel};
        if crate::eth::RawSocket::open("lo", rmx_core::wire::frame::ETHERTYPE, false).is_err() {
            eprintln!("skipped: raw sockets on lo need root or CAP_NET_RAW");
            return;
        }
        let opts = EthOpts {
            faults: Faults {
                loss_ppm: 1_000_000,
                ..Faults::default()
            },
            ..EthOpts::default()
        };
        let net = Net::Eth(EthNet {
            iface: "lo".into(),
            netns: Vec::new(),
            opts,
            launch: None,
        });
        let cfg = Config {
            peer_timeout_ns: 300_000_000,
            ..crate::rank::loop_config()
        };
        let r = try_run(2, cfg, &net, |r| {
            let mut b = [0u8; 8];
            let from = Source::Rank(1 - r.rank());
            let st = r.recv(from, TagSel::Tag(1), &mut b);
            assert!(st.is_ok_and(|st| st.fault.is_none()), "nothing comes");
        });
        match r {
            Err(JobError::PeerFailed { ranks }) => assert!(!ranks.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
