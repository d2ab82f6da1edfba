//! One-sided communication between the ranks of a job: windows of memory,
//! put, get and accumulate, and fence synchronization in the four designs
//! of the fence paper (section 3), chosen per window
//! ([`rmx_core::onesided::Design`]):
//!
//! - **Fence-Def** (`deferred.rs`): operations are checked at the origin and
//!   queued; the closing fence sends them as two-sided messages. Runs on
//!   every transport, overlaps nothing.
//! - **Fence-Imm-Naive, -Opt, -RI** (`immediate.rs`): puts and gets move as
//!   RDMA when issued, so they overlap the computation that follows; the
//!   fence waits for them as its design says.
//!
//! Accumulates travel as messages in every design (the target applies them,
//! so concurrent ones combine), checked again against the window's key and
//! bounds when they arrive ([`Window::admit`]). Operations travel in a
//! context of their own; a message's tag names the window, the epoch and
//! what it carries.

mod deferred;
mod fence;
mod float;
#[cfg(test)]
mod hazard;
mod host;
mod immediate;
mod inbox;
mod io;
mod messages;

pub(crate) mod memory;

use std::sync::Arc;

use rmx_core::collective::{reduce, Int, Op};
use rmx_core::onesided::{
    Descriptor, Design, Epoch, EpochError, Float, OpHeader, RmaError, RmaKind, Target, Window,
};
use rmx_core::Remote;

use crate::rank::{Epochs, Rank, ShellNic};
use crate::transport::Transport;
use immediate::Immediate;
use memory::WinMemory;
use rmx_driver::task::CollectiveError;

pub use fence::FenceReq;
pub use rmx_core::onesided::{CONTEXT as RMA_CONTEXT, MAX_GETS};

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
    /// The transport cannot carry this design (`rmx info` lists which it
    /// offers); the deferred design runs everywhere.
    Unsupported(Design),
    /// The window's memory could not be registered with the transport.
    Register(rmx_core::RegError),
    /// The transport refused or failed this many RDMA operations of the
    /// epoch (a connection failed, or a key was refused): their data is
    /// missing; the fence itself completed on every rank.
    Transfer {
        failed: u64,
    },
    /// `len` bytes (a window's, or an operation's staging) could not be
    /// reserved: past the address space, or more than the system gives.
    Memory {
        len: usize,
    },
    /// Ranks passed different [`Assert::NO_SUCCEED`] or
    /// [`Assert::NO_PRECEDE`] to the same fence: the fence completed on
    /// every rank as if none had asserted it (the window stays open).
    Disagree,
    /// The window's memory is open to other ranks' RDMA in this epoch: read
    /// and write it with [`Win::read`] and [`Win::write`], or close the
    /// epoch with [`Assert::NO_SUCCEED`] first.
    Exposed,
}

/// What a fence may assume (MPI's `MPI_MODE_*` assertions). Every rank of
/// the window must give the same `NO_PRECEDE` and `NO_SUCCEED`; every
/// design checks `NO_PRECEDE`, and an immediate design `NO_SUCCEED`
/// ([`WinError::Disagree`]), since the window's memory is handed out on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assert(pub u8);

impl Assert {
    pub const NONE: Assert = Assert(0);
    /// No operation of this rank's epoch ends here: the fence skips the
    /// completion step (the deferred design then does nothing at all).
    pub const NO_PRECEDE: Assert = Assert(1);
    /// No operation follows until the next fence: the fence skips opening
    /// the next epoch (the immediate designs' barrier or flags).
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

impl From<EpochError> for WinError {
    fn from(e: EpochError) -> Self {
        match e {
            EpochError::Rma(e) => WinError::Rma(e),
            EpochError::TooManyGets => WinError::TooManyGets,
            EpochError::TooLong => WinError::TooLong,
            // A fence under way is this rank's own, finished before any
            // call returns: only an assertion reaches the user.
            EpochError::Assertion | EpochError::Fencing | EpochError::Busy => WinError::Assertion,
        }
    }
}

/// A get's result, once the fence that ends its epoch returned: the
/// epoch it was issued in (counted over the window's life) and its number
/// there, so a handle kept past a later fence is refused, never taken for
/// a later get's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Get {
    epoch: u64,
    id: u32,
}

/// An operation the deferred design holds until the fence.
struct Queued {
    target: u16,
    header: OpHeader,
    data: Vec<u8>,
}

