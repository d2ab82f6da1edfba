//! One window of a simulated rank, as its rank holds it: memory, the
//! core's epoch, and what the fence in progress keeps (queued operations,
//! gets); the fence's steps are `fence.rs`'s.

use rmx_core::onesided::{Epoch, OpHeader, Target, FIRST};
use rmx_core::{MemKey, UserBuf};

/// A get of the open epoch, by its number: where its bytes are, or will be
/// once the fence ends.
pub(crate) enum Got {
    /// Read when issued (this rank's own window, or nothing to read).
    Bytes(Vec<u8>),
    /// An RDMA read into the epoch's source buffer, at this offset.
    Read { at: usize, len: usize },
    /// To ask of `target` in the fence (Def).
    Asked { target: u16, len: u32 },
    /// The target's answer, being received into `buf`.
    Answer { target: u16, buf: Vec<u8> },
}

/// An operation's messages, as the core composes them
/// ([`OpHeader::compose`]).
pub(crate) struct Outgoing {
    pub(crate) target: u16,
    pub(crate) first: Vec<u8>,
    pub(crate) rest: Vec<u8>,
}

impl Outgoing {
    pub(crate) fn new(target: u16, h: &OpHeader, data: &[u8]) -> Outgoing {
        let mut buf = [0u8; FIRST];
        let (n, apart) = h.compose(data, &mut buf);
        let (first, rest) = (buf[..n].to_vec(), apart.unwrap_or_default().to_vec());
        Outgoing {
            target,
            first,
            rest,
        }
    }
}

/// One window of a rank: its memory in the NIC, the core's epoch, the
/// deferred design's queue, and registered memory RDMA puts read from.
pub struct Win {
    pub id: u16,
    pub epoch: Epoch<Vec<Target>>,
    pub mem: UserBuf,
    pub len: usize,
    pub(crate) queued: Vec<Outgoing>,
    /// Source of this epoch's RDMA puts: buffer, address, key, bytes used.
    pub(crate) src: (UserBuf, u64, MemKey),
    pub(crate) src_used: usize,
    pub(crate) gets: Vec<Got>,
}
