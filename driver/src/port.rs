//! The port: what a transport does for one rank. No protocol decision
//! lives here: the core makes them from the port's [`Caps`].

use rmx_core::{Caps, Gather, PostError, RdmaOp, RegError, Remote, WcResult};

/// One gather entry: a range of local memory and the key it was registered
/// under (0 where the transport checks no key). C's layout, so a gather
/// list reaches a port written in C as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    pub addr: usize,
    pub len: usize,
    pub key: u32,
}

impl From<Gather> for Sge {
    /// The core's gather entry, as a port takes it.
    fn from(g: Gather) -> Sge {
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

/// One work request, as a verbs queue pair takes it: every post a rank
/// makes is one of these, through [`Port::post`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work<'a> {
    /// The bytes of `sges`, in order, as one packet; `solicited` also
    /// wakes a thread sleeping on the peer's events.
    Send { sges: &'a [Sge], solicited: bool },
    /// `head` then `body`, copied during the call (verbs' inline send);
    /// completes later. `signal` false ([`rmx_core::Nic::send_inline`]'s
    /// hint): the port may complete it only when a later signalled post
    /// to the same peer completes, reported then before that one's: as its
    /// own completion, or with the other inline sends completed at that
    /// moment as one [`WorkId::Inlines`](rmx_core::WorkId::Inlines) (with
    /// the signalled one, if it is an inline send too).
    Inline {
        head: &'a [u8],
        body: &'a [u8],
        signal: bool,
    },
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
pub trait Port {
    /// What the transport can do and its limits.
    fn caps(&self) -> Caps;

    /// Registers memory the shell owns (send bounce slots) for local access.
    ///
    /// # Safety
    /// The range stays valid for the transport's accesses until deregistered
    /// and every operation naming it has completed.
    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError>;

    /// Registers application memory for local and remote access (a
    /// rendezvous, a zero-copy send, a window).
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

    /// The core's unexpected messages hold all but `free` receive buffers
    /// ([`rmx_core::Nic::rx_pool_low`]): buffers the transport kept back
    /// and has now posted, which the core lends as credits. Default none.
    fn rx_pool_low(&mut self, free: u32) -> u32 {
        let _ = free;
        0
    }

    /// Moves up to `out.len()` finished sends and RDMA operations into
    /// `out`, oldest first, as `ibv_poll_cq` fills a caller's array; how
    /// many. The rest wait for the next poll.
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize;

    /// Waits until no posted operation still reads or writes memory (a
    /// software NIC's engine, a device's queues flushed).
    fn drain(&mut self) {}
}
