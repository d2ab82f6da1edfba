//! One-sided communication between the ranks of a job: windows of memory,
//! put, get and accumulate, and fence synchronization. This is the
//! deferred design (the fence paper's Fence-Def, section 3.1): operations
//! are checked at the origin and queued; the closing fence learns from a
//! reduce_scatter how many operations each rank will receive, sends its
//! own as two-sided messages, applies the ones that arrive (each checked
//! again against the window's key and bounds: [`Window::admit`]), answers
//! gets, and returns when all of them are done. It needs no RDMA, so it
//! runs on every transport; it overlaps nothing (the operations move inside
//! the fence), which is the immediate designs' business.
//!
//! Operations travel in a context of their own; a message's tag names the
//! window, the epoch and what it carries.

use rmx_core::collective::{reduce, Int, Op};
use rmx_core::onesided::{OpHeader, RmaError, RmaKind, Window, HEADER};
use rmx_core::{Source, TagSel};

use crate::collective::CollectiveError;
use crate::rank::{Rank, Req};
use crate::transport::Transport;

/// The communication context of one-sided operations.
pub const RMA_CONTEXT: u16 = 0xC012;

/// Gets one rank may have outstanding in one epoch.
pub const MAX_GETS: u32 = 0xFF00;

/// Why a window call failed.
#[derive(Debug, PartialEq, Eq)]
pub enum WinError {
    Rma(RmaError),
    Collective(CollectiveError),
    /// More gets in one epoch than [`MAX_GETS`].
    TooManyGets,
    /// Data longer than one operation carries (4 GiB).
    TooLong,
    /// An operation was queued in an epoch its closing fence asserted had
    /// none ([`Assert::NO_PRECEDE`]), or issued after a fence that
    /// asserted none would follow ([`Assert::NO_SUCCEED`]).
    Assertion,
}

/// What a fence may assume (MPI's `MPI_MODE_*` assertions). Every rank of
/// the window must give the same `NO_PRECEDE` and `NO_SUCCEED`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assert(pub u8);

impl Assert {
    pub const NONE: Assert = Assert(0);
    /// No operation of this rank's epoch ends here: the fence skips
    /// counting (in the deferred design it then does nothing at all).
    pub const NO_PRECEDE: Assert = Assert(1);
    /// No operation follows until the next fence.
    pub const NO_SUCCEED: Assert = Assert(2);
    /// The window's memory was not written locally since the last fence.
    pub const NO_STORE: Assert = Assert(4);
    /// The window will not be the target of puts or accumulates until the
    /// next fence.
    pub const NO_PUT: Assert = Assert(8);

    pub fn has(self, a: Assert) -> bool {
        self.0 & a.0 == a.0
    }
}

impl core::ops::BitOr for Assert {
    type Output = Assert;
    fn bitor(self, o: Assert) -> Assert {
        Assert(self.0 | o.0)
    }
}

impl From<RmaError> for WinError {
    fn from(e: RmaError) -> Self {
        WinError::Rma(e)
    }
}

impl From<CollectiveError> for WinError {
    fn from(e: CollectiveError) -> Self {
        WinError::Collective(e)
    }
}

/// A get's result, once the fence that ends its epoch returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Get(u32);

struct Queued {
    target: u16,
    header: OpHeader,
    data: Vec<u8>,
}

/// A window: this rank's memory exposed to every rank of the job, and the
/// descriptors of every rank's.
pub struct Win {
    id: u16,
    me: u16,
    mem: Vec<u8>,
    windows: Vec<Window>,
    epoch: u16,
    /// The last fence asserted that no operation would follow.
    closed: bool,
    queued: Vec<Queued>,
    /// Gets queued this epoch (the next one's number).
    gets: u32,
    got: Vec<Option<Vec<u8>>>,
    refused: u64,
}

/// Tag of a message of window `id` in `epoch`: `what` is the header and
/// data channels (0xFFFE, 0xFFFD) or a get's number.
fn tag(id: u16, epoch: u16, what: u32) -> u32 {
    (id as u32 & 0xFF) << 24 | (epoch as u32 & 0xFF) << 16 | (what & 0xFFFF)
}
const HEADERS: u32 = 0xFFFE;
const DATA: u32 = 0xFFFD;

