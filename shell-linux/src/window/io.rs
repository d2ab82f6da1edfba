//! What one fence's requests read and write, kept in the window between
//! fences so the next reuses the memory.

use super::messages::Outgoing;
use crate::rank::Req;

/// The buffers of one fence's requests, and the requests; kept in the
/// window between fences, emptied, so the next reuses the memory.
#[derive(Default)]
pub(super) struct Io {
    pub pending: Vec<Req>,
    /// Operations sent (deferred design).
    pub outgoing: Vec<Outgoing>,
    /// Finish messages' bodies: at most one per rank, so the vector,
    /// reserved for all of them before the first is sent, never moves
    /// what a request reads.
    pub bodies: Vec<[u8; 4]>,
    /// Replies to this rank's gets with their numbers, and their receives
    /// (apart from `pending`: waiting for request handles, a rank waits
    /// for its sends, never for a reply its own later sends ask for).
    pub replies: Vec<(u32, Vec<u8>)>,
    pub reply_recvs: Vec<Req>,
    /// Naive: the flag every other rank sends, received here (one byte a
    /// rank, sized once before the receives are posted), the receives,
    /// and the one byte every flag sent carries.
    pub flags: Vec<u8>,
    pub flag_recvs: Vec<Req>,
    pub flag: [u8; 1],
    /// The counts a fence sums with the other ranks.
    pub counts: Vec<u8>,
}

impl Io {
    /// Forgets one fence's contents, keeping the memory for the next
    /// (up to [`KEEP`] entries a list: one large epoch does not pin its
    /// lists' memory for the window's life). Only once no request names
    /// any of it.
    pub(super) fn clear(&mut self) {
        self.pending.clear();
        self.outgoing.clear();
        self.bodies.clear();
        self.replies.clear();
        self.reply_recvs.clear();
        self.flag_recvs.clear();
        self.pending.shrink_to(KEEP);
        self.outgoing.shrink_to(KEEP);
        self.replies.shrink_to(KEEP);
    }
}

/// Entries a fence's request and operation lists keep for the next.
pub(super) const KEEP: usize = 256;
