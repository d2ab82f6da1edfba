//! The immediate designs' side of a window (the fence paper's section 3.2):
//! puts and gets move as RDMA when issued, so the data travels while the
//! application computes. The core's [`Epoch`](rmx_core::onesided::Epoch)
//! posts them, counts them and says what the fence waits for; this file
//! keeps their bytes: staging memory for put copies and get results,
//! registrations of `put_raw` sources, and accumulates (messages in every
//! design, applied by the target) in flight.

use std::sync::Arc;

use rmx_core::onesided::{EpochError, OpHeader};
use rmx_core::{Gather, MemKey, RecvFault};

#[cfg(test)]
use super::epoch_of;
use super::memory::WinMemory;
use super::messages::Outgoing;
use super::{Win, WinError};
use crate::rank::{Rank, Req};
use crate::transport::{Mr, Sge, Transport};

/// Where a put's bytes come from.
pub(super) enum Source<'a> {
    /// Copied into the window's staging memory first.
    Copy(&'a [u8]),
    /// Read by the NIC from the caller's memory (`Win::put_raw`).
    Raw(*const u8, usize),
}

/// Registered memory for the bytes of puts (copies) and gets (results),
/// reused from epoch to epoch.
#[derive(Default)]
struct Staging {
    chunks: Vec<(Arc<WinMemory>, u32)>,
    cur: usize,
    off: usize,
}

/// The smallest staging chunk.
const CHUNK: usize = 1 << 20;

impl Staging {
    /// Room for `len` bytes: (chunk, offset).
    fn alloc<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        len: usize,
    ) -> Result<(usize, usize), WinError> {
        let fits = |c: &(Arc<WinMemory>, u32), off: usize| c.0.len() - off >= len;
        if self.chunks.get(self.cur).is_some_and(|c| fits(c, self.off)) {
        } else if let Some(j) =
            (self.cur + 1..self.chunks.len()).find(|&j| fits(&self.chunks[j], 0))
        {
            (self.cur, self.off) = (j, 0);
        } else {
            let size = len.max(CHUNK);
            let mem = Arc::new(WinMemory::new(size).ok_or(WinError::Memory { len: size })?);
            let owner = Arc::clone(&mem) as Arc<dyn std::any::Any + Send + Sync>;
            // SAFETY: the window memory lives as long as its owner, which the
            // rank keeps until the registration ends.
            let pinned = r.with(|d| unsafe { d.pin(mem.addr(), mem.reserved(), owner) });
            let mr = pinned.map_err(WinError::Register)?;
            self.chunks.push((mem, mr.key));
            (self.cur, self.off) = (self.chunks.len() - 1, 0);
        }
        let at = (self.cur, self.off);
        self.off = (self.off + len)
            .next_multiple_of(64)
            .min(self.chunks[self.cur].0.len());
        Ok(at)
    }

    fn sge(&self, (chunk, off): (usize, usize), len: usize) -> Sge {
        let (mem, key) = &self.chunks[chunk];
        Sge {
            addr: mem.addr() + off,
            len,
            key: *key,
        }
    }

    fn reset(&mut self) {
        (self.cur, self.off) = (0, 0);
    }
}

/// A window's bytes in flight for the current epoch (immediate designs).
#[derive(Default)]
pub(super) struct Immediate {
    staging: Staging,
    /// Accumulates in flight: their bytes (on the heap, where the
    /// requests read them) and requests.
    sent: Vec<Outgoing>,
    pending: Vec<Req>,
    /// The first fault of an accumulate's send waited for before the
    /// fence (the rank out of request handles).
    pub(super) fault: Option<RecvFault>,
    /// Gets: number, staging place and length; those answered locally.
    gets: Vec<(u32, (usize, usize), usize)>,
    local_gets: Vec<(u32, Vec<u8>)>,
    /// Registrations of `put_raw` sources, ended once the RDMA completed.
    raw: Vec<Mr>,
}

impl Immediate {
    /// The keys of the staging memory, given up (the window is freed).
    pub(super) fn keys(&mut self) -> Vec<u32> {
        self.staging.chunks.drain(..).map(|(_, k)| k).collect()
    }
}

impl Drop for Immediate {
    /// A window dropped with accumulates in flight (no fence, no free):
    /// their bytes are left to the requests still reading them.
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            std::mem::forget(std::mem::take(&mut self.sent));
        }
    }
}

/// The window's immediate state.
fn state(w: &mut Win) -> &mut Immediate {
    w.imm.as_mut().expect("an immediate design's window")
}

/// Has the core post `h`'s RDMA from `local`; while the NIC is busy (its
/// send queue full, the target out of receive buffers for an immediate)
/// the rank progresses, which frees entries, and the core tries again.
fn post<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    target: u16,
    h: &OpHeader,
    local: Sge,
) -> Result<(), WinError> {
    let g = Gather {
        addr: local.addr as u64,
        len: local.len as u32,
        key: MemKey(local.key),
    };
    loop {
        let res = w.epoch(r, |e, nic| {
            let res = e.post(nic, target, h, g);
            nic.port().doorbell();
            res
        });
        match res {
            Err(EpochError::Busy) => {
                r.progress();
            }
            res => return res.map_err(Into::into),
        }
    }
}