impl<T: Transport + 'static> Rank<T> {
    /// Creates a window of `len` bytes (zeroed) whose displacements count
    /// in `disp_unit` bytes; collective: every rank calls it, in the same
    /// order as its other window creations.
    pub fn win_create(&mut self, len: usize, disp_unit: u32) -> Result<Win, WinError> {
        if disp_unit == 0 {
            return Err(WinError::Rma(RmaError::Misaligned));
        }
        let id = self.windows;
        self.windows = self.windows.wrapping_add(1);
        let n = self.size() as usize;
        // A key no other window of this rank had: stale accesses fail.
        let key = (crate::clock::now_ns() as u32 ^ (self.rank() as u32) << 16 ^ id as u32) | 1;
        let mut all = vec![0u8; 16 * n];
        let me = self.rank() as usize;
        all[16 * me..16 * me + 8].copy_from_slice(&(len as u64).to_le_bytes());
        all[16 * me + 8..16 * me + 12].copy_from_slice(&disp_unit.to_le_bytes());
        all[16 * me + 12..16 * me + 16].copy_from_slice(&key.to_le_bytes());
        self.allgather(&mut all)?;
        let windows = all
            .chunks_exact(16)
            .map(|c| Window {
                len: u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                disp_unit: u32::from_le_bytes(c[8..12].try_into().expect("4 bytes")),
                key: u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")),
            })
            .collect();
        Ok(Win {
            id,
            me: self.rank(),
            mem: vec![0; len],
            windows,
            epoch: 0,
            closed: false,
            queued: Vec::new(),
            gets: 0,
            got: Vec::new(),
            refused: 0,
        })
    }
}

impl Win {
    /// This rank's window memory, to read or change between epochs.
    pub fn memory(&mut self) -> &mut [u8] {
        &mut self.mem
    }

