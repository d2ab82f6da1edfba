//! The port as C implements it: a table of callbacks over the caller's
//! own network (a driver's queues, a runtime's shared memory), shaped as
//! a verbs queue pair is, so the core's protocols run over it unchanged.
//! What the port may do is told once, in `rmx_port_caps_t`; every
//! decision (eager or rendezvous, which rendezvous, when to pack) stays
//! in the core.

use core::ffi::{c_int, c_void};

use crate::port::{Completion, Mr, Port, Recv, Sge, Work};
use rmx_core::{Caps, PostError, RdmaError, RdmaOp, RegError, WcResult};

/// A port callback's result: done.
pub const RMX_PORT_OK: c_int = 0;
/// `post`: the work was done during the call (its completion is this).
pub const RMX_PORT_DONE: c_int = 1;
/// `post`: send queue full, or (a write with immediate) the peer has no
/// receive buffer; nothing was done and the core posts it again later.
pub const RMX_PORT_BUSY: c_int = -1;
/// `post`, or a completion's `status`: the connection to the peer is gone.
pub const RMX_PORT_DOWN: c_int = -2;
/// `post` or `reg`: the port does not do this (the core does without).
pub const RMX_PORT_UNSUPPORTED: c_int = -3;
/// `post`, or a completion's `status`: a memory key or bound check failed.
pub const RMX_PORT_ACCESS: c_int = -4;
/// `reg`: out of registrations or pinnable memory.
pub const RMX_PORT_NO_RESOURCE: c_int = -5;

/// `rmx_work_t.kind`: the bytes of `sges`, in order, as one packet.
pub const RMX_WORK_SEND: u32 = 0;
/// `rmx_work_t.kind`: `head` then `body` as one packet, copied during the
/// call (an inline send).
pub const RMX_WORK_INLINE: u32 = 1;
/// `rmx_work_t.kind`: write `sges[0]` to the peer's `remote_addr`.
pub const RMX_WORK_RDMA_WRITE: u32 = 2;
/// `rmx_work_t.kind`: read the peer's `remote_addr` into `sges[0]`.
pub const RMX_WORK_RDMA_READ: u32 = 3;
/// `rmx_work_t.kind`: write as `RMX_WORK_RDMA_WRITE`, then take one of the
/// peer's receive buffers to report `imm` there.
pub const RMX_WORK_WRITE_IMM: u32 = 4;

/// `rmx_work_t.flags` (a send): also wake a thread sleeping on the peer.
pub const RMX_WORK_SOLICITED: u32 = 1;
/// `rmx_work_t.flags` (an inline send): report this send's completion;
/// without it the port may report it only with a later signalled one.
pub const RMX_WORK_SIGNAL: u32 = 2;

/// `reg`'s `flags`: application memory, for remote access too (a
/// rendezvous, a window); without it, memory of rmx's own (bounce slots)
/// for local access.
pub const RMX_REG_REMOTE: u32 = 1;

/// `poll_recv`'s result: a packet is in `*buf`.
pub const RMX_RECV_PACKET: c_int = 1;
/// `poll_recv`'s result: a write with immediate landed, `*imm` its value
/// (`*buf` the receive buffer it took, handed back at once).
pub const RMX_RECV_IMM: c_int = 2;

/// What the port can do and its limits (0: no limit, or none).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmx_port_caps_t {
    /// Non-zero: `RMX_WORK_RDMA_WRITE` works (the RPUT rendezvous).
    pub rdma_write: u8,
    /// Non-zero: `RMX_WORK_RDMA_READ` works (the RGET rendezvous).
    pub rdma_read: u8,
    /// Non-zero: `RMX_WORK_WRITE_IMM` works.
    pub write_imm: u8,
    /// Non-zero: packets may be lost, duplicated or reordered; the core
    /// then carries reliability itself (sequence numbers, acks, timers
    /// that `rmx_ep_progress`'s clock drives).
    pub lossy: u8,
    /// Non-zero: registering costs next to nothing and sends may gather
    /// from application memory (a CPU-driven port).
    pub cheap_gather: u8,
    pub reserved: [u8; 3],
    /// Largest RDMA operation in bytes.
    pub max_transfer: u32,
    /// Largest inline send, header included (0: none).
    pub inline_max: u32,
    /// Send work-queue entries per peer.
    pub send_queue: u32,
    /// Receive buffers the port holds for packets.
    pub rx_buffers: u32,
    /// Largest packet a send may carry: a receive buffer's size.
    pub mtu: u32,
}

