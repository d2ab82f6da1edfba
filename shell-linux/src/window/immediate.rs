//! The immediate designs (the fence paper's section 3.2): puts and gets
//! move as RDMA when issued, so the data travels while the application
//! computes, and the closing fence only has to learn that it landed.
//!
//! - **Fence-Imm-Naive** and **-Opt**: the fence waits for its RDMA to
//!   complete locally, then sends a finish message on every channel it put
//!   on (a channel delivers in order, so the finish message comes after
//!   the data); a reduce_scatter of channels used tells each target how
//!   many finish messages to wait for. Naive then opens the next epoch
//!   with a flag from every rank to every other, Opt with a barrier.
//! - **Fence-Imm-RI**: puts are RDMA writes with immediate, each counted
//!   by the target as it lands (the rank's progress notes it and gives the
//!   receive buffer straight back); an allreduce of per-target counts
//!   tells each target how many to wait for; then a barrier.
//!
//! Accumulates go as messages at once and are applied by the target in
//! its fence (a finish message, or the allreduce, says how many). A put
//! or get the NIC cannot take now (send queue full, or the target out of
//! receive buffers for an immediate) waits in order and is posted again
//! as the rank progresses.

use std::collections::VecDeque;
use std::sync::Arc;

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::{imm, Opening, Steps, TargetCompletion, HEADER, INLINE};
use rmx_core::{PostError, RdmaOp, Source as From, TagSel};

use super::book::wr_id;
use super::memory::WinMemory;
use super::messages::{self, recv_failed, send_failed, Outgoing};
use super::{tag, u32_at, Checked, Win, WinError, FINISH, FLAG, RMA_CONTEXT};
use crate::collective::CollectiveError;
use crate::rank::{Driver, Rank, Req};
use crate::transport::{Mr, Sge, Transport, Work};

/// Where a put's bytes come from.
pub(super) enum Source<'a> {
    /// Copied into the window's staging memory first.
    Copy(&'a [u8]),
    /// Read by the NIC from the caller's memory (`Win::put_raw`).
    Raw(*const u8, usize),
}

/// One RDMA operation, as posted (or waiting to be).
#[derive(Clone, Copy)]
struct Rdma {
    target: u16,
    seq: u32,
    op: RdmaOp,
    local: Sge,
    remote_addr: u64,
    rkey: u32,
    imm: Option<u32>,
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
            let mr = r.with(|d| d.nic.pin(&mem)).map_err(WinError::Register)?;
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

/// A window's immediate-design state for the current epoch.
pub(super) struct Immediate {
    staging: Staging,
    /// Operations issued this epoch (local ones too).
    ops: u32,
    /// RDMA operations numbered this epoch: target, and whether it was a
    /// put with immediate, by sequence number.
    seqs: Vec<(u16, bool)>,
    /// Posted operations whose completion the rank's progress will note.
    later: u64,
    /// Sequence numbers of operations the transport failed.
    failed: Vec<u32>,
    backlog: VecDeque<Rdma>,
    /// Posts the NIC refused for now (and that waited), since creation.
    pub(super) retries: u64,
    /// By target: puts with immediate, accumulate messages, and whether a
    /// finish message is owed.
    puts: Vec<u32>,
    msgs: Vec<u32>,
    used: Vec<bool>,
    /// Accumulates in flight: their bytes (on the heap, where the
    /// requests read them) and requests.
    sent: Vec<Outgoing>,
    pending: Vec<Req>,
    /// Gets: number, staging place and length; those answered locally.
    gets: Vec<(u32, (usize, usize), usize)>,
    local_gets: Vec<(u32, Vec<u8>)>,
    /// Registrations of `put_raw` sources, ended by the fence.
    raw: Vec<Mr>,
}

impl Immediate {
    pub(super) fn new(ranks: usize) -> Immediate {
        Immediate {
            staging: Staging::default(),
            ops: 0,
            seqs: Vec::new(),
            later: 0,
            failed: Vec::new(),
            backlog: VecDeque::new(),
            retries: 0,
            puts: vec![0; ranks],
            msgs: vec![0; ranks],
            used: vec![false; ranks],
            sent: Vec::new(),
            pending: Vec::new(),
            gets: Vec::new(),
            local_gets: Vec::new(),
            raw: Vec::new(),
        }
    }

    pub(super) fn issued(&self) -> bool {
        self.ops > 0
    }

