//! A verbs device that exists only in this process, so that the count
//! runs through the `verbs` port unchanged, on any machine, deterministically.
//!
//! It defines the libibverbs entry points the port calls (`ibv_open_device`,
//! `ibv_create_qp`, `ibv_reg_mr`, …) under their own names: a binary that
//! links this crate binds the port's calls to them instead of to the shared
//! library (`rmx_linux::verbs::device::names` then lists only [`DEVICE`]).
//! The port's per-message calls go, as with a real provider, through the
//! context's operations table (`post_send`, `post_srq_recv`, `poll_cq`),
//! which here point at a device that delivers at once:
//!
//! - a send takes the next buffer of the peer queue pair's shared receive
//!   queue, copies its gather list (or inline bytes) there, and puts a
//!   receive completion on the peer's receive completion queue and, if
//!   signalled, a send completion on its own;
//! - an empty RDMA write (the port's drain) completes; any other operation
//!   is refused with `EINVAL`;
//! - a send that meets an empty receive queue is refused with `ENOMEM` (a
//!   real device would retry); the core's credits keep that from happening;
//! - datagram queue pairs (the connection handshake) take sends and never
//!   deliver: the ranks are joined without one.
//!
//! The device's work is counted as its own layer: it stands in for a
//! provider's post and poll, not for a network.
//!
//! One thread per pair of ranks: the objects are plain Rust values behind
//! the C pointers, used by the thread that drives both ranks; only the
//! registry of queue pairs by number, which connects and unlinks them, is
//! shared, behind a lock.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use ibverbs_sys as ib;

/// The device's name, as `ibv_get_device_name` gives it.
pub const DEVICE: &str = "fake0";

/// The largest inline send a queue pair is granted.
pub const INLINE_MAX: u32 = 256;

/// The largest message.
const MAX_MSG: u32 = 1 << 30;

/// A work completion as `ibv_poll_cq` writes it (the binding keeps the
/// fields a device writes private).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Wc {
    wr_id: u64,
    status: u32,
    opcode: u32,
    vendor_err: u32,
    byte_len: u32,
    imm_data: u32,
    qp_num: u32,
    src_qp: u32,
    wc_flags: u32,
    pkey_index: u16,
    slid: u16,
    sl: u8,
    dlid_path_bits: u8,
}

const _: () = assert!(std::mem::size_of::<Wc>() == std::mem::size_of::<ib::ibv_wc>());

/// A posted receive buffer.
#[derive(Clone, Copy)]
struct Slot {
    wr_id: u64,
    addr: u64,
    len: u32,
}

/// A completion queue: the verbs object first, so that a pointer to one is
/// a pointer to the other.
#[repr(C)]
struct Cq {
    cq: ib::ibv_cq,
    wcs: VecDeque<Wc>,
}

#[repr(C)]
struct Srq {
    srq: ib::ibv_srq,
    slots: VecDeque<Slot>,
}

#[repr(C)]
struct Qp {
    qp: ib::ibv_qp,
    /// The connected queue pair (from RTR); null before, and once it is
    /// destroyed.
    peer: *mut Qp,
}

/// Queue pair numbers and keys, never reused.
static NEXT: AtomicU32 = AtomicU32::new(0x11);

/// Every live queue pair, by number (its address as an integer).
static QPS: Mutex<Vec<(u32, usize)>> = Mutex::new(Vec::new());

/// The one device, made on first listing and never freed.
static THE_DEVICE: OnceLock<usize> = OnceLock::new();

fn device() -> *mut ib::ibv_device {
    *THE_DEVICE.get_or_init(|| {
        // SAFETY: plain integers, arrays and function pointers; all zeroes
        // is a valid value.
        let mut d: Box<ib::ibv_device> = Box::new(unsafe { std::mem::zeroed() });
        for (to, from) in d.name.iter_mut().zip(DEVICE.bytes()) {
            *to = from as c_char;
        }
        Box::into_raw(d) as usize
    }) as *mut ib::ibv_device
}

fn eventfd() -> c_int {
    // SAFETY: a new descriptor, closed with its object.
    unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }
}

/// Frees an object made by `Box::into_raw`; 0 as libibverbs says success.
///
/// # Safety
/// `p` came from `Box::<T>::into_raw` here and is freed once.
unsafe fn free<T>(p: *mut T) -> c_int {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(p) });
    }
    0
}