pub(super) fn put<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    target: u16,
    h: OpHeader,
    src: Source,
) -> Result<(), WinError> {
    let len = h.len as usize;
    if target == w.me || len == 0 {
        let data = match src {
            Source::Copy(d) => d,
            // SAFETY: the caller of `put_raw` keeps the bytes valid.
            Source::Raw(p, n) => unsafe { std::slice::from_raw_parts(p, n) },
        };
        if target == w.me {
            w.mem.write(h.offset as usize, data);
        }
        w.epoch(r, |e, _| e.local());
        return Ok(());
    }
    let s = state(w);
    let local = match src {
        Source::Copy(d) => {
            let place = s.staging.alloc(r, len)?;
            s.staging.chunks[place.0].0.write(place.1, d);
            s.staging.sge(place, len)
        }
        Source::Raw(p, n) => {
            // SAFETY: the caller of `put_raw` keeps the bytes valid until
            // the fence, which ends this registration.
            let mr = r
                .with(|d| unsafe { d.nic.port().register_user(p as usize, n) })
                .map_err(WinError::Register)?;
            s.raw.push(mr);
            Sge {
                addr: p as usize,
                len: n,
                key: mr.key,
            }
        }
    };
    post(w, r, target, &h, local)
}

pub(super) fn get<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    target: u16,
    h: &mut OpHeader,
) -> Result<(), WinError> {
    let len = h.len as usize;
    w.epoch(r, |e, _| e.number_get(h))?;
    if target == w.me || len == 0 {
        let mut b = vec![0u8; len];
        if target == w.me {
            w.mem.read(h.offset as usize, &mut b);
        }
        let gid = h.id;
        state(w).local_gets.push((gid, b));
        return Ok(());
    }
    let gid = h.id;
    let s = state(w);
    let place = s.staging.alloc(r, len)?;
    s.gets.push((gid, place, len));
    let local = s.staging.sge(place, len);
    post(w, r, target, h, local)
}

pub(super) fn accumulate<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    target: u16,
    h: OpHeader,
    data: &[u8],
) -> Result<(), WinError> {
    if target == w.me {
        w.apply(&h, data);
        w.epoch(r, |e, _| e.local());
        return Ok(());
    }
    let out = Outgoing::new(target, &h, data.to_vec());
    let mut pending = std::mem::take(&mut state(w).pending);
    // SAFETY: the messages' bytes are on the heap, kept in `sent` until
    // the fence has waited for `pending` (also when the data's send is
    // refused after the header's left: it is not counted, and the target
    // drops the header with the epoch). Waiting for request handles, the
    // rank receives the operations aimed at it (every rank may be issuing
    // faster than its operations leave).
    let sent = unsafe { super::inbox::send_paced(&out, w, r, &mut pending) };
    let s = state(w);
    s.pending = pending;
    s.sent.push(out);
    s.fault = s.fault.or(sent?);
    w.epoch(r, |e, _| e.message(target));
    Ok(())
}

/// The accumulates' sends still out, for the fence to wait for; their
/// bytes move to `bytes`, kept with the fence's own.
pub(super) fn take_sent(s: &mut Immediate, bytes: &mut Vec<Outgoing>) -> Vec<Req> {
    bytes.append(&mut s.sent);
    std::mem::take(&mut s.pending)
}

/// The fence reported (its flush waited for the epoch's RDMA and sends,
/// or it failed and ended them): their bytes and registrations go.
pub(super) fn end_flush<T: Transport + 'static>(s: &mut Immediate, r: &mut Rank<T>) {
    s.fault = None;
    if !s.raw.is_empty() {
        let raw = std::mem::take(&mut s.raw);
        r.with(|d| raw.into_iter().for_each(|mr| d.nic.port().deregister(mr)));
    }
}

/// Hands out the epoch's gets (landed in staging, or answered here) and
/// reuses the staging memory.
pub(super) fn end_epoch(w: &mut Win, gets: u32) {
    let got = &mut w.got;
    *got = vec![None; gets as usize];
    let s = w.imm.as_mut().expect("an immediate design's window");
    for (gid, b) in s.local_gets.drain(..) {
        got[gid as usize] = Some(b);
    }
    for (gid, place, len) in s.gets.drain(..) {
        let mut b = vec![0u8; len];
        s.staging.chunks[place.0].0.read(place.1, &mut b);
        got[gid as usize] = Some(b);
    }
    s.staging.reset();
}

/// The strawman of the fence paper's section 3.2 ("wait for local
/// completion, then barrier"), for the test that shows it wrong: it
/// exists only in tests.
#[cfg(test)]
pub(super) fn strawman_fence<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
) -> Result<(), WinError> {
    // The strawman's hazard needs no accumulates: nothing to receive.
    let id = w.id;
    r.drive(|d| match epoch_of(&mut d.windows, id).in_flight() {
        0 => std::task::Poll::Ready(()),
        _ => std::task::Poll::Pending,
    });
    let s = state(w);
    let fault = s.fault;
    end_flush(s, r);
    let gets = w.epoch(r, |e, _| {
        let g = e.gets();
        e.abort();
        g
    });
    end_epoch(w, gets);
    r.barrier()?;
    match fault {
        Some(f) => Err(WinError::Collective(
            rmx_driver::task::CollectiveError::Failed(f),
        )),
        None => Ok(()),
    }
}
