//! Operations as two-sided messages (all of the deferred design's, the
//! immediate designs' accumulates): a header message, then the data in a
//! message of its own, so a target receives the data straight into a
//! buffer of the size the header announced.

use std::ops::Range;

use rmx_core::onesided::{OpHeader, RmaError, RmaKind, HEADER};
use rmx_core::{Source, TagSel};

use super::{tag, Win, WinError, DATA, HEADERS, RMA_CONTEXT};
use crate::collective::CollectiveError;
use crate::rank::{Rank, Req};
use crate::transport::Transport;

pub(super) fn send_failed(e: rmx_core::SendError) -> WinError {
    WinError::Collective(CollectiveError::Send(e))
}

pub(super) fn recv_failed(e: rmx_core::RecvError) -> WinError {
    WinError::Collective(CollectiveError::Recv(e))
}

/// Sends an operation: its header, and its data if it carries any.
///
/// # Safety
/// `header` and `data` stay valid and unmodified until every request
/// pushed onto `pending` completed.
pub(super) unsafe fn send<T: Transport + 'static>(
    r: &mut Rank<T>,
    target: u16,
    header: &[u8; HEADER],
    data: &[u8],
    pending: &mut Vec<Req>,
) -> Result<(), WinError> {
    let h = OpHeader::decode(header).map_err(WinError::Rma)?;
    let (id, epoch) = (h.window, h.epoch);
    // SAFETY: the caller's contract.
    let s = unsafe {
        r.isend_in(
            target,
            tag(id, epoch, HEADERS),
            RMA_CONTEXT,
            header.as_ptr(),
            header.len(),
        )
    };
    pending.push(s.map_err(send_failed)?);
    if !data.is_empty() {
        // SAFETY: as above.
        let s = unsafe {
            r.isend_in(
                target,
                tag(id, epoch, DATA),
                RMA_CONTEXT,
                data.as_ptr(),
                data.len(),
            )
        };
        pending.push(s.map_err(send_failed)?);
    }
    Ok(())
}

/// An operation that arrived: from whom, and what the window made of it.
pub(super) struct Arrived {
    pub from: u16,
    /// The header and byte range, if the window admitted it.
    pub admitted: Option<(OpHeader, Range<u64>)>,
    pub data: Vec<u8>,
}

/// Receives the next operation of this epoch from `src` and checks it
/// against the window (key, epoch, range); a refused one is counted, and
/// its data taken and dropped so the next header is read as one.
pub(super) fn recv<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    src: Source,
) -> Result<Arrived, WinError> {
    let (id, epoch) = (w.id, w.epoch);
    let mut hb = [0u8; HEADER];
    let st = r
        .recv_in(
            src,
            TagSel::Tag(tag(id, epoch, HEADERS)),
            RMA_CONTEXT,
            &mut hb,
        )
        .map_err(recv_failed)?;
    let from = st.source;
    let h = OpHeader::decode(&hb);
    let carries = matches!(h, Ok(OpHeader { kind: RmaKind::Put | RmaKind::Accumulate(..), len, .. }) if len > 0);
    let admitted = h.and_then(|h| {
        if h.window != id || h.epoch != epoch {
            return Err(RmaError::Key);
        }
        w.windows[w.me as usize].admit(&h).map(|range| (h, range))
    });
    let mut data = match &admitted {
        Ok((h, _)) if carries => vec![0u8; h.len as usize],
        _ => Vec::new(),
    };
    if carries {
        r.recv_in(
            Source::Rank(from),
            TagSel::Tag(tag(id, epoch, DATA)),
            RMA_CONTEXT,
            &mut data,
        )
        .map_err(recv_failed)?;
    }
    if admitted.is_err() {
        w.refused += 1;
    }
    Ok(Arrived {
        from,
        admitted: admitted.ok(),
        data,
    })
}
