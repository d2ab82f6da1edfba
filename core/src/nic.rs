//! What the core asks of the shell: memory reached by handle, and posting work.
//!
//! The core never holds a pointer. Bounce slots, receive buffers (which also
//! keep unexpected messages) and user buffers are named by handles; the shell resolves them and does
//! the copies and the posts, on whatever NIC it drives.

pub use crate::completion::WorkId;
pub use crate::remote::{MemKey, RdmaError, Remote};

/// A pre-registered send bounce slot owned by the endpoint (index `0..SLOTS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotId(pub u16);

/// A receive buffer the NIC filled; opaque to the core, handed back by [`Nic::repost`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxBuf(pub u32);

/// A user buffer the shell registered for a send or a receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UserBuf(pub u32);

/// A place in memory the core names for a copy: a handle plus a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// A send bounce slot.
    Slot(SlotId, u32),
    /// A received packet (offset from the packet's first byte).
    Rx(RxBuf, u32),
    /// A user buffer.
    User(UserBuf, u32),
}

/// Why the shell could not register memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegError {
    /// The NIC or shell does not register user memory.
    Unsupported,
    /// Out of pinnable memory or registration resources (e.g. `RLIMIT_MEMLOCK`).
    NoResources,
    /// The range cannot be watched for changes, so a registration of it could
    /// go stale unnoticed.
    Unmonitored,
}

/// A payload the NIC gathers straight from registered user memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather {
    pub addr: u64,
    pub len: u32,
    pub key: MemKey,
}

/// When the NIC is done with a posted send's bounce slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// The data left the slot during the call (inline/PIO send); the slot is free.
    Done,
    /// The NIC still holds the send (reads the slot, or waits for the peer to
    /// take it): it occupies one of the connection's `Config::send_wqes`
    /// until the shell calls `Endpoint::on_send_complete`.
    Later,
}

/// Why a post was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// Send queue full or receiver not ready: the core keeps the slot and posts it again.
    Busy,
    /// The connection is gone; the core counts it and drops the packet.
    Down,
    /// The NIC cannot do this (e.g. no inline sends); the core uses another way.
    Unsupported,
    /// A memory key or bound check failed (verbs' local protection or remote
    /// access error, reported during the post): nothing was transferred.
    Access,
}

/// What a transport can do and its limits: the core picks a rendezvous from
/// the first, and [`crate::Config::fit`] fits a configuration to the rest,
/// so no shell re-derives a protocol rule. A limit of 0 means "no limit".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// RDMA write into a peer's registered memory (the RPUT rendezvous).
    pub rdma_write: bool,
    /// RDMA read from a peer's registered memory (the RGET rendezvous).
    pub rdma_read: bool,
    /// RDMA write with an immediate value, which consumes a receive buffer
    /// at the peer and reports the value there once the data has landed
    /// (the remote notification the Fence-Imm-RI design counts).
    pub write_imm: bool,
    /// Largest single RDMA operation in bytes; longer transfers are split.
    pub max_transfer: u32,
    /// Largest inline send, header included (verbs' `max_inline_data`).
    pub inline_max: u32,
    /// Send work-queue entries per connection.
    pub send_queue: u32,
    /// Buffers the shell posts to its shared receive queue.
    pub rx_buffers: u32,
    /// Largest packet a send may carry (a receive buffer's size).
    pub mtu: u32,
    /// Packets may be lost, duplicated or reordered (raw Ethernet): the
    /// core's reliability layer must carry everything.
    pub lossy: bool,
    /// Registering memory costs next to nothing and sends may gather from
    /// it (the transport's sends read memory through the CPU, as a socket
    /// call does): a PULL sender registers its buffer and sends each frame
    /// straight from it instead of copying it into a bounce slot first.
    pub cheap_gather: bool,
}

/// The direction of a one-sided transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaOp {
    /// Local memory to the peer's.
    Write,
    /// The peer's memory to local.
    Read,
}

/// Implemented by a shell for the NIC and memory it owns.
pub trait Nic {
    /// The bytes of a send bounce slot (at least `HEADER_LEN + eager_threshold`).
    fn slot_mut(&mut self, slot: SlotId) -> &mut [u8];
    /// The bytes of a received packet, exactly as long as the packet.
    fn rx(&self, buf: RxBuf) -> &[u8];
    /// Copies `len` bytes; the core guarantees both ranges lie inside their objects.
    fn copy(&mut self, dst: Loc, src: Loc, len: usize);
    /// Sends the first `len` bytes of `slot` to `peer`.
    fn post_send(&mut self, peer: u16, slot: SlotId, len: usize) -> Result<Posted, PostError>;

    /// As [`post_send`](Self::post_send), and wakes a progress thread the
    /// peer may have sleeping on its NIC's events (verbs' solicited event):
    /// the core asks for it on rendezvous control packets only, so eager
    /// traffic never pays for a wake-up.
    fn post_send_solicited(
        &mut self,
        peer: u16,
        slot: SlotId,
        len: usize,
    ) -> Result<Posted, PostError> {
        self.post_send(peer, slot, len)
    }
    /// The core is done with a receive buffer; the NIC may fill it again.
    /// A buffer holding an unexpected message comes back only when that
    /// message is received, so it stays readable through [`rx`](Self::rx).
    fn repost(&mut self, buf: RxBuf);

