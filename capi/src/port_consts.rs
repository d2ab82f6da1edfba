//! The embedded endpoint's constants as C sees them. They are rmx-driver's
//! (which the Linux module's endpoints share), written out here so that
//! the header carries them, and each checked equal to the driver's.

use std::ffi::c_int;

use rmx_driver::embed::{endpoint as ep, ops, task, window};

/// A port callback's result: done.
pub const RMX_PORT_OK: c_int = 0;

/// `post`: the work was done during the call (its completion is this).
pub const RMX_PORT_DONE: c_int = 1;

/// `post`: send queue full, or (a write with immediate) the peer has no
/// receive buffer; nothing was done and the core posts it again later.
pub const RMX_PORT_BUSY: c_int = -1;

/// `post`, or a completion's `status`: the connection to the peer is gone.
pub const RMX_PORT_DOWN: c_int = -2;

/// `post` or `reg`: the port does not do this (the core does without).
pub const RMX_PORT_UNSUPPORTED: c_int = -3;

/// `post`, or a completion's `status`: a memory key or bound check failed.
pub const RMX_PORT_ACCESS: c_int = -4;

/// `reg`: out of registrations or pinnable memory.
pub const RMX_PORT_NO_RESOURCE: c_int = -5;

/// `rmx_work_t.kind`: the bytes of `sges`, in order, as one packet.
pub const RMX_WORK_SEND: u32 = 0;

/// `rmx_work_t.kind`: `head` then `body` as one packet, copied during the
/// call (an inline send).
pub const RMX_WORK_INLINE: u32 = 1;

/// `rmx_work_t.kind`: write `sges[0]` to the peer's `remote_addr`.
pub const RMX_WORK_RDMA_WRITE: u32 = 2;

/// `rmx_work_t.kind`: read the peer's `remote_addr` into `sges[0]`.
pub const RMX_WORK_RDMA_READ: u32 = 3;

/// `rmx_work_t.kind`: write as `RMX_WORK_RDMA_WRITE`, then take one of the
/// peer's receive buffers to report `imm` there.
pub const RMX_WORK_WRITE_IMM: u32 = 4;

/// `rmx_work_t.flags` (a send): also wake a thread sleeping on the peer.
pub const RMX_WORK_SOLICITED: u32 = 1;

/// `rmx_work_t.flags` (an inline send): report this send's completion;
/// without it the port may report it only with a later signalled one.
pub const RMX_WORK_SIGNAL: u32 = 2;

/// `reg`'s `flags`: application memory, for remote access too (a
/// rendezvous, a window); without it, memory of rmx's own (bounce slots)
/// for local access.
pub const RMX_REG_REMOTE: u32 = 1;

/// `poll_recv`'s result: a packet is in `*buf`.
pub const RMX_RECV_PACKET: c_int = 1;

/// `poll_recv`'s result: a write with immediate landed, `*imm` its value
/// (`*buf` the receive buffer it took, handed back at once).
pub const RMX_RECV_IMM: c_int = 2;

/// `rmx_ep_config_t.rendezvous`: the core picks by what the port can do
/// (RGET, else RPUT, else PULL).
pub const RMX_RNDV_AUTO: u8 = 0;

/// The receiver's buffer is written by the sender (RDMA write).
pub const RMX_RNDV_RPUT: u8 = 1;

/// The sender's buffer is read by the receiver (RDMA read).
pub const RMX_RNDV_RGET: u8 = 2;

/// The receiver asks for frames, the sender sends them (no RDMA).
pub const RMX_RNDV_PULL: u8 = 3;

/// `rmx_coll_t.kind`: returns once every rank entered it.
pub const RMX_COLL_BARRIER: c_int = 0;

/// Every rank's `len` bytes become their reduction over all ranks.
pub const RMX_COLL_ALLREDUCE: c_int = 1;

/// Every rank ends with the root's `len` bytes.
pub const RMX_COLL_BCAST: c_int = 2;

/// The root ends with the reduction of every rank's `len` bytes (the
/// others' are left partly reduced).
pub const RMX_COLL_REDUCE: c_int = 3;

