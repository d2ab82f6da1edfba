//! The `eth` transport as a job opens it: the interface (and each rank's
//! namespace in a lab), the port's options, and the launch a process may
//! be one rank of; each rank's port opens, offers its address (MAC,
//! endpoint and the job's sealing key) and joins the others'.

use rmx_core::Config;

use super::{EthOpts, EthPort, ENTRY};
use crate::launch::Launch;
use crate::transport::network::{Floor, Network, Swap, Wire};
use crate::transport::Entry;
use crate::transport::{AnyPort, Faults, SetupError};

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
impl Network for EthNet {
    type Port = EthPort;
    type Options = super::EthOptions;
    const ENTRY: Entry = ENTRY;

    fn given(o: &super::EthOptions) -> Option<&'static str> {
        o.given()
    }

    /// Threads share one interface, which must be named: the lab made
    /// without one has a namespace for each of two ranks.
    fn threads_share(o: &super::EthOptions) -> Result<(), String> {
        match o.iface {
            Some(_) => Ok(()),
            None => Err("--iface IF (lo, or any interface): its ranks are threads of this process and share one interface".into()),
        }
    }

    fn open(
        o: &super::EthOptions,
        launched: bool,
    ) -> Result<(EthNet, Option<crate::lab::TempLab>), SetupError> {
        if launched && o.iface.is_none() {
            return Err(SetupError::Launched {
                transport: ENTRY.name,
                give: ENTRY.launch_flags().into_iter().collect(),
            });
        }
        o.open().map_err(|why| SetupError::Network {
            transport: ENTRY.name,
            why,
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "iface": self.iface,
            "netns": self.netns,
            "ethertype": self.opts.ethertype,
            "rx_buffers": self.opts.rx_buffers,
            "max_packet": self.opts.max_packet,
            "batch": self.opts.batch,
            "bypass_qdisc": self.opts.bypass_qdisc,
            "loss_ppm": self.opts.faults.loss_ppm,
            "dup_ppm": self.opts.faults.dup_ppm,
            "reorder_ppm": self.opts.faults.reorder_ppm,
            "rx_ring": self.opts.rx_ring,
            "frames": if self.opts.module { "module" } else { "socket" },
            "pinning": self.opts.module.then_some(match self.opts.pinning {
                crate::kmod::cache::Mode::Decoupled => "decoupled",
                crate::kmod::cache::Mode::Synchronous => "synchronous",
            }),
            "launch": self.launch.as_ref().map(|l| format!("{l:?}")),
        })
    }

    fn floor(&self) -> Floor {
        Floor::Frames {
            iface: self.iface.clone(),
        }
    }

    fn rx_buffers(&self) -> usize {
        self.opts.rx_buffers as usize
    }

    fn launch(&self) -> Option<&Launch> {
        self.launch.as_ref()
    }

    fn with_faults(&self, faults: Faults) -> Result<EthNet, SetupError> {
        Ok(EthNet {
            opts: EthOpts {
                faults,
                ..self.opts
            },
            ..self.clone()
        })
    }

    fn for_config(&self, _: &Config) -> EthNet {
        self.clone()
    }

    fn netns(&self, me: u16) -> Option<&str> {
        self.netns.get(me as usize).map(String::as_str)
    }

    fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError> {
        Ok(Box::new(EthWire {
            base: endpoints(),
            swap: Swap::new(ranks, self.launch.as_ref()),
            net: self.clone(),
        }))
    }
}

/// An `eth` network of a running job.
struct EthWire {
    net: EthNet,
    swap: Swap,
    /// The first endpoint number of this job's ports (see [`endpoints`]).
    base: u16,
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

impl Wire for EthWire {
    fn port(
        &self,
        me: u16,
        k: usize,
        nets: usize,
        placed: &Result<(), SetupError>,
    ) -> Result<AnyPort, SetupError> {
        let net = &self.net;
        let endpoint = self.base.wrapping_add((me as usize * nets + k) as u16);
        let opened = placed.clone().and_then(|()| {
            EthPort::open(&net.iface, endpoint, net.opts).map_err(|e| SetupError::Port {
                rank: me,
                what: net.iface.clone(),
                why: e.to_string(),
            })
        });
        let mine = opened.as_ref().ok().map(EthPort::address);
        let all = self.swap.swap(me, k, mine);
        let mut port = opened?;
        port.join(me, &all?)
            .map_err(|why| SetupError::Join { rank: me, why })?;
        Ok(AnyPort::from(port).with_faults(net.opts.faults))
    }
}
