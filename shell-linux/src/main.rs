//! `rmx`: information, benchmarks and the benchmark suite of the rmx transport.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rmx_core::onesided::Design;
use rmx_linux::bench::{self, report::Report, Opts};
use rmx_linux::job::{EthNet, Launch, Net};
use rmx_linux::lab::{LabSpec, TempLab};
use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::CoreEndpoint;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "rmx",
    version,
    about = "rmx messaging transport: information and benchmarks",
    long_about = "rmx is the transport core an MPI library, a PGAS runtime or a network driver \
embeds to move messages over RDMA and Ethernet. This tool reports what this build can do and \
runs its benchmark suite (OSU-style: latency, bandwidth, message rate)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Transports, default configuration, and the core's memory figures.
    Info {
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Models built from rmx's own sizes.
    #[command(subcommand)]
    Model(ModelCmd),
    /// A network on this machine for the eth transport: network namespaces
    /// joined by veth pairs (through a bridge above two ranks), with netem
    /// faults. Needs root.
    #[command(subcommand)]
    Lab(LabCmd),
    /// Measure copy, registration and lookup costs; print the minimum reuse
    /// that makes registering a send buffer pay (per size) and save the
    /// figures zero-copy eager sends use.
    #[command(
        long_about = "Measures, per message size, the cost of one copy (C) and of registering plus deregistering the pages the message spans (R), and the lookup overhead of the reuse tracker and registration cache (V). A buffer of size m pays for its registration after n > R / (C - V) sends; sizes where V >= C never do. The figures are saved to $RMX_CALIBRATION, else $XDG_CONFIG_HOME/rmx/calibration.json, else ~/.config/rmx/calibration.json, and used by --eager-reuse on and `rmx bench eager-reuse`."
    )]
    Calibrate {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
        /// Measure and print, but do not save.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// One-way latency (half round trip) beside the bare shared-memory floor.
    Pingpong {
        #[command(flatten)]
        args: BenchArgs,
        /// Rendezvous for sizes above the eager threshold; `all` measures
        /// each [default: the transport's choice; with --rndv the sizes run
        /// to 4 MiB].
        #[arg(long, value_enum)]
        rndv: Option<RndvSel>,
        /// Send frequently used buffers zero-copy (registered, gathered by the
        /// NIC) instead of copying them into a bounce slot.
        #[arg(long, value_enum, default_value_t = OnOff::Off)]
        eager_reuse: OnOff,
    },
    /// Ping-pong with eager zero-copy of reused buffers off and on, alternating
    /// in one run, beside the bound one saved copy sets (128 B - 8 KiB).
    EagerReuse(BenchArgs),
    /// Latency of barrier, allreduce, reduce_scatter (256 B) and allgather
    /// (256 B a rank) at 2, 4, 8, … ranks up to --ranks, ranks as threads
    /// (the fence paper's Table 1). On eth give --iface (lo, or any
    /// interface: in-process ranks share it).
    #[command(
        long_about = "Latency of the collectives the fence designs are built on, as the fence paper's Table 1 reports them: barrier (dissemination), allreduce of 256 B (recursive doubling), reduce_scatter of a 256-byte vector (each rank's block its part) and allgather of 256 B a rank (Bruck), at 2, 4, 8, ... ranks up to --ranks (and --ranks itself). Ranks are threads of this process; each collective runs --iters times (default 1000) after --warmup, and the time per collective is rank 0's, between barriers. On eth give --iface (lo, or any interface: the in-process ranks share it, talking through rmx's local path between endpoints of one host)."
    )]
    Collectives {
        #[command(flatten)]
        args: BenchArgs,
        /// The largest group [default: 8; 1024 with --sim].
        #[arg(long)]
        ranks: Option<u16>,
        /// In virtual time: the core's schedules over a LogGP model of an
        /// InfiniBand DDR network, for groups this machine cannot run.
        #[arg(long)]
        sim: bool,
    },
    /// Overlap of a put with computation before the closing fence, by
    /// design (the fence paper's Fig. 6): 1 B - 1 MiB, two ranks.
    #[command(
        long_about = "Overlap of one-sided communication with computation, as the fence paper's section 4.2.1 measures it (Fig. 6): each of two ranks puts one message to the other between two fences, with a computation inserted after the put and before the closing fence. l0 is the epoch without computation; the computation grows by 10% of l0 until the epoch reaches 1.1 l0, and the last step below that gives the overlap ratio (c - (l - l0)) / l0, as `rmx bench overlap` defines it. Sizes 1 B - 1 MiB; each time is the median of --iters epochs (default 100). The put reads the origin buffer in place (as MPI_Put). The deferred design moves the data inside the fence, so it is expected to overlap nothing; the immediate designs (naive, opt, ri; RDMA transports) move it during the computation."
    )]
    FenceOverlap {
        #[command(flatten)]
        args: BenchArgs,
        /// def, naive, opt, ri, or all (every design the transport offers).
        #[arg(long, default_value = "all")]
        design: String,
    },
    /// Time per epoch closed by a fence, by design and pattern (the fence
    /// paper's Figs. 7-10), beside a bare barrier.
    #[command(
        long_about = "Time per one-sided epoch closed by a fence, as the fence paper's section 4.2 measures it: --pattern zero (a fence alone, Fig. 7), single (one 16-byte put to the next rank, Fig. 8), neighbours (16-byte puts to up to 8 neighbours, Fig. 9), halo4 and halo8 (puts of each size from --min-size to --max-size to 4 or 8 neighbours beside a 20 us computation, Fig. 10; rows give iteration_us), or all. A bare barrier is measured first as the reference. Ranks are threads of this process, at 2, 4, ... up to --ranks. --design def is the deferred design (operations sent as two-sided messages inside the closing fence; every transport); naive, opt and ri are the immediate designs (puts and gets as RDMA when issued; finish messages and all-pairs flags, finish messages and a barrier, or writes with immediate counted by the target, an allreduce of counts and a barrier), on transports with RDMA (loop); all runs every design the transport offers."
    )]
    Fence {
        #[command(flatten)]
        args: BenchArgs,
        /// def (deferred, two-sided), naive, opt, ri, or all.
        #[arg(long, default_value = "all")]
        design: String,
        /// zero, single, neighbours, halo4, halo8, or all.
        #[arg(long, default_value = "all")]
        pattern: String,
        /// The largest group [default: 4; 1024 with --sim].
        #[arg(long)]
        ranks: Option<u16>,
        /// In virtual time: all four designs as the paper composes them, the
        /// core's collective schedules over a LogGP model of an InfiniBand
        /// DDR network, for groups this machine cannot run.
        #[arg(long)]
        sim: bool,
    },
    /// Buffer i of N sent i times (reuse 1..N), buffers packed back to back or
    /// one per page: improvement of zero-copy over copy per size and layout.
    Spectrum {
        #[command(flatten)]
        args: BenchArgs,
        /// Buffers in the spectrum (N·(N+1)/2 round trips per size, layout and mode).
        #[arg(long, default_value_t = 1000)]
        buffers: usize,
        /// Also write the improvement curves as an SVG plot here.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Windows of 64 non-blocking sends, then an ack: MB/s (and messages/s)
    /// per send-queue configuration (the paper's 200, 5, 5 + coalescing and
    /// 10 + coalescing WQEs unless --wqes/--coalesce choose).
    Bw(RateArgs),
    /// Windows of 64 non-blocking sends, then an ack: messages/s (and MB/s)
    /// per send-queue configuration, as `bw`.
    #[command(
        long_about = "Uni-directional message rate, osu_bw style: the sender posts a window of 64 non-blocking sends, the receiver acknowledges the window, repeated. Each connection may have --wqes sends outstanding (its send work-queue entries); with --coalesce on, messages that find every entry in use are packed into one queued send (at most half a buffer each), and with --header-cache on a message matching the previous one's context, tag and size carries a one-byte marker instead of its header. Without --wqes and --coalesce the paper's four configurations run, alternating in one run: 200 WQEs, 5 WQEs, 5 WQEs + coalescing, 10 WQEs + coalescing. --header-cache both compares the marker on and off (default sizes 8-512 B)."
    )]
    Msgrate(RateArgs),
    /// Computation hidden behind a non-blocking send or receive (overlap
    /// ratio), per rendezvous, with and without the progress thread.
    #[command(
        long_about = "Overlap, by the method of Rashti and Afsahi: a synchronous non-blocking send (--side send) or a non-blocking receive (--side recv), a computation, then the wait. l0 is the communication time without computation; the computation c grows by 10% of l0 per step until the communication time l reaches 1.1 l0, and the last step below that gives the overlap ratio (c - (l - l0)) / l0. Sizes 1 B - 1 MiB; above the eager threshold once per rendezvous (--rndv, default all three) and with and without a progress thread (--progress-thread, default both). Each time is the median of --iters repetitions (default 100)."
    )]
    Overlap(OverlapArgs),
    /// Whether a pending send or receive moves during a computation
    /// longer than its latency: the work left after the delay.
    #[command(
        long_about = "Progress, by the method of Rashti and Afsahi: the sender (--side send) starts a non-blocking send and computes for a delay longer than the message latency before waiting, while the receiver's blocking receive is timed; or the receiver (--side recv) posts a non-blocking receive and computes for the delay, watching its buffer for the data, then waits. post_delay_fraction = (latency - delay) / l0: near 0 when the transfer progressed on its own, near 1 when it all waited for the delay to end. Delays are 2 and 5 times l0 (at least 20 us). Each latency is the median of --iters repetitions (default 100)."
    )]
    Progress(OverlapArgs),
    /// Every benchmark; writes tables, JSON and SVG plots into a folder.
    Suite {
        /// Folder for the report (created if missing).
        #[arg(long, default_value = "rmx-report")]
        out: PathBuf,
        /// Timed iterations per size.
        #[arg(long, default_value_t = 10_000)]
        iters: u64,
        /// loop, or eth: the eth benchmarks (pingpong, msgrate and bw beside
        /// their floors, PULL to 4 MiB, overlap and progress, and a run with
        /// 1% loss and 5% reordering) over a lab made for the run (root).
        #[arg(long, default_value = "loop")]
        transport: String,
        /// eth: use this interface instead of a lab.
        #[arg(long)]
        iface: Option<String>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum OnOff {
    On,
    Off,
}

/// A rendezvous to measure, or all of them.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum RndvSel {
    Rput,
    Rget,
    Pull,
    All,
}