/// Rank i gives block i (`len` bytes at i × `len`) of a buffer of n
/// blocks; every rank ends with all of them.
pub const RMX_COLL_ALLGATHER: c_int = 4;

/// As allgather, but only the root ends with all blocks.
pub const RMX_COLL_GATHER: c_int = 5;

/// The root's n blocks of `len` bytes: rank i ends with block i.
pub const RMX_COLL_SCATTER: c_int = 6;

/// Every rank gives n blocks; rank i ends with the reduction of every
/// rank's block i, at i × `len`.
pub const RMX_COLL_REDUCE_SCATTER: c_int = 7;

/// Rank i's n blocks (block j for rank j), then n blocks of room: it
/// ends with block i of every rank j at (n + j) × `len`.
pub const RMX_COLL_ALLTOALL: c_int = 8;

/// `rmx_ep_fence`'s assertion: no operation of this rank's epoch ends
/// at this fence (MPI_MODE_NOPRECEDE).
pub const RMX_EP_NO_PRECEDE: u32 = 1;

/// No operation follows this fence until the next (MPI_MODE_NOSUCCEED).
pub const RMX_EP_NO_SUCCEED: u32 = 2;

const _: () = {
    assert!(RMX_EP_NO_PRECEDE == window::RMX_EP_NO_PRECEDE);
    assert!(RMX_EP_NO_SUCCEED == window::RMX_EP_NO_SUCCEED);
    assert!(RMX_PORT_OK == ops::RMX_PORT_OK);
    assert!(RMX_PORT_DONE == ops::RMX_PORT_DONE);
    assert!(RMX_PORT_BUSY == ops::RMX_PORT_BUSY);
    assert!(RMX_PORT_DOWN == ops::RMX_PORT_DOWN);
    assert!(RMX_PORT_UNSUPPORTED == ops::RMX_PORT_UNSUPPORTED);
    assert!(RMX_PORT_ACCESS == ops::RMX_PORT_ACCESS);
    assert!(RMX_PORT_NO_RESOURCE == ops::RMX_PORT_NO_RESOURCE);
    assert!(RMX_WORK_SEND == ops::RMX_WORK_SEND);
    assert!(RMX_WORK_INLINE == ops::RMX_WORK_INLINE);
    assert!(RMX_WORK_RDMA_WRITE == ops::RMX_WORK_RDMA_WRITE);
    assert!(RMX_WORK_RDMA_READ == ops::RMX_WORK_RDMA_READ);
    assert!(RMX_WORK_WRITE_IMM == ops::RMX_WORK_WRITE_IMM);
    assert!(RMX_WORK_SOLICITED == ops::RMX_WORK_SOLICITED);
    assert!(RMX_WORK_SIGNAL == ops::RMX_WORK_SIGNAL);
    assert!(RMX_REG_REMOTE == ops::RMX_REG_REMOTE);
    assert!(RMX_RECV_PACKET == ops::RMX_RECV_PACKET);
    assert!(RMX_RECV_IMM == ops::RMX_RECV_IMM);
    assert!(RMX_RNDV_AUTO == ep::RMX_RNDV_AUTO);
    assert!(RMX_RNDV_RPUT == ep::RMX_RNDV_RPUT);
    assert!(RMX_RNDV_RGET == ep::RMX_RNDV_RGET);
    assert!(RMX_RNDV_PULL == ep::RMX_RNDV_PULL);
    assert!(RMX_COLL_BARRIER == task::RMX_COLL_BARRIER);
    assert!(RMX_COLL_ALLREDUCE == task::RMX_COLL_ALLREDUCE);
    assert!(RMX_COLL_BCAST == task::RMX_COLL_BCAST);
    assert!(RMX_COLL_REDUCE == task::RMX_COLL_REDUCE);
    assert!(RMX_COLL_ALLGATHER == task::RMX_COLL_ALLGATHER);
    assert!(RMX_COLL_GATHER == task::RMX_COLL_GATHER);
    assert!(RMX_COLL_SCATTER == task::RMX_COLL_SCATTER);
    assert!(RMX_COLL_REDUCE_SCATTER == task::RMX_COLL_REDUCE_SCATTER);
    assert!(RMX_COLL_ALLTOALL == task::RMX_COLL_ALLTOALL);
};