    /// Unexpected messages hold all but `free` buffers of the shared
    /// receive pool (`Config::rx_low_water` reached, as verbs' SRQ limit
    /// event). The shell may post more buffers from a reserve and return how
    /// many; the core lends them as credits. The default adds none: peers
    /// wait for credit (back-pressure) until the application receives.
    fn rx_pool_low(&mut self, free: u32) -> u32 {
        let _ = free;
        0
    }

    /// Sends `header` then `len` bytes at `payload` as one packet, copied out by
    /// the CPU during the call (verbs' `IBV_SEND_INLINE`): no bounce slot, no
    /// key check. Called only on reliable transports, for payloads up to
    /// `Config::inline_max`. [`Posted::Later`]: the send still holds one of the
    /// connection's send entries; the shell calls `Endpoint::on_inline_complete`.
    ///
    /// `signal` false: the send needs no completion of its own (verbs'
    /// unsignalled send, which spares the device a completion entry and
    /// the shell a poll). The shell may then report its completion only
    /// when a later signalled post to the same peer completes, as a
    /// reliable connection completes in order; the core never waits on
    /// such a send before it has made one. A shell may also ignore the
    /// hint and complete every send.
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; crate::wire::HEADER_LEN],
        payload: Loc,
        len: usize,
        signal: bool,
    ) -> Result<Posted, PostError> {
        let _ = (peer, header, payload, len, signal);
        Err(PostError::Unsupported)
    }

    /// [`send_inline`](Self::send_inline) of the packet encoded in the
    /// first `len` bytes of `slot` (header, then payload; `len` is at
    /// least `HEADER_LEN`, as the core checks): a message that waited for
    /// a send entry. A shell that sends the slot as it lies copies it out
    /// in one piece, without first reading its header back. The default
    /// does what `send_inline` does with the header copied out.
    fn send_inline_slot(
        &mut self,
        peer: u16,
        slot: SlotId,
        len: usize,
        signal: bool,
    ) -> Result<Posted, PostError> {
        use crate::wire::HEADER_LEN;
        let head = self
            .slot_mut(slot)
            .get(..HEADER_LEN)
            .and_then(|h| <[u8; HEADER_LEN]>::try_from(h).ok())
            .ok_or(PostError::Access)?;
        let body = len.checked_sub(HEADER_LEN).ok_or(PostError::Access)?;
        self.send_inline(
            peer,
            &head,
            Loc::Slot(slot, HEADER_LEN as u32),
            body,
            signal,
        )
    }

    /// [`send_inline`](Self::send_inline) of `body`, bytes the shell handed
    /// the core with the send ([`crate::Endpoint::isend_now`]) rather than a
    /// buffer named by handle. The default sends nothing inline.
    fn send_inline_bytes(
        &mut self,
        peer: u16,
        header: &[u8; crate::wire::HEADER_LEN],
        body: &[u8],
        signal: bool,
    ) -> Result<Posted, PostError> {
        let _ = (peer, header, body, signal);
        Err(PostError::Unsupported)
    }

    /// The address of a user buffer, for the reuse tracker; `None` if the
    /// shell does not say (zero-copy sends are then never attempted).
    fn user_addr(&self, buf: UserBuf) -> Option<u64> {
        let _ = buf;
        None
    }

    /// Registers the page-aligned range `[addr, addr+len)` for the NIC to read.
    fn register(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        let _ = (addr, len);
        Err(RegError::Unsupported)
    }

    /// Ends a registration made by [`register`](Self::register).
    fn deregister(&mut self, key: MemKey) {
        let _ = key;
    }

    /// A registration for one rendezvous transfer, for local and remote
    /// access, ended by [`deregister`](Self::deregister) when the transfer
    /// completes. Unlike [`register`](Self::register) it is never cached, so
    /// the range need not be watched for changes.
    fn register_once(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        self.register(addr, len)
    }

    /// What the transport can do; the default is a message-only transport.
    fn caps(&self) -> Caps {
        Caps::default()
    }

    /// Posts one RDMA operation of `local.len` bytes between `local` and the
    /// peer's `remote`, with `work`'s [`WorkId::wr_id`]: the shell hands
    /// that id back with the completion of a [`Posted::Later`] post.
    fn post_rdma(
        &mut self,
        peer: u16,
        work: WorkId,
        op: RdmaOp,
        local: Gather,
        remote: Remote,
    ) -> Result<Posted, PostError> {
        let _ = (peer, work, op, local, remote);
        Err(PostError::Unsupported)
    }

    /// As [`post_rdma`](Self::post_rdma) writing, and the peer is told
    /// `imm` once the data has landed: it consumes one of the peer's
    /// receive buffers ([`Caps::write_imm`]; verbs'
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`). [`PostError::Busy`] when the peer
    /// has no receive buffer now.
    fn post_write_imm(
        &mut self,
        peer: u16,
        work: WorkId,
        local: Gather,
        remote: Remote,
        imm: u32,
    ) -> Result<Posted, PostError> {
        let _ = (peer, work, local, remote, imm);
        Err(PostError::Unsupported)
    }

    /// Sends the first `header_len` bytes of `slot` followed by `payload`,
    /// gathered from registered user memory, as one packet (a two-entry
    /// gather list). [`Posted::Later`] means the NIC still reads the user
    /// buffer until the slot's completion.
    fn post_send_gather(
        &mut self,
        peer: u16,
        slot: SlotId,
        header_len: usize,
        payload: Gather,
    ) -> Result<Posted, PostError> {
        let _ = (peer, slot, header_len, payload);
        Err(PostError::Unsupported)
    }
}