impl rmx_port_caps_t {
    /// The core's view of these capabilities.
    pub fn caps(&self) -> Caps {
        Caps {
            rdma_write: self.rdma_write != 0,
            rdma_read: self.rdma_read != 0,
            write_imm: self.write_imm != 0,
            max_transfer: self.max_transfer,
            inline_max: self.inline_max,
            send_queue: self.send_queue,
            rx_buffers: self.rx_buffers,
            mtu: self.mtu,
            lossy: self.lossy != 0,
            cheap_gather: self.cheap_gather != 0,
        }
    }
}

/// One gather entry: `len` bytes at `addr`, registered under `key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmx_sge_t {
    pub addr: usize,
    pub len: usize,
    pub key: u32,
}

/// One work request, valid only during `post`: copy what is kept.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmx_work_t {
    /// `RMX_WORK_*`.
    pub kind: u32,
    /// `RMX_WORK_SOLICITED`, `RMX_WORK_SIGNAL`.
    pub flags: u32,
    /// A send's gather list; an RDMA operation's one local entry.
    pub sges: *const rmx_sge_t,
    pub nsge: usize,
    /// An inline send: `head_len` bytes at `head`, then `body_len` at `body`.
    pub head: *const u8,
    pub head_len: usize,
    pub body: *const u8,
    pub body_len: usize,
    /// An RDMA operation: the peer's address and the key it registered.
    pub remote_addr: u64,
    pub remote_key: u32,
    /// `RMX_WORK_WRITE_IMM`: the value the peer's receive reports.
    pub imm: u32,
}

/// A finished post, as `poll_cq` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmx_completion_t {
    /// The `wr_id` it was posted with.
    pub wr_id: u64,
    /// `RMX_PORT_OK`, `RMX_PORT_ACCESS` or `RMX_PORT_DOWN`.
    pub status: c_int,
}

/// The port's callbacks, each given the `port` pointer the endpoint was
/// created with. rmx calls them only from inside an `rmx_ep_*` call on
/// that endpoint, one at a time. Optional ones may be null.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmx_port_ops_t {
    /// Registers `len` bytes at `addr` (`flags`: `RMX_REG_REMOTE`); the
    /// key in `*key`. `RMX_PORT_OK`, `RMX_PORT_UNSUPPORTED` or
    /// `RMX_PORT_NO_RESOURCE`.
    pub reg: Option<
        unsafe extern "C" fn(
            port: *mut c_void,
            addr: usize,
            len: usize,
            flags: u32,
            key: *mut u32,
        ) -> c_int,
    >,
    /// Ends a registration: operations naming its key fail afterwards.
    pub dereg: Option<unsafe extern "C" fn(port: *mut c_void, addr: usize, len: usize, key: u32)>,
    /// Posts `work` to `peer`: `RMX_PORT_DONE` (done during the call),
    /// `RMX_PORT_OK` (reported later by `poll_cq` with `wr_id`), or an
    /// `RMX_PORT_*` refusal (nothing done).
    pub post: Option<
        unsafe extern "C" fn(
            port: *mut c_void,
            peer: u16,
            wr_id: u64,
            work: *const rmx_work_t,
        ) -> c_int,
    >,
    /// The next received packet: 0 if none, `RMX_RECV_PACKET` (`*buf` names
    /// it) or `RMX_RECV_IMM`.
    pub poll_recv:
        Option<unsafe extern "C" fn(port: *mut c_void, buf: *mut u32, imm: *mut u32) -> c_int>,
    /// The bytes of a polled buffer not yet reposted (their length in
    /// `*len`), valid until it is reposted; null for any other.
    pub rx_bytes:
        Option<unsafe extern "C" fn(port: *mut c_void, buf: u32, len: *mut usize) -> *const u8>,
    /// Hands a polled buffer back to the port: 1, or 0 if it was not held.
    pub repost: Option<unsafe extern "C" fn(port: *mut c_void, buf: u32) -> c_int>,
    /// Moves up to `max` finished posts, oldest first, into `out`: how many.
    pub poll_cq: Option<
        unsafe extern "C" fn(port: *mut c_void, out: *mut rmx_completion_t, max: usize) -> usize,
    >,
    /// Optional: hands posts held for a batch to the network now.
    pub doorbell: Option<unsafe extern "C" fn(port: *mut c_void)>,
    /// Optional: returns once no posted operation still reads or writes
    /// memory (called before registrations end and the endpoint goes).
    pub drain: Option<unsafe extern "C" fn(port: *mut c_void)>,
}