fn leak<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

// ---- libibverbs' entry points ---------------------------------------------

#[no_mangle]
unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ib::ibv_device {
    if !num.is_null() {
        // SAFETY: the caller's count.
        unsafe { *num = 1 };
    }
    leak([device(), ptr::null_mut()]).cast()
}

#[no_mangle]
unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ib::ibv_device) {
    // SAFETY: a list from ibv_get_device_list, freed once.
    unsafe { free(list.cast::<[*mut ib::ibv_device; 2]>()) };
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_name(dev: *mut ib::ibv_device) -> *const c_char {
    // SAFETY: the one device, which lives for ever.
    unsafe { (*dev).name.as_ptr() }
}

#[no_mangle]
unsafe extern "C" fn ibv_open_device(dev: *mut ib::ibv_device) -> *mut ib::ibv_context {
    // SAFETY: integers, pointers, a mutex and function pointers; all zeroes
    // is a valid value of each.
    let mut ctx: ib::ibv_context = unsafe { std::mem::zeroed() };
    ctx.device = dev;
    ctx.cmd_fd = -1;
    ctx.async_fd = eventfd();
    ctx.num_comp_vectors = 1;
    ctx.ops.post_send = Some(post_send);
    ctx.ops.post_recv = Some(post_recv);
    ctx.ops.post_srq_recv = Some(post_srq_recv);
    ctx.ops.poll_cq = Some(poll_cq);
    ctx.ops.req_notify_cq = Some(req_notify_cq);
    leak(ctx)
}

#[no_mangle]
unsafe extern "C" fn ibv_close_device(ctx: *mut ib::ibv_context) -> c_int {
    // SAFETY: a context from ibv_open_device, closed once.
    unsafe {
        libc::close((*ctx).async_fd);
        free(ctx)
    }
}

/// Fills the whole attribute structure (the port passes the whole one).
#[no_mangle]
unsafe extern "C" fn ibv_query_port(
    _ctx: *mut ib::ibv_context,
    port: u8,
    attr: *mut ib::ibv_port_attr,
) -> c_int {
    if port != 1 {
        return libc::EINVAL;
    }
    let a = ib::ibv_port_attr {
        state: ib::ibv_port_state::IBV_PORT_ACTIVE,
        max_mtu: ib::IBV_MTU_4096,
        active_mtu: ib::IBV_MTU_1024,
        gid_tbl_len: 1,
        max_msg_sz: MAX_MSG,
        link_layer: ib::IBV_LINK_LAYER_ETHERNET as u8,
        ..Default::default()
    };
    // SAFETY: the caller's attribute structure.
    unsafe { *attr = a };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_query_device(
    _ctx: *mut ib::ibv_context,
    attr: *mut ib::ibv_device_attr,
) -> c_int {
    let a = ib::ibv_device_attr {
        max_qp_rd_atom: 16,
        phys_port_cnt: 1,
        ..Default::default()
    };
    // SAFETY: the caller's attribute structure.
    unsafe { *attr = a };
    0
}

/// One GID: an IPv4-mapped address, as RoCE v2 has.
#[no_mangle]
unsafe extern "C" fn ibv_query_gid(
    _ctx: *mut ib::ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ib::ibv_gid,
) -> c_int {
    if port != 1 || index != 0 {
        return -1;
    }
    let mut raw = [0u8; 16];
    raw[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
    // SAFETY: the caller's GID.
    unsafe { *gid = ib::ibv_gid { raw } };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ib::ibv_context) -> *mut ib::ibv_pd {
    leak(ib::ibv_pd {
        context: ctx,
        handle: 0,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ib::ibv_pd) -> c_int {
    // SAFETY: from ibv_alloc_pd, freed once.
    unsafe { free(pd) }
}

#[no_mangle]
unsafe extern "C" fn ibv_create_comp_channel(
    ctx: *mut ib::ibv_context,
) -> *mut ib::ibv_comp_channel {
    leak(ib::ibv_comp_channel {
        context: ctx,
        fd: eventfd(),
        refcnt: 0,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ib::ibv_comp_channel) -> c_int {
    // SAFETY: from ibv_create_comp_channel, destroyed once.
    unsafe {
        libc::close((*ch).fd);
        free(ch)
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ib::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ib::ibv_comp_channel,
    _vector: c_int,
) -> *mut ib::ibv_cq {
    // SAFETY: integers, pointers and pthread objects; all zeroes is valid.
    let mut cq: ib::ibv_cq = unsafe { std::mem::zeroed() };
    cq.context = ctx;
    cq.channel = channel;
    cq.cq_context = cq_context;
    cq.cqe = cqe;
    leak(Cq {
        cq,
        wcs: VecDeque::with_capacity(cqe.max(1) as usize),
    })
    .cast()
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_cq(cq: *mut ib::ibv_cq) -> c_int {
    // SAFETY: from ibv_create_cq (a `Cq`), destroyed once.
    unsafe { free(cq.cast::<Cq>()) }
}

#[no_mangle]
unsafe extern "C" fn ibv_create_srq(
    pd: *mut ib::ibv_pd,
    attr: *mut ib::ibv_srq_init_attr,
) -> *mut ib::ibv_srq {
    // SAFETY: integers, pointers and pthread objects; all zeroes is valid.
    let mut srq: ib::ibv_srq = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's attributes and protection domain.
    let max = unsafe {
        srq.context = (*pd).context;
        srq.srq_context = (*attr).srq_context;
        (*attr).attr.max_wr
    };
    srq.pd = pd;
    leak(Srq {
        srq,
        slots: VecDeque::with_capacity(max as usize),
    })
    .cast()
}

/// Takes the limit (it never fires: the pool is never short here).
#[no_mangle]
unsafe extern "C" fn ibv_modify_srq(
    _srq: *mut ib::ibv_srq,
    _attr: *mut ib::ibv_srq_attr,
    _mask: c_int,
) -> c_int {
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_srq(srq: *mut ib::ibv_srq) -> c_int {
    // SAFETY: from ibv_create_srq (an `Srq`), destroyed once.
    unsafe { free(srq.cast::<Srq>()) }
}

/// Grants inline sends up to [`INLINE_MAX`]; asked for more, fails, as a
/// device does.
#[no_mangle]
unsafe extern "C" fn ibv_create_qp(
    pd: *mut ib::ibv_pd,
    attr: *mut ib::ibv_qp_init_attr,
) -> *mut ib::ibv_qp {
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    if a.cap.max_inline_data > INLINE_MAX {
        return ptr::null_mut();
    }
    // SAFETY: integers, pointers and pthread objects; all zeroes is valid.
    let mut qp: ib::ibv_qp = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's protection domain.
    qp.context = unsafe { (*pd).context };
    qp.qp_context = a.qp_context;
    qp.pd = pd;
    qp.send_cq = a.send_cq;
    qp.recv_cq = a.recv_cq;
    qp.srq = a.srq;
    qp.qp_num = NEXT.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
    qp.state = ib::ibv_qp_state::IBV_QPS_RESET;
    qp.qp_type = a.qp_type;
    let num = qp.qp_num;
    let p = leak(Qp {
        qp,
        peer: ptr::null_mut(),
    });
    qps().push((num, p as usize));
    p.cast()
}

fn qps() -> std::sync::MutexGuard<'static, Vec<(u32, usize)>> {
    QPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Moves the queue pair to the state asked for; at RTR, a reliable one is
/// connected to the queue pair of the number given.
#[no_mangle]
unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ib::ibv_qp,
    attr: *mut ib::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    if mask as c_uint & ib::ibv_qp_attr_mask::IBV_QP_STATE.0 == 0 {
        return 0;
    }
    let q = qp.cast::<Qp>();
    // SAFETY: a queue pair made here and the caller's attributes.
    unsafe {
        let (state, dest) = ((*attr).qp_state, (*attr).dest_qp_num);
        if state == ib::ibv_qp_state::IBV_QPS_RTR && (*q).qp.qp_type == ib::ibv_qp_type::IBV_QPT_RC
        {
            // Linked under the registry's lock, as destroying unlinks.
            let all = qps();
            let Some(&(_, peer)) = all.iter().find(|&&(n, _)| n == dest) else {
                return libc::EINVAL;
            };
            (*q).peer = peer as *mut Qp;
        }
        (*q).qp.state = state;
    }
    0
}

/// Unlinks the queue pair from every peer, then frees it.
#[no_mangle]
unsafe extern "C" fn ibv_destroy_qp(qp: *mut ib::ibv_qp) -> c_int {
    let q = qp.cast::<Qp>();
    let mut all = qps();
    all.retain(|&(_, p)| p != q as usize);
    for &(_, p) in all.iter() {
        let other = p as *mut Qp;
        // SAFETY: a live queue pair of the list.
        unsafe {
            if (*other).peer == q {
                (*other).peer = ptr::null_mut();
            }
        }
    }
    // SAFETY: from ibv_create_qp (a `Qp`), destroyed once.
    unsafe { free(q) }
}

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ib::ibv_pd,
    addr: *mut c_void,
    length: usize,
    _access: c_int,
) -> *mut ib::ibv_mr {
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    leak(ib::ibv_mr {
        // SAFETY: the caller's protection domain.
        context: unsafe { (*pd).context },
        pd,
        addr,
        length,
        handle: 0,
        lkey: key,
        rkey: key,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_dereg_mr(mr: *mut ib::ibv_mr) -> c_int {
    // SAFETY: from ibv_reg_mr, freed once.
    unsafe { free(mr) }
}

#[no_mangle]
unsafe extern "C" fn ibv_create_ah(
    pd: *mut ib::ibv_pd,
    _attr: *mut ib::ibv_ah_attr,
) -> *mut ib::ibv_ah {
    leak(ib::ibv_ah {
        // SAFETY: the caller's protection domain.
        context: unsafe { (*pd).context },
        pd,
        handle: 0,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_ah(ah: *mut ib::ibv_ah) -> c_int {
    // SAFETY: from ibv_create_ah, freed once.
    unsafe { free(ah) }
}

/// No asynchronous event ever happens.
#[no_mangle]
unsafe extern "C" fn ibv_get_async_event(
    _ctx: *mut ib::ibv_context,
    _event: *mut ib::ibv_async_event,
) -> c_int {
    -1
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_async_event(_event: *mut ib::ibv_async_event) {}

/// No completion event is ever raised (nothing sleeps on one here).
#[no_mangle]
unsafe extern "C" fn ibv_get_cq_event(
    _channel: *mut ib::ibv_comp_channel,
    _cq: *mut *mut ib::ibv_cq,
    _cq_context: *mut *mut c_void,
) -> c_int {
    -1
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_cq_events(_cq: *mut ib::ibv_cq, _n: c_uint) {}

// ---- the provider's operations --------------------------------------------

unsafe extern "C" fn req_notify_cq(_cq: *mut ib::ibv_cq, _solicited: c_int) -> c_int {
    0
}

unsafe extern "C" fn poll_cq(cq: *mut ib::ibv_cq, n: c_int, wc: *mut ib::ibv_wc) -> c_int {
    // SAFETY: a queue made here (a `Cq`), on the one thread.
    let q = unsafe { &mut *cq.cast::<Cq>() };
    let n = (n.max(0) as usize).min(q.wcs.len());
    for (i, w) in q.wcs.drain(..n).enumerate() {
        // SAFETY: the caller's array holds `n` entries of this layout.
        unsafe { *wc.cast::<Wc>().add(i) = w };
    }
    n as c_int
}

/// Takes each request's one buffer onto the shared receive queue.
unsafe extern "C" fn post_srq_recv(
    srq: *mut ib::ibv_srq,
    mut wr: *mut ib::ibv_recv_wr,
    _bad: *mut *mut ib::ibv_recv_wr,
) -> c_int {
    // SAFETY: a queue made here (an `Srq`), on the one thread.
    let slots = unsafe { &mut (*srq.cast::<Srq>()).slots };
    while !wr.is_null() {
        // SAFETY: the caller's list of receive requests.
        let r = unsafe { &*wr };
        let (addr, len) = match r.num_sge {
            // SAFETY: the request's first gather entry.
            1.. => unsafe { ((*r.sg_list).addr, (*r.sg_list).length) },
            _ => (0, 0),
        };
        slots.push_back(Slot {
            wr_id: r.wr_id,
            addr,
            len,
        });
        wr = r.next;
    }
    0
}

/// A datagram queue pair's receives: never filled (nothing is delivered
/// to one), so nothing is kept.
unsafe extern "C" fn post_recv(
    _qp: *mut ib::ibv_qp,
    _wr: *mut ib::ibv_recv_wr,
    _bad: *mut *mut ib::ibv_recv_wr,
) -> c_int {
    0
}

/// Carries each request of the list at once (see the module's rules).
unsafe extern "C" fn post_send(
    qp: *mut ib::ibv_qp,
    mut wr: *mut ib::ibv_send_wr,
    bad: *mut *mut ib::ibv_send_wr,
) -> c_int {
    let me = qp.cast::<Qp>();
    while !wr.is_null() {
        // SAFETY: the caller's list, and queue pairs and queues made here,
        // on the one thread.
        let rc = unsafe { carry(me, &*wr) };
        if rc != 0 {
            // SAFETY: the caller's out-pointer.
            unsafe { *bad = wr };
            return rc;
        }
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
    0
}

/// One send request: delivered, and completed if signalled.
///
/// # Safety
/// `me` is a queue pair made here; `r`'s gather list is readable.
unsafe fn carry(me: *mut Qp, r: &ib::ibv_send_wr) -> c_int {
    // SAFETY: the caller's queue pair.
    let q = unsafe { &mut *me };
    let datagram = q.qp.qp_type == ib::ibv_qp_type::IBV_QPT_UD;
    let opcode = match r.opcode {
        ib::ibv_wr_opcode::IBV_WR_SEND if datagram => ib::ibv_wc_opcode::IBV_WC_SEND,
        ib::ibv_wr_opcode::IBV_WR_SEND => {
            if q.peer.is_null() || q.qp.state != ib::ibv_qp_state::IBV_QPS_RTS {
                return libc::EINVAL;
            }
            // SAFETY: the connected queue pair (unlinked when destroyed).
            let rc = unsafe { deliver(q.qp.qp_num, &mut *q.peer, r) };
            if rc != 0 {
                return rc;
            }
            ib::ibv_wc_opcode::IBV_WC_SEND
        }
        ib::ibv_wr_opcode::IBV_WR_RDMA_WRITE if r.num_sge == 0 => {
            ib::ibv_wc_opcode::IBV_WC_RDMA_WRITE
        }
        _ => return libc::EINVAL,
    };
    if r.send_flags & ib::ibv_send_flags::IBV_SEND_SIGNALED.0 != 0 {
        // SAFETY: the queue pair's send queue, made here.
        let cq = unsafe { &mut *q.qp.send_cq.cast::<Cq>() };
        cq.wcs.push_back(Wc {
            wr_id: r.wr_id,
            opcode,
            qp_num: q.qp.qp_num,
            ..Wc::default()
        });
    }
    0
}

/// Copies a send's bytes into the next buffer of `to`'s shared receive
/// queue and completes it there (every reliable queue pair the port makes
/// has one).
///
/// # Safety
/// `to` is a queue pair made here; `r`'s gather list is readable.
unsafe fn deliver(from: u32, to: &mut Qp, r: &ib::ibv_send_wr) -> c_int {
    if to.qp.srq.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the queue pair's shared receive queue, made here.
    let slots = unsafe { &mut (*to.qp.srq.cast::<Srq>()).slots };
    let Some(slot) = slots.pop_front() else {
        return libc::ENOMEM;
    };
    let sges: &[ib::ibv_sge] = match r.num_sge {
        // SAFETY: the request's gather list.
        n @ 1.. => unsafe { std::slice::from_raw_parts(r.sg_list, n as usize) },
        _ => &[],
    };
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    let mut wc = Wc {
        wr_id: slot.wr_id,
        opcode: ib::ibv_wc_opcode::IBV_WC_RECV,
        qp_num: to.qp.qp_num,
        src_qp: from,
        ..Wc::default()
    };
    if total > u64::from(slot.len) {
        wc.status = ib::ibv_wc_status::IBV_WC_LOC_LEN_ERR;
    } else {
        let mut at = slot.addr as *mut u8;
        for s in sges {
            // SAFETY: the sender's bytes, into the receive buffer the
            // receiver posted, which holds `total` bytes.
            unsafe {
                ptr::copy_nonoverlapping(s.addr as *const u8, at, s.length as usize);
                at = at.add(s.length as usize);
            }
        }
        wc.byte_len = total as u32;
    }
    // SAFETY: the receiving queue pair's receive queue, made here.
    let cq = unsafe { &mut *to.qp.recv_cq.cast::<Cq>() };
    cq.wcs.push_back(wc);
    0
}
