//! The command line's shape: subcommands, their arguments and `--help` texts (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rmx",
    version,
    about = "rmx messaging transport: information and benchmarks",
    long_about = "rmx is the transport core an MPI library, a PGAS runtime or a network driver \
embeds to move messages over RDMA and Ethernet. This tool reports what this build can do and \
runs its benchmark suite (OSU-style: latency, bandwidth, message rate)."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

// Parsed once per run: the size of the benchmarks' options does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum Cmd {
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
        /// Whose registration R is: loop (the software NIC's page walk and
        /// key table) or verbs (`ibv_reg_mr` on --device: pinning in the
        /// kernel). eth registers nothing and measures as loop.
        #[arg(long, default_value = "loop")]
        transport: String,
        /// The transport's own options (verbs: --device, --port,
        /// --gid-index).
        #[command(flatten)]
        net: rmx_linux::transport::registry::Options,
    },
}

#[derive(Subcommand)]
pub(crate) enum BenchCmd {
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
        /// In virtual time: the core's collectives run by simulated ranks over
        /// a LogGP model of an InfiniBand DDR network, for groups this
        /// machine cannot run (--iters defaults to 2, --warmup to 1).
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
        long_about = "Time per one-sided epoch closed by a fence, as the fence paper's section 4.2 measures it: --pattern zero (a fence alone, Fig. 7), single (one 16-byte put to the next rank, Fig. 8), neighbours (16-byte puts to up to 8 neighbours, Fig. 9), halo4 and halo8 (puts of each size from --min-size to --max-size to 4 or 8 neighbours beside a 20 us computation, Fig. 10; rows give iteration_us), or all. A bare barrier is measured first as the reference. Ranks are threads of this process, at 2, 4, ... up to --ranks. --design def is the deferred design (operations sent as two-sided messages inside the closing fence; every transport); naive, opt and ri are the immediate designs (puts and gets as RDMA when issued; finish messages and all-pairs flags, finish messages and a barrier, or writes with immediate counted by the target, an allreduce of counts and a barrier), on transports with RDMA (loop, verbs); all runs every design the transport offers."
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
        /// In virtual time: all four designs and their collectives run by
        /// simulated ranks of rmx-core over a LogGP model of an InfiniBand
        /// DDR network, for groups this machine cannot run (--iters
        /// defaults to 2, --warmup to 1).
        #[arg(long)]
        sim: bool,
    },
    /// Pin + unpin of 1 … 4096 pages through rmx.ko, beside mlock and a
    /// device's registration (the Open-MX paper's Table 1), and the cost of
    /// checking a cached region's validity.
    #[command(
        long_about = "The Open-MX paper's Table 1: the time to pin and unpin 1, 2, 4 ... --max-pages pages (memory already faulted in), the median of --iters rounds per size, through rmx.ko (RMX_PIN of a declared region, then RMX_UNPIN; needs the module loaded: shell-kernel/module/build, then insmod rmx.ko), through mlock/munlock, and with --transport verbs through ibv_reg_mr/ibv_dereg_mr on --device. Each method's fit base + pages x per_page (least squares) gives base_us, ns/page and GB/s (a page's bytes over its per-page time). With rmx.ko, also a send of the whole region through the module's region cache, decoupled (pinned once, kept) and pinning and unpinning around every send (the paper's comparison). Then the cost of one validity check of a pinned, cached region: one load from the page rmx.ko maps, an ioctl asking rmx.ko, and the userfaultfd monitor's check."
    )]
    Pin {
        /// Print one JSON document instead of tables.
        #[arg(long)]
        json: bool,
        /// Timed rounds per size (their median is the figure).
        #[arg(long, default_value_t = 20)]
        iters: u64,
        /// The largest region, in pages (a power of two up to it is the last row).
        #[arg(long, default_value_t = 4096)]
        max_pages: usize,
        /// Also write the curves as an SVG plot here.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// loop measures rmx.ko and mlock only; verbs adds ibv_reg_mr on --device.
        #[arg(long, default_value = "loop")]
        transport: String,
        /// The transport's own options (verbs: --device, --port, --gid-index).
        #[command(flatten)]
        net: rmx_linux::transport::registry::Options,
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
        /// Timed iterations per size; the spectrum sends a tenth as many
        /// buffers (10 to 1000), so a short run stays short.
        #[arg(long, default_value_t = 10_000)]
        iters: u64,
        /// The transport (loop; eth over a lab made for the run, root;
        /// verbs on an RDMA device). The suite runs what its capabilities
        /// call for: latency, message rate and the header cache
        /// everywhere; each rendezvous it offers to 4 MiB with overlap and
        /// progress; the memory model, eager reuse, the fences and
        /// collectives (2, 4 and 8 ranks) where there is RDMA; a run with
        /// 1% loss and 5% reordering where the wire is lossy. On verbs,
        /// where perftest is installed, ib_send_lat, ib_write_lat,
        /// ib_send_bw and ib_write_bw run on the same device beside rmx,
        /// and UCX's ucx_perftest am_lat over rc_verbs beside pingpong
        /// (ucx-utils): columns and curves of their own.
        #[arg(long, default_value = "loop")]
        transport: String,
        /// The transport's own options (eth: --iface to use an interface
        /// instead of a lab; verbs: --device, --port, --gid-index).
        #[command(flatten)]
        net: rmx_linux::transport::registry::Options,
        /// The largest group of the simulated collectives and fences
        /// (2, 4, ... up to it; at most 4096).
        #[arg(long, default_value_t = 1024)]
        sim_ranks: u16,
        /// Run only these members (comma-separated), e.g. to split a long
        /// run: pingpong, msgrate, header-cache, rendezvous (latency,
        /// bandwidth, overlap and progress of each rendezvous), memory,
        /// eager-reuse (with spectrum), one-sided (collectives and fences),
        /// lossy.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnOff {
    On,
    Off,
}

