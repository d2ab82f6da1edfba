//! What one fence's requests read and write, kept in the window between
//! fences so the next reuses the memory.

use rmx_driver::task::{FenceLayout, FenceTask};

use super::messages::Outgoing;
use crate::rank::Req;

/// A fence's task on a std rank: its requests' slots in a vector.
pub(super) type Task = FenceTask<Req, Vec<Option<Req>>>;

/// The buffers of one fence, kept in the window, emptied, so the next
/// reuses the memory. Every
/// byte a request names lies on the heap (inner vectors), so the lists
/// may grow while requests are out.
#[derive(Default)]
pub(super) struct Io {
    /// The bytes the fence task is lent (its counts, finish bodies, flags
    /// and an operation's first message), and where each lies: the same
    /// for every fence of the window.
    pub mem: Vec<u8>,
    pub layout: Option<FenceLayout>,
    /// Operations sent (deferred design).
    pub outgoing: Vec<Outgoing>,
    /// Accumulates sent before the fence (immediate designs).
    pub sent: Vec<Outgoing>,
    /// Answers to this rank's gets: their numbers, targets and bytes.
    pub replies: Vec<(u32, u16, Vec<u8>)>,
    /// Answers this rank sends to others' gets.
    pub answers: Vec<Vec<u8>>,
    /// Where an operation's data sent apart lands.
    pub data: Vec<u8>,
}

impl Io {
    /// Forgets one fence's contents, keeping the memory for the next
    /// (up to [`KEEP`] entries a list: one large epoch does not pin its
    /// lists' memory for the window's life). Only once no request names
    /// any of it.
    pub(super) fn clear(&mut self) {
        self.outgoing.clear();
        self.sent.clear();
        self.replies.clear();
        self.answers.clear();
        self.outgoing.shrink_to(KEEP);
        self.sent.shrink_to(KEEP);
        self.replies.shrink_to(KEEP);
        self.answers.shrink_to(KEEP);
        self.data.shrink_to(KEEP);
    }
}

/// Entries a fence's request and operation lists keep for the next.
pub(super) const KEEP: usize = 256;
