//! `late`: the loop NIC with its RDMA writes landing late (the driver
//! layer's `Delayed` device). A transport for tests only, built with the
//! cargo feature `test-transport`: its one line in the registry is all
//! that makes it known to `--transport`, `rmx info`, the suite, the
//! benchmarks' floors, `rmx calibrate` and `rmx model memory`.

use rmx_core::Config;

use crate::loopnic::{self, Fabric, LoopConfig};
use crate::transport::delayed::{delayed, Delayed};
use crate::transport::network::{Floor, Network, Wire};
use crate::transport::{AnyPort, Entry, SetupError};

/// The largest delay of a write unless `--late-ns` says otherwise.
const LATE_NS: u64 = 20_000;

/// `late` in the transport registry: the loop NIC's abilities, its ranks
/// threads of one process.
pub const ENTRY: Entry = Entry {
    name: "late",
    about: "loop with RDMA writes landing up to --late-ns late (a test transport)",
    built: true,
    floor: "shared-memory floor",
    caps: loopnic::ENTRY.caps,
    device: false,
    launched: None,
    info: None,
};

/// A `late` job's settings: the loop NIC's, and how late a write lands.
#[derive(Clone, Debug)]
pub struct LateNet {
    pub nic: LoopConfig,
    pub max_delay_ns: u64,
}

/// `late`'s option.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LateOptions {
    /// The longest an RDMA write lands late, in nanoseconds (--transport
    /// late only; default 20000).
    #[arg(long, value_name = "NS")]
    pub late_ns: Option<u64>,
}

impl Network for LateNet {
    type Port = Delayed<loopnic::Port>;
    type Options = LateOptions;
    const ENTRY: Entry = ENTRY;

    fn given(o: &LateOptions) -> Option<&'static str> {
        o.late_ns.map(|_| "--late-ns")
    }

    fn open(
        o: &LateOptions,
        _launched: bool,
    ) -> Result<(LateNet, Option<crate::lab::TempLab>), SetupError> {
        let net = LateNet {
            nic: LoopConfig::default(),
            max_delay_ns: o.late_ns.unwrap_or(LATE_NS),
        };
        Ok((net, None))
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "nic": self.nic, "max_delay_ns": self.max_delay_ns })
    }

    fn rx_buffers(&self) -> usize {
        self.nic.srq_depth
    }

    fn floor(&self) -> Floor {
        Floor::Memory
    }

    fn for_config(&self, cfg: &Config) -> LateNet {
        LateNet {
            nic: self.nic.for_config(cfg),
            ..*self
        }
    }

    fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError> {
        Ok(Box::new(LateWire {
            fabric: self.nic.fabric(ranks, ENTRY.name)?,
            max_delay_ns: self.max_delay_ns,
        }))
    }
}

/// A `late` network of a running job.
struct LateWire {
    fabric: Fabric,
    max_delay_ns: u64,
}

impl Wire for LateWire {
    fn port(
        &self,
        me: u16,
        _: usize,
        _: usize,
        placed: &Result<(), SetupError>,
    ) -> Result<AnyPort, SetupError> {
        placed.clone()?;
        let port = delayed(self.fabric.port(me), self.max_delay_ns, u64::from(me));
        Ok(port.into())
    }
}
