//! The `loop` transport as a job opens it: one fabric of software NICs in
//! this process, a port per rank. No addresses to swap: a rank's number is
//! its address on the fabric.

use rmx_core::Config;

use super::{Fabric, LoopConfig, Port, ENTRY};
use crate::transport::network::{Floor, Network, Wire};
use crate::transport::AnyPort;
use crate::transport::Entry;
use crate::transport::SetupError;

/// loop has no options of its own: its ranks are threads of one process.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LoopOptions {}

impl Network for LoopConfig {
    type Port = Port;
    type Options = LoopOptions;
    const ENTRY: Entry = ENTRY;

    fn given(_: &LoopOptions) -> Option<&'static str> {
        None
    }

    fn open(
        _: &LoopOptions,
        _launched: bool,
    ) -> Result<(LoopConfig, Option<crate::lab::TempLab>), SetupError> {
        Ok((LoopConfig::default(), None))
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!(self)
    }

    fn rx_buffers(&self) -> usize {
        self.srq_depth
    }

    fn floor(&self) -> Floor {
        Floor::Memory
    }

    /// `send_wqes` entries per connection, as a verbs queue pair is
    /// created with them.
    fn for_config(&self, cfg: &Config) -> LoopConfig {
        LoopConfig {
            sq_depth: cfg.send_wqes as u32,
            ..*self
        }
    }

    fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError> {
        Ok(Box::new(self.fabric(ranks, ENTRY.name)?))
    }
}

impl LoopConfig {
    /// A fabric of `ranks` NICs of these sizes, for a job of `transport`
    /// (loop, or a transport built on it); why not in its words.
    pub(crate) fn fabric(&self, ranks: u16, transport: &'static str) -> Result<Fabric, SetupError> {
        Fabric::new(ranks as usize, *self).map_err(|e| SetupError::Network {
            transport,
            why: e.to_string(),
        })
    }
}

impl Wire for Fabric {
    fn port(
        &self,
        me: u16,
        _: usize,
        _: usize,
        placed: &Result<(), SetupError>,
    ) -> Result<AnyPort, SetupError> {
        placed.clone()?;
        Ok(Fabric::port(self, me).into())
    }
}
