//! Fence-Def's side of a window (the fence paper's section 3.1): the
//! epoch's operations wait here, with their bytes, until the closing
//! fence sends them as two-sided messages ([`Step::SendQueued`]); the
//! target applies the ones the core admits and answers gets, and the
//! origin receives the answers straight into their buffers. How many
//! operations each rank receives is the core's to count and sum.
//!
//! [`Step::SendQueued`]: rmx_core::onesided::Step::SendQueued

use rmx_core::onesided::{tag, RmaKind};
use rmx_core::{RecvFault, Source, TagSel};

use super::inbox::{self, Inbox};
use super::io::Io;
use super::messages::{recv_failed, Outgoing};
use super::{Win, WinError, RMA_CONTEXT};
use crate::rank::Rank;
use crate::transport::Transport;

/// Posts the receives of this rank's get replies, applies its operations
/// on its own window, and sends the rest: they travel while the counts are
/// summed (their tags name the epoch: a target matches only its own).
/// Operations for this rank are received meanwhile whenever the sends wait
/// for request handles. The first fault of a send waited for.
///
/// # Safety
/// The buffers of `io` stay in place, untouched, until every request on
/// `io.pending` and `io.reply_recvs` completed; `inbox` as
/// [`inbox::drain`].
pub(super) unsafe fn send_queued<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
    inbox: &mut Inbox,
) -> Result<Option<RecvFault>, WinError> {
    let (id, me) = (w.id, w.me);
    let queued = std::mem::take(&mut w.queued);
    for q in queued.iter().filter(|q| q.header.kind == RmaKind::Get) {
        io.replies
            .push((q.header.id, vec![0u8; q.header.len as usize]));
    }
    for (q, (gid, buf)) in queued
        .iter()
        .filter(|q| q.header.kind == RmaKind::Get)
        .zip(io.replies.iter_mut())
    {
        if q.target == me {
            w.mem.read(q.header.offset as usize, buf);
            continue;
        }
        let sel = TagSel::Tag(tag(id, epoch, *gid));
        // SAFETY: the caller's contract; `replies` never grows again.
        let req = unsafe {
            r.irecv_in(
                Source::Rank(q.target),
                sel,
                RMA_CONTEXT,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        io.reply_recvs.push(req.map_err(recv_failed)?);
    }
    for q in queued {
        if q.target != me {
            io.outgoing.push(Outgoing::new(q.target, &q.header, q.data));
        } else if q.header.kind != RmaKind::Get {
            w.apply(&q.header, &q.data);
        }
    }
    let mut fault = None;
    for o in io.outgoing.iter() {
        // SAFETY: `outgoing` is complete (never grows again); the caller's
        // contract keeps it, and the inbox.
        let sent = unsafe { o.send(r, &mut io.pending, &mut |r| inbox::drain(w, r, inbox)) };
        fault = fault.or(sent?);
    }
    Ok(fault)
}

/// Hands out the epoch's gets, answered into their buffers.
pub(super) fn end_epoch(w: &mut Win, gets: u32, io: &mut Io) {
    w.got = vec![None; gets as usize];
    for (gid, buf) in io.replies.drain(..) {
        if let Some(g) = w.got.get_mut(gid as usize) {
            *g = Some(buf);
        }
    }
}
