//! The core's [`Nic`] over any [`Port`]: bounce slots registered once,
//! user buffers and registrations in fixed tables the embedder supplies,
//! and every post the core asks for turned into one work request. A shell
//! (userspace or kernel) adds only what is its own: how to copy bytes
//! fast and how to watch memory for changes ([`Host`]).

use rmx_core::wire::HEADER_LEN;
use rmx_core::{
    Caps, Gather, Loc, MemKey, Nic, PostError, Posted, RdmaOp, RegError, Remote, Request, RxBuf,
    SlotId, UserBuf, WorkId,
};

use crate::port::{Completion, Mr, Port, Sge, Work};

/// What the adapter asks of the shell that embeds it.
pub trait Host {
    /// Copies `len` bytes from `src` to `dst`.
    ///
    /// # Safety
    /// Both ranges are valid for `len` bytes and do not overlap.
    unsafe fn copy(&mut self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
    }

    /// Starts watching `[addr, addr+len)` for changes (unmapping, remapping)
    /// so that a cached registration of it is dropped in time; `false` if
    /// it cannot be watched, and the core then never caches it.
    fn watch(&mut self, addr: u64, len: u64) -> bool {
        let _ = (addr, len);
        false
    }
}

/// A host that copies with `copy_nonoverlapping` and watches nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl Host for Plain {}

/// One row of the user-buffer table: a range the core names by handle, or
/// a link in the free list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserEntry {
    /// Free; the next free row (`u32::MAX`: none).
    Link(u32),
    Used {
        addr: usize,
        len: usize,
    },
}

impl Default for UserEntry {
    fn default() -> UserEntry {
        UserEntry::Link(NONE)
    }
}

/// The adapter's tables, as storage the embedder supplies (arrays, or
/// vectors sized once): bounce slots, user buffers, registrations.
pub trait AdapterTables {
    type Bytes: AsRef<[u8]> + AsMut<[u8]>;
    type Users: AsRef<[UserEntry]> + AsMut<[UserEntry]>;
    type Regs: AsRef<[Option<Mr>]> + AsMut<[Option<Mr>]>;
}

/// The core's [`Nic`] over port `P`.
pub struct Adapter<P: Port, H: Host, S: AdapterTables> {
    port: P,
    host: H,
    slot_size: usize,
    slots: S::Bytes,
    slots_mr: Mr,
    users: S::Users,
    /// Head of the free user rows (`NONE`: the table is full).
    free: u32,
    regs: S::Regs,
    /// Calls that named what the adapter does not hold (see [`faults`](Self::faults)).
    faults: u64,
}

const NONE: u32 = u32::MAX;

/// Why an adapter could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterError {
    /// The port refused to register the bounce slots.
    Register(RegError),
    /// A table has more rows than its handles can name.
    TooLarge,
}

impl<P: Port, H: Host, S: AdapterTables> Adapter<P, H, S> {
    /// The bounce slots' size for eager messages of `eager` bytes: header
    /// and payload, rounded to a cache line.
    pub const fn slot_size(eager: usize) -> usize {
        (HEADER_LEN + eager).div_ceil(64) * 64
    }

    /// An adapter over `port`; `slots` holds the bounce slots (its length
    /// a multiple of [`slot_size`](Self::slot_size)`(eager)`), `users` and
    /// `regs` as many rows as user buffers and registrations may be live
    /// at once.
    ///
    /// # Safety
    /// `slots` never moves while the adapter lives (a vector's heap buffer
    /// or a static array, not an inline array that moves with it): the
    /// port holds its address.
    pub unsafe fn new(
        mut port: P,
        host: H,
        eager: usize,
        mut slots: S::Bytes,
        mut users: S::Users,
        regs: S::Regs,
    ) -> Result<Self, AdapterError> {
        let n = users.as_ref().len();
        if u32::try_from(n).map_or(true, |n| n == NONE) {
            return Err(AdapterError::TooLarge);
        }
        for (i, u) in users.as_mut().iter_mut().enumerate() {
            *u = UserEntry::Link(if i + 1 < n { i as u32 + 1 } else { NONE });
        }
        let b = slots.as_mut();
        // SAFETY: the caller's contract keeps the slots in place; `Drop`
        // deregisters them.
        let slots_mr = unsafe { port.register(b.as_mut_ptr() as usize, b.len().max(1)) }
            .map_err(AdapterError::Register)?;
        Ok(Adapter {
            port,
            host,
            slot_size: Self::slot_size(eager),
            slots,
            slots_mr,
            users,
            free: if n == 0 { NONE } else { 0 },
            regs,
            faults: 0,
        })
    }