impl rmx_port_ops_t {
    /// The name of the first required callback that is null.
    pub fn missing(&self) -> Option<&'static str> {
        [
            ("reg", self.reg.is_none()),
            ("dereg", self.dereg.is_none()),
            ("post", self.post.is_none()),
            ("poll_recv", self.poll_recv.is_none()),
            ("rx_bytes", self.rx_bytes.is_none()),
            ("repost", self.repost.is_none()),
            ("poll_cq", self.poll_cq.is_none()),
        ]
        .into_iter()
        .find_map(|(name, null)| null.then_some(name))
    }
}

// A send's gather list goes to C as it is: the driver's entry and C's
// have one layout.
const _: () = {
    assert!(core::mem::size_of::<Sge>() == core::mem::size_of::<rmx_sge_t>());
    assert!(core::mem::align_of::<Sge>() == core::mem::align_of::<rmx_sge_t>());
    assert!(core::mem::offset_of!(Sge, addr) == core::mem::offset_of!(rmx_sge_t, addr));
    assert!(core::mem::offset_of!(Sge, len) == core::mem::offset_of!(rmx_sge_t, len));
    assert!(core::mem::offset_of!(Sge, key) == core::mem::offset_of!(rmx_sge_t, key));
};

/// A [`Port`] over a C callback table.
pub struct CPort {
    ops: rmx_port_ops_t,
    ctx: *mut c_void,
    caps: Caps,
    /// Callbacks that broke their contract (`poll_cq` past `max`, an
    /// unknown code): treated as the safest reading, and counted.
    pub faults: u64,
}

impl CPort {
    /// A port over `ops` with `ctx`.
    ///
    /// # Safety
    /// Every required callback is non-null ([`rmx_port_ops_t::missing`])
    /// and keeps the contract its field states, for as long as the port
    /// lives; `ctx` is what they expect.
    pub unsafe fn new(ops: rmx_port_ops_t, ctx: *mut c_void, caps: Caps) -> CPort {
        CPort {
            ops,
            ctx,
            caps,
            faults: 0,
        }
    }

    fn reg(&mut self, addr: usize, len: usize, flags: u32) -> Result<Mr, RegError> {
        let mut key = 0u32;
        let Some(reg) = self.ops.reg else {
            return Err(RegError::Unsupported);
        };
        // SAFETY: `new`'s contract; `key` is a valid out-pointer.
        match unsafe { reg(self.ctx, addr, len, flags, &mut key) } {
            RMX_PORT_OK => Ok(Mr { addr, len, key }),
            RMX_PORT_NO_RESOURCE => Err(RegError::NoResources),
            RMX_PORT_UNSUPPORTED => Err(RegError::Unsupported),
            _ => {
                self.faults += 1;
                Err(RegError::Unsupported)
            }
        }
    }
}

/// A completion's status as the core reads it.
fn result(status: c_int) -> Option<WcResult> {
    match status {
        RMX_PORT_OK => Some(Ok(())),
        RMX_PORT_ACCESS => Some(Err(RdmaError::Access)),
        RMX_PORT_DOWN => Some(Err(RdmaError::Down)),
        _ => None,
    }
}

impl Port for CPort {
    fn caps(&self) -> Caps {
        self.caps
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        self.reg(addr, len, 0)
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        self.reg(addr, len, RMX_REG_REMOTE)
    }

