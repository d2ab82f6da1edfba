//! verbs' command-line options: which device, port and GID every rank
//! opens.

use super::{Select, Sizes, VerbsNet};
use crate::launch::Launch;

/// `--device`, `--port`, `--gid-index`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct VerbsOptions {
    /// verbs: the RDMA device every rank opens (`ibv_devices` lists them)
    /// [default: the first].
    #[arg(long)]
    pub device: Option<String>,
    /// verbs: the device's port [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub port: Option<u8>,
    /// verbs: the GID table index (`ibv_devinfo -v`) [default: the first
    /// RoCE v2 GID of an IPv4 address, else the first valid one].
    #[arg(long)]
    pub gid_index: Option<u8>,
}

impl VerbsOptions {
    /// The first option given, by its flag.
    pub fn given(&self) -> Option<&'static str> {
        [
            ("--device", self.device.is_some()),
            ("--port", self.port.is_some()),
            ("--gid-index", self.gid_index.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The network these options name. The device is looked up here, so
    /// that a wrong name is a sentence, not a failed rank.
    pub fn open(&self) -> Result<VerbsNet, String> {
        let names = super::device::names();
        match &self.device {
            None if names.is_empty() => return Err("no RDMA device: load rdma_rxe and add one (`rdma link add rxe0 type rxe netdev IF`), or use --transport loop".into()),
            Some(d) if !names.contains(d) => {
                return Err(format!(
                    "no RDMA device {d:?}: this machine has {} (`ibv_devices` lists them)",
                    match names.is_empty() {
                        true => "none".to_string(),
                        false => names.join(", "),
                    }
                ))
            }
            _ => {}
        }
        let launch = crate::pmi::Pmi::from_env()
            .map_err(|e| format!("started by a launcher, but its PMI failed: {e}"))?
            .map(Launch::new);
        Ok(VerbsNet {
            select: Select {
                device: self.device.clone().or_else(|| names.first().cloned()),
                port: self.port.unwrap_or(1),
                gid_index: self.gid_index,
            },
            sizes: Sizes::default(),
            launch,
        })
    }
}