    /// The keys of the staging memory, given up (the window is freed).
    pub(super) fn keys(&mut self) -> Vec<u32> {
        self.staging.chunks.drain(..).map(|(_, k)| k).collect()
    }

    /// Numbers an operation to `target`.
    fn number(&mut self, target: u16, with_imm: bool) -> u32 {
        self.seqs.push((target, with_imm));
        self.seqs.len() as u32 - 1
    }

    /// Posts what waits, in order, as far as the NIC takes it.
    fn post_backlog<T: Transport>(&mut self, d: &mut Driver<T>, id: u16) {
        while let Some(op) = self.backlog.front().copied() {
            if !self.post(d, id, op) {
                return;
            }
            self.backlog.pop_front();
        }
    }

    /// Posts one operation: `false` if the NIC cannot take it now.
    fn post<T: Transport>(&mut self, d: &mut Driver<T>, id: u16, op: Rdma) -> bool {
        let port = d.nic.port();
        let wr = wr_id(id, op.seq);
        let remote = rmx_core::Remote {
            addr: op.remote_addr,
            key: rmx_core::MemKey(op.rkey),
        };
        let work = match op.imm {
            Some(imm) => Work::WriteImm {
                local: op.local,
                remote,
                imm,
            },
            None => Work::Rdma {
                op: op.op,
                local: op.local,
                remote,
            },
        };
        let res = port.post(op.target, wr, work);
        port.doorbell();
        match res {
            Ok(None) => self.later += 1,
            Ok(Some(c)) if c.result.is_ok() => {}
            Err(PostError::Busy) => {
                self.retries += 1;
                return false;
            }
            Ok(Some(_)) | Err(_) => self.failed.push(op.seq),
        }
        true
    }

    /// Issues an operation behind any that wait.
    fn issue<T: Transport + 'static>(&mut self, r: &mut Rank<T>, id: u16, op: Rdma) {
        r.with(|d| {
            self.post_backlog(d, id);
            if !self.backlog.is_empty() || !self.post(d, id, op) {
                self.backlog.push_back(op);
            }
        });
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

/// Runs `f` on the window's immediate state, taken out of it meanwhile.
fn with_state<R>(w: &mut Win, f: impl FnOnce(&mut Win, &mut Immediate) -> R) -> R {
    let mut s = w.imm.take().expect("an immediate design's window");
    let out = f(w, &mut s);
    w.imm = Some(s);
    out
}

pub(super) fn put<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    c: Checked,
    src: Source,
) -> Result<(), WinError> {
    let len = c.header.len as usize;
    let at = c.header.offset as usize;
    if c.target == w.me {
        let data = match src {
            Source::Copy(d) => d,
            // SAFETY: the caller of `put_raw` keeps the bytes valid.
            Source::Raw(p, n) => unsafe { std::slice::from_raw_parts(p, n) },
        };
        w.mem.write(at, data);
        with_state(w, |_, s| s.ops += 1);
        return Ok(());
    }
    if len == 0 {
        return Ok(());
    }
    let remote = w.remotes[c.target as usize];
    let ri = w.design.completion() == TargetCompletion::Immediates;
    let (id, epoch) = (w.id, w.epoch);
    with_state(w, |_, s| {
        let local = match src {
            Source::Copy(d) => {
                let place = s.staging.alloc(r, len)?;
                s.staging.chunks[place.0].0.write(place.1, d);
                s.staging.sge(place, len)
            }
            Source::Raw(p, n) => {
                // SAFETY: the caller of `put_raw` keeps the bytes valid
                // until the fence, which ends this registration.
                let mr = r
                    .with(|d| unsafe { d.nic.register_user(p as usize, n) })
                    .map_err(WinError::Register)?;
                s.raw.push(mr);
                Sge {
                    addr: p as usize,
                    len: n,
                    key: mr.key,
                }
            }
        };
        let seq = s.number(c.target, ri);
        s.ops += 1;
        s.used[c.target as usize] = true;
        if ri {
            s.puts[c.target as usize] += 1;
        }
        let op = Rdma {
            target: c.target,
            seq,
            op: RdmaOp::Write,
            local,
            remote_addr: remote.addr.saturating_add(at as u64),
            rkey: remote.key.0,
            imm: ri.then(|| imm(id, epoch)),
        };
        s.issue(r, id, op);
        Ok(())
    })
}

pub(super) fn get<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    c: Checked,
) -> Result<(), WinError> {
    let len = c.header.len as usize;
    let at = c.header.offset as usize;
    let gid = c.header.id;
    if c.target == w.me || len == 0 {
        let mut b = vec![0u8; len];
        if c.target == w.me {
            w.mem.read(at, &mut b);
        }
        with_state(w, |_, s| {
            s.ops += 1;
            s.local_gets.push((gid, b));
        });
        return Ok(());
    }
    let remote = w.remotes[c.target as usize];
    let id = w.id;
    with_state(w, |_, s| {
        let place = s.staging.alloc(r, len)?;
        let seq = s.number(c.target, false);
        s.ops += 1;
        s.gets.push((gid, place, len));
        let op = Rdma {
            target: c.target,
            seq,
            op: RdmaOp::Read,
            local: s.staging.sge(place, len),
            remote_addr: remote.addr.saturating_add(at as u64),
            rkey: remote.key.0,
            imm: None,
        };
        s.issue(r, id, op);
        Ok(())
    })
}

