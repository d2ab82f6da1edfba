//! A transport's line in the registry, as the transport itself declares
//! it: here in the seam, so that transports name it without importing the
//! registry that lists them. Every command that treats transports apart
//! reads it (or the network's [`Network`](super::Network) methods), so a
//! new transport is its module and one line in the registry.

use rmx_core::Caps;

/// One transport: its name on command lines and in reports, a line about
/// it, whether this build carries it, and what the commands that treat
/// transports apart need to know of it before a port opens.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub built: bool,
    /// The legend of its benchmarks' floor curve ("": no floor).
    pub floor: &'static str,
    /// What it can do before a port opens (the limits come with the
    /// port): the fence designs it offers, whether the core runs its
    /// reliability layer over it (`lossy`).
    pub caps: Caps,
    /// Its ports sit on a device whose registration cost and memory per
    /// connection are measured (`rmx calibrate`, `rmx model memory`),
    /// rather than modelled on the loop NIC.
    pub device: bool,
    /// How a process a launcher started runs one rank on it: the flags to
    /// add to `--transport NAME` ("" for none); `None` where its ranks are
    /// threads of one process.
    pub launched: Option<&'static str>,
    /// What `rmx info` says of it beyond its line, with `send_wqes`
    /// entries per connection.
    pub info: Option<fn(send_wqes: u16) -> Info>,
}

/// What a reliable transport with every RDMA operation the core uses can
/// do before its port opens (the limits come with the port): loop, verbs.
pub const RDMA: Caps = Caps {
    rdma_write: true,
    rdma_read: true,
    write_imm: true,
    max_transfer: 0,
    inline_max: 0,
    send_queue: 0,
    rx_buffers: 0,
    mtu: 0,
    lossy: false,
    cheap_gather: false,
};

/// A transport's part of `rmx info`: a JSON value under its name, and the
/// lines the text form prints.
pub struct Info {
    pub json: serde_json::Value,
    pub lines: Vec<String>,
}

/// The fence designs a transport that can do `caps` carries.
pub fn designs(caps: &Caps) -> Vec<rmx_core::onesided::Design> {
    rmx_core::onesided::Design::ALL
        .into_iter()
        .filter(|d| d.offered(caps))
        .collect()
}

impl Entry {
    /// The fence designs it carries, by what it can do before a port opens.
    pub fn designs(&self) -> Vec<rmx_core::onesided::Design> {
        designs(&self.caps)
    }

    /// What a launched job gives to run on this transport, if it can.
    pub fn launch_flags(&self) -> Option<String> {
        let flags = self.launched.filter(|_| self.built)?;
        Some(match flags {
            "" => format!("--transport {}", self.name),
            f => format!("--transport {} {f}", self.name),
        })
    }
}
