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
    let n = r.size() as usize;
    let (id, epoch, me) = (w.id, w.epoch, w.me);
    let queued = std::mem::take(&mut w.queued);
    // Replies to this rank's gets, received straight into their buffers.
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let mut reply_ids = Vec::new();
    for q in queued.iter().filter(|q| q.header.kind == RmaKind::Get) {
        replies.push(vec![0u8; q.header.len as usize]);
        reply_ids.push((q.target, q.header.id));
    }
    let mut pending: Vec<Req> = Vec::new();
    for (buf, &(t, gid)) in replies.iter_mut().zip(&reply_ids) {
        if t == me {
            continue;
        }
        let sel = TagSel::Tag(tag(id, epoch, gid));
        // SAFETY: `replies` outlives the wait below and is not touched.
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
    let mut outgoing = Vec::new();
    for q in queued {
        if q.target != me {
            let t = q.target as usize;
            let v = u32_at(&counts, t) + 1;
            counts[4 * t..4 * t + 4].copy_from_slice(&v.to_ne_bytes());
            outgoing.push(Outgoing::new(q.target, &q.header, q.data));
            continue;
        }
        match q.header.kind {
            RmaKind::Get => {
                let i = reply_ids.iter().position(|&x| x == (q.target, q.header.id));
                if let Some(i) = i {
                    w.mem.read(q.header.offset as usize, &mut replies[i]);
                }
            }
            _ => w.apply(&q.header, &q.data),
        }
    }
    for o in &outgoing {
        // SAFETY: `outgoing` is complete (never grows again) and outlives
        // the wait below.
        unsafe { o.send(r, &mut pending)? };
    }
    // How many operations each rank receives from the others.
    r.reduce_scatter(&mut counts, Int::U32, Op::Sum)?;
    let expected = u32_at(&counts, me as usize);
    // Operations aimed at this rank, as many as the counts said.
    let mut answers: Vec<(u16, u32, Vec<u8>)> = Vec::new();
    for _ in 0..expected {
        let a = messages::recv(w, r, Source::Any)?;
        match a.admitted {
            Some((h, range)) if h.kind == RmaKind::Get => {
                let mut b = vec![0u8; (range.end - range.start) as usize];
                w.mem.read(range.start as usize, &mut b);
                answers.push((a.from, h.id, b));
            }
            Some((h, _)) => w.apply(&h, &a.data),
            None => {}
        }
    }
    for (to, gid, a) in &answers {
        // SAFETY: `answers` outlives the wait below.
        let s = unsafe { r.isend_in(*to, tag(id, epoch, *gid), RMA_CONTEXT, a.as_ptr(), a.len()) };
        pending.push(s.map_err(send_failed)?);
    }
    let mut fault = None;
    for q in pending {
        fault = fault.or(r.wait(q).fault);
    }
    if let Some(f) = fault {
        return Err(WinError::Collective(CollectiveError::Failed(f)));
    }
    w.got = vec![None; std::mem::take(&mut w.gets) as usize];
    for (buf, &(_, gid)) in replies.into_iter().zip(&reply_ids) {
        w.got[gid as usize] = Some(buf);
    }
    Ok(())
}