pub(super) fn accumulate<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    c: Checked,
    data: &[u8],
) -> Result<(), WinError> {
    if c.target == w.me {
        w.apply(&c.header, data);
        with_state(w, |_, s| s.ops += 1);
        return Ok(());
    }
    with_state(w, |_, s| {
        let out = Outgoing::new(c.target, &c.header, data.to_vec());
        // SAFETY: the messages' bytes are on the heap, kept in `sent` until
        // the fence has waited for `pending` (also when the data's send
        // is refused after the header's left: it is not counted, and the
        // target drops the header with the epoch).
        let sent = unsafe { out.send(r, &mut s.pending) };
        s.sent.push(out);
        sent?;
        s.ops += 1;
        s.msgs[c.target as usize] += 1;
        s.used[c.target as usize] = true;
        Ok(())
    })
}

/// Ends the epoch as `steps` says; `closing` is this rank's
/// `NO_SUCCEED`. The window is closed (its memory handed out) only if
/// every rank asserted it, which the fence's collective tells each rank.
pub(super) fn fence<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    steps: Steps,
    closing: bool,
) -> Result<(), WinError> {
    with_state(w, |w, s| fence_in(w, s, r, steps, closing))
}

fn fence_in<T: Transport + 'static>(
    w: &mut Win,
    s: &mut Immediate,
    r: &mut Rank<T>,
    steps: Steps,
    closing: bool,
) -> Result<(), WinError> {
    let mut fault = None;
    // Every rank has entered this fence and no operation of the epoch is
    // left to land anywhere: the opening has nothing left to order.
    let mut quiet = false;
    // Ranks that asserted NO_SUCCEED, as the step's collective counted.
    let mut closers = None;
    if let Some(c) = steps.completion {
        fault = complete_locally(w.id, s, r);
        // A put with immediate that failed raises none: not counted.
        for &seq in &s.failed {
            if let Some(&(t, true)) = s.seqs.get(seq as usize) {
                s.puts[t as usize] -= 1;
            }
        }
        (quiet, closers) = match c {
            TargetCompletion::FinishMessages => (false, Some(finish_messages(w, s, r, closing)?)),
            TargetCompletion::Immediates => {
                let (quiet, closers) = immediates(w, s, r, closing)?;
                (quiet, Some(closers))
            }
            TargetCompletion::CountedMessages => unreachable!("the deferred design's"),
        };
    }
    let failed = end_epoch(w, s);
    let closers = match closers {
        Some(k) => k,
        None => {
            // No completion step (NO_PRECEDE): an allreduce of the
            // assertion counts the closers, and is itself a barrier.
            let mut k = (closing as u32).to_ne_bytes();
            r.allreduce(&mut k, Int::U32, Op::Sum)?;
            quiet = true;
            u32::from_ne_bytes(k)
        }
    };
    let all = closers == r.size() as u32;
    match if all {
        Opening::None
    } else {
        w.design.opening()
    } {
        Opening::Barrier | Opening::AllPairs if quiet => {}
        Opening::Barrier => r.barrier()?,
        Opening::AllPairs => all_pairs(w, r)?,
        Opening::None => {}
    }
    w.closed = all;
    if let Some(f) = fault {
        return Err(WinError::Collective(CollectiveError::Failed(f)));
    }
    if failed > 0 {
        return Err(WinError::Transfer { failed });
    }
    if closers > 0 && !all {
        return Err(WinError::Disagree);
    }
    Ok(())
}

