//! The seam between a rank and the network it runs on. [`crate::rank::Rank`],
//! waiting, the progress thread, the job runner and the benchmarks are
//! written against [`Transport`]; each network is one module behind it:
//! `loop` ([`crate::loopnic::Port`]) and raw Ethernet
//! ([`crate::eth::EthPort`]). It is shaped as verbs are (send queues with
//! gather lists, a shared receive pool, completion queues, solicited events,
//! memory keys) so that rdma-core and a kernel driver plug in the same way.
//! No protocol decision lives here: the core makes them from [`Caps`].

mod any;
#[cfg(test)]
pub(crate) mod delayed;
mod events;
mod faulty;
pub mod registry;

pub use any::AnyPort;
pub use events::{Events, FdEvents};
pub use faulty::{Faults, Faulty};

use rmx_core::{Caps, PostError, RdmaOp, RegError, Remote, WcResult};

/// One gather entry: a range of local memory and the key it was registered
/// under (0 where the transport checks no key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    pub addr: usize,
    pub len: usize,
    pub key: u32,
}

impl From<rmx_core::Gather> for Sge {
    /// The core's gather entry, as the transport takes it.
    fn from(g: rmx_core::Gather) -> Sge {
        Sge {
            addr: g.addr as usize,
            len: g.len as usize,
            key: g.key.0,
        }
    }
}

/// A registration: the range and the key operations name it by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    pub addr: usize,
    pub len: usize,
    pub key: u32,
}

/// A receive buffer the port filled: a packet, or (with `imm`) the
/// notification of an RDMA write with immediate, which carries no bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recv {
    pub buf: u32,
    pub imm: Option<u32>,
}

/// A finished send or RDMA operation, by the id it was posted with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub result: WcResult,
}

/// What a transport dropped or refused below the core, for `rmx` reports
/// and tests: frames the core never saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Frames shorter than their headers.
    pub short: u64,
    /// Frames of another frame-format version.
    pub version: u64,
    /// Frames whose packet length runs past the frame.
    pub length: u64,
    /// Frames for an endpoint index that is not this one.
    pub unknown_endpoint: u64,
    /// Frames from an address that is no rank of the job.
    pub unknown_source: u64,
    /// Frames whose seal is not the job's: forged, or another job's.
    pub forged: u64,
    /// Frames dropped on purpose (fault injection).
    pub injected_drops: u64,
    /// Frames sent and received.
    pub frames_out: u64,
    pub frames_in: u64,
}

/// One work request, as a verbs queue pair takes it: every post a rank
/// makes is one of these, through [`Transport::post`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work<'a> {
    /// The bytes of `sges`, in order, as one packet; `solicited` also
    /// wakes a thread sleeping on the peer's events.
    Send { sges: &'a [Sge], solicited: bool },
    /// `head` then `body`, copied during the call (verbs' inline send);
    /// completes later.
    Inline { head: &'a [u8], body: &'a [u8] },
    /// One RDMA read or write between `local` and the peer's memory.
    Rdma {
        op: RdmaOp,
        local: Sge,
        remote: Remote,
    },
    /// One RDMA write that, once its data has landed, consumes one of the
    /// peer's receive buffers to report `imm` there ([`Recv::imm`]); a
    /// peer out of receive buffers is [`PostError::Busy`] (receiver not
    /// ready), with nothing written.
    WriteImm {
        local: Sge,
        remote: Remote,
        imm: u32,
    },
}

/// A network port of one rank: posts work, reports completions and
/// received packets, and holds the receive buffers the core names.
///
/// Every post either completes during the call (`Ok(Some(_))`) or later
/// through [`poll_cq`](Self::poll_cq) with the same `wr_id`.
pub trait Transport: Send {
    /// This rank's index in the job.
    fn rank(&self) -> u16;

    /// What the transport can do and its limits.
    fn caps(&self) -> Caps;

    /// What a thread sleeps on until the port has something for it.
    fn events(&self) -> Events;

    /// Registers memory the shell owns (send bounce slots) for local access.
    ///
    /// # Safety
    /// The range stays valid for the transport's accesses until deregistered
    /// and every operation naming it has completed.
    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError>;

    /// Registers application memory for local and remote access (a
    /// rendezvous, a zero-copy send).
    ///
    /// # Safety
    /// As [`register`](Self::register).
    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError>;

    /// Ends a registration; operations naming it afterwards fail.
    fn deregister(&mut self, mr: Mr);

    /// Posts one work request to `peer`: done during the call (`Ok(Some)`,
    /// or an inline send's `Ok(None)` completing later), or completing
    /// later through [`poll_cq`](Self::poll_cq) with `wr_id` (`Ok(None)`).
    /// A transport refuses what it cannot do with
    /// [`PostError::Unsupported`].
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError>;

    /// Hands the work posted since the last call to the hardware at once (a
    /// doorbell): a transport may hold posts to send them in one batch, and
    /// the rank rings this at the end of every call that may have posted.
    fn doorbell(&mut self) {}

    /// The next received packet, if any.
    fn poll_recv(&mut self) -> Option<Recv>;

    /// The packet in a buffer polled and not yet reposted; `None` for any
    /// other index.
    fn rx_bytes(&self, buf: u32) -> Option<&[u8]>;

    /// Hands a polled buffer back; `false` (nothing done) for one not held.
    fn repost(&mut self, buf: u32) -> bool;

    /// Moves up to `out.len()` finished sends and RDMA operations into
    /// `out`, oldest first, as `ibv_poll_cq` fills a caller's array; how
    /// many. The rest wait for the next poll.
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize;

    /// Work of this port is under way on another thread of this machine (a
    /// software NIC's engine): a waiter should leave it the CPU.
    fn busy(&self) -> bool {
        false
    }

    /// Waits until no posted operation still reads or writes memory.
    fn drain(&mut self) {}

    /// Frames dropped or refused below the core.
    fn counters(&self) -> Counters {
        Counters::default()
    }
}
