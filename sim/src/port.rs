//! The simulated rank's network port: a [`Port`] like any transport's, so
//! the rank runs the driver's [`Adapter`](rmx_driver::Adapter) and
//! [`progress`](rmx_driver::progress) as every shell does. It reaches
//! memory by address (the bounce slots, the rank's buffers, a peer's RDMA
//! landing) only inside a registration, charges the rank's CPU the model's
//! cost of each post and each packet taken, and stamps every post with
//! that time for the network ([`crate::net`]).

use std::collections::{HashMap, VecDeque};

use rmx_core::{Caps, PostError, RdmaError, RdmaOp, RegError, Remote};
use rmx_driver::{Completion, Mr, Port, Recv, Sge, Work};

use crate::model::Model;

/// A posted RDMA operation, on its way through the network.
#[derive(Clone, Copy, Debug)]
pub struct RdmaPost {
    pub peer: u16,
    pub op: RdmaOp,
    /// The work request, as its completion reports it.
    pub wr_id: u64,
    /// A write with immediate: the value the target's receive queue reports.
    pub imm: Option<u32>,
    pub local: Sge,
    pub remote: Remote,
}

/// What the rank posted, for the network, and when it left the CPU.
#[derive(Debug)]
pub enum ToWire {
    Packet {
        at: u64,
        to: u16,
        bytes: Vec<u8>,
    },
    /// `data`: a write's bytes, read when posted; `Err` if the local memory
    /// was not registered (the operation fails at its origin).
    Rdma {
        at: u64,
        post: RdmaPost,
        data: Result<Vec<u8>, RdmaError>,
    },
}

/// What arrived for the rank's receive queue.
#[derive(Debug)]
enum Arrival {
    Packet(Vec<u8>),
    Immediate(u32),
}

/// A registration: where, and whether peers may reach it.
#[derive(Clone, Copy, Debug)]
struct Reg {
    addr: usize,
    len: usize,
    remote: bool,
}

/// The port of one simulated rank.
pub struct SimPort {
    caps: Caps,
    model: Model,
    /// The rank's virtual time: when its CPU is next free.
    pub cpu: u64,
    regs: HashMap<u32, Reg>,
    next_key: u32,
    arrived: VecDeque<Arrival>,
    /// Receive buffers polled and not yet reposted.
    rx: Vec<Option<Vec<u8>>>,
    cq: VecDeque<Completion>,
    /// Posts not yet taken by the network.
    pub outbox: Vec<ToWire>,
    /// Peers whose connection is gone: posts to them fail with `Down`.
    pub down: Vec<u16>,
}

impl SimPort {
    /// A port under `model`'s costs: with RDMA (and writes with
    /// immediate) on a reliable wire, messages only on a lossy one.
    pub fn new(model: Model, lossy: bool) -> SimPort {
        let caps = match lossy {
            true => Caps::default(),
            false => Caps {
                rdma_write: true,
                rdma_read: true,
                write_imm: true,
                max_transfer: 1 << 24,
                ..Caps::default()
            },
        };
        SimPort {
            caps,
            model,
            cpu: 0,
            regs: HashMap::new(),
            next_key: 1,
            arrived: VecDeque::new(),
            rx: Vec::new(),
            cq: VecDeque::new(),
            outbox: Vec::new(),
            down: Vec::new(),
        }
    }

    /// Something waits to be polled: a packet, an immediate, a completion.
    pub fn pending(&self) -> bool {
        !self.arrived.is_empty() || !self.cq.is_empty()
    }

    /// A packet reached the receive queue.
    pub fn arrive(&mut self, bytes: Vec<u8>) {
        self.arrived.push_back(Arrival::Packet(bytes));
    }

    /// A write with immediate landed: its notification waits to be polled.
    pub fn immediate(&mut self, imm: u32) {
        self.arrived.push_back(Arrival::Immediate(imm));
    }

    /// A posted operation finished.
    pub fn complete(&mut self, wr_id: u64, result: rmx_core::WcResult) {
        self.cq.push_back(Completion { wr_id, result });
    }

    /// Whether registration `key` covers `len` bytes at `addr` (for a
    /// peer's access, `remote`), as a NIC checks a key before it touches
    /// memory. Addresses come from the wire: a range that wraps covers
    /// nothing.
    fn covers(&self, key: u32, addr: usize, len: usize, remote: bool) -> bool {
        self.regs.get(&key).is_some_and(|r| {
            (r.remote || !remote)
                && addr
                    .checked_add(len)
                    .is_some_and(|end| r.addr <= addr && end <= r.addr + r.len)
        })
    }

    /// The `len` bytes at `addr` under `key`; `None` if the key does not
    /// cover them.
    pub fn read(&self, key: u32, addr: usize, len: usize, remote: bool) -> Option<Vec<u8>> {
        if !self.covers(key, addr, len, remote) {
            return None;
        }
        let mut v = vec![0; len];
        // SAFETY: a registration's range stays valid until deregistered
        // (`Port::register`'s contract), and this one covers the bytes.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, v.as_mut_ptr(), len) };
        Some(v)
    }

