//! What the core asks of the shell: memory reached by handle, and posting work.
//!
//! The core never holds a pointer. Bounce slots, receive buffers, unexpected-message
//! storage and user buffers are named by handles; the shell resolves them and does
//! the copies and the posts, on whatever NIC it drives.

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
    /// Unexpected-message storage slot `0..UNEXPECTED` (each `eager_threshold` bytes).
    Unexpected(u16, u32),
}

/// When the NIC is done with a posted send's bounce slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// The data left the slot during the call (inline/PIO send); the slot is free.
    Done,
    /// The NIC still reads the slot; the shell calls `Endpoint::on_send_complete`.
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
    /// The core is done with a receive buffer; the NIC may fill it again.
    fn repost(&mut self, buf: RxBuf);

    /// Sends `header` then `len` bytes at `payload` as one packet, copied out by
    /// the CPU during the call (verbs' `IBV_SEND_INLINE`): no bounce slot, no
    /// key check, no completion. Called only on reliable transports, for
    /// payloads up to `Config::inline_max`.
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; crate::wire::HEADER_LEN],
        payload: Loc,
        len: usize,
    ) -> Result<(), PostError> {
        let _ = (peer, header, payload, len);
        Err(PostError::Unsupported)
    }
}