/// A window: this rank's memory exposed to every rank of the job. Its
/// epochs (what is checked, counted, posted and awaited) are the core's
/// [`Epoch`], kept by the rank so its progress can hand them completions
/// and immediates; the window keeps the memory and the bytes.
pub struct Win {
    id: u16,
    me: u16,
    design: Design,
    mem: Arc<WinMemory>,
    /// The registration of `mem` (immediate designs).
    mem_key: Option<u32>,
    /// The last fence closed the window on every rank (the epoch's word,
    /// kept here for calls that take no rank).
    closed: bool,
    queued: Vec<Queued>,
    /// The open epoch's number over the window's life (the core's wraps).
    epochs: u64,
    /// The gets' bytes of the epoch the last fence ended, and its number.
    got: Vec<Option<Vec<u8>>>,
    got_epoch: u64,
    /// Refused operations and posts retried, as of the last call that
    /// reached the epoch; accumulates that failed to apply.
    refused: u64,
    retries: u64,
    misapplied: u64,
    imm: Option<Immediate>,
    /// The last fence's buffers, emptied: the next fence reuses their
    /// memory instead of allocating its own. On the heap, so that a fence
    /// moves it as one pointer; `None` only while a fence holds it.
    io: Option<Box<io::Io>>,
    /// The last fence, ended (its task and its requests' slots): the next
    /// is started in its place.
    fence: Option<Box<fence::Running>>,
    /// Where an operation aimed at this rank lands while the window waits
    /// for request handles outside a fence; nothing is posted between calls.
    first: Option<inbox::First>,
}