/// A rendezvous to measure, or all of them.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RndvSel {
    Rput,
    Rget,
    Pull,
    All,
}

impl RndvSel {
    pub(crate) fn protocols(sel: Option<RndvSel>) -> Vec<rmx_core::Protocol> {
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
pub(crate) enum SideSel {
    Send,
    Recv,
}

/// Options of `overlap` and `progress`.
#[derive(Args, Clone)]
pub(crate) struct OverlapArgs {
    #[command(flatten)]
    pub(crate) args: BenchArgs,
    /// The side measured: the sender's non-blocking send or the receiver's
    /// non-blocking receive.
    #[arg(long, value_enum, default_value_t = SideSel::Send)]
    pub(crate) side: SideSel,
    /// Rendezvous above the eager threshold [default: all three].
    #[arg(long, value_enum)]
    pub(crate) rndv: Option<RndvSel>,
    /// A progress thread per rank drives the endpoint during the
    /// computation [default: both, off then on].
    #[arg(long, value_enum)]
    pub(crate) progress_thread: Option<OnOff>,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnOffBoth {
    On,
    Off,
    Both,
}

#[derive(Subcommand)]
pub(crate) enum LabCmd {
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

#[derive(Subcommand)]
pub(crate) enum ModelCmd {
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
        /// Whose connections: loop (the software NIC's, entries estimated
        /// at 64 bytes) or verbs (measured on --device: what its provider
        /// maps per connected queue pair at each send depth).
        #[arg(long, default_value = "loop")]
        transport: String,
        /// The transport's own options (verbs: --device, --port,
        /// --gid-index).
        #[command(flatten)]
        net: rmx_linux::transport::registry::Options,
    },
}

/// Options of the streaming benchmarks (`bw`, `msgrate`).
#[derive(Args, Clone)]
pub(crate) struct RateArgs {
    #[command(flatten)]
    pub(crate) args: BenchArgs,
    /// Send work-queue entries per connection (outstanding sends).
    #[arg(long)]
    pub(crate) wqes: Option<u16>,
    /// Pack messages that find every send entry in use into one send.
    #[arg(long, value_enum)]
    pub(crate) coalesce: Option<OnOff>,
    /// Coalesce once this many sends are outstanding on the connection, even
    /// with entries free (MVAPICH2's threshold), instead of once all are in use.
    #[arg(long)]
    pub(crate) coalesce_after: Option<u16>,
    /// One-byte marker for a packed message whose matching information
    /// equals the previous one's; `both` compares on and off.
    #[arg(long, value_enum, default_value_t = OnOffBoth::On)]
    pub(crate) header_cache: OnOffBoth,
    /// Rendezvous for sizes above the eager threshold; `all` compares the
    /// three (with the default send queue unless --wqes/--coalesce say) and
    /// runs the sizes to 4 MiB.
    #[arg(long, value_enum)]
    pub(crate) rndv: Option<RndvSel>,
}

#[derive(Args, Clone)]
pub(crate) struct BenchArgs {
    /// Transport to measure: loop (in-process software NIC), eth (raw
    /// Ethernet frames; needs root or CAP_NET_RAW) or verbs (RDMA RC queue
    /// pairs through rdma-core; a build with `--features verbs` and a
    /// device, e.g. Soft-RoCE's rxe0).
    #[arg(long, default_value = "loop")]
    pub(crate) transport: String,
    /// Each transport's own options (eth: --iface, --mtu, --loss, --dup,
    /// --reorder, --rx; verbs: --device, --port, --gid-index), from the
    /// transport registry.
    #[command(flatten)]
    pub(crate) net: rmx_linux::transport::registry::Options,
    /// Largest message sent eagerly as fragments of one packet each
    /// (Open-MX's medium messages), above it by rendezvous; 0 turns them
    /// off [default: 32768 on eth, 0 on loop, whose RDMA rendezvous
    /// copies nothing].
    #[arg(long, value_name = "BYTES")]
    pub(crate) medium_max: Option<u32>,
    /// Completion moderation, as perftest's --cq-mod: an inline send asks
    /// for a completion of its own once in N to a peer, the sends between
    /// complete with it (verbs: unsignalled work requests). At least one
    /// in half a connection's send entries is signalled whatever N; 1
    /// signals every send [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) cq_mod: Option<u16>,
    /// Smallest message size in bytes [default: 1; 128 for eager-reuse and
    /// spectrum, where copies below it are too cheap to save].
    #[arg(long)]
    pub(crate) min_size: Option<usize>,
    /// Largest message size in bytes [default: 8192, the end of the eager
    /// range; 4 MiB with --rndv; 1 MiB for overlap and progress; 512 for
    /// --header-cache both].
    #[arg(long)]
    pub(crate) max_size: Option<usize>,
    /// Timed iterations per size (after the warm-up) [default: 10000; 100
    /// repetitions per step for overlap and progress].
    #[arg(long)]
    pub(crate) iters: Option<u64>,
    /// Untimed warm-up iterations per size [default: a tenth of --iters].
    #[arg(long)]
    pub(crate) warmup: Option<u64>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}
