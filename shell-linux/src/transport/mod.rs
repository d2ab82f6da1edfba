//! The seam between a rank and the network it runs on. Each network is
//! one module implementing the driver layer's [`Port`] (shaped as verbs
//! are: one post per work request with a gather list, a shared receive
//! pool, a completion queue, memory keys), which every shell shares, and
//! [`Transport`], what the std shell adds for threads (events to sleep on,
//! the rank's number, reports): `loop` ([`crate::loopnic::Port`]) and raw
//! Ethernet ([`crate::eth::EthPort`]). No protocol decision lives here:
//! the core makes them from [`Caps`](rmx_core::Caps).

#[cfg(any(test, feature = "test-transport"))]
pub(crate) mod delayed;
mod entry;
pub mod env;
mod error;
mod events;
pub mod faulty;
pub mod network;
pub mod registry;

pub use entry::{Entry, Info, RDMA};
pub use error::SetupError;
pub use events::{Events, FdEvents, Notifier};
pub use faulty::{Faults, Faulty};
pub use network::{Device, Floor, Network, Swap, Wire};
pub use registry::{AnyPort, Net};

pub use rmx_driver::{Completion, Mr, Port, Recv, Sge, Work};

/// What a transport dropped or refused below the core, for `rmx` reports
/// and tests: frames the core never saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Frames shorter than their headers.
    pub short: u64,
    /// Frames of another frame-format version.
    pub version: u64,
    /// Frames whose packet length runs past the frame (eth); receives that
    /// failed, longer than a buffer or flushed (verbs).
    pub length: u64,
    /// Frames for an endpoint index that is not this one.
    pub unknown_endpoint: u64,
    /// Frames from an address that is no rank of the job.
    pub unknown_source: u64,
    /// Frames whose seal is not the job's (eth), or connection requests
    /// that are not from a rank of the job (verbs): forged, or another
    /// job's.
    pub forged: u64,
    /// Frames dropped on purpose (fault injection).
    pub injected_drops: u64,
    /// Frames the socket kept refusing (a same-host peer full, a busy
    /// transmit queue) when the memory they read had to be given back
    /// (eth): lost, as on a wire, and sent again by the reliability layer.
    pub frames_lost: u64,
    /// Frames sent and received.
    pub frames_out: u64,
    pub frames_in: u64,
    /// Frames whose data rmx.ko took from a registered buffer's region
    /// (eth through the module).
    pub region_frames: u64,
    /// Frames whose region the module could not send from (its pages
    /// past the pinned-page limit, the memory unmapped): sent copied by
    /// the port instead, and the rest of that registration's likewise.
    pub region_refused: u64,
}

/// A rank's port as the std shell drives it: the [`Port`] every shell
/// shares, plus what threads need (events to sleep on, the rank it is,
/// waiting for the hardware) and what reports show.
pub trait Transport: Port + Send {
    /// This rank's index in the job.
    fn rank(&self) -> u16;

    /// What a thread sleeps on until the port has something for it.
    fn events(&self) -> Events;

    /// Work of this port is under way on another thread of this machine (a
    /// software NIC's engine): a waiter should leave it the CPU.
    fn busy(&self) -> bool {
        false
    }

    /// Frames dropped or refused below the core.
    fn counters(&self) -> Counters {
        Counters::default()
    }
}