impl<T: Transport + 'static> Rank<T> {
    /// Creates a window of `len` bytes (zeroed) whose displacements count
    /// in `disp_unit` bytes, fenced by the deferred design; collective:
    /// every rank calls it, in the same order as its other window creations.
    pub fn win_create(&mut self, len: usize, disp_unit: u32) -> Result<Win, WinError> {
        self.win_create_with(len, disp_unit, Design::Def)
    }

    /// [`win_create`](Self::win_create) with a fence design; every rank
    /// must give the same. An immediate design the transport cannot carry
    /// is [`WinError::Unsupported`] on every rank alike.
    pub fn win_create_with(
        &mut self,
        len: usize,
        disp_unit: u32,
        design: Design,
    ) -> Result<Win, WinError> {
        if disp_unit == 0 {
            return Err(WinError::Rma(RmaError::Misaligned));
        }
        let caps = self.with(|d| d.nic.port().caps());
        if !design.offered(&caps) {
            return Err(WinError::Unsupported(design));
        }
        let id = self.windows;
        self.windows = self.windows.wrapping_add(1);
        let n = self.size() as usize;
        let mem = Arc::new(WinMemory::new(len).ok_or(WinError::Memory { len })?);
        let mem_key = if design.immediate() {
            let owner = Arc::clone(&mem) as Arc<dyn std::any::Any + Send + Sync>;
            // SAFETY: the window memory lives as long as its owner, which the
            // rank keeps until the registration ends.
            let pinned = self.with(|d| unsafe { d.pin(mem.addr(), mem.reserved(), owner) });
            let mr = pinned.map_err(WinError::Register)?;
            Some(mr.key)
        } else {
            None
        };
        // A key no other window of this rank had: stale accesses fail.
        let key = (crate::clock::now_ns() as u32 ^ (self.rank() as u32) << 16 ^ id as u32) | 1;
        let mine = Descriptor {
            window: Window {
                len: len as u64,
                disp_unit,
                key,
            },
            remote: Remote {
                addr: mem.addr() as u64,
                key: rmx_core::MemKey(mem_key.unwrap_or(0)),
            },
        };
        let mut all = vec![0u8; Descriptor::LEN * n];
        let me = self.rank() as usize;
        all[Descriptor::LEN * me..Descriptor::LEN * (me + 1)].copy_from_slice(&mine.encode());
        self.allgather(&mut all)?;
        let targets = all
            .chunks_exact(Descriptor::LEN)
            .map(|b| Descriptor::decode(b).map(Target::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(WinError::Rma)?;
        let epoch = Epoch::new(id, self.rank(), design, targets).expect("this rank is in the job");
        self.with(|d| d.windows.insert(id, epoch));
        Ok(Win {
            id,
            me: self.rank(),
            design,
            mem,
            mem_key,
            closed: false,
            queued: Vec::new(),
            epochs: 0,
            got: Vec::new(),
            got_epoch: u64::MAX,
            refused: 0,
            retries: 0,
            misapplied: 0,
            io: Some(Box::default()),
            fence: None,
            first: None,
            imm: design.immediate().then(Immediate::default),
        })
    }
}

/// The epoch of window `id`, which lives as long as the window.
fn epoch_of(windows: &mut Epochs, id: u16) -> &mut Epoch<Vec<Target>> {
    windows
        .get_mut(id)
        .expect("a window's epoch lives until it is freed")
}

impl Win {
    /// The design this window's fences follow.
    pub fn design(&self) -> Design {
        self.design
    }

    /// Runs `f` on this window's epoch and the rank's NIC, and notes what
    /// the epoch counted.
    fn epoch<T: Transport + 'static, R>(
        &mut self,
        r: &mut Rank<T>,
        f: impl FnOnce(&mut Epoch<Vec<Target>>, &mut ShellNic<T>) -> R,
    ) -> R {
        let id = self.id;
        let (out, refused, retries, closed) = r.with(|d| {
            let e = epoch_of(&mut d.windows, id);
            let out = f(e, &mut d.nic);
            (out, e.refused(), e.retries(), e.closed())
        });
        (self.refused, self.retries, self.closed) = (refused, retries, closed);
        out
    }

    /// This rank's window memory as a slice. Always for the deferred
    /// design (operations land only inside this rank's fence); for an
    /// immediate one only while no rank may access it (after a fence that
    /// asserted [`Assert::NO_SUCCEED`]), else [`WinError::Exposed`].
    pub fn memory(&mut self) -> Result<&mut [u8], WinError> {
        if self.design.immediate() && !self.closed {
            return Err(WinError::Exposed);
        }
        // SAFETY: `&mut self` for the slice's life; the deferred design
        // writes it only through `self`, and an immediate window is closed
        // to every rank until the next fence, which takes `&mut self`.
        Ok(unsafe { self.mem.slice_mut() })
    }

    /// Copies `out.len()` bytes from offset `at` of this rank's window
    /// memory. During an epoch in which others put here the bytes may be
    /// from before or after their puts (a conflict MPI leaves undefined);
    /// [`WinError::Rma`] if the range is outside.
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<(), WinError> {
        if self.mem.read(at, out) {
            Ok(())
        } else {
            Err(self.outside(at, out.len()))
        }
    }

    /// Copies `data` to offset `at` of this rank's window memory (see
    /// [`read`](Self::read) for what a conflicting put does).
    pub fn write(&mut self, at: usize, data: &[u8]) -> Result<(), WinError> {
        if self.mem.write(at, data) {
            Ok(())
        } else {
            Err(self.outside(at, data.len()))
        }
    }

    /// A copy of this rank's whole window memory.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.mem.len()];
        self.mem.read(0, &mut v);
        v
    }

    fn outside(&self, at: usize, len: usize) -> WinError {
        WinError::Rma(RmaError::OutOfBounds {
            offset: at as u64,
            len: len as u64,
            window: self.mem.len() as u64,
        })
    }

    /// Operations from the wire that the window refused (bad key, out of
    /// bounds, malformed) since it was created.
    pub fn refused(&self) -> u64 {
        self.refused + self.misapplied
    }

    /// RDMA operations the NIC could not take at once (its send queue
    /// full, or a target out of receive buffers for an immediate) and
    /// posted again after progress, since the window was created.
    pub fn retries(&self) -> u64 {
        self.retries
    }

    /// The origin's checks (the core's): the epoch is open, the target
    /// exists, the range lies in its window, an accumulate is whole
    /// elements.
    fn check<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        len: usize,
        kind: RmaKind,
    ) -> Result<OpHeader, WinError> {
        let len = u64::try_from(len).map_err(|_| WinError::TooLong)?;
        Ok(self.epoch(r, |e, _| e.check(target, disp, len, kind))?)
    }

    /// Writes `data` at displacement `disp` of `target`'s window: at once
    /// as RDMA in an immediate design (from a copy, so `data` is free when
    /// this returns), at the closing fence in the deferred one. The data
    /// is there when the fence that ends the epoch returns.
    pub fn put<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        data: &[u8],
    ) -> Result<(), WinError> {
        if self.imm.is_none() {
            return self
                .defer(r, target, disp, data.len(), data, RmaKind::Put)
                .map(drop);
        }
        let h = self.check(r, target, disp, data.len(), RmaKind::Put)?;
        immediate::put(self, r, target, h, immediate::Source::Copy(data))
    }

    /// [`put`](Self::put) straight from the caller's memory, without a copy
    /// (what an MPI library's `MPI_Put` does): in an immediate design the
    /// NIC reads `len` bytes at `ptr` while the application goes on.
    ///
    /// # Safety
    /// The bytes stay valid and unmodified until the fence that ends this
    /// epoch returns.
    pub unsafe fn put_raw<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        ptr: *const u8,
        len: usize,
    ) -> Result<(), WinError> {
        if self.imm.is_none() {
            // SAFETY: the caller's contract covers this call.
            let data = unsafe { std::slice::from_raw_parts(ptr, len) };
            return self
                .defer(r, target, disp, len, data, RmaKind::Put)
                .map(drop);
        }
        let h = self.check(r, target, disp, len, RmaKind::Put)?;
        immediate::put(self, r, target, h, immediate::Source::Raw(ptr, len))
    }

    /// Combines `data` into `target`'s window at `disp`, element by element.
    pub fn accumulate<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        data: &[u8],
        op: Op,
        ty: Int,
    ) -> Result<(), WinError> {
        self.combine(r, target, disp, data, RmaKind::Accumulate(op, ty))
    }

    /// [`accumulate`](Self::accumulate) of floating-point elements
    /// (native byte order): sum, min, max or replace; a bitwise operation
    /// is [`RmaError::Malformed`] at the origin.
    pub fn accumulate_float<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        data: &[u8],
        op: Op,
        ty: Float,
    ) -> Result<(), WinError> {
        if !Float::allows(op) {
            return Err(RmaError::Malformed.into());
        }
        self.combine(r, target, disp, data, RmaKind::AccumulateFloat(op, ty))
    }

    /// Either accumulate: a message in every design, applied by the target.
    fn combine<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        data: &[u8],
        kind: RmaKind,
    ) -> Result<(), WinError> {
        if self.imm.is_none() {
            return self
                .defer(r, target, disp, data.len(), data, kind)
                .map(drop);
        }
        let h = self.check(r, target, disp, data.len(), kind)?;
        immediate::accumulate(self, r, target, h, data)
    }

    /// Reads `len` bytes at `disp` of `target`'s window; the bytes are
    /// [`take`](Self::take)n after the fence that ends the epoch.
    pub fn get<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        len: usize,
    ) -> Result<Get, WinError> {
        if self.imm.is_none() {
            let h = self.defer(r, target, disp, len, &[], RmaKind::Get)?;
            return Ok(self.handle(h.id));
        }
        let mut h = self.check(r, target, disp, len, RmaKind::Get)?;
        immediate::get(self, r, target, &mut h)?;
        Ok(self.handle(h.id))
    }

    fn handle(&self, id: u32) -> Get {
        Get {
            epoch: self.epochs,
            id,
        }
    }

    /// Checks and queues an operation of `len` bytes for the deferred
    /// design's fence (a put's or accumulate's bytes copied from `data`),
    /// counted in the same call to the epoch as its check.
    fn defer<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        target: u16,
        disp: u64,
        len: usize,
        data: &[u8],
        kind: RmaKind,
    ) -> Result<OpHeader, WinError> {
        let len = u64::try_from(len).map_err(|_| WinError::TooLong)?;
        let me = self.me;
        let header = self.epoch(r, |e, _| {
            let mut h = e.check(target, disp, len, kind)?;
            if kind == RmaKind::Get {
                e.number_get(&mut h)?;
            }
            match target == me {
                true => e.local(),
                false => e.message(target),
            }
            Ok::<_, EpochError>(h)
        })?;
        self.queued.push(Queued {
            target,
            header,
            data: data.to_vec(),
        });
        Ok(header)
    }

    /// The bytes of a get whose epoch the last fence ended; `None` if it
    /// has not ended, if they were taken already, or if a later fence
    /// ended another epoch since (take them before the next fence).
    pub fn take(&mut self, g: Get) -> Option<Vec<u8>> {
        if g.epoch != self.got_epoch {
            return None;
        }
        self.got.get_mut(g.id as usize)?.take()
    }

    /// Ends the epoch (and starts the next): every operation this rank
    /// issued, and every one aimed at it, is done when this returns.
    /// Collective over the job's ranks.
    pub fn fence<T: Transport + 'static>(&mut self, r: &mut Rank<T>) -> Result<(), WinError> {
        self.fence_with(r, Assert::NONE)
    }

    /// [`fence`](Self::fence) with assertions: `NO_PRECEDE` skips waiting
    /// for operations and opening the next epoch when every rank gives it
    /// (the counts are still summed, so that a rank giving it alone is
    /// found out: [`WinError::Disagree`] on every rank, and
    /// [`WinError::Assertion`] on one that issued operations, which the
    /// fence completes anyway); `NO_SUCCEED` skips opening the next epoch
    /// and refuses operations until the next fence. `NO_STORE` and
    /// `NO_PUT` change nothing in these designs.
    pub fn fence_with<T: Transport + 'static>(
        &mut self,
        r: &mut Rank<T>,
        assert: Assert,
    ) -> Result<(), WinError> {
        let f = self.ifence(r, assert)?;
        r.wait_fence(f)
    }

    /// Ends a window: collective; an epoch still open is closed first, as
    /// by a fence asserting [`Assert::NO_SUCCEED`] (every operation issued
    /// completes), then its registrations end once every rank is here. A
    /// window merely dropped, or whose closing fails, keeps its memory
    /// registered until the rank ends: no RDMA in flight reaches freed
    /// memory.
    pub fn free<T: Transport + 'static>(mut self, r: &mut Rank<T>) -> Result<(), WinError> {
        if !self.closed {
            match self.fence_with(r, Assert::NO_SUCCEED) {
                Ok(()) | Err(WinError::Transfer { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        r.barrier()?;
        let keys: Vec<u32> = self
            .mem_key
            .take()
            .into_iter()
            .chain(self.imm.as_mut().map(|i| i.keys()).unwrap_or_default())
            .collect();
        let id = self.id;
        r.with(|d| {
            keys.iter().for_each(|&k| d.unpin(k));
            d.windows.remove(id);
        });
        Ok(())
    }

    /// Applies an admitted put or accumulate to this window.
    fn apply(&mut self, h: &OpHeader, data: &[u8]) {
        apply(&self.mem, &mut self.misapplied, h, data);
    }
}

/// Applies an admitted put or accumulate to a window's memory; one that
/// fails to (a bug: admission checked it) is counted in `misapplied`.
fn apply(mem: &WinMemory, misapplied: &mut u64, h: &OpHeader, data: &[u8]) {
    let at = h.offset as usize;
    match h.kind {
        RmaKind::Put => {
            mem.write(at, data);
        }
        RmaKind::Accumulate(..) | RmaKind::AccumulateFloat(..) => {
            let mut acc = vec![0u8; data.len()];
            mem.read(at, &mut acc);
            let done = match h.kind {
                RmaKind::Accumulate(op, ty) => reduce(op, ty, &mut acc, data).is_ok(),
                RmaKind::AccumulateFloat(op, ty) => float::reduce(op, ty, &mut acc, data),
                _ => false,
            };
            *misapplied += !done as u64;
            mem.write(at, &acc);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{self, Net};
    use crate::loopnic::LoopConfig;
    use crate::rank::loop_config;
    use rmx_core::{Source, TagSel};

    /// A fence reuses the last one's lists: a large epoch's lists shrink
    /// back to a bounded size, and the epochs after it (smaller ones, and
    /// gets, whose replies the lists carried) land whole.
    #[test]
    fn fences_reuse_their_lists_without_keeping_a_large_epochs_memory() {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let peer = 1 - r.rank();
            let mut w = r.win_create(4096, 1).expect("window");
            w.fence(r).unwrap();
            for i in 0..2000u64 {
                w.put(r, peer, i % 4096, &[i as u8]).unwrap();
            }
            w.fence(r).unwrap();
            let io = w.io.as_mut().expect("between fences");
            let slots = w.fence.as_mut().map_or(0, |f| f.slots_capacity());
            let big = (io.outgoing.capacity(), slots);
            let mut seen = Vec::new();
            for round in 0..3u8 {
                let data = [round + 1 + 10 * r.rank() as u8; 8];
                w.put(r, peer, 64, &data).unwrap();
                w.fence(r).unwrap();
                let g = w.get(r, peer, 64, 8).unwrap();
                w.fence(r).unwrap();
                seen.push(w.take(g).expect("the get's bytes"));
            }
            (big, seen)
        });
        for (me, ((outgoing, pending), seen)) in out.into_iter().enumerate() {
            assert!(outgoing <= io::KEEP && pending <= io::KEEP);
            // What this rank put into its peer's window, read back.
            for (round, got) in seen.iter().enumerate() {
                assert_eq!(got, &[round as u8 + 1 + 10 * me as u8; 8]);
            }
        }
    }

    /// An epoch may hold more operations than the receive pool and the
    /// request table: every rank floods the next with accumulates (and,
    /// deferred, puts and gets), and every fence ends with each one
    /// applied once. Before, each design stalled for ever from some
    /// hundreds of them: the operations held the target's pool, their
    /// origins ran out of credit, and the fence's collective queued
    /// behind them (and, on `loop`, one kept buffer blocked every later
    /// one of the ring).
    #[test]
    fn epochs_larger_than_the_receive_pool_end_in_every_design() {
        const N: u64 = 3200;
        const SLOTS: u64 = 64;
        for design in Design::ALL {
            let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let (me, n) = (r.rank(), r.size());
                let next = (me + 1) % n;
                let mut w = r
                    .win_create_with(8 * SLOTS as usize + 64, 1, design)
                    .expect("window");
                w.fence(r).unwrap();
                for i in 0..N {
                    let at = (i % SLOTS) * 8;
                    w.accumulate(r, next, at, &1u64.to_ne_bytes(), Op::Sum, Int::U64)
                        .unwrap();
                }
                let get = match design {
                    Design::Def => {
                        for i in 0..N {
                            w.put(r, next, 8 * SLOTS + i % 64, &[me as u8 + 1]).unwrap();
                        }
                        Some(w.get(r, next, 0, 8).unwrap())
                    }
                    _ => None,
                };
                w.fence(r).unwrap();
                let got = get.map(|g| w.take(g).expect("the get's bytes"));
                w.fence(r).unwrap();
                let mem = w.to_vec();
                (mem, got)
            });
            for (me, (mem, got)) in out.iter().enumerate() {
                let from = (me + out.len() - 1) % out.len();
                for slot in mem[..8 * SLOTS as usize].chunks(8) {
                    let v = u64::from_ne_bytes(slot.try_into().unwrap());
                    assert_eq!(v, N / SLOTS, "{design:?}: rank {me}'s sums");
                }
                if design == Design::Def {
                    assert!(mem[8 * SLOTS as usize..]
                        .iter()
                        .all(|&b| b == from as u8 + 1));
                    // The get reads the window before or after the
                    // epoch's accumulates: never a part.
                    let g = u64::from_ne_bytes(got.as_ref().unwrap()[..8].try_into().unwrap());
                    assert!(g == 0 || g == N / SLOTS, "{design:?}: got {g}");
                }
            }
        }
    }

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
                let good = w.epoch(r, |e, _| e.descriptor(1)).unwrap().window;
                let epoch = w.epoch(r, |e, _| e.epoch());
                let forged = |key: u32, offset: u64, len: u32| OpHeader {
                    kind: RmaKind::Put,
                    last: false,
                    window: w.id,
                    epoch,
                    key,
                    len,
                    offset,
                    id: 0,
                };
                for h in [
                    forged(good.key ^ 1, 0, 4),        // stale key
                    forged(good.key, 30, 4),           // past the end
                    forged(good.key, u64::MAX - 1, 4), // wraps
                ] {
                    // Counted and queued as `defer` does, unchecked.
                    w.epoch(r, |e, _| e.message(1));
                    w.queued.push(Queued {
                        target: 1,
                        header: h,
                        data: vec![0xAB; 4],
                    });
                }
                w.put(r, 1, 8, &[7; 4]).unwrap();
            }
            w.fence(r).unwrap();
            (w.refused(), w.to_vec())
        });
        let (refused, mem) = &out[1];
        assert_eq!(*refused, 3);
        assert_eq!(&mem[8..12], &[7; 4]);
        assert!(mem.iter().all(|&b| b != 0xAB), "nothing forged was written");
        assert_eq!(out[0].0, 0);
    }

    /// One get past [`MAX_GETS`] in an epoch is refused with a typed error
    /// in every design (the core numbers gets; their replies' tags carry
    /// the number), and nothing of it is queued or posted.
    #[test]
    fn one_get_too_many_is_refused() {
        for design in [Design::Def, Design::ImmOpt] {
            let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let mut w = r.win_create_with(8, 1, design).expect("window");
                w.fence(r).unwrap();
                let me = r.rank();
                let ok = (0..MAX_GETS).all(|_| w.get(r, me, 0, 0).is_ok());
                (ok, w.get(r, me, 0, 0), w.queued.len())
            });
            for (ok, last, queued) in out {
                assert!(ok, "{design:?}");
                assert_eq!(last, Err(WinError::TooManyGets), "{design:?}");
                let expect = if design == Design::Def {
                    MAX_GETS as usize
                } else {
                    0
                };
                assert_eq!(queued, expect, "{design:?}");
            }
        }
    }

    /// An immediate design's RDMA with a forged memory key or an address
    /// outside the window's registration: the NIC refuses it, nothing is
    /// written, the fence completes on every rank and reports the failed
    /// operations to the origin; a good put beside them lands.
    #[test]
    fn forged_rdma_keys_and_addresses_fail_without_writing() {
        for design in [Design::ImmOpt, Design::ImmRi] {
            let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let mut w = r.win_create_with(32, 1, design).expect("window");
                w.fence(r).unwrap();
                let mut res = Ok(());
                if r.rank() == 0 {
                    let good = w.epoch(r, |e, _| e.descriptor(1)).unwrap();
                    let set = |w: &mut Win, r: &mut Rank<_>, remote: Remote| {
                        let d = Descriptor { remote, ..good };
                        w.epoch(r, |e, _| e.set_descriptor(1, d));
                    };
                    let forged_key = rmx_core::MemKey(good.remote.key.0 ^ 0x55);
                    set(
                        &mut w,
                        r,
                        Remote {
                            key: forged_key,
                            ..good.remote
                        },
                    );
                    w.put(r, 1, 0, &[0xAB; 4]).unwrap();
                    let far = good.remote.addr + (1 << 20);
                    set(
                        &mut w,
                        r,
                        Remote {
                            addr: far,
                            ..good.remote
                        },
                    );
                    w.put(r, 1, 0, &[0xAB; 4]).unwrap();
                    set(&mut w, r, good.remote);
                    w.put(r, 1, 8, &[7; 4]).unwrap();
                    res = w.fence_with(r, Assert::NO_SUCCEED);
                } else {
                    w.fence_with(r, Assert::NO_SUCCEED).unwrap();
                }
                (res, w.to_vec())
            });
            assert_eq!(
                out[0].0,
                Err(WinError::Transfer { failed: 2 }),
                "{design:?}"
            );
            let mem = &out[1].1;
            assert_eq!(&mem[8..12], &[7; 4], "{design:?}");
            assert!(
                mem.iter().all(|&b| b != 0xAB),
                "{design:?}: nothing forged written"
            );
        }
    }

    /// Ranks that pass different `NO_SUCCEED` to one fence: the fence
    /// tells every rank, none is handed the window's memory (a peer that
    /// did not close could still write it), and the window stays open
    /// for every design that moves data by RDMA. Before, rank 0 got a
    /// `&mut [u8]` that rank 1's puts then wrote.
    #[test]
    fn ranks_that_disagree_on_closing_get_no_memory_slice() {
        for design in [Design::ImmNaive, Design::ImmOpt, Design::ImmRi] {
            let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let mut w = r.win_create_with(32, 1, design).expect("window");
                w.fence(r).unwrap();
                let close = if r.rank() == 0 {
                    Assert::NO_SUCCEED
                } else {
                    Assert::NONE
                };
                let fenced = w.fence_with(r, close);
                let slice = w.memory().map(|_| ());
                // Still open on both: a put and a fence go through.
                let put = w.put(r, 1 - r.rank(), 0, &[1; 4]);
                let again = w.fence_with(r, Assert::NO_SUCCEED);
                let closed = w.memory().map(|_| ());
                (fenced, slice, put, again, closed)
            });
            for (fenced, slice, put, again, closed) in out {
                assert_eq!(fenced, Err(WinError::Disagree), "{design:?}");
                assert_eq!(slice, Err(WinError::Exposed), "{design:?}");
                assert_eq!(put, Ok(()), "{design:?}");
                assert_eq!(again, Ok(()), "{design:?}");
                assert_eq!(closed, Ok(()), "{design:?}");
            }
        }
    }

    /// A window of 64 bytes in `design` whose epoch has this rank put its
    /// number + 1 into the next rank's first 8 bytes and add 1 to its u32
    /// at 8; this rank's number and the window.
    fn ring_epoch(r: &mut Rank, design: Design) -> (u16, Win) {
        let (me, n) = (r.rank(), r.size());
        let next = (me + 1) % n;
        let mut w = r.win_create_with(64, 1, design).expect("window");
        w.fence(r).unwrap();
        w.put(r, next, 0, &[me as u8 + 1; 8]).unwrap();
        let one = 1u32.to_ne_bytes();
        w.accumulate(r, next, 8, &one, Op::Sum, Int::U32).unwrap();
        (me, w)
    }

    /// A started fence moves on while its rank waits for something else:
    /// rank 0 starts its fence and then blocks in a receive that rank 1
    /// sends only once its own fence (which needs rank 0's) is done. Were
    /// the fence moved on only when tested, the ranks would hang.
    #[test]
    fn a_started_fence_moves_on_while_its_rank_waits_in_a_receive() {
        for design in Design::ALL {
            let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let (me, mut w) = ring_epoch(r, design);
                let f = w.ifence(r, Assert::NONE).expect("started");
                let fenced = match me {
                    0 => {
                        let mut b = [0u8; 4];
                        r.recv(Source::Rank(1), TagSel::Tag(7), &mut b)
                            .expect("recv");
                        assert_eq!(b, *b"done");
                        r.wait_fence(f)
                    }
                    _ => {
                        let res = r.wait_fence(f);
                        if me == 1 {
                            r.send(0, 7, b"done").expect("send");
                        }
                        res
                    }
                };
                (fenced, w.to_vec())
            });
            for (me, (fenced, mem)) in out.into_iter().enumerate() {
                let prev = (me + 2) % 3;
                assert_eq!(fenced, Ok(()), "{design:?}");
                assert_eq!(&mem[..8], &[prev as u8 + 1; 8], "{design:?}");
                assert_eq!(&mem[8..12], &1u32.to_ne_bytes(), "{design:?}");
            }
        }
    }

    /// A started fence moves on whenever the rank is tested, and a
    /// collective started while it runs keeps one order on every rank: the
    /// fence took its collectives' numbers when it started. Three ranks in
    /// every design each put, accumulate and get around a ring, start the
    /// fence, start an allreduce (rank 0 tests its fence in between), and
    /// test both until they end; rank 1
    /// computes (sleeps) before its first test, so the others' fences wait
    /// on it.
    #[test]
    fn a_started_fence_completes_beside_a_collective_started_after_it() {
        for design in Design::ALL {
            let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
                let (me, mut w) = ring_epoch(r, design);
                let g = w.get(r, (me + 1) % r.size(), 32, 4).unwrap();
                let mut f = w.ifence(r, Assert::NONE).expect("started");
                // Rank 0's fence moves on before its allreduce starts:
                // whatever step it reaches, the numbers are already taken.
                if me == 0 {
                    assert_eq!(r.test_fence(&mut f), None);
                }
                let c = r
                    .iallreduce(u64::from(me).to_ne_bytes().to_vec(), Int::U64, Op::Sum)
                    .expect("started");
                if me == 1 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let fenced = loop {
                    if let Some(res) = r.test_fence(&mut f) {
                        break res;
                    }
                };
                assert_eq!(r.test_fence(&mut f), None, "a fence reports once");
                drop(f);
                let sum = r.wait_collective(c).expect("allreduce");
                (fenced, w.to_vec(), w.take(g), sum)
            });
            for (me, (fenced, mem, got, sum)) in out.into_iter().enumerate() {
                let prev = (me + 2) % 3;
                assert_eq!(fenced, Ok(()), "{design:?}");
                assert_eq!(&mem[..8], &[prev as u8 + 1; 8], "{design:?}");
                assert_eq!(&mem[8..12], &1u32.to_ne_bytes(), "{design:?}");
                assert_eq!(got, Some(vec![0; 4]), "{design:?}");
                assert_eq!(sum, 3u64.to_ne_bytes().to_vec(), "{design:?}");
            }
        }
    }
}