/// Waits until this rank's operations of the epoch have completed here:
/// every RDMA operation posted (those the NIC refused, again) and its
/// completion seen, every accumulate sent. The fault of a failed send.
fn complete_locally<T: Transport + 'static>(
    id: u16,
    s: &mut Immediate,
    r: &mut Rank<T>,
) -> Option<rmx_core::RecvFault> {
    if s.later > 0 || !s.backlog.is_empty() {
        r.wait_until(|d| {
            s.post_backlog(d, id);
            s.backlog.is_empty() && d.book.finished(id) >= s.later
        });
        let done = r.with(|d| d.book.take(id));
        s.failed.extend(done.failed);
    }
    let fault = r.wait_all(s.pending.drain(..));
    s.sent.clear();
    if !s.raw.is_empty() {
        let raw = std::mem::take(&mut s.raw);
        r.with(|d| raw.into_iter().for_each(|mr| d.nic.deregister_user(mr)));
    }
    fault
}

/// Hands out the epoch's gets and starts counting anew; how many
/// operations failed.
fn end_epoch(w: &mut Win, s: &mut Immediate) -> u64 {
    // Gets landed in staging (or were answered here).
    w.got = vec![None; std::mem::take(&mut w.gets) as usize];
    for (gid, b) in s.local_gets.drain(..) {
        w.got[gid as usize] = Some(b);
    }
    for (gid, place, len) in s.gets.drain(..) {
        let mut b = vec![0u8; len];
        s.staging.chunks[place.0].0.read(place.1, &mut b);
        w.got[gid as usize] = Some(b);
    }
    let failed = s.failed.len() as u64;
    s.staging.reset();
    s.ops = 0;
    s.seqs.clear();
    s.later = 0;
    s.failed.clear();
    s.puts.iter_mut().for_each(|p| *p = 0);
    s.msgs.iter_mut().for_each(|p| *p = 0);
    s.used.iter_mut().for_each(|p| *p = false);
    failed
}

/// The strawman of the fence paper's section 3.2 ("wait for local
/// completion, then barrier"), for the test that shows it wrong: it
/// exists only in tests.
#[cfg(test)]
pub(super) fn strawman_fence<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
) -> Result<(), WinError> {
    let fault = with_state(w, |w, s| {
        let fault = complete_locally(w.id, s, r);
        end_epoch(w, s);
        fault
    });
    r.barrier()?;
    w.epoch = w.epoch.wrapping_add(1);
    match fault {
        Some(f) => Err(WinError::Collective(CollectiveError::Failed(f))),
        None => Ok(()),
    }
}

/// Naive and Opt: finish messages after the local completions, as many
/// as a reduce_scatter of channels used says; each carries how many
/// accumulates came on its channel.
fn finish_messages<T: Transport + 'static>(
    w: &mut Win,
    s: &mut Immediate,
    r: &mut Rank<T>,
    closing: bool,
) -> Result<u32, WinError> {
    let n = s.used.len();
    let (id, epoch, me) = (w.id, w.epoch, w.me as usize);
    // Per target: whether this rank used its channel, and whether it
    // closes the window; summed, each target's block says how many finish
    // messages come and how many ranks close.
    let mut counts: Vec<u8> = s
        .used
        .iter()
        .flat_map(|&u| [u as u32, closing as u32])
        .flat_map(u32::to_ne_bytes)
        .collect();
    r.reduce_scatter(&mut counts, Int::U32, Op::Sum)?;
    let (expected, closers) = (u32_at(&counts, 2 * me), u32_at(&counts, 2 * me + 1));
    let bodies: Vec<[u8; 4]> = (0..n).map(|t| s.msgs[t].to_le_bytes()).collect();
    let mut pending = Vec::new();
    let sent = (|| {
        for t in (0..n).filter(|&t| s.used[t]) {
            // SAFETY: `bodies` outlives the wait (or abandonment) below.
            let q = unsafe {
                r.isend_in(
                    t as u16,
                    tag(id, epoch, FINISH),
                    RMA_CONTEXT,
                    bodies[t].as_ptr(),
                    4,
                )
            };
            pending.push(q.map_err(send_failed)?);
        }
        for _ in 0..expected {
            let mut b = [0u8; 4];
            let st = r
                .recv_in(
                    From::Any,
                    TagSel::Tag(tag(id, epoch, FINISH)),
                    RMA_CONTEXT,
                    &mut b,
                )
                .map_err(recv_failed)?;
            for _ in 0..u32::from_le_bytes(b) {
                let a = messages::recv(w, r, From::Rank(st.source))?;
                if let Some((h, _)) = a.admitted {
                    w.apply(&h, &a.data);
                }
            }
        }
        Ok(())
    })();
    settle(r, pending, sent).map(|()| closers)
}