    /// Calls refused because they named what the adapter or its port does
    /// not hold: a user buffer never handed out, bytes past a handle's
    /// memory, a receive buffer the port has no bytes for, a repost of a
    /// buffer not held. A copy or post so named does nothing (a post is
    /// [`PostError::Access`]); a receive buffer reads as empty (the core
    /// drops it as malformed). Never a panic: a kernel shell cannot have
    /// one. Non-zero means a bug in the shell or the port.
    pub fn faults(&self) -> u64 {
        self.faults
    }

    pub fn port(&mut self) -> &mut P {
        &mut self.port
    }

    pub fn port_ref(&self) -> &P {
        &self.port
    }

    pub fn host(&mut self) -> &mut H {
        &mut self.host
    }

    /// Names `len` bytes at `addr` for the core; `None` if every row is
    /// in use.
    ///
    /// # Safety
    /// The range stays valid for reads and writes until the handle is
    /// given back with [`drop_user`](Self::drop_user): the core copies
    /// into and out of it, and registers it for the NIC.
    pub unsafe fn add_user(&mut self, addr: usize, len: usize) -> Option<UserBuf> {
        let i = self.free;
        let row = self.users.as_mut().get_mut(i as usize)?;
        let UserEntry::Link(next) = *row else {
            return None;
        };
        *row = UserEntry::Used { addr, len };
        self.free = next;
        Some(UserBuf(i))
    }

    /// Gives a handle's row back (the core no longer names it).
    pub fn drop_user(&mut self, b: UserBuf) {
        if let Some(row) = self.users.as_mut().get_mut(b.0 as usize) {
            if matches!(row, UserEntry::Used { .. }) {
                *row = UserEntry::Link(self.free);
                self.free = b.0;
            }
        }
    }

    /// Starts one operation of the core (`op`) on `len` bytes at `addr`,
    /// named by a handle for it: `full` if every row is in use. The
    /// handle comes back with the request for the caller to give back
    /// ([`drop_user`](Self::drop_user)) when the request ends; `None` if
    /// the operation ended during the call ([`Request::COMPLETE`]), whose
    /// handle serves the next at once, as a refused one's does.
    ///
    /// # Safety
    /// As for [`add_user`](Self::add_user), until the request ends.
    #[inline]
    pub unsafe fn lend<E>(
        &mut self,
        addr: usize,
        len: usize,
        full: E,
        op: impl FnOnce(&mut Self, UserBuf) -> Result<Request, E>,
    ) -> Result<(Request, Option<UserBuf>), E> {
        // SAFETY: the caller's contract.
        let Some(buf) = (unsafe { self.add_user(addr, len) }) else {
            return Err(full);
        };
        match op(self, buf) {
            Ok(req) if req == Request::COMPLETE => {
                self.drop_user(buf);
                Ok((req, None))
            }
            Ok(req) => Ok((req, Some(buf))),
            Err(e) => {
                self.drop_user(buf);
                Err(e)
            }
        }
    }

    /// The first `len` bytes of a bounce slot as a gather entry.
    fn slot_sge(&self, slot: SlotId, len: usize) -> Sge {
        Sge {
            addr: self.slots.as_ref().as_ptr() as usize + slot.0 as usize * self.slot_size,
            len,
            key: self.slots_mr.key,
        }
    }

    /// A post on the port, in the core's terms.
    fn sent(r: Result<Option<Completion>, PostError>) -> Result<Posted, PostError> {
        match r? {
            Some(c) => c.result.map(|()| Posted::Done).map_err(Into::into),
            None => Ok(Posted::Later),
        }
    }

