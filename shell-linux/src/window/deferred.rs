//! Fence-Def's side of a window (the fence paper's section 3.1): the
//! epoch's operations wait here, with their bytes, until the closing
//! fence sends them as two-sided messages ([`Step::SendQueued`]); the
//! target applies the ones the core admits and answers gets, and the
//! origin receives the answers straight into their buffers. How many
//! operations each rank receives is the core's to count and sum.
//!
//! [`Step::SendQueued`]: rmx_core::onesided::Step::SendQueued

use rmx_core::onesided::RmaKind;

use super::io::Io;
use super::memory::WinMemory;
use super::messages::Outgoing;
use super::{Queued, Win};

/// The fence sends the queued operations: those on this rank's own
/// window are applied (its own gets read) and the rest made ready in `io`,
/// with a buffer for the answer to every get.
pub(super) fn ready(
    me: u16,
    mem: &WinMemory,
    misapplied: &mut u64,
    queued: impl Iterator<Item = Queued>,
    io: &mut Io,
) {
    for q in queued {
        let h = q.header;
        match (q.target == me, h.kind == RmaKind::Get) {
            (true, true) => {
                let mut b = vec![0u8; h.len as usize];
                mem.read(h.offset as usize, &mut b);
                io.replies.push((h.id, me, b));
            }
            (true, false) => super::apply(mem, misapplied, &h, &q.data),
            (false, get) => {
                if get {
                    io.replies.push((h.id, q.target, vec![0u8; h.len as usize]));
                }
                io.outgoing.push(Outgoing::new(q.target, &h, q.data));
            }
        }
    }
    // The task receives the answers to the gets of other ranks: those
    // read here come last, past what it is told.
    io.replies.sort_by_key(|&(_, target, _)| target == me);
}

/// Hands out the epoch's gets, answered into their buffers.
pub(super) fn end_epoch(w: &mut Win, gets: u32, io: &mut Io) {
    w.got = vec![None; gets as usize];
    for (gid, _, buf) in io.replies.drain(..) {
        if let Some(g) = w.got.get_mut(gid as usize) {
            *g = Some(buf);
        }
    }
}
