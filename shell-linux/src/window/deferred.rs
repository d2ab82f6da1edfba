//! Fence-Def (the fence paper's section 3.1): the epoch's operations were
//! queued at the origin; the closing fence sends them as two-sided
//! messages, learns from a reduce_scatter how many operations each rank
//! will receive (the messages travel meanwhile), applies the ones that
//! arrive, answers gets, and returns when all of them are done. Nothing opens the next epoch: no operation leaves
//! a rank before its next fence.

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::{RmaKind, Steps};
use rmx_core::{Source, TagSel};

use super::messages::{self, recv_failed, send_failed, Outgoing};
use super::{tag, u32_at, Win, WinError, RMA_CONTEXT};
use crate::collective::CollectiveError;
use crate::rank::{Rank, Req};
use crate::transport::Transport;

pub(super) fn fence<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    steps: Steps,
) -> Result<(), WinError> {
    if steps.completion.is_none() {
        w.got = vec![None; std::mem::take(&mut w.gets) as usize];
        return Ok(());
    }
    let queued = std::mem::take(&mut w.queued);
    // Replies to this rank's gets, received straight into their buffers.
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let mut reply_ids = Vec::new();
    for q in queued.iter().filter(|q| q.header.kind == RmaKind::Get) {
        replies.push(vec![0u8; q.header.len as usize]);
        reply_ids.push((q.target, q.header.id));
    }
    // Every buffer a request names lives out here, so that on an error the
    // requests are ended before any of them goes.
    let mut pending: Vec<Req> = Vec::new();
    let mut outgoing = Vec::new();
    let mut answers: Vec<(u16, u32, Vec<u8>)> = Vec::new();
    let io = Io {
        replies: &mut replies,
        reply_ids: &reply_ids,
        outgoing: &mut outgoing,
        answers: &mut answers,
    };
    // SAFETY: every buffer `exchange` posts lives in this frame until the
    // requests are waited for or abandoned below.
    match unsafe { exchange(w, r, queued, io, &mut pending) } {
        Ok(()) => {
            if let Some(f) = r.wait_all(pending) {
                return Err(WinError::Collective(CollectiveError::Failed(f)));
            }
        }
        Err(e) => {
            r.abandon(pending);
            return Err(e);
        }
    }
    w.got = vec![None; std::mem::take(&mut w.gets) as usize];
    for (buf, &(_, gid)) in replies.into_iter().zip(&reply_ids) {
        w.got[gid as usize] = Some(buf);
    }
    Ok(())
}

/// The buffers of one fence's messages, owned by its caller.
struct Io<'a> {
    replies: &'a mut [Vec<u8>],
    reply_ids: &'a [(u16, u32)],
    outgoing: &'a mut Vec<Outgoing>,
    answers: &'a mut Vec<(u16, u32, Vec<u8>)>,
}

/// Posts the receives of this rank's get replies, sends its operations,
/// learns how many arrive, applies them and answers the gets among them;
/// every request is pushed onto `pending`.
///
/// # Safety
/// The buffers of `io` stay in place, untouched, until every request on
/// `pending` completed.
unsafe fn exchange<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    queued: Vec<super::Queued>,
    io: Io,
    pending: &mut Vec<Req>,
) -> Result<(), WinError> {
    let n = r.size() as usize;
    let (id, epoch, me) = (w.id, w.epoch, w.me);
    for (buf, &(t, gid)) in io.replies.iter_mut().zip(io.reply_ids) {
        if t == me {
            continue;
        }
        let sel = TagSel::Tag(tag(id, epoch, gid));
        // SAFETY: the caller's contract.
        let q = unsafe {
            r.irecv_in(
                Source::Rank(t),
                sel,
                RMA_CONTEXT,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        pending.push(q.map_err(recv_failed)?);
    }
    // This rank's operations leave first, so they travel while the counts
    // are exchanged (their tags name the epoch: a target matches only its
    // own); its own are applied here.
    let mut counts = vec![0u8; 4 * n];
    for q in queued {
        if q.target != me {
            let t = q.target as usize;
            let v = u32_at(&counts, t) + 1;
            counts[4 * t..4 * t + 4].copy_from_slice(&v.to_ne_bytes());
            io.outgoing.push(Outgoing::new(q.target, &q.header, q.data));
            continue;
        }
        match q.header.kind {
            RmaKind::Get => {
                let i = io
                    .reply_ids
                    .iter()
                    .position(|&x| x == (q.target, q.header.id));
                if let Some(i) = i {
                    w.mem.read(q.header.offset as usize, &mut io.replies[i]);
                }
            }
            _ => w.apply(&q.header, &q.data),
        }
    }
    for o in io.outgoing.iter() {
        // SAFETY: `outgoing` is complete (never grows again); the caller's
        // contract keeps it.
        unsafe { o.send(r, pending)? };
    }
    // How many operations each rank receives from the others.
    r.reduce_scatter(&mut counts, Int::U32, Op::Sum)?;
    let expected = u32_at(&counts, me as usize);
    // Operations aimed at this rank, as many as the counts said.
    for _ in 0..expected {
        let a = messages::recv(w, r, Source::Any)?;
        match a.admitted {
            Some((h, range)) if h.kind == RmaKind::Get => {
                let mut b = vec![0u8; (range.end - range.start) as usize];
                w.mem.read(range.start as usize, &mut b);
                io.answers.push((a.from, h.id, b));
            }
            Some((h, _)) => w.apply(&h, &a.data),
            None => {}
        }
    }
    for (to, gid, a) in io.answers.iter() {
        // SAFETY: `answers` is complete; the caller's contract keeps it.
        let s = unsafe { r.isend_in(*to, tag(id, epoch, *gid), RMA_CONTEXT, a.as_ptr(), a.len()) };
        pending.push(s.map_err(send_failed)?);
    }
    Ok(())
}