    /// Writes `data` at `addr` under `key`; `false` (nothing written) if
    /// the key does not cover it.
    pub fn write(&mut self, key: u32, addr: usize, data: &[u8], remote: bool) -> bool {
        if !self.covers(key, addr, data.len(), remote) {
            return false;
        }
        // SAFETY: as `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        true
    }

    /// A peer's RDMA may reach `len` bytes at `remote`.
    pub fn reachable(&self, remote: Remote, len: usize) -> bool {
        usize::try_from(remote.addr).is_ok_and(|a| self.covers(remote.key.0, a, len, true))
    }

    /// A peer's RDMA read of `len` bytes at `remote`; `None` where the
    /// registration does not reach.
    pub fn read_remote(&self, remote: Remote, len: usize) -> Option<Vec<u8>> {
        let a = usize::try_from(remote.addr).ok()?;
        self.read(remote.key.0, a, len, true)
    }

    /// A peer's RDMA write of `data` at `remote`; `false` (nothing
    /// written) where the registration does not reach.
    pub fn write_remote(&mut self, remote: Remote, data: &[u8]) -> bool {
        usize::try_from(remote.addr).is_ok_and(|a| self.write(remote.key.0, a, data, true))
    }

    /// The bytes of `sges`, in order; `None` if one is not registered.
    fn gather(&self, sges: &[Sge]) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        for s in sges {
            bytes.extend(self.read(s.key, s.addr, s.len, false)?);
        }
        Some(bytes)
    }

    /// Charges one post's CPU cost: the time it leaves.
    fn spend_post(&mut self) -> u64 {
        self.cpu += self.model.overhead_ns;
        self.cpu
    }

    fn new_key(&mut self, reg: Reg) -> Mr {
        let key = self.next_key;
        self.next_key += 1;
        self.regs.insert(key, reg);
        Mr {
            addr: reg.addr,
            len: reg.len,
            key,
        }
    }
}

impl Port for SimPort {
    fn caps(&self) -> Caps {
        self.caps
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        let remote = false;
        Ok(self.new_key(Reg { addr, len, remote }))
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        let remote = true;
        Ok(self.new_key(Reg { addr, len, remote }))
    }

    fn deregister(&mut self, mr: Mr) {
        self.regs.remove(&mr.key);
    }

    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        if self.down.contains(&peer) {
            return Err(PostError::Down);
        }
        let (op, local, remote, imm) = match work {
            Work::Send { sges, .. } => {
                let bytes = self.gather(sges).ok_or(PostError::Access)?;
                let at = self.spend_post();
                self.outbox.push(ToWire::Packet {
                    at,
                    to: peer,
                    bytes,
                });
                return Ok(Some(Completion {
                    wr_id,
                    result: Ok(()),
                }));
            }
            Work::Inline { .. } => return Err(PostError::Unsupported),
            Work::Rdma { op, local, remote } if self.caps.rdma_write => (op, local, remote, None),
            Work::WriteImm { local, remote, imm } if self.caps.write_imm => {
                (RdmaOp::Write, local, remote, Some(imm))
            }
            Work::Rdma { .. } | Work::WriteImm { .. } => return Err(PostError::Unsupported),
        };
        if local.len > self.caps.max_transfer as usize {
            // The core never asks for more (it splits by `max_transfer`).
            return Err(PostError::Access);
        }
        let data = match op {
            RdmaOp::Write => self.read(local.key, local.addr, local.len, false),
            RdmaOp::Read => self
                .covers(local.key, local.addr, local.len, false)
                .then(Vec::new),
        };
        let post = RdmaPost {
            peer,
            op,
            wr_id,
            imm,
            local,
            remote,
        };
        let at = self.spend_post();
        let data = data.ok_or(RdmaError::Access);
        self.outbox.push(ToWire::Rdma { at, post, data });
        Ok(None)
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        match self.arrived.pop_front()? {
            Arrival::Immediate(imm) => {
                self.cpu += self.model.immediate_ns;
                Some(Recv {
                    buf: u32::MAX,
                    imm: Some(imm),
                })
            }
            Arrival::Packet(bytes) => {
                self.cpu += self.model.overhead_ns;
                let i = match self.rx.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        self.rx.push(None);
                        self.rx.len() - 1
                    }
                };
                self.rx[i] = Some(bytes);
                Some(Recv {
                    buf: i as u32,
                    imm: None,
                })
            }
        }
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        self.rx.get(buf as usize)?.as_deref()
    }

    fn repost(&mut self, buf: u32) -> bool {
        // An immediate's buffer is no packet's: nothing held.
        self.rx
            .get_mut(buf as usize)
            .and_then(Option::take)
            .is_some()
            || buf == u32::MAX
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        let n = out.len().min(self.cq.len());
        for (o, c) in out.iter_mut().zip(self.cq.drain(..n)) {
            *o = c;
        }
        n
    }
}

#[cfg(test)]
mod tests;