    /// Resolves a location to a pointer with `len` bytes behind it; `None`
    /// (counted in [`faults`](Self::faults)) if nothing held is there.
    fn resolve(&mut self, l: Loc, len: usize) -> Option<*mut u8> {
        let (base, size, off) = match l {
            Loc::Slot(s, o) => {
                let at = (s.0 as usize).saturating_mul(self.slot_size);
                match self
                    .slots
                    .as_mut()
                    .get_mut(at..at.saturating_add(self.slot_size))
                {
                    Some(b) => (b.as_mut_ptr(), b.len(), o),
                    None => (core::ptr::null_mut(), 0, o),
                }
            }
            Loc::Rx(b, o) => match self.port.rx_bytes(b.0) {
                Some(r) => (r.as_ptr() as *mut u8, r.len(), o),
                None => (core::ptr::null_mut(), 0, o),
            },
            Loc::User(b, o) => match self.users.as_ref().get(b.0 as usize) {
                Some(&UserEntry::Used { addr, len }) => (addr as *mut u8, len, o),
                _ => (core::ptr::null_mut(), 0, o),
            },
        };
        if base.is_null() || (off as usize).checked_add(len).is_none_or(|e| e > size) {
            self.faults += 1;
            return None;
        }
        // SAFETY: bounds checked just above.
        Some(unsafe { base.add(off as usize) })
    }

    /// Registers `len` bytes at `addr` for local and remote access and
    /// keeps the registration until [`deregister`](Nic::deregister).
    ///
    /// # Safety
    /// The range stays valid until deregistered.
    pub unsafe fn register_kept(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        let slot = self
            .regs
            .as_ref()
            .iter()
            .position(Option::is_none)
            .ok_or(RegError::NoResources)?;
        // SAFETY: the caller's contract.
        let mr = unsafe { self.port.register_user(addr, len) }?;
        self.regs.as_mut()[slot] = Some(mr);
        Ok(mr)
    }

    /// Ends the registration with `key`, if this adapter holds it.
    pub fn deregister_key(&mut self, key: u32) -> bool {
        let found = self
            .regs
            .as_mut()
            .iter_mut()
            .find(|r| r.is_some_and(|mr| mr.key == key));
        match found.and_then(Option::take) {
            Some(mr) => {
                self.port.deregister(mr);
                true
            }
            None => false,
        }
    }
}

impl<P: Port, H: Host, S: AdapterTables> Drop for Adapter<P, H, S> {
    /// Waits for the port's operations, then ends every registration the
    /// adapter holds, before the slots' memory goes.
    fn drop(&mut self) {
        self.port.drain();
        for r in self.regs.as_mut() {
            if let Some(mr) = r.take() {
                self.port.deregister(mr);
            }
        }
        self.port.deregister(self.slots_mr);
    }
}

impl<P: Port, H: Host, S: AdapterTables> Nic for Adapter<P, H, S> {
    #[inline]
    fn slot_mut(&mut self, slot: SlotId) -> &mut [u8] {
        let s = slot.0 as usize * self.slot_size;
        &mut self.slots.as_mut()[s..s + self.slot_size]
    }

    /// A buffer the port has no bytes for reads as empty: the core drops
    /// it as malformed (see [`Adapter::faults`]).
    #[inline]
    fn rx(&self, buf: RxBuf) -> &[u8] {
        self.port.rx_bytes(buf.0).unwrap_or(&[])
    }

    #[inline(always)]
    fn copy(&mut self, dst: Loc, src: Loc, len: usize) {
        let (Some(s), Some(d)) = (self.resolve(src, len), self.resolve(dst, len)) else {
            return;
        };
        // SAFETY: both ranges bounds-checked by `resolve`; distinct objects.
        unsafe { self.host.copy(d, s, len) }
    }

    #[inline]
    fn post_send(&mut self, peer: u16, slot: SlotId, len: usize) -> Result<Posted, PostError> {
        let sges = [self.slot_sge(slot, len)];
        let work = Work::Send {
            sges: &sges,
            solicited: false,
        };
        Self::sent(self.port.post(peer, WorkId::Send(slot).wr_id(), work))
    }

    #[inline]
    fn post_send_solicited(
        &mut self,
        peer: u16,
        slot: SlotId,
        len: usize,
    ) -> Result<Posted, PostError> {
        let sges = [self.slot_sge(slot, len)];
        let work = Work::Send {
            sges: &sges,
            solicited: true,
        };
        Self::sent(self.port.post(peer, WorkId::Send(slot).wr_id(), work))
    }