impl RndvSel {
    fn protocols(sel: Option<RndvSel>) -> Vec<rmx_core::Protocol> {
        use rmx_core::Protocol::*;
        match sel {
            None | Some(RndvSel::All) => vec![Rput, Rget, Pull],
            Some(RndvSel::Rput) => vec![Rput],
            Some(RndvSel::Rget) => vec![Rget],
            Some(RndvSel::Pull) => vec![Pull],
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum SideSel {
    Send,
    Recv,
}

/// Options of `overlap` and `progress`.
#[derive(Args, Clone)]
struct OverlapArgs {
    #[command(flatten)]
    args: BenchArgs,
    /// The side measured: the sender's non-blocking send or the receiver's
    /// non-blocking receive.
    #[arg(long, value_enum, default_value_t = SideSel::Send)]
    side: SideSel,
    /// Rendezvous above the eager threshold [default: all three].
    #[arg(long, value_enum)]
    rndv: Option<RndvSel>,
    /// A progress thread per rank drives the endpoint during the
    /// computation [default: both, off then on].
    #[arg(long, value_enum)]
    progress_thread: Option<OnOff>,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum OnOffBoth {
    On,
    Off,
    Both,
}

#[derive(Subcommand)]
enum LabCmd {
    /// Make namespaces rmx0 … rmxN-1, each with interface rmxeth.
    Up {
        /// Ranks (namespaces).
        #[arg(long, default_value_t = 2)]
        ranks: u16,
        /// Interface MTU in bytes.
        #[arg(long, default_value_t = 9000)]
        mtu: u32,
        /// Per cent of frames each interface drops.
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// Per cent of frames each interface sends twice.
        #[arg(long, default_value_t = 0.0)]
        dup: f64,
        /// Per cent of frames each interface sends at once while the rest
        /// wait --delay (needs --delay).
        #[arg(long, default_value_t = 0.0)]
        reorder: f64,
        /// Microseconds added to every frame.
        #[arg(long, default_value_t = 0)]
        delay: u64,
    },
    /// Remove the lab's namespaces (and so its interfaces).
    Down,
    /// The lab's namespaces, their interface's state, MTU and qdisc.
    Status {
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start CMD once in each namespace of the lab as one job of MPICH's
    /// hydra: runs `mpiexec.hydra -n 1 ip netns exec rmx0 CMD : -n 1 ip netns
    /// exec rmx1 CMD …` (hydra's MPMD form), so the ranks find each other
    /// through PMI. Example: rmx lab exec -- rmx bench pingpong
    /// --transport eth --iface rmxeth
    Exec {
        /// The command and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
        /// Print the mpiexec.hydra command line instead of running it.
        #[arg(long)]
        dry_run: bool,
    },
}

fn lab(cmd: LabCmd) -> Result<(), String> {
    use rmx_linux::lab::{Lab, LabSpec, IFACE};
    match cmd {
        LabCmd::Up {
            ranks,
            mtu,
            loss,
            dup,
            reorder,
            delay,
        } => {
            let spec = LabSpec {
                ranks,
                mtu,
                loss,
                dup,
                reorder,
                delay_us: delay,
                ..LabSpec::default()
            };
            Lab::up(&spec)?;
            println!(
                "lab up: {ranks} ranks in namespaces {}0 … {}{}, interface {IFACE}, MTU {mtu}",
                spec.prefix,
                spec.prefix,
                ranks - 1
            );
            Ok(())
        }
        LabCmd::Down => {
            let n = Lab::down(&LabSpec::default())?;
            println!("lab down: {n} namespaces removed");
            Ok(())
        }
        LabCmd::Exec { cmd, dry_run } => {
            let ranks = Lab::status(&LabSpec::default())?;
            if ranks.is_empty() {
                return Err("no lab is up: make one with `sudo rmx lab up`".into());
            }
            let mut args: Vec<String> = Vec::new();
            for (i, r) in ranks.iter().enumerate() {
                if i > 0 {
                    args.push(":".into());
                }
                args.extend(["-n", "1", "ip", "netns", "exec", &r.netns].map(String::from));
                args.extend(cmd.iter().cloned());
            }
            if dry_run {
                println!("{} {}", rmx_linux::pmi::HYDRA, args.join(" "));
                return Ok(());
            }
            let hydra = rmx_linux::pmi::HYDRA;
            let st = std::process::Command::new(hydra)
                .args(&args)
                .status()
                .map_err(|e| format!("cannot run {hydra}: {e} (install Debian's mpich)"))?;
            if st.success() {
                Ok(())
            } else {
                Err(format!("the job ended with {st}"))
            }
        }
        LabCmd::Status { json } => {
            let st = Lab::status(&LabSpec::default())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&st).expect("json"));
            } else if st.is_empty() {
                println!("no lab is up (`rmx lab up` makes one)");
            } else {
                for r in st {
                    let state = if r.up { "up" } else { "down" };
                    println!(
                        "{:<8} {IFACE} {state:<5} mtu {:<6} {}",
                        r.netns, r.mtu, r.qdisc
                    );
                }
            }
            Ok(())
        }
    }
}

#[derive(Subcommand)]
enum ModelCmd {
    /// Per-process memory of a fully connected job as it grows, from rmx's
    /// bytes per connection, beside the coalescing paper's MVAPICH figures.
    Memory {
        /// Largest job size: rows for 1, 2, 4, ... up to this many processes.
        #[arg(long, default_value_t = 16384)]
        procs: u64,
        /// Send work-queue entries per connection [default: the paper's 5, 10,
        /// 20, 40, 100 and 200].
        #[arg(long)]
        wqes: Option<u16>,
        /// Buffers of the shared receive pool, where unexpected messages
        /// also wait (credits are lent from it, not reserved per peer)
        /// [default: the loop transport's SRQ depth].
        #[arg(long)]
        rx_buffers: Option<u32>,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write per-process memory against job size as an SVG plot here.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
}

/// Options of the streaming benchmarks (`bw`, `msgrate`).
#[derive(Args, Clone)]
struct RateArgs {
    #[command(flatten)]
    args: BenchArgs,
    /// Send work-queue entries per connection (outstanding sends).
    #[arg(long)]
    wqes: Option<u16>,
    /// Pack messages that find every send entry in use into one send.
    #[arg(long, value_enum)]
    coalesce: Option<OnOff>,
    /// Coalesce once this many sends are outstanding on the connection, even
    /// with entries free (MVAPICH2's threshold), instead of once all are in use.
    #[arg(long)]
    coalesce_after: Option<u16>,
    /// One-byte marker for a packed message whose matching information
    /// equals the previous one's; `both` compares on and off.
    #[arg(long, value_enum, default_value_t = OnOffBoth::On)]
    header_cache: OnOffBoth,
    /// Rendezvous for sizes above the eager threshold; `all` compares the
    /// three (with the default send queue unless --wqes/--coalesce say) and
    /// runs the sizes to 4 MiB.
    #[arg(long, value_enum)]
    rndv: Option<RndvSel>,
}

/// How the eth transport receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RxSel {
    Ring,
    Recvmmsg,
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// Transport to measure: loop (in-process software NIC) or eth (raw
    /// Ethernet frames; needs root or CAP_NET_RAW).
    #[arg(long, default_value = "loop")]
    transport: String,
    /// eth: the interface every rank opens. Without it rmx makes a lab of
    /// two network namespaces joined by a veth pair for the run, one rank
    /// in each, and removes it afterwards (also on failure and Ctrl-C).
    /// Ranks on one interface of one host (threads, or processes of a
    /// launcher) talk through rmx's local path; on `lo` through the wire.
    #[arg(long)]
    iface: Option<String>,
    /// eth, lab made for the run: its interfaces' MTU [default: 9000].
    #[arg(long)]
    mtu: Option<u32>,
    /// eth: per cent of received frames the transport drops (injected on
    /// receive, seeded, so it works where the kernel has no netem).
    #[arg(long)]
    loss: Option<f64>,
    /// eth: per cent of received frames the transport delivers twice.
    #[arg(long)]
    dup: Option<f64>,
    /// eth: per cent of received frames delivered after the next one.
    #[arg(long)]
    reorder: Option<f64>,
    /// Largest message sent eagerly as fragments of one packet each
    /// (Open-MX's medium messages), above it by rendezvous; 0 turns them
    /// off [default: 32768 on eth, 0 on loop, whose RDMA rendezvous
    /// copies nothing].
    #[arg(long, value_name = "BYTES")]
    medium_max: Option<u32>,
    /// eth: how frames come in: a PACKET_MMAP ring (no system call to
    /// poll) or batched recvmmsg [default: ring].
    #[arg(long, value_enum)]
    rx: Option<RxSel>,
    /// Smallest message size in bytes [default: 1; 128 for eager-reuse and
    /// spectrum, where copies below it are too cheap to save].
    #[arg(long)]
    min_size: Option<usize>,
    /// Largest message size in bytes [default: 8192, the end of the eager
    /// range; 4 MiB with --rndv; 1 MiB for overlap and progress; 512 for
    /// --header-cache both].
    #[arg(long)]
    max_size: Option<usize>,
    /// Timed iterations per size (after the warm-up) [default: 10000; 100
    /// repetitions per step for overlap and progress].
    #[arg(long)]
    iters: Option<u64>,
    /// Untimed warm-up iterations per size [default: a tenth of --iters].
    #[arg(long)]
    warmup: Option<u64>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

const TRANSPORTS: [(&str, bool, &str); 3] = [
    (
        "loop",
        true,
        "in-process software NIC with verbs semantics (default)",
    ),
    (
        "eth",
        true,
        "raw Ethernet frames over AF_PACKET (needs root or CAP_NET_RAW)",
    ),
    (
        "verbs",
        false,
        "rdma-core verbs RC queue pairs: not in this build yet",
    ),
];

fn check_transport(t: &str) -> Result<(), String> {
    match TRANSPORTS.iter().find(|x| x.0 == t) {
        Some((_, true, _)) => Ok(()),
        Some((name, false, why)) => Err(format!(
            "transport `{name}` is not available ({why}); run with --transport loop, or see `rmx info`"
        )),
        None => Err(format!(
            "unknown transport `{t}`; choose one of: loop, eth, verbs (see `rmx info`)"
        )),
    }
}

/// The largest eager message: where the benchmarks' sizes end by default.
const EAGER_END: usize = 8192;
/// Where sizes end with a rendezvous selected.
const RNDV_END: usize = 4 << 20;
/// The largest size a benchmark accepts (a window of 64 buffers of it is allocated).
const SIZE_LIMIT: usize = 64 << 20;

/// The largest `--medium-max`.
const MEDIUM_LIMIT: u32 = 1 << 20;

/// The core's configuration for a benchmark: the default with what its
/// options change.
fn bench_config(a: &BenchArgs) -> rmx_core::Config {
    rmx_core::Config {
        medium_max: a.medium_max.or(rmx_linux::rank::loop_config().medium_max),
        ..rmx_linux::rank::loop_config()
    }
}

/// The most repetitions a benchmark takes: buffers of results are sized by it.
const ITERS_LIMIT: u64 = 1_000_000_000;
/// The most buffers `bench spectrum` takes (buffer i is sent i times, so the
/// run grows with the square of it).
const BUFFERS_LIMIT: usize = 10_000;
/// The largest job `model memory` describes: ranks are 16-bit.
const PROCS_LIMIT: u64 = 1 << 16;
/// The largest receive pool `rmx model memory` models (16 GiB of 8 KiB buffers).
const RX_BUFFERS_LIMIT: u32 = 1 << 21;

fn check_iters(iters: u64) -> Result<(), String> {
    if iters == 0 || iters > ITERS_LIMIT {
        return Err(format!(
            "--iters must be between 1 and {ITERS_LIMIT} (got {iters})"
        ));
    }
    Ok(())
}

/// The run's options; `sizes` are the benchmark's default smallest and
/// largest sizes.
fn opts(a: &BenchArgs, sizes: (usize, usize)) -> Result<Opts, String> {
    opts_iters(a, sizes, 10_000)
}

/// [`opts`] with the benchmark's default iteration count.
fn opts_iters(a: &BenchArgs, sizes: (usize, usize), iters: u64) -> Result<Opts, String> {
    check_transport(&a.transport)?;
    let min_size = a.min_size.unwrap_or(sizes.0);
    let max_size = a.max_size.unwrap_or(sizes.1);
    if min_size > max_size {
        return Err(format!(
            "--min-size {min_size} is larger than --max-size {max_size}"
        ));
    }
    if max_size > SIZE_LIMIT {
        return Err(format!(
            "--max-size {max_size} is above the benchmarks' limit of {SIZE_LIMIT} bytes"
        ));
    }
    if let Some(m) = a.medium_max.filter(|&m| m > MEDIUM_LIMIT) {
        return Err(format!(
            "--medium-max {m} is above {MEDIUM_LIMIT}: fragments are copied through the receive pool; larger messages belong to a rendezvous"
        ));
    }
    let iters = a.iters.unwrap_or(iters);
    check_iters(iters)?;
    let warmup = a.warmup.unwrap_or(iters / 10);
    if warmup > ITERS_LIMIT {
        return Err(format!(
            "--warmup {warmup} is above the limit of {ITERS_LIMIT}"
        ));
    }
    Ok(Opts {
        transport: a.transport.clone(),
        min_size,
        max_size,
        iters,
        warmup,
        eager_reuse: None,
        quiet: a.json,
    })
}

fn two_ranks(started: &str) -> String {
    format!("this benchmark has 2 ranks, the launcher started {started}: use mpiexec.hydra -n 2")
}

/// `loop` with its default settings.
fn loop_net() -> Net {
    Net::Loop(LoopConfig::default())
}

/// The network a benchmark runs on, and the lab made for it (removed when
/// dropped). `launchable`: the benchmark also runs as one rank per process
/// under a PMI launcher (`mpiexec -n 2 rmx bench …`).
fn network(a: &BenchArgs, launchable: bool) -> Result<(Net, Option<TempLab>), String> {
    // Checked before PMI is touched: a rank that connected and then left
    // makes the launcher kill the others at once, message or not.
    let launched = std::env::var_os("PMI_FD").is_some() || std::env::var_os("PMI_PORT").is_some();
    if launched {
        if !launchable {
            return Err("this benchmark runs its ranks as threads of one process; start it without a launcher (pingpong, msgrate and bw run under a launcher)".into());
        }
        if a.transport != "eth" || a.iface.is_none() {
            return Err("under a launcher each process is one rank: give --transport eth --iface IF (the interface to use, e.g. lo, or each namespace's with `ip netns exec`)".into());
        }
        // PMI_SIZE is set in PMI_FD mode; with PMI_PORT the size comes
        // with the handshake and is checked below.
        if let Ok(size) = std::env::var("PMI_SIZE") {
            if size.trim() != "2" {
                return Err(two_ranks(size.trim()));
            }
        }
    }
    let eth_only = [
        ("--iface", a.iface.is_some()),
        ("--mtu", a.mtu.is_some()),
        ("--loss", a.loss.is_some()),
        ("--dup", a.dup.is_some()),
        ("--reorder", a.reorder.is_some()),
        ("--rx", a.rx.is_some()),
    ];
    if a.transport != "eth" {
        if let Some((name, _)) = eth_only.iter().find(|x| x.1) {
            return Err(format!("{name} applies to --transport eth only"));
        }
        return Ok((Net::Loop(LoopConfig::default()), None));
    }
    let faults = rmx_linux::eth::Faults::percent(
        a.loss.unwrap_or(0.0),
        a.dup.unwrap_or(0.0),
        a.reorder.unwrap_or(0.0),
        0x5eed,
    )?;
    let opts = rmx_linux::eth::EthOpts {
        faults,
        rx_ring: a.rx != Some(RxSel::Recvmmsg),
        ..Default::default()
    };
    if let Some(iface) = &a.iface {
        if a.mtu.is_some() {
            return Err("--mtu sets the MTU of a lab rmx makes; with --iface the interface's own MTU is used".into());
        }
        // Opened once here so that a wrong name or missing privilege is a
        // sentence, not a failed rank thread (and before PMI is touched).
        rmx_linux::eth::RawSocket::open(iface, rmx_core::wire::frame::ETHERTYPE, false).map_err(|e| {
            format!("cannot open interface {iface:?} for raw frames: {e} (it needs root or CAP_NET_RAW; `ip link` lists the interfaces)")
        })?;
        let launch = rmx_linux::pmi::Pmi::from_env()
            .map_err(|e| format!("started by a launcher, but its PMI failed: {e}"))?
            .map(Launch::new);
        if let Some(l) = &launch {
            if l.size() != 2 {
                return Err(two_ranks(&l.size().to_string()));
            }
        }
        let net = EthNet {
            iface: iface.clone(),
            netns: Vec::new(),
            opts,
            launch,
        };
        return Ok((Net::Eth(net), None));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("--transport eth without --iface makes a lab of network namespaces, which needs root: run with sudo, or give --iface IF on an interface you may open (e.g. --iface lo with CAP_NET_RAW)".into());
    }
    let spec = LabSpec {
        prefix: format!("rmxb{}", std::process::id()),
        mtu: a.mtu.unwrap_or(9000),
        ..LabSpec::default()
    };
    spec.check()?;
    let lab = TempLab::up(spec)?;
    let net = EthNet {
        iface: rmx_linux::lab::IFACE.into(),
        netns: (0..2).map(|r| lab.spec().netns(r)).collect(),
        opts,
        launch: None,
    };
    Ok((Net::Eth(net), Some(lab)))
}

/// The calibration zero-copy runs with, once the monitor it needs is up.
fn reuse_ready() -> Result<rmx_linux::reuse::Calibration, String> {
    rmx_linux::monitor::Monitor::global()
        .map_err(|e| format!("zero-copy eager sends need the invalidation monitor: {e}"))?;
    let (cal, saved) = rmx_linux::reuse::Calibration::load()?;
    if !saved {
        eprintln!("rmx: using default cost figures; run `rmx calibrate` to measure this machine's");
    }
    Ok(cal)
}

/// Under a launcher only rank 0 shows progress.
fn quiet_off_rank0(o: Opts, net: &Net) -> Opts {
    match net.launch() {
        Some(l) if l.rank() != 0 => Opts { quiet: true, ..o },
        _ => o,
    }
}

/// Prints the report, on rank 0 only when a launcher started the ranks,
/// and tells the launcher this rank is done.
fn emit_rank0(net: &Net, r: &Report, json: bool) -> Result<(), String> {
    match net.launch() {
        Some(l) => {
            if l.rank() == 0 {
                emit(r, json);
            }
            l.finalize()
        }
        None => {
            emit(r, json);
            Ok(())
        }
    }
}

fn emit(r: &Report, json: bool) {
    if json {
        println!("{}", r.json());
    } else {
        print!("{}", r.table());
    }
}

fn info(json_out: bool) {
    let cfg = rmx_linux::rank::loop_config();
    let nic = LoopConfig::default();
    let costs = rmx_linux::model::Costs::of(cfg.send_wqes, cfg.eager_threshold, &nic);
    let doc = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "cores": rmx_linux::clock::cores(),
        "transports": TRANSPORTS.iter().map(|(n, a, d)| json!({"name": n, "available": a, "about": d})).collect::<Vec<_>>(),
        "config": {
            "eager_threshold": cfg.eager_threshold,
            "medium_max": rmx_core::config::MEDIUM_MAX,
            "keepalive_ns": cfg.keepalive_ns,
            "peer_timeout_ns": cfg.peer_timeout_ns,
            "fence_designs": {
                "loop": Net::Loop(Default::default()).designs().iter().map(|d| d.name()).collect::<Vec<_>>(),
                "eth": Design::ALL.iter().filter(|d| d.offered(&rmx_linux::eth::CAPS)).map(|d| d.name()).collect::<Vec<_>>(),
            },
            "credits": cfg.credits,
            "credit_return": cfg.credit_return,
            "rx_buffers": nic.srq_depth,
            "rx_reserve": cfg.rx_reserve,
            "send_wqes": cfg.send_wqes,
            "coalesce": format!("{:?}", cfg.coalesce),
            "header_cache": cfg.header_cache,
            "header_bytes": rmx_core::wire::HEADER_LEN,
            "wire_version": rmx_core::wire::VERSION,
            "loop": nic,
        },
        "endpoint_bytes": costs.core_fixed,
        "peer_bytes": CoreEndpoint::PEER_BYTES,
        "per_connection_bytes": costs.per_connection(),
        "shared_bytes": costs.shared(),
        "receive_pool_bytes": costs.receive_pool,
        "send_slot_bytes": costs.send_slots,
        "core_fixed_bytes": costs.core_fixed,
        "dominant": costs.dominant(),
        "reuse_bytes": rmx_linux::reuse::policy_bytes(),
        "copy": copy_choice_json(),
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return;
    }
    println!(
        "rmx {}  ({} cores)",
        env!("CARGO_PKG_VERSION"),
        doc["cores"]
    );
    println!("transports:");
    for (n, a, d) in TRANSPORTS {
        println!(
            "  {n:<6} {:<12} {d}",
            if a { "available" } else { "unavailable" }
        );
    }
    println!("configuration:");
    println!("  eager threshold   {} bytes", cfg.eager_threshold);
    println!(
        "  medium messages   up to {} bytes as fragments on transports without RDMA (eth)",
        rmx_core::config::MEDIUM_MAX
    );
    println!("  fence designs     def, naive, opt, ri on loop (RDMA, write with immediate); def on eth (no RDMA)");
    println!(
        "  liveness          lossy transports ping a silent peer awaited for {} ms; given up after {} ms without any answer",
        cfg.keepalive_ns / 1_000_000,
        cfg.peer_timeout_ns / 1_000_000
    );
    println!(
        "  credits           a share of the {}-buffer receive pool per peer, up to {} more lent on request (returned after {})",
        nic.srq_depth, cfg.credits, cfg.credit_return
    );
    println!(
        "  send entries      {} per connection, coalescing {:?}, header cache {}",
        cfg.send_wqes,
        cfg.coalesce,
        if cfg.header_cache { "on" } else { "off" }
    );
    println!(
        "  header            {} bytes, wire version {}",
        rmx_core::wire::HEADER_LEN,
        rmx_core::wire::VERSION
    );
    println!(
        "  loop NIC          SRQ {} x {} B, SQ depth {}, inline up to {} B",
        nic.srq_depth, nic.buf_size, nic.sq_depth, nic.inline_max
    );
    println!("memory (core, from the types):");
    println!("  endpoint_bytes    {}", costs.core_fixed);
    println!("  peer_bytes        {}", CoreEndpoint::PEER_BYTES);
    println!(
        "  per connection    {} bytes (peer state, {} send entries, NIC state; dominant: {})",
        costs.per_connection(),
        cfg.send_wqes,
        costs.dominant()
    );
    println!(
        "  shared            {} bytes (receive pool {}, send slots {}, endpoint {})",
        costs.shared(),
        costs.receive_pool,
        costs.send_slots,
        costs.core_fixed
    );
    println!(
        "  reuse_bytes       {} (zero-copy tracker storage, per rank, outside the endpoint)",
        rmx_linux::reuse::policy_bytes()
    );
    let e = rmx_linux::copy::engine();
    println!(
        "copy engine ({}; up to 32 bytes inline):",
        match e.origin() {
            rmx_linux::copy::Origin::Calibration => "from the saved calibration",
            rmx_linux::copy::Origin::Measured =>
                "measured at start-up; `rmx calibrate` measures longer",
        }
    );
    for (k, (lo, hi, r)) in copy_classes().into_iter().enumerate() {
        let last = k + 1 == rmx_linux::copy::CLASSES;
        let upto = if last {
            "and above".to_string()
        } else {
            format!("to {}", human(hi))
        };
        println!("  {:>8} {:<11} {}", human(lo), upto, r.name());
    }
}

/// The copy engine's classes: (smallest, largest, routine).
fn copy_classes() -> Vec<(usize, usize, rmx_linux::copy::Routine)> {
    use rmx_linux::copy::{class_size, engine};
    engine()
        .routines()
        .iter()
        .enumerate()
        .map(|(c, &r)| {
            let lo = if c == 0 { 33 } else { class_size(c - 1) + 1 };
            (lo, class_size(c), r)
        })
        .collect()
}

fn copy_choice_json() -> serde_json::Value {
    let e = rmx_linux::copy::engine();
    json!({
        "origin": format!("{:?}", e.origin()).to_lowercase(),
        "inline_up_to": 32,
        "classes": copy_classes().into_iter().map(|(lo, hi, r)| json!({"from": lo, "to": hi, "routine": r.name()})).collect::<Vec<_>>(),
    })
}

/// `n` bytes as the tables print sizes (B, KiB, MiB).
fn human(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// Prints a suite member's table, writes `{name}.json`, and adds its section
/// (table and `{name}.svg`, which the caller draws) to the report.
fn record(out: &std::path::Path, md: &mut String, name: &str, r: &Report) -> Result<(), String> {
    println!("{}", r.table());
    let file = format!("{name}.json");
    std::fs::write(out.join(&file), r.json()).map_err(|e| format!("cannot write {file}: {e}"))?;
    md.push_str(&format!(
        "## {name}\n\n```\n{}```\n\n![{name}]({name}.svg)\n\n",
        r.table()
    ));
    Ok(())
}

/// The report without links to plots that were not drawn (a table whose
/// curve says nothing more gets none).
fn without_missing_plots(out: &std::path::Path, md: &str) -> String {
    md.lines()
        .filter(|l| {
            let file = l
                .strip_prefix("![")
                .and_then(|l| l.split_once("]("))
                .map(|(_, f)| f.trim_end_matches(')'));
            file.is_none_or(|f| out.join(f).exists())
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The suite's options: the eager sizes, `iters` per size.
fn suite_opts(transport: &str, iters: u64) -> Opts {
    Opts {
        transport: transport.into(),
        min_size: 1,
        max_size: EAGER_END,
        iters,
        warmup: (iters / 10).max(100),
        eager_reuse: None,
        quiet: false,
    }
}

fn suite(out: &std::path::Path, iters: u64) -> Result<(), String> {
    check_iters(iters)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let o = suite_opts("loop", iters);
    let mut md = String::from("# rmx benchmark report\n\n");
    let cfg = rmx_linux::rank::loop_config();
    let r = bench::pingpong::run(&o, cfg, &loop_net(), &[]);
    record(out, &mut md, "pingpong", &r)?;
    r.svg(
        &out.join("pingpong.svg"),
        &[
            ("latency_us", "rmx latency"),
            ("floor_us", "shared-memory floor"),
        ],
        "one-way latency (us)",
    )?;
    // One streaming run serves both the message-rate and the bandwidth plot.
    let setups = bench::rate::Setup::PAPER;
    let r = bench::rate::run("msgrate", &o, cfg, &loop_net(), &setups);
    record(out, &mut md, "msgrate", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("msgrate.svg"))?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw.svg"))?;
    md.push_str("![bw](bw.svg)\n\n");
    let cache = [
        bench::rate::Setup::new(5, true),
        bench::rate::Setup {
            header_cache: false,
            ..bench::rate::Setup::new(5, true)
        },
    ];
    let small = Opts {
        min_size: 8,
        max_size: 512,
        ..o.clone()
    };
    let r = bench::rate::run("header-cache", &small, cfg, &loop_net(), &cache);
    record(out, &mut md, "header-cache", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("header-cache.svg"))?;
    large_messages(out, &mut md, &o)?;
    let r = memory_report(8192, &[5, 10, 200], LoopConfig::default(), true);
    record(out, &mut md, "memory", &r)?;
    memory_plot(&r, &out.join("memory.svg"))?;
    // Zero-copy eager sends of reused buffers, where the monitor they need runs.
    match reuse_ready() {
        Ok(cal) => {
            let o = Opts {
                min_size: 128,
                ..o.clone()
            };
            let cfg = rmx_linux::rank::loop_config();
            let r = bench::eager_reuse::run(&o, cfg, &loop_net(), &cal);
            record(out, &mut md, "eager-reuse", &r)?;
            r.svg_linear(
                &out.join("eager-reuse.svg"),
                &[
                    ("improvement_pct", "measured improvement"),
                    ("theoretical_pct", "one copy / copy-path latency"),
                ],
                "latency improvement (%)",
            )?;
            let r = bench::spectrum::run(&o, cfg, &loop_net(), &cal, 1000);
            record(out, &mut md, "spectrum", &r)?;
            bench::spectrum::plot(&r, &out.join("spectrum.svg"))?;
        }
        Err(e) => {
            eprintln!("rmx: skipping eager-reuse and spectrum: {e}");
            md.push_str(&format!("## eager-reuse, spectrum\n\nNot run: {e}\n\n"));
        }
    }
    // One-sided: the collectives the fences use, and the deferred fence.
    let few = Opts {
        iters: (iters / 10).max(100),
        warmup: 20,
        min_size: 16,
        max_size: 4096,
        ..o.clone()
    };
    let r = bench::collectives::run(&few, cfg, &[2, 4], |_| loop_net());
    record(out, &mut md, "collectives", &r)?;
    let path = out.join("collectives.svg");
    r.svg_by_ranks(&path, "collective", "latency_us", |_| true, "latency (us)")?;
    let all = Design::ALL;
    let r = bench::fence::run(
        &few,
        cfg,
        &[2, 4],
        &all,
        &bench::fence::PATTERNS,
        &loop_net(),
    );
    record(out, &mut md, "fence", &r)?;
    // One 16-byte put to the next rank (Fig. 8), beside the barrier.
    let keep = |row: &serde_json::Value| row["pattern"] == "single" || row["design"] == "barrier";
    r.svg_by_ranks(
        &out.join("fence.svg"),
        "design",
        "fence_us",
        keep,
        "fence (us)",
    )?;
    // The shape at scale, in the model.
    let m = bench::sim::Model::IB_DDR;
    let sizes = group_sizes(None, 0, true)?;
    let r = bench::sim::collectives_report(&few, &m, &sizes);
    record(out, &mut md, "collectives-sim", &r)?;
    let y = "latency (us)";
    r.svg_by_ranks(
        &out.join("collectives-sim.svg"),
        "collective",
        "latency_us",
        |_| true,
        y,
    )?;
    let r = bench::sim::fence_report(&few, &m, &all, &["zero", "neighbours"], &sizes);
    record(out, &mut md, "fence-sim", &r)?;
    for p in ["zero", "neighbours"] {
        let path = out.join(format!("fence-sim-{p}.svg"));
        let keep = |row: &serde_json::Value| row["pattern"] == p || row["design"] == "barrier";
        r.svg_by_ranks(&path, "design", "fence_us", keep, "fence (us)")?;
        md.push_str(&format!("![fence {p}](fence-sim-{p}.svg)\n\n"));
    }
    md.push_str("![collectives](collectives-sim.svg)\n\n");
    let r = bench::fence::overlap(
        &Opts {
            iters: 20,
            min_size: 1,
            max_size: 1 << 20,
            ..few.clone()
        },
        cfg,
        &all,
        &loop_net(),
    );
    record(out, &mut md, "fence-overlap", &r)?;
    let (curves, names) = r.pivot("design", "overlap_ratio");
    let series: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), n.as_str())).collect();
    curves.svg_linear(&out.join("fence-overlap.svg"), &series, "overlap ratio")?;
    std::fs::write(out.join("report.md"), without_missing_plots(out, &md))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

/// The suite on `eth`: what the wire changes, each beside its floor.
fn suite_eth(out: &std::path::Path, iters: u64, iface: Option<String>) -> Result<(), String> {
    use rmx_core::Protocol;
    check_iters(iters)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let args = BenchArgs {
        transport: "eth".into(),
        iface,
        mtu: None,
        loss: None,
        dup: None,
        reorder: None,
        rx: None,
        medium_max: None,
        min_size: None,
        max_size: None,
        iters: Some(iters),
        warmup: None,
        json: false,
    };
    let (net, _lab) = network(&args, false)?;
    let o = suite_opts("eth", iters);
    let cfg = rmx_linux::rank::loop_config();
    let mut md = String::from("# rmx benchmark report: eth\n\n");
    let latency = |md: &mut String, name: &str, o: &Opts, net: &Net| -> Result<(), String> {
        let r = bench::pingpong::run(o, cfg, net, &[]);
        record(out, md, name, &r)?;
        r.svg(
            &out.join(format!("{name}.svg")),
            &[
                ("latency_us", "rmx latency"),
                ("p99_us", "rmx p99"),
                ("floor_us", "bare-frame floor"),
            ],
            "one-way latency (us)",
        )
    };
    // One packet and fragments, where the latency target lies.
    let small = Opts {
        max_size: 32 * 1024,
        ..o.clone()
    };
    latency(&mut md, "pingpong", &small, &net)?;
    let r = bench::rate::run("msgrate", &o, cfg, &net, &bench::rate::Setup::PAPER);
    record(out, &mut md, "msgrate", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("msgrate.svg"))?;
    let big = Opts {
        min_size: 65536,
        max_size: RNDV_END,
        ..o.clone()
    };
    latency(&mut md, "pingpong-pull", &big, &net)?;
    let pull = [bench::rate::Setup::new(10, true).rndv(Protocol::Pull)];
    let r = bench::rate::run(
        "bw",
        &Opts {
            min_size: 1,
            ..big.clone()
        },
        cfg,
        &net,
        &pull,
    );
    record(out, &mut md, "bw", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw.svg"))?;
    let ov = Opts {
        min_size: 1,
        max_size: 1 << 20,
        iters: (iters / 100).max(20),
        warmup: 10,
        ..o.clone()
    };
    for side in [bench::Side::Send, bench::Side::Recv] {
        let name = format!("overlap-{}", side.name());
        let r = bench::overlap::run(&ov, cfg, &net, side, &[Protocol::Pull], &[false, true]);
        record(out, &mut md, &name, &r)?;
        bench::overlap::plot(&r, &out.join(format!("{name}.svg")))?;
        let name = format!("progress-{}", side.name());
        let r = bench::progress::run(&ov, cfg, &net, side, &[Protocol::Pull], &[false, true]);
        record(out, &mut md, &name, &r)?;
        bench::progress::plot(&r, &out.join(format!("{name}.svg")))?;
    }
    // The same wire losing 1% of its frames and reordering 5%.
    let lossy = match &net {
        Net::Eth(e) => Net::Eth(EthNet {
            opts: rmx_linux::eth::EthOpts {
                faults: rmx_linux::eth::Faults::percent(1.0, 0.0, 5.0, 0x5eed)?,
                ..e.opts
            },
            ..e.clone()
        }),
        n => n.clone(),
    };
    latency(
        &mut md,
        "pingpong-lossy",
        &Opts {
            max_size: RNDV_END,
            ..o.clone()
        },
        &lossy,
    )?;
    let r = bench::rate::run(
        "bw-lossy",
        &Opts {
            max_size: RNDV_END,
            ..o.clone()
        },
        cfg,
        &lossy,
        &pull,
    );
    record(out, &mut md, "bw-lossy", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw-lossy.svg"))?;
    std::fs::write(out.join("report.md"), without_missing_plots(out, &md))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

/// The suite's rendezvous part: latency and bandwidth to 4 MiB per
/// rendezvous, then overlap and progress on both sides.
fn large_messages(out: &std::path::Path, md: &mut String, o: &Opts) -> Result<(), String> {
    use rmx_core::Protocol;
    let cfg = rmx_linux::rank::loop_config();
    let nic = &loop_net();
    let all = [Protocol::Rput, Protocol::Rget, Protocol::Pull];
    let big = Opts {
        min_size: 65536,
        max_size: RNDV_END,
        ..o.clone()
    };
    let r = bench::pingpong::run(&big, cfg, nic, &all);
    record(out, md, "pingpong-rndv", &r)?;
    let (curves, labels) = r.pivot("rndv", "latency_us");
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    curves.svg(
        &out.join("pingpong-rndv.svg"),
        &series,
        "one-way latency (us)",
    )?;
    let setups: Vec<_> = all
        .iter()
        .map(|&p| bench::rate::Setup::new(10, true).rndv(p))
        .collect();
    let r = bench::rate::run("bw-rndv", &big, cfg, nic, &setups);
    record(out, md, "bw-rndv", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw-rndv.svg"))?;
    let ov = Opts {
        min_size: 1,
        max_size: 1 << 20,
        iters: (o.iters / 100).max(20),
        warmup: 10,
        ..o.clone()
    };
    for side in [bench::Side::Send, bench::Side::Recv] {
        let name = format!("overlap-{}", side.name());
        let r = bench::overlap::run(&ov, cfg, nic, side, &all, &[false, true]);
        record(out, md, &name, &r)?;
        bench::overlap::plot(&r, &out.join(format!("{name}.svg")))?;
        let name = format!("progress-{}", side.name());
        let r = bench::progress::run(&ov, cfg, nic, side, &all, &[false, true]);
        record(out, md, &name, &r)?;
        bench::progress::plot(&r, &out.join(format!("{name}.svg")))?;
    }
    Ok(())
}

/// The most ranks `bench collectives` runs as threads of one process.
const RANKS_LIMIT: u16 = 64;

/// The most ranks a `--sim` run models.
const SIM_RANKS_LIMIT: u16 = 16384;

/// Group sizes 2, 4, 8, … below `ranks`, and `ranks`: threads of this
/// process, or (`sim`) ranks of the model.
fn group_sizes(ranks: Option<u16>, default: u16, sim: bool) -> Result<Vec<u16>, String> {
    let (ranks, limit) = match sim {
        true => (ranks.unwrap_or(1024), SIM_RANKS_LIMIT),
        false => (ranks.unwrap_or(default), RANKS_LIMIT),
    };
    if !(2..=limit).contains(&ranks) {
        let why = if sim {
            "the model's table grows with it"
        } else {
            "the ranks are threads of this process; --sim models larger groups"
        };
        return Err(format!(
            "--ranks must be between 2 and {limit} (got {ranks}): {why}"
        ));
    }
    let mut sizes: Vec<u16> = (1..16)
        .map(|k| 1u16 << k)
        .take_while(|&n| n < ranks)
        .collect();
    sizes.push(ranks);
    Ok(sizes)
}

/// The network of a benchmark whose ranks are threads of this process:
/// on eth they share one interface, which must be named.
fn threads_network(a: &BenchArgs, what: &str) -> Result<(Net, Option<TempLab>), String> {
    if a.transport == "eth" && a.iface.is_none() {
        return Err(format!("{what} on eth needs --iface IF (lo, or any interface): its ranks are threads of this process and share one interface"));
    }
    network(a, false)
}

/// `rmx bench collectives`.
fn collectives(a: &BenchArgs, ranks: Option<u16>, sim: bool) -> Result<(), String> {
    let o = opts_iters(a, (0, 0), 1000)?;
    let sizes = group_sizes(ranks, 8, sim)?;
    if sim {
        let m = bench::sim::Model::IB_DDR;
        emit(&bench::sim::collectives_report(&o, &m, &sizes), a.json);
        return Ok(());
    }
    let (net, _lab) = threads_network(a, "collectives")?;
    let r = bench::collectives::run(&o, bench_config(a), &sizes, |_| net.clone());
    emit(&r, a.json);
    Ok(())
}

/// The designs `--design` names, among those the network's transport
/// carries (every design in the model).
fn designs(design: &str, net: Option<&Net>) -> Result<Vec<Design>, String> {
    let runnable = net.map_or(Design::ALL.to_vec(), Net::designs);
    let names = || {
        runnable
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match design {
        "all" => Ok(runnable),
        d => match Design::parse(d) {
            Some(d) if runnable.contains(&d) => Ok(vec![d]),
            Some(d) => Err(format!(
                "--design {} needs RDMA, which this transport lacks: it carries {}; see every design modelled with --sim",
                d.name(),
                names()
            )),
            None => Err(format!("unknown --design {d}: choose def, naive, opt, ri or all")),
        },
    }
}

/// `rmx bench fence`.
fn fence(
    a: &BenchArgs,
    design: &str,
    pattern: &str,
    ranks: Option<u16>,
    sim: bool,
) -> Result<(), String> {
    let patterns: Vec<&str> = match pattern {
        "all" => bench::fence::PATTERNS.to_vec(),
        p if bench::fence::PATTERNS.contains(&p) => vec![p],
        p => {
            return Err(format!(
                "unknown --pattern {p}: choose zero, single, neighbours, halo4, halo8 or all"
            ))
        }
    };
    let o = opts_iters(a, (16, 16384), 1000)?;
    if o.max_size > 1 << 20 {
        return Err(format!(
            "--max-size {} is above 1 MiB: every rank's window holds 8 puts of it",
            o.max_size
        ));
    }
    let sizes = group_sizes(ranks, 4, sim)?;
    if sim {
        let designs = designs(design, None)?;
        let m = bench::sim::Model::IB_DDR;
        let r = bench::sim::fence_report(&o, &m, &designs, &patterns, &sizes);
        emit(&r, a.json);
        return Ok(());
    }
    let (net, _lab) = threads_network(a, "fence")?;
    let designs = designs(design, Some(&net))?;
    let r = bench::fence::run(&o, bench_config(a), &sizes, &designs, &patterns, &net);
    emit(&r, a.json);
    Ok(())
}

/// `overlap` or `progress`, by their shared options.
fn overlap_or_progress(a: &OverlapArgs, progress: bool) -> Result<(), String> {
    let o = opts_iters(&a.args, (1, 1 << 20), 100)?;
    let side = match a.side {
        SideSel::Send => bench::Side::Send,
        SideSel::Recv => bench::Side::Recv,
    };
    let variants = RndvSel::protocols(a.rndv);
    let threads = match a.progress_thread {
        None => vec![false, true],
        Some(t) => vec![t == OnOff::On],
    };
    let cfg = bench_config(&a.args);
    let (net, _lab) = network(&a.args, false)?;
    let nic = &net;
    let r = if progress {
        bench::progress::run(&o, cfg, nic, side, &variants, &threads)
    } else {
        bench::overlap::run(&o, cfg, nic, side, &variants, &threads)
    };
    emit(&r, a.args.json);
    Ok(())
}

/// The configurations a `bw`/`msgrate` run compares.
fn setups(a: &RateArgs) -> Result<Vec<bench::rate::Setup>, String> {
    use bench::rate::Setup;
    if a.wqes == Some(0) {
        return Err("--wqes must be at least 1 (a connection needs a send entry)".into());
    }
    let base: Vec<Setup> = match (a.wqes, a.coalesce) {
        // Large messages: the rendezvous compared, with the default queue.
        (None, None) if a.rndv.is_some() => {
            vec![Setup::new(rmx_linux::rank::loop_config().send_wqes, true)]
        }
        (None, None) => Setup::PAPER.to_vec(),
        (w, c) => {
            let ws = w.map_or(vec![200, 10, 5], |w| vec![w]);
            let cs = c.map_or(vec![false, true], |c| vec![c == OnOff::On]);
            ws.iter()
                .flat_map(|&w| cs.iter().map(move |&c| Setup::new(w, c)))
                .collect()
        }
    };
    let caches: &[bool] = match a.header_cache {
        OnOffBoth::On => &[true],
        OnOffBoth::Off => &[false],
        OnOffBoth::Both => &[true, false],
    };
    let after = a.coalesce_after;
    if let Some(n) = after {
        if n == 0 || a.wqes.is_some_and(|w| n > w) {
            return Err("--coalesce-after must be between 1 and --wqes".into());
        }
    }
    let variants: Vec<Option<rmx_core::Protocol>> = match a.rndv {
        None => vec![None],
        sel => RndvSel::protocols(sel).into_iter().map(Some).collect(),
    };
    let base: Vec<Setup> = base
        .into_iter()
        .flat_map(|s| variants.iter().map(move |&p| Setup { rndv: p, ..s }))
        .collect();
    // The marker exists only in packed sends: without coalescing, one run.
    let out = base
        .into_iter()
        .flat_map(|s| {
            let hs: &[bool] = if s.coalesce { caches } else { &caches[..1] };
            hs.iter().map(move |&h| Setup {
                header_cache: h,
                after: if s.coalesce { after } else { None },
                ..s
            })
        })
        .collect();
    Ok(out)
}

fn rate(name: &str, a: &RateArgs) -> Result<(), String> {
    let sizes = if a.header_cache == OnOffBoth::Both {
        (8, 512)
    } else if a.rndv.is_some() {
        (1, RNDV_END)
    } else {
        (1, EAGER_END)
    };
    let o = opts(&a.args, sizes)?;
    let setups = setups(a)?;
    let (net, _lab) = network(&a.args, true)?;
    let o = quiet_off_rank0(o, &net);
    let r = bench::rate::run(name, &o, bench_config(&a.args), &net, &setups);
    emit_rank0(&net, &r, a.args.json)
}

fn memory(
    procs: u64,
    wqes: Option<u16>,
    rx_buffers: Option<u32>,
    json_out: bool,
    plot: Option<PathBuf>,
) -> Result<(), String> {
    if procs == 0 || wqes == Some(0) || rx_buffers == Some(0) {
        return Err("--procs, --wqes and --rx-buffers must be at least 1".into());
    }
    if rx_buffers.is_some_and(|b| b > RX_BUFFERS_LIMIT) {
        return Err(format!(
            "--rx-buffers is above {RX_BUFFERS_LIMIT}: a pool that large is not a per-process cost anyone runs"
        ));
    }
    if procs > PROCS_LIMIT {
        return Err(format!(
            "--procs {procs} is above {PROCS_LIMIT}, the most ranks a job can have (ranks are 16-bit)"
        ));
    }
    let mut nic = LoopConfig::default();
    if let Some(b) = rx_buffers {
        nic.srq_depth = b as usize;
    }
    let all: Vec<u16> = rmx_linux::model::PAPER_TABLE2.iter().map(|t| t.0).collect();
    let wqes = wqes.map_or(all, |w| vec![w]);
    let r = memory_report(procs, &wqes, nic, json_out);
    if let Some(p) = plot {
        memory_plot(&r, &p)?;
    }
    emit(&r, json_out);
    Ok(())
}

/// The connection-memory model for job sizes up to `procs`.
fn memory_report(procs: u64, wqes: &[u16], nic: LoopConfig, quiet: bool) -> Report {
    use rmx_linux::model;
    let cfg = rmx_linux::rank::loop_config();
    let rows = model::rows(&model::job_sizes(procs), wqes, cfg.eager_threshold, &nic);
    let o = Opts::tool(quiet);
    let config = json!({
        "rx_buffers": nic.srq_depth,
        "eager_threshold": cfg.eager_threshold,
        "wqe_bytes": model::WQE_BYTES,
        "nic": nic,
    });
    Report::new(
        "model memory",
        &o,
        config,
        rows,
        vec![
            bench::report::Column::new("wqes", "wqes", 0),
            bench::report::Column::new("per_connection_bytes", "per_conn_B", 0),
            bench::report::Column::new("per_process_bytes", "per_process_B", 0),
            bench::report::Column::new("paper_per_connection_bytes", "paper_conn_B", 0),
            bench::report::Column::new("paper_per_process_bytes", "paper_process_B", 0),
            bench::report::Column::new("shared_bytes", "shared_B", 0),
            bench::report::Column::new("dominant", "dominant_term", 0),
        ],
    )
    .keyed_by("procs", "processes (fully connected)")
}

/// Per-process bytes against job size: rmx's curves and the paper's.
fn memory_plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let mut r = r.clone();
    for row in r.results.iter_mut() {
        let w = row["wqes"].clone();
        row["rmx"] = json!(format!("rmx, {w} WQEs"));
        row["paper"] = json!(format!("MVAPICH (paper), {w} WQEs"));
    }
    let (mut both, mut labels) = r.pivot("rmx", "per_process_bytes");
    let (paper, paper_labels) = r.pivot("paper", "paper_per_process_bytes");
    for (row, p) in both.results.iter_mut().zip(&paper.results) {
        for l in &paper_labels {
            row[l.as_str()] = p[l.as_str()].clone();
        }
    }
    labels.extend(paper_labels);
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    both.svg(path, &series, "bytes per process")
}

/// Every copy candidate's GB/s per size class, and the routine chosen.
fn copy_report(cal: &rmx_linux::reuse::Calibration, o: &Opts) -> Report {
    use rmx_linux::copy::Routine;
    // The routines this process started with (measured quickly at start-up,
    // or from the file): how far each is from this run's fastest.
    let in_use = rmx_linux::copy::engine().routines();
    let results = cal
        .copy
        .iter()
        .zip(in_use)
        .map(|(row, used)| {
            let mut v = json!({"size": row.size, "chosen": row.routine, "in_use": used.name()});
            for (k, mbps) in &row.mb_per_s {
                v[k.as_str()] = json!(*mbps as f64 / 1000.0);
            }
            let speed = |name: &str| row.mb_per_s.get(name).copied().unwrap_or(0) as f64;
            let best = speed(&row.routine).max(1.0);
            v["in_use_pct"] = json!((100.0 * speed(used.name()) / best).round());
            v
        })
        .collect();
    let measured = |r: &Routine| {
        cal.copy
            .iter()
            .any(|row| row.mb_per_s.contains_key(r.name()))
    };
    let mut columns: Vec<bench::report::Column> = Routine::ALL
        .iter()
        .filter(|r| measured(r))
        .map(|r| bench::report::Column::new(r.name(), r.name(), 1))
        .collect();
    columns.push(bench::report::Column::new("chosen", "chosen", 0));
    columns.push(bench::report::Column::new("in_use", "in_use", 0));
    columns.push(bench::report::Column::new("in_use_pct", "in_use_pct", 0));
    Report::new(
        "calibrate copy (GB/s per candidate)",
        o,
        json!({"inline_up_to": 32}),
        results,
        columns,
    )
}

fn calibrate(json_out: bool, dry_run: bool) -> Result<(), String> {
    if !json_out {
        eprintln!("rmx: calibrating (a few seconds)...");
    }
    let cal = rmx_linux::calibrate::measure();
    let model = cal.model()?;
    let results = cal
        .rows
        .iter()
        .map(|r| {
            json!({
                "size": r.size,
                "copy_ns": r.copy_ns,
                "reg_ns": r.reg_ns,
                "lookup_ns": cal.lookup_ns,
                "min_reuse": model.min_reuse(r.size),
                "register_after": model.threshold(r.size),
            })
        })
        .collect();
    let o = Opts::tool(json_out);
    let config = json!({
        "speculate_permille": cal.speculate_permille,
        "monitor": rmx_linux::monitor::Monitor::global().is_ok(),
    });
    let r = Report::new(
        "calibrate",
        &o,
        config,
        results,
        vec![
            bench::report::Column::new("copy_ns", "copy_ns", 0),
            bench::report::Column::new("reg_ns", "reg_ns", 0),
            bench::report::Column::new("lookup_ns", "lookup_ns", 0),
            bench::report::Column::new("min_reuse", "min_reuse", 0),
            bench::report::Column::new("register_after", "register_after", 0),
        ],
    );
    let copy = copy_report(&cal, &o);
    if json_out {
        let mut doc: serde_json::Value = serde_json::from_str(&r.json()).expect("json");
        doc["copy"] = serde_json::from_str(&copy.json()).expect("json");
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        print!("{}", r.table());
        print!("{}", copy.table());
    }
    if !dry_run {
        let p = cal.save()?;
        if !json_out {
            eprintln!("rmx: saved to {}", p.display());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    one_line_panics();
    if let Some(why) = rmx_linux::pmi::foreign_launcher() {
        // Each process would run the whole job alone, and the copies
        // would take each other's frames: refuse before anything starts.
        eprintln!("rmx: {why}");
        return ExitCode::from(2);
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli)));
    let code = match result {
        Ok(Ok(())) => return ExitCode::SUCCESS,
        // A failure while running (a peer, the transport, the launcher),
        // not bad input.
        Err(_) => {
            if let Some(why) = first_stop() {
                eprintln!("rmx: {why}");
            }
            1
        }
        Ok(Err(e)) => {
            eprintln!("rmx: {e}");
            2
        }
    };
    if std::env::var_os("PMI_RANK").is_some() {
        // A launcher kills the other ranks once one exits, and may drop
        // what they still had to say: give it time to pass this on first.
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    ExitCode::from(code)
}

/// Why each thread stopped, in the order they first did: the latest
/// reason per thread (a rank that stops on a failed peer says so last).
static STOPPED: std::sync::Mutex<Vec<(std::thread::ThreadId, String)>> =
    std::sync::Mutex::new(Vec::new());

/// A failure while running (a rank's thread or this process stopping on a
/// failed peer, transport or launcher) becomes one line, `rmx: rank R:
/// why`, printed by [`first_stop`]; with `RUST_BACKTRACE` the full
/// report comes first.
fn one_line_panics() {
    let full = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    let report = std::panic::take_hook();
    let pmi_rank = std::env::var("PMI_RANK").ok();
    std::panic::set_hook(Box::new(move |info| {
        if full {
            report(info);
        }
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("stopped");
        let thread = std::thread::current();
        let rank = pmi_rank
            .as_deref()
            .map(|r| format!("rank {r}"))
            .or_else(|| {
                thread
                    .name()
                    .filter(|n| n.starts_with("rank "))
                    .map(String::from)
            });
        let line = match rank {
            // Printed already: nothing left to say.
            _ if info.payload().is::<rmx_linux::job::Said>() => String::new(),
            Some(r) => format!("{r}: {msg}"),
            None => msg.to_string(),
        };
        let mut stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
        match stopped.iter_mut().find(|(t, _)| *t == thread.id()) {
            Some(s) => s.1 = line,
            None => stopped.push((thread.id(), line)),
        }
    }));
}

/// Why the first thread that stopped did, unless it said so itself.
fn first_stop() -> Option<String> {
    let stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
    stopped
        .first()
        .map(|(_, why)| why.clone())
        .filter(|why| !why.is_empty())
}

/// Runs the command: `Err` is bad input (said, exit 2).
fn run(cli: Cli) -> Result<(), String> {
    // The copy routines are chosen before anything is timed.
    match cli.cmd {
        Cmd::Info { json } => {
            info(json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Pingpong {
            args: a,
            eager_reuse,
            rndv,
        }) => {
            let end = if rndv.is_some() { RNDV_END } else { EAGER_END };
            opts(&a, (1, end)).and_then(|mut o| {
                if eager_reuse == OnOff::On {
                    o.eager_reuse = Some(reuse_ready()?);
                }
                let variants = rndv.map_or(vec![], |s| RndvSel::protocols(Some(s)));
                let (net, _lab) = network(&a, true)?;
                let o = quiet_off_rank0(o, &net);
                let r = bench::pingpong::run(&o, bench_config(&a), &net, &variants);
                emit_rank0(&net, &r, a.json)
            })
        }
        Cmd::Bench(BenchCmd::Overlap(a)) => overlap_or_progress(&a, false),
        Cmd::Bench(BenchCmd::Progress(a)) => overlap_or_progress(&a, true),
        Cmd::Bench(BenchCmd::EagerReuse(a)) => opts(&a, (128, EAGER_END)).and_then(|o| {
            let cal = reuse_ready()?;
            let (net, _lab) = network(&a, false)?;
            emit(
                &bench::eager_reuse::run(&o, bench_config(&a), &net, &cal),
                a.json,
            );
            Ok(())
        }),
        Cmd::Bench(BenchCmd::Bw(a)) => rate("bw", &a),
        Cmd::Bench(BenchCmd::Collectives {
            args: a,
            ranks,
            sim,
        }) => collectives(&a, ranks, sim),
        Cmd::Bench(BenchCmd::Fence {
            args: a,
            design,
            pattern,
            ranks,
            sim,
        }) => fence(&a, &design, &pattern, ranks, sim),
        Cmd::Bench(BenchCmd::FenceOverlap { args: a, design }) => {
            (|| {
                let o = opts_iters(&a, (1, 1 << 20), 100)?;
                if o.max_size > 1 << 26 {
                    return Err(format!("--max-size {} is above 64 MiB", o.max_size));
                }
                let (net, _lab) = threads_network(&a, "fence-overlap")?;
                let designs = designs(&design, Some(&net))?;
                let r = bench::fence::overlap(&o, bench_config(&a), &designs, &net);
                emit(&r, a.json);
                Ok(())
            })()
        }
        Cmd::Bench(BenchCmd::Msgrate(a)) => rate("msgrate", &a),
        Cmd::Model(ModelCmd::Memory {
            procs,
            wqes,
            rx_buffers,
            json,
            plot,
        }) => memory(procs, wqes, rx_buffers, json, plot),
        Cmd::Bench(BenchCmd::Suite {
            out,
            iters,
            transport,
            iface,
        }) => match transport.as_str() {
            "eth" => suite_eth(&out, iters, iface),
            t => check_transport(t).and_then(|()| suite(&out, iters)),
        },
        Cmd::Calibrate { json, dry_run } => calibrate(json, dry_run),
        Cmd::Lab(cmd) => lab(cmd),
        Cmd::Bench(BenchCmd::Spectrum {
            args: a,
            buffers,
            plot,
        }) => opts(&a, (128, EAGER_END)).and_then(|o| {
            if buffers == 0 || buffers > BUFFERS_LIMIT {
                return Err(format!(
                    "--buffers must be between 1 and {BUFFERS_LIMIT} (got {buffers}): buffer i is sent i times"
                ));
            }
            let cal = reuse_ready()?;
            let (net, _lab) = network(&a, false)?;
            let r = bench::spectrum::run(&o, bench_config(&a), &net, &cal, buffers);
            if let Some(p) = plot {
                bench::spectrum::plot(&r, &p)?;
            }
            emit(&r, a.json);
            Ok(())
        }),
    }
}