    /// Operations from the wire that the window refused (bad key, out of
    /// bounds, malformed) since it was created.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    fn queue(
        &mut self,
        target: u16,
        disp: u64,
        len: usize,
        kind: RmaKind,
        data: Vec<u8>,
    ) -> Result<OpHeader, WinError> {
        if self.closed {
            return Err(WinError::Assertion);
        }
        let w = *self.windows.get(target as usize).ok_or(RmaError::Target)?;
        let len32 = u32::try_from(len).map_err(|_| WinError::TooLong)?;
        let range = w.range(disp, len as u64)?;
        let header = OpHeader {
            kind,
            last: false,
            window: self.id,
            epoch: self.epoch,
            key: w.key,
            len: len32,
            offset: range.start,
            id: 0,
        };
        if let RmaKind::Accumulate(_, ty) = kind {
            let s = ty.size() as u64;
            if !range.start.is_multiple_of(s) || !(len as u64).is_multiple_of(s) {
                return Err(RmaError::Misaligned.into());
            }
        }
        self.queued.push(Queued {
            target,
            header,
            data,
        });
        Ok(header)
    }

    /// Writes `data` at displacement `disp` of `target`'s window when the
    /// epoch ends.
    pub fn put(&mut self, target: u16, disp: u64, data: &[u8]) -> Result<(), WinError> {
        self.queue(target, disp, data.len(), RmaKind::Put, data.to_vec())
            .map(|_| ())
    }

    /// Combines `data` into `target`'s window at `disp`, element by element.
    pub fn accumulate(
        &mut self,
        target: u16,
        disp: u64,
        data: &[u8],
        op: Op,
        ty: Int,
    ) -> Result<(), WinError> {
        let kind = RmaKind::Accumulate(op, ty);
        self.queue(target, disp, data.len(), kind, data.to_vec())
            .map(|_| ())
    }

    /// Reads `len` bytes at `disp` of `target`'s window; the bytes are
    /// [`take`](Self::take)n after the fence that ends the epoch.
    pub fn get(&mut self, target: u16, disp: u64, len: usize) -> Result<Get, WinError> {
        let id = self.gets;
        if id >= MAX_GETS {
            return Err(WinError::TooManyGets);
        }
        self.queue(target, disp, len, RmaKind::Get, Vec::new())?;
        if let Some(q) = self.queued.last_mut() {
            q.header.id = id;
        }
        self.gets += 1;
        Ok(Get(id))
    }

    /// The bytes of a get whose epoch ended; `None` if it has not, or if
    /// they were taken already.
    pub fn take(&mut self, g: Get) -> Option<Vec<u8>> {
        self.got.get_mut(g.0 as usize)?.take()
    }

    /// Ends the epoch (and starts the next): every operation this rank
    /// queued, and every one aimed at it, is done when this returns.
    /// Collective over the job's ranks.
    pub fn fence<T: Transport + 'static>(&mut self, r: &mut Rank<T>) -> Result<(), WinError> {
        self.fence_with(r, Assert::NONE)
    }

    /// [`fence`](Self::fence) with assertions: `NO_PRECEDE` skips the
    /// count exchange, which is all the deferred design does when no
    /// operation precedes (the paper left assertions out); `NO_SUCCEED`
    /// refuses operations until the next fence. `NO_STORE` and `NO_PUT`
    /// change nothing in this design.
    pub fn fence_with<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        assert: Assert,
    ) -> Result<(), WinError> {
        if assert.has(Assert::NO_PRECEDE) {
            if !self.queued.is_empty() {
                return Err(WinError::Assertion);
            }
            self.got = vec![None; std::mem::take(&mut self.gets) as usize];
            self.epoch = self.epoch.wrapping_add(1);
            self.closed = assert.has(Assert::NO_SUCCEED);
            return Ok(());
        }
        self.closed = assert.has(Assert::NO_SUCCEED);
        let n = r.size() as usize;
        let (id, epoch) = (self.id, self.epoch);
        // How many operations each rank receives from the others.
        let mut counts = vec![0u8; 4 * n];
        for q in self.queued.iter().filter(|q| q.target != self.me) {
            let c = &mut counts[4 * q.target as usize..4 * q.target as usize + 4];
            let v = u32::from_ne_bytes(c.try_into().expect("4 bytes")) + 1;
            c.copy_from_slice(&v.to_ne_bytes());
        }
        r.reduce_scatter(&mut counts, Int::U32, Op::Sum)?;
        let at = 4 * self.me as usize;
        let expected = u32::from_ne_bytes(counts[at..at + 4].try_into().expect("4 bytes"));
        let queued = std::mem::take(&mut self.queued);
        // Replies to this rank's gets, received straight into their buffers.
        let mut replies: Vec<Vec<u8>> = Vec::new();
        let mut reply_ids = Vec::new();
        for q in queued.iter().filter(|q| q.header.kind == RmaKind::Get) {
            replies.push(vec![0u8; q.header.len as usize]);
            reply_ids.push((q.target, q.header.id));
        }
        let mut pending: Vec<Req> = Vec::new();
        for (buf, &(t, gid)) in replies.iter_mut().zip(&reply_ids) {
            if t == self.me {
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
            pending.push(q.map_err(|e| WinError::Collective(CollectiveError::Recv(e)))?);
        }
        // This rank's operations: its own applied here, the others sent.
        let headers: Vec<[u8; HEADER]> = queued.iter().map(|q| q.header.encode()).collect();
        for (k, q) in queued.iter().enumerate() {
            if q.target == self.me {
                match q.header.kind {
                    RmaKind::Get => {
                        let i = reply_ids.iter().position(|&x| x == (q.target, q.header.id));
                        let range = q.header.offset as usize
                            ..(q.header.offset + q.header.len as u64) as usize;
                        if let Some(i) = i {
                            replies[i].copy_from_slice(&self.mem[range]);
                        }
                    }
                    _ => self.apply(&q.header, &q.data),
                }
                continue;
            }
            let h = &headers[k];
            // SAFETY: `headers` and `queued` outlive the wait below.
            let s = unsafe {
                r.isend_in(
                    q.target,
                    tag(id, epoch, HEADERS),
                    RMA_CONTEXT,
                    h.as_ptr(),
                    h.len(),
                )
            };
            pending.push(s.map_err(|e| WinError::Collective(CollectiveError::Send(e)))?);
            if !q.data.is_empty() {
                // SAFETY: as above.
                let s = unsafe {
                    r.isend_in(
                        q.target,
                        tag(id, epoch, DATA),
                        RMA_CONTEXT,
                        q.data.as_ptr(),
                        q.data.len(),
                    )
                };
                pending.push(s.map_err(|e| WinError::Collective(CollectiveError::Send(e)))?);
            }
        }
        // Operations aimed at this rank, as many as the counts said.
        let mut answers: Vec<Vec<u8>> = Vec::new();
        let mut answer_to = Vec::new();
        for _ in 0..expected {
            let mut hb = [0u8; HEADER];
            let st = r
                .recv_in(
                    Source::Any,
                    TagSel::Tag(tag(id, epoch, HEADERS)),
                    RMA_CONTEXT,
                    &mut hb,
                )
                .map_err(|e| WinError::Collective(CollectiveError::Recv(e)))?;
            let from = st.source;
            let h = OpHeader::decode(&hb);
            let carries = matches!(h, Ok(OpHeader { kind: RmaKind::Put | RmaKind::Accumulate(..), len, .. }) if len > 0);
            let admitted = h.and_then(|h| {
                if h.window != id || h.epoch != epoch {
                    return Err(RmaError::Key);
                }
                self.windows[self.me as usize]
                    .admit(&h)
                    .map(|range| (h, range))
            });
            // The data message is taken whatever the verdict, so the next
            // header is read as one; a refused one is cut to nothing.
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
                .map_err(|e| WinError::Collective(CollectiveError::Recv(e)))?;
            }
            match admitted {
                Err(_) => self.refused += 1,
                Ok((h, range)) if h.kind == RmaKind::Get => {
                    answers.push(self.mem[range.start as usize..range.end as usize].to_vec());
                    answer_to.push((from, h.id));
                }
                Ok((h, _)) => self.apply(&h, &data),
            }
        }
        for (a, &(to, gid)) in answers.iter().zip(&answer_to) {
            // SAFETY: `answers` outlives the wait below.
            let s =
                unsafe { r.isend_in(to, tag(id, epoch, gid), RMA_CONTEXT, a.as_ptr(), a.len()) };
            pending.push(s.map_err(|e| WinError::Collective(CollectiveError::Send(e)))?);
        }
        let mut fault = None;
        for q in pending {
            fault = fault.or(r.wait(q).fault);
        }
        if let Some(f) = fault {
            return Err(WinError::Collective(CollectiveError::Failed(f)));
        }
        self.got = vec![None; std::mem::take(&mut self.gets) as usize];
        for (buf, &(_, gid)) in replies.into_iter().zip(&reply_ids) {
            self.got[gid as usize] = Some(buf);
        }
        self.epoch = self.epoch.wrapping_add(1);
        Ok(())
    }

    /// Applies an admitted put or accumulate to this window.
    fn apply(&mut self, h: &OpHeader, data: &[u8]) {
        let at = h.offset as usize..h.offset as usize + data.len();
        match h.kind {
            RmaKind::Put => self.mem[at].copy_from_slice(data),
            RmaKind::Accumulate(op, ty) => {
                // Checked at admission: a failure here is a bug, counted.
                self.refused += reduce(op, ty, &mut self.mem[at], data).is_err() as u64;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{self, Net};
    use crate::loopnic::LoopConfig;
    use crate::rank::loop_config;

    /// Operations that skipped the origin's checks (queued here directly,
    /// as a faulty or hostile origin would send them) are refused by the
    /// target's and counted; nothing of them is written, and a good one
    /// beside them lands.
    #[test]
    fn the_target_refuses_forged_keys_and_ranges_from_the_wire() {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let mut w = r.win_create(32, 1).expect("window");
            w.fence(r).unwrap();
            if r.rank() == 0 {
                let good = w.windows[1];
                let forged = |key: u32, offset: u64, len: u32| Queued {
                    target: 1,
                    header: OpHeader {
                        kind: RmaKind::Put,
                        last: false,
                        window: w.id,
                        epoch: w.epoch,
                        key,
                        len,
                        offset,
                        id: 0,
                    },
                    data: vec![0xAB; len as usize],
                };
                w.queued.push(forged(good.key ^ 1, 0, 4)); // stale key
                w.queued.push(forged(good.key, 30, 4)); // past the end
                w.queued.push(forged(good.key, u64::MAX - 1, 4)); // wraps
                w.put(1, 8, &[7; 4]).unwrap();
            }
            w.fence(r).unwrap();
            (w.refused(), w.memory().to_vec())
        });
        let (refused, mem) = &out[1];
        assert_eq!(*refused, 3);
        assert_eq!(&mem[8..12], &[7; 4]);
        assert!(mem.iter().all(|&b| b != 0xAB), "nothing forged was written");
        assert_eq!(out[0].0, 0);
    }
}
