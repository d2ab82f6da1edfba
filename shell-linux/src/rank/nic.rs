//! The memory the core names by handle (bounce slots, receive buffers,
//! user buffers, registrations) and the port that moves it: the core's
//! [`Nic`] over any [`Transport`].

use crate::monitor::Monitor;
use crate::transport::{Completion, Mr, Sge, Transport, Work};
use crate::window::memory::WinMemory;
use rmx_core::{
    Caps, Gather, Loc, MemKey, Nic, PostError, Posted, RdmaOp, RegError, Remote, RxBuf, SlotId,
    UserBuf, WorkId,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Memory the core reaches by handle, plus the port that moves it.
pub struct ShellNic<T: Transport> {
    pub(super) port: T,
    pub(super) slot_size: usize,
    pub(super) slots: Vec<u8>,
    pub(super) slots_mr: Mr,
    pub(super) user: Vec<(usize, usize)>,
    pub(super) user_free: Vec<u32>,
    /// User-memory registrations the core asked for, by key.
    pub(super) user_regs: HashMap<u32, Mr>,
    /// Watches registered memory for changes; registration refuses what it
    /// cannot watch.
    pub(super) monitor: Option<Arc<Monitor>>,
    /// Memory of windows and their operations, registered for remote
    /// access: kept alive here until deregistered, whatever became of the
    /// window, so no NIC operation reaches freed memory.
    pub(super) pinned: Vec<(Mr, Arc<WinMemory>)>,
}

impl<T: Transport> ShellNic<T> {
    /// A NIC with `nslots` send bounce slots for eager messages of `eager` bytes.
    pub(super) fn new(mut port: T, eager: usize, nslots: usize) -> ShellNic<T> {
        let slot_size = (rmx_core::wire::HEADER_LEN + eager).div_ceil(64) * 64;
        let slots = vec![0u8; slot_size * nslots];
        // SAFETY: the slots' heap buffer never moves or shrinks, and `Drop`
        // waits for the NIC's operations and deregisters before it is freed.
        let slots_mr = unsafe { port.register(slots.as_ptr() as usize, slots.len()) }
            .expect("a fresh protection domain has keys");
        ShellNic {
            port,
            slot_size,
            slots,
            slots_mr,
            user: Vec::new(),
            user_free: Vec::new(),
            user_regs: HashMap::new(),
            monitor: None,
            pinned: Vec::new(),
        }
    }

    /// A post on the port, in the core's terms: done at once (or failed at
    /// once), or completing later.
    pub(super) fn sent(r: Result<Option<Completion>, PostError>) -> Result<Posted, PostError> {
        match r? {
            Some(c) => c.result.map(|()| Posted::Done).map_err(Into::into),
            None => Ok(Posted::Later),
        }
    }

    /// The first `len` bytes of a bounce slot as a gather entry.
    pub(super) fn slot_sge(&self, slot: SlotId, len: usize) -> Sge {
        Sge {
            addr: self.slots.as_ptr() as usize + slot.0 as usize * self.slot_size,
            len,
            key: self.slots_mr.key,
        }
    }

    /// Registers `mem` for local and remote access and keeps it alive
    /// until [`unpin`](Self::unpin) or the end of this NIC.
    pub(crate) fn pin(&mut self, mem: &Arc<WinMemory>) -> Result<Mr, RegError> {
        // SAFETY: `mem` is kept alive in `pinned` until deregistered, and
        // `Drop` drains the port first.
        let mr = unsafe { self.port.register_user(mem.addr(), mem.reserved()) }?;
        self.pinned.push((mr, Arc::clone(mem)));
        Ok(mr)
    }

    /// Ends the registration with `key`; the memory goes once its last
    /// holder lets go. The caller knows that no operation names it.
    pub(crate) fn unpin(&mut self, key: u32) {
        if let Some(i) = self.pinned.iter().position(|(mr, _)| mr.key == key) {
            let (mr, _) = self.pinned.swap_remove(i);
            self.port.deregister(mr);
        }
    }

    /// Registers `len` bytes at `addr` for an operation the caller waits
    /// for before it ends the registration.
    ///
    /// # Safety
    /// The range stays valid until [`deregister`](Self::deregister_user)ed.
    pub(crate) unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.port.register_user(addr, len) }
    }

    pub(crate) fn deregister_user(&mut self, mr: Mr) {
        self.port.deregister(mr);
    }

    pub(crate) fn port(&mut self) -> &mut T {
        &mut self.port
    }

    pub(super) fn add_user(&mut self, ptr: usize, len: usize) -> UserBuf {
        match self.user_free.pop() {
            Some(i) => {
                self.user[i as usize] = (ptr, len);
                UserBuf(i)
            }
            None => {
                self.user.push((ptr, len));
                UserBuf(self.user.len() as u32 - 1)
            }
        }
    }

    pub(super) fn drop_user(&mut self, b: UserBuf) {
        self.user_free.push(b.0);
    }

    /// Resolves a location to a pointer with `len` bytes behind it.
    pub(super) fn resolve(&mut self, l: Loc, len: usize) -> *mut u8 {
        let (base, size, off) = match l {
            Loc::Slot(s, o) => (
                self.slots[s.0 as usize * self.slot_size..].as_mut_ptr(),
                self.slot_size,
                o,
            ),
            Loc::Rx(b, o) => {
                let r = self.rx(b);
                (r.as_ptr() as *mut u8, r.len(), o)
            }
            Loc::User(b, o) => {
                let (p, n) = self.user[b.0 as usize];
                (p as *mut u8, n, o)
            }
        };
        assert!(
            off as usize + len <= size,
            "core named {l:?}+{len} beyond {size} bytes"
        );
        // SAFETY: bounds checked just above.
        unsafe { base.add(off as usize) }
    }
}

