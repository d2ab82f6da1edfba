//! Raw Ethernet for the `eth` transport: frames of rmx's own EtherType
//! (`rmx_core::wire::frame`) through an AF_PACKET socket on one interface, and
//! the network namespaces of `rmx lab` that a rank's thread enters.

pub mod local;
mod network;
mod options;
pub mod port;
pub mod qdisc;
mod regs;
pub mod ring;
pub mod socket;

pub use crate::transport::Faults;
pub use network::EthNet;
pub use options::{EthOptions, FramesSel, PinningSel, RxSel};
pub use port::{EthOpts, EthPort};
pub use socket::RawSocket;

use rmx_core::wire::frame::SealKey;

/// A fresh secret for a job's frames, from the kernel's random source.
pub fn new_key() -> Result<SealKey, String> {
    let mut b = [0u8; SealKey::LEN];
    getrandom::fill(&mut b).map_err(|e| format!("no random bytes for the job's key: {e}"))?;
    Ok(SealKey::from_bytes(b))
}

/// Raw Ethernet in the transport registry.
pub const ENTRY: crate::transport::Entry = crate::transport::Entry {
    name: "eth",
    about: "raw Ethernet frames over AF_PACKET (needs root or CAP_NET_RAW)",
    built: true,
    floor: "bare-frame floor",
    caps: CAPS,
    device: false,
    launched: Some(
        "--iface IF (the interface to use, e.g. lo, or each namespace's with `ip netns exec`)",
    ),
    info: None,
};

/// What raw Ethernet can do, before a port knows its interface (the
/// receive pool and the MTU come from the port): messages only, no RDMA,
/// frames may be lost, and sends gather from memory through the CPU.
pub const CAPS: rmx_core::Caps = rmx_core::Caps {
    rdma_write: false,
    rdma_read: false,
    write_imm: false,
    max_transfer: 0,
    inline_max: 0,
    send_queue: 0,
    rx_buffers: 0,
    mtu: 0,
    lossy: true,
    cheap_gather: true,
};