    fn deregister(&mut self, mr: Mr) {
        if let Some(dereg) = self.ops.dereg {
            // SAFETY: `new`'s contract.
            unsafe { dereg(self.ctx, mr.addr, mr.len, mr.key) }
        }
    }

    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        let none = rmx_work_t {
            kind: RMX_WORK_SEND,
            flags: 0,
            sges: core::ptr::null(),
            nsge: 0,
            head: core::ptr::null(),
            head_len: 0,
            body: core::ptr::null(),
            body_len: 0,
            remote_addr: 0,
            remote_key: 0,
            imm: 0,
        };
        let one;
        let w = match work {
            Work::Send { sges, solicited } => rmx_work_t {
                flags: if solicited { RMX_WORK_SOLICITED } else { 0 },
                sges: sges.as_ptr().cast(),
                nsge: sges.len(),
                ..none
            },
            Work::Inline { head, body, signal } => rmx_work_t {
                kind: RMX_WORK_INLINE,
                flags: if signal { RMX_WORK_SIGNAL } else { 0 },
                head: head.as_ptr(),
                head_len: head.len(),
                body: body.as_ptr(),
                body_len: body.len(),
                ..none
            },
            Work::Rdma { op, local, remote } => {
                one = local;
                rmx_work_t {
                    kind: match op {
                        RdmaOp::Write => RMX_WORK_RDMA_WRITE,
                        RdmaOp::Read => RMX_WORK_RDMA_READ,
                    },
                    sges: (&one as *const Sge).cast(),
                    nsge: 1,
                    remote_addr: remote.addr,
                    remote_key: remote.key.0,
                    ..none
                }
            }
            Work::WriteImm { local, remote, imm } => {
                one = local;
                rmx_work_t {
                    kind: RMX_WORK_WRITE_IMM,
                    sges: (&one as *const Sge).cast(),
                    nsge: 1,
                    remote_addr: remote.addr,
                    remote_key: remote.key.0,
                    imm,
                    ..none
                }
            }
        };
        let Some(post) = self.ops.post else {
            return Err(PostError::Unsupported);
        };
        // SAFETY: `new`'s contract; `w` and what it points to live
        // through the call.
        match unsafe { post(self.ctx, peer, wr_id, &w) } {
            RMX_PORT_OK => Ok(None),
            RMX_PORT_DONE => Ok(Some(Completion {
                wr_id,
                result: Ok(()),
            })),
            RMX_PORT_BUSY => Err(PostError::Busy),
            RMX_PORT_DOWN => Err(PostError::Down),
            RMX_PORT_UNSUPPORTED => Err(PostError::Unsupported),
            RMX_PORT_ACCESS => Err(PostError::Access),
            _ => {
                // Whether anything was sent is unknown: the connection is
                // what the core can no longer trust.
                self.faults += 1;
                Err(PostError::Down)
            }
        }
    }

    fn doorbell(&mut self) {
        if let Some(bell) = self.ops.doorbell {
            // SAFETY: `new`'s contract.
            unsafe { bell(self.ctx) }
        }
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        let (mut buf, mut imm) = (0u32, 0u32);
        let poll = self.ops.poll_recv?;
        // SAFETY: `new`'s contract; both out-pointers are valid.
        match unsafe { poll(self.ctx, &mut buf, &mut imm) } {
            RMX_RECV_PACKET => Some(Recv { buf, imm: None }),
            RMX_RECV_IMM => Some(Recv {
                buf,
                imm: Some(imm),
            }),
            0 => None,
            _ => {
                self.faults += 1;
                None
            }
        }
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        let mut len = 0usize;
        let bytes = self.ops.rx_bytes?;
        // SAFETY: `new`'s contract; `len` is a valid out-pointer.
        let p = unsafe { bytes(self.ctx, buf, &mut len) };
        if p.is_null() || isize::try_from(len).is_err() {
            return None;
        }
        // SAFETY: the callback's contract: `len` bytes at `p`, unchanged
        // until the buffer is reposted, which needs `&mut self`.
        Some(unsafe { core::slice::from_raw_parts(p, len) })
    }

    fn repost(&mut self, buf: u32) -> bool {
        let Some(repost) = self.ops.repost else {
            return false;
        };
        // SAFETY: `new`'s contract.
        unsafe { repost(self.ctx, buf) == 1 }
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        let Some(poll) = self.ops.poll_cq else {
            return 0;
        };
        let mut got = [rmx_completion_t::default(); 32];
        let max = out.len().min(got.len());
        // SAFETY: `new`'s contract; `got` holds `max` entries.
        let n = unsafe { poll(self.ctx, got.as_mut_ptr(), max) };
        if n > max {
            self.faults += 1;
        }
        let mut kept = 0;
        for c in &got[..n.min(max)] {
            let result = result(c.status).unwrap_or_else(|| {
                self.faults += 1;
                Err(RdmaError::Down)
            });
            out[kept] = Completion {
                wr_id: c.wr_id,
                result,
            };
            kept += 1;
        }
        kept
    }

    fn drain(&mut self) {
        if let Some(drain) = self.ops.drain {
            // SAFETY: `new`'s contract.
            unsafe { drain(self.ctx) }
        }
    }
}