    #[inline]
    fn post_send_gather(
        &mut self,
        peer: u16,
        slot: SlotId,
        header_len: usize,
        payload: Gather,
    ) -> Result<Posted, PostError> {
        let sges = [self.slot_sge(slot, header_len), Sge::from(payload)];
        let work = Work::Send {
            sges: &sges,
            solicited: false,
        };
        Self::sent(self.port.post(peer, WorkId::Send(slot).wr_id(), work))
    }

    #[inline]
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        payload: Loc,
        len: usize,
        signal: bool,
    ) -> Result<Posted, PostError> {
        let p = self.resolve(payload, len).ok_or(PostError::Access)?;
        // SAFETY: `resolve` checked `len` bytes at `p`.
        let body = unsafe { core::slice::from_raw_parts(p as *const u8, len) };
        self.send_inline_bytes(peer, header, body, signal)
    }

    /// The slot's packet goes as one part, read where it lies: one copy
    /// into the device, and no header copied out first.
    #[inline]
    fn send_inline_slot(
        &mut self,
        peer: u16,
        slot: SlotId,
        len: usize,
        signal: bool,
    ) -> Result<Posted, PostError> {
        if len < HEADER_LEN {
            self.faults += 1;
            return Err(PostError::Access);
        }
        let p = self
            .resolve(Loc::Slot(slot, 0), len)
            .ok_or(PostError::Access)?;
        // SAFETY: `resolve` checked `len` bytes at `p`.
        let packet = unsafe { core::slice::from_raw_parts(p as *const u8, len) };
        let work = Work::Inline {
            head: packet,
            body: &[],
            signal,
        };
        Self::sent(self.port.post(peer, WorkId::Inline(peer).wr_id(), work))
    }

    #[inline]
    fn send_inline_bytes(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        body: &[u8],
        signal: bool,
    ) -> Result<Posted, PostError> {
        let work = Work::Inline {
            head: header,
            body,
            signal,
        };
        // An inline send may complete during the call, as any post.
        Self::sent(self.port.post(peer, WorkId::Inline(peer).wr_id(), work))
    }

    #[inline]
    fn repost(&mut self, buf: RxBuf) {
        if !self.port.repost(buf.0) {
            self.faults += 1;
        }
    }

    fn rx_pool_low(&mut self, free: u32) -> u32 {
        self.port.rx_pool_low(free)
    }

    #[inline]
    fn user_addr(&self, buf: UserBuf) -> Option<u64> {
        match self.users.as_ref().get(buf.0 as usize)? {
            UserEntry::Used { addr, .. } => Some(*addr as u64),
            _ => None,
        }
    }

    fn register(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        if !self.host.watch(addr, len) {
            return Err(RegError::Unmonitored);
        }
        self.register_once(addr, len)
    }

    fn deregister(&mut self, key: MemKey) {
        self.deregister_key(key.0);
    }

    fn register_once(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        let (Ok(addr), Ok(len)) = (usize::try_from(addr), usize::try_from(len)) else {
            return Err(RegError::NoResources);
        };
        // SAFETY: the core registers only user buffers the shell handed it
        // (valid while their request is pending); registrations kept beyond
        // that (the registration cache) are of watched memory, dropped when
        // it changes, and all of them when the adapter is dropped.
        let mr = unsafe { self.register_kept(addr, len) }?;
        Ok(MemKey(mr.key))
    }

    fn caps(&self) -> Caps {
        self.port.caps()
    }

    fn post_rdma(
        &mut self,
        peer: u16,
        work: WorkId,
        op: RdmaOp,
        local: Gather,
        remote: Remote,
    ) -> Result<Posted, PostError> {
        let local = Sge::from(local);
        let w = Work::Rdma { op, local, remote };
        Self::sent(self.port.post(peer, work.wr_id(), w))
    }

    fn post_write_imm(
        &mut self,
        peer: u16,
        work: WorkId,
        local: Gather,
        remote: Remote,
        imm: u32,
    ) -> Result<Posted, PostError> {
        let local = Sge::from(local);
        let w = Work::WriteImm { local, remote, imm };
        Self::sent(self.port.post(peer, work.wr_id(), w))
    }
}

#[cfg(test)]
mod tests;
