//! Raw Ethernet for the `eth` transport: frames of rmx's own EtherType
//! (`rmx_core::frame`) through an AF_PACKET socket on one interface, and
//! the network namespaces of `rmx lab` that a rank's thread enters.

pub mod netns;
pub mod port;
pub mod qdisc;
pub mod ring;
pub mod socket;

pub use port::{EthOpts, EthPort, Faults};
pub use socket::RawSocket;
