//! eth's command-line options. The transport registry flattens them into
//! every benchmark's; they say which interface, lab and faults a job's
//! network has.

use super::{EthNet, EthOpts, RawSocket};
use crate::lab::{LabSpec, TempLab, IFACE};
use crate::launch::Launch;

/// How the eth transport receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RxSel {
    Ring,
    Recvmmsg,
}

/// What moves the eth transport's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FramesSel {
    /// An AF_PACKET socket per endpoint.
    Socket,
    /// rmx.ko (`/dev/rmx`): the kernel routes frames to endpoints.
    Module,
}

/// When rmx.ko pins the pages of a buffer a frame's data is sent from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PinningSel {
    /// On demand and progressively, kept until the memory changes: a
    /// buffer sent from again is already pinned.
    Decoupled,
    /// Whole when registered, unpinned when deregistered (every
    /// communication pays for its pinning: the comparison).
    Synchronous,
}

/// `--iface`, `--mtu`, `--loss`, `--dup`, `--reorder`, `--rx`, `--frames`,
/// `--pinning`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct EthOptions {
    /// eth: the interface every rank opens. Without it rmx makes a lab of
    /// two network namespaces joined by a veth pair for the run, one rank
    /// in each, and removes it afterwards (also on failure and Ctrl-C).
    /// Ranks on one interface of one host (threads, or processes of a
    /// launcher) talk through rmx's local path; on `lo` through the wire.
    #[arg(long)]
    pub iface: Option<String>,
    /// eth, lab made for the run: its interfaces' MTU [default: 9000].
    #[arg(long)]
    pub mtu: Option<u32>,
    /// eth: per cent of received frames the transport drops (injected on
    /// receive, seeded, so it works where the kernel has no netem).
    #[arg(long)]
    pub loss: Option<f64>,
    /// eth: per cent of received frames the transport delivers twice.
    #[arg(long)]
    pub dup: Option<f64>,
    /// eth: per cent of received frames delivered after the next one.
    #[arg(long)]
    pub reorder: Option<f64>,
    /// eth: how frames come in: a PACKET_MMAP ring (no system call to
    /// poll) or batched recvmmsg [default: ring].
    #[arg(long, value_enum)]
    pub rx: Option<RxSel>,
    /// eth: what carries the frames: an AF_PACKET socket per endpoint, or
    /// rmx.ko, which routes them to endpoints in the kernel (load it
    /// first: `shell-kernel/module/build`, then `insmod rmx.ko`)
    /// [default: socket].
    #[arg(long, value_enum)]
    pub frames: Option<FramesSel>,
    /// eth with --frames module: when the module pins the pages of the
    /// buffers it sends data from [default: decoupled].
    #[arg(long, value_enum)]
    pub pinning: Option<PinningSel>,
}

impl EthOptions {
    /// The first option given, by its flag.
    pub fn given(&self) -> Option<&'static str> {
        [
            ("--iface", self.iface.is_some()),
            ("--mtu", self.mtu.is_some()),
            ("--loss", self.loss.is_some()),
            ("--dup", self.dup.is_some()),
            ("--reorder", self.reorder.is_some()),
            ("--rx", self.rx.is_some()),
            ("--frames", self.frames.is_some()),
            ("--pinning", self.pinning.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The network these options name: the interface (opened once here, so
    /// a wrong name or missing privilege is a sentence, not a failed rank),
    /// or a lab made for the run (root), which the caller keeps until the
    /// job is over. A launch without `--iface` is refused before this.
    pub fn open(&self) -> Result<(EthNet, Option<TempLab>), String> {
        let faults = crate::transport::faulty::percent(
            self.loss.unwrap_or(0.0),
            self.dup.unwrap_or(0.0),
            self.reorder.unwrap_or(0.0),
            0x5eed,
        )?;
        let module = self.frames == Some(FramesSel::Module);
        if module && self.rx.is_some() {
            return Err("--rx chooses how a socket receives; with --frames module the module queues each endpoint's frames".into());
        }
        if !module && self.pinning.is_some() {
            return Err("--pinning chooses how rmx.ko pins the buffers it sends from: give it with --frames module".into());
        }
        let opts = EthOpts {
            faults,
            rx_ring: !module && self.rx != Some(RxSel::Recvmmsg),
            module,
            pinning: match self.pinning {
                Some(PinningSel::Synchronous) => crate::kmod::cache::Mode::Synchronous,
                _ => crate::kmod::cache::Mode::Decoupled,
            },
            ..Default::default()
        };
        if module {
            crate::kmod::Device::open().map_err(|e| format!("--frames module: {e}"))?;
        }
        if let Some(iface) = &self.iface {
            if self.mtu.is_some() {
                return Err("--mtu sets the MTU of a lab rmx makes; with --iface the interface's own MTU is used".into());
            }
            let opened = if module {
                probe_module(iface)
            } else {
                RawSocket::open(iface, rmx_core::wire::frame::ETHERTYPE, false).map(drop)
            };
            opened.map_err(|e| {
                format!("cannot open interface {iface:?} for raw frames: {e} (it needs root or CAP_NET_RAW; `ip link` lists the interfaces)")
            })?;
            let launch = crate::pmi::Pmi::from_env()
                .map_err(|e| format!("started by a launcher, but its PMI failed: {e}"))?
                .map(Launch::new);
            let net = EthNet {
                iface: iface.clone(),
                netns: Vec::new(),
                opts,
                launch,
            };
            return Ok((net, None));
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("--transport eth without --iface makes a lab of network namespaces, which needs root: run with sudo, or give --iface IF on an interface you may open (e.g. --iface lo with CAP_NET_RAW)".into());
        }
        let spec = LabSpec {
            prefix: format!("rmxb{}", std::process::id()),
            mtu: self.mtu.unwrap_or(9000),
            ..LabSpec::default()
        };
        spec.check()?;
        let lab = TempLab::up(spec)?;
        let net = EthNet {
            iface: IFACE.into(),
            netns: (0..2).map(|r| lab.spec().netns(r)).collect(),
            opts,
            launch: None,
        };
        Ok((net, Some(lab)))
    }
}

/// Whether rmx.ko binds an endpoint to `iface` here (an endpoint another
/// job holds says as much).
fn probe_module(iface: &str) -> std::io::Result<()> {
    let dev = crate::kmod::Device::open()?;
    let endpoint = (std::process::id() as u16).wrapping_mul(40_503) ^ 0x5a5a;
    match dev.bind(iface, endpoint, rmx_core::wire::frame::ETHERTYPE) {
        Err(e) if e.raw_os_error() != Some(libc::EADDRINUSE) => Err(e),
        _ => Ok(()),
    }
}