impl<T: Transport> Drop for ShellNic<T> {
    /// The NIC's thread may still copy from the bounce slots (a send larger
    /// than the port's synchronous limit completes for the core once copied
    /// into a slot): wait for it, then end every registration, before the
    /// slots are freed.
    fn drop(&mut self) {
        self.port.drain();
        for (_, mr) in self.user_regs.drain() {
            self.port.deregister(mr);
        }
        for (mr, _) in self.pinned.drain(..) {
            self.port.deregister(mr);
        }
        self.port.deregister(self.slots_mr);
    }
}

impl<T: Transport> Nic for ShellNic<T> {
    #[inline]
    fn slot_mut(&mut self, slot: SlotId) -> &mut [u8] {
        let s = slot.0 as usize * self.slot_size;
        &mut self.slots[s..s + self.slot_size]
    }

    #[inline]
    fn rx(&self, buf: RxBuf) -> &[u8] {
        self.port
            .rx_bytes(buf.0)
            .expect("the core names held receive buffers")
    }

    #[inline]
    fn copy(&mut self, dst: Loc, src: Loc, len: usize) {
        let s = self.resolve(src, len);
        let d = self.resolve(dst, len);
        // SAFETY: both ranges bounds-checked by `resolve`; distinct objects.
        unsafe { crate::copy::copy_bytes(d, s, len) }
    }

    #[inline]
    fn post_send(&mut self, peer: u16, slot: SlotId, len: usize) -> Result<Posted, PostError> {
        let sge = self.slot_sge(slot, len);
        Self::sent(self.port.post(
            peer,
            WorkId::Send(slot).wr_id(),
            Work::Send {
                sges: &[sge],
                solicited: false,
            },
        ))
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
        Self::sent(self.port.post(
            peer,
            WorkId::Send(slot).wr_id(),
            Work::Send {
                sges: &sges,
                solicited: false,
            },
        ))
    }

    #[inline]
    fn user_addr(&self, buf: UserBuf) -> Option<u64> {
        self.user.get(buf.0 as usize).map(|&(p, _)| p as u64)
    }

    fn register(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        let Some(m) = &self.monitor else {
            return Err(RegError::Unmonitored);
        };
        m.watch(addr, len).map_err(|_| RegError::Unmonitored)?;
        self.register_once(addr, len)
    }

    fn deregister(&mut self, key: MemKey) {
        if let Some(mr) = self.user_regs.remove(&key.0) {
            self.port.deregister(mr);
        }
    }

    fn register_once(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        // SAFETY: the core registers only user buffers handed to it through
        // `Rank::isend_raw`/`irecv_raw` (or a borrow held across the wait),
        // valid while their request is pending; registrations kept beyond
        // that (the registration cache) are dropped by the monitor when the
        // memory is unmapped, and all of them when the rank is dropped.
        let mr = unsafe { self.port.register_user(addr as usize, len as usize) }?;
        self.user_regs.insert(mr.key, mr);
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
        Self::sent(
            self.port
                .post(peer, work.wr_id(), Work::Rdma { op, local, remote }),
        )
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
        let work_req = Work::WriteImm { local, remote, imm };
        Self::sent(self.port.post(peer, work.wr_id(), work_req))
    }

    #[inline]
    fn post_send_solicited(
        &mut self,
        peer: u16,
        slot: SlotId,
        len: usize,
    ) -> Result<Posted, PostError> {
        let sge = self.slot_sge(slot, len);
        let wr_id = WorkId::Send(slot).wr_id();
        let work = Work::Send {
            sges: &[sge],
            solicited: true,
        };
        Self::sent(self.port.post(peer, wr_id, work))
    }

    #[inline]
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; rmx_core::wire::HEADER_LEN],
        payload: Loc,
        len: usize,
    ) -> Result<Posted, PostError> {
        let p = self.resolve(payload, len);
        // SAFETY: `resolve` checked `len` bytes at `p`.
        let body = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        let work = Work::Inline { head: header, body };
        self.port.post(peer, WorkId::Inline(peer).wr_id(), work)?;
        Ok(Posted::Later)
    }

    #[inline]
    fn repost(&mut self, buf: RxBuf) {
        let held = self.port.repost(buf.0);
        debug_assert!(held, "the core reposts each buffer it was given once");
    }
}
