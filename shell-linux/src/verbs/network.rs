//! The `verbs` transport as a job opens it: every rank opens the same
//! device (threads of one process, or one process per rank under a
//! launcher), swaps addresses through the job's bootstrap, and meets the
//! others once more before any asks for a connection.

use rmx_core::Config;

use super::{Select, Sizes, VerbsPort, ENTRY};
use crate::launch::Launch;
use crate::transport::network::{Device, Network, Swap, Wire};
use crate::transport::Entry;
use crate::transport::{AnyPort, SetupError};

/// Where the ranks of a `verbs` job open their ports.
#[derive(Clone, Debug)]
pub struct VerbsNet {
    pub select: Select,
    pub sizes: Sizes,
    /// This process is one rank of a job a launcher started.
    pub launch: Option<Launch>,
}

impl Network for VerbsNet {
    type Port = VerbsPort;
    type Options = super::VerbsOptions;
    const ENTRY: Entry = ENTRY;

    fn given(o: &super::VerbsOptions) -> Option<&'static str> {
        o.given()
    }

    fn open(
        o: &super::VerbsOptions,
        _launched: bool,
    ) -> Result<(VerbsNet, Option<crate::lab::TempLab>), SetupError> {
        o.open()
            .map(|n| (n, None))
            .map_err(|why| SetupError::Network {
                transport: ENTRY.name,
                why,
            })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "device": self.select.device,
            "port": self.select.port,
            "gid_index": self.select.gid_index,
            "rx_buffers": self.sizes.rx_buffers,
            "buf_size": self.sizes.buf_size,
            "sq_depth": self.sizes.sq_depth,
            "launch": self.launch.as_ref().map(|l| format!("{l:?}")),
        })
    }

    /// The first port's device, as perftest names it.
    fn device(&self) -> Option<Device> {
        let port = self.open_port(0, 1).ok()?;
        let f = port.facts();
        Some(Device {
            name: f.name.clone(),
            port: f.port,
            gid_index: Some(f.gid_index),
        })
    }

    /// `ibv_reg_mr` on the device: pinning and the device's translation
    /// table in the kernel.
    fn registrar(&self) -> Option<Result<AnyPort, SetupError>> {
        Some(self.open_port(0, 1).map(AnyPort::from))
    }

    /// 16 connected queue pairs measured at `wqes` entries each.
    fn connection_bytes(&self, wqes: u16) -> Option<Result<(u64, u64), String>> {
        Some(
            super::footprint::measure(&self.select, wqes as u32, 16)
                .map(|q| (q.mapped, VerbsPort::connection_bytes(wqes as u32) as u64)),
        )
    }

    fn rx_buffers(&self) -> usize {
        self.sizes.rx_buffers as usize
    }

    fn launch(&self) -> Option<&Launch> {
        self.launch.as_ref()
    }

    /// `send_wqes` entries per queue pair; the receive queue's limit at
    /// the core's low watermark.
    fn for_config(&self, cfg: &Config) -> VerbsNet {
        let mut n = self.clone();
        n.sizes.sq_depth = cfg.send_wqes.max(1) as u32;
        n.sizes.rx_low = cfg.rx_low_water;
        n
    }

    fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError> {
        Ok(Box::new(VerbsWire {
            swap: Swap::new(ranks, self.launch.as_ref()),
            net: self.clone(),
            ranks,
        }))
    }
}

impl VerbsNet {
    /// Rank `me`'s port of `ranks` on the device; why not, naming it.
    fn open_port(&self, me: u16, ranks: u16) -> Result<VerbsPort, SetupError> {
        VerbsPort::open(&self.select, self.sizes, me, ranks).map_err(|e| SetupError::Port {
            rank: me,
            what: self
                .select
                .device
                .as_deref()
                .unwrap_or("an RDMA device")
                .into(),
            why: e.to_string(),
        })
    }
}

struct VerbsWire {
    net: VerbsNet,
    swap: Swap,
    ranks: u16,
}

impl Wire for VerbsWire {
    fn port(
        &self,
        me: u16,
        k: usize,
        nets: usize,
        placed: &Result<(), SetupError>,
    ) -> Result<AnyPort, SetupError> {
        let opened = placed
            .clone()
            .and_then(|()| self.net.open_port(me, self.ranks));
        let mine = opened.as_ref().ok().map(|p| p.address().encode());
        let all = self.swap.swap(me, k, mine);
        let connected = opened.and_then(|mut p| {
            let a = all?;
            p.connect(&a)
                .map_err(|why| SetupError::Join { rank: me, why })?;
            Ok(p)
        });
        // Every rank took the addresses before any asks for a connection;
        // one that could not is named to all at once, not after a timeout.
        let ready = connected.as_ref().ok().map(|_| vec![1]);
        let met = self.swap.swap(me, nets + k, ready);
        // This rank's own failure first: it says why.
        let port = connected?;
        met?;
        Ok(AnyPort::from(port))
    }
}