/// RI: an allreduce of per-target counts (puts with immediate and
/// accumulate messages together) and of the ranks that close the window;
/// then the target takes immediates and accumulates as they come until it
/// has that many. Whether every rank's count was zero (the allreduce
/// shows all of them), and the closers.
fn immediates<T: Transport + 'static>(
    w: &mut Win,
    s: &mut Immediate,
    r: &mut Rank<T>,
    closing: bool,
) -> Result<(bool, u32), WinError> {
    let (id, epoch, me) = (w.id, w.epoch, w.me as usize);
    let n = s.puts.len();
    let mut counts: Vec<u8> = (0..n)
        .map(|t| s.puts[t] + s.msgs[t])
        .chain([closing as u32])
        .flat_map(u32::to_ne_bytes)
        .collect();
    r.allreduce(&mut counts, Int::U32, Op::Sum)?;
    let total = u32_at(&counts, me);
    let closers = u32_at(&counts, n);
    let quiet = counts[..4 * n].iter().all(|&b| b == 0);
    if total == 0 {
        return Ok((quiet, closers));
    }
    let key = imm(id, epoch);
    let mut got = 0u32;
    let mut first: Box<messages::First> = Box::new([0u8; HEADER + INLINE]);
    let mut posted = None;
    let out = loop {
        let notified = r.with(|d| d.book.notified(key));
        if notified + got >= total {
            break Ok((quiet, closers));
        }
        let q = match posted.take() {
            Some(q) => q,
            // SAFETY: `first` is on the heap and kept until this request
            // completes or is cancelled and waited for below.
            None => match unsafe { messages::post(w, r, From::Any, &mut first) } {
                Ok(q) => q,
                Err(e) => break Err(e),
            },
        };
        match r.wait_or(q, |d| d.book.notified(key) + got >= total) {
            Ok(st) => match messages::finish(w, r, st, &first) {
                Ok(a) => {
                    got += 1;
                    if let Some((h, _)) = a.admitted {
                        w.apply(&h, &a.data);
                    }
                }
                Err(e) => break Err(e),
            },
            Err(q) => posted = Some(q),
        }
    };
    if let Some(q) = posted {
        // Everything came as immediates: the receive is not needed.
        let cancelled = r.cancel(&q);
        let st = r.wait(q);
        if !cancelled {
            // A message nobody counted (a faulty or hostile origin).
            messages::finish(w, r, st, &first)?;
            w.refused += 1;
        }
    }
    r.with(|d| d.book.forget(key));
    out
}

/// Naive's opening: a flag from every rank to every other.
fn all_pairs<T: Transport + 'static>(w: &mut Win, r: &mut Rank<T>) -> Result<(), WinError> {
    let (id, epoch) = (w.id, w.epoch);
    let flags = vec![0u8; r.size() as usize];
    let mut got = vec![0u8; r.size() as usize];
    let mut pending = Vec::new();
    let posted = (|| {
        for p in (0..r.size()).filter(|&p| p != w.me) {
            let t = tag(id, epoch, FLAG);
            // SAFETY: `flags` and `got` outlive the wait (or abandonment)
            // below.
            let q = unsafe {
                r.irecv_in(
                    From::Rank(p),
                    TagSel::Tag(t),
                    RMA_CONTEXT,
                    got[p as usize..].as_mut_ptr(),
                    1,
                )
            };
            pending.push(q.map_err(recv_failed)?);
            // SAFETY: as above.
            let q = unsafe { r.isend_in(p, t, RMA_CONTEXT, flags[p as usize..].as_ptr(), 1) };
            pending.push(q.map_err(send_failed)?);
        }
        Ok(())
    })();
    settle(r, pending, posted)
}

/// Ends the requests of a step that posted them into its own buffers:
/// waits for them if it went through (the first fault is the error), else
/// abandons them and returns its error.
fn settle<T: Transport + 'static>(
    r: &mut Rank<T>,
    pending: Vec<Req>,
    step: Result<(), WinError>,
) -> Result<(), WinError> {
    match step {
        Ok(()) => match r.wait_all(pending) {
            Some(f) => Err(WinError::Collective(CollectiveError::Failed(f))),
            None => Ok(()),
        },
        Err(e) => {
            r.abandon(pending);
            Err(e)
        }
    }
}
