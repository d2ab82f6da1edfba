//! The core for a C runtime or driver (`rmx_ep_*`): one endpoint in
//! memory the caller provides, over a port the caller implements
//! (`rmx_port_ops_t`), moved on only when the caller calls in with the
//! time. No thread, no allocation, no clock of its own: what a kernel
//! module or a runtime with its own progress engine embeds.
//!
//! Each endpoint's calls come one at a time (the caller serialises them);
//! two endpoints are independent.

use std::ffi::{c_int, c_void};

use rmx_core::storage::{
    HoldEntry, Peer, PostedEntry, RequestEntry, SlotEntry, UnexpectedEntry, WorkEntry,
};
use rmx_core::{
    Config, ConfigError, Endpoint, Protocol, RecvError, Request, Sizes, Tables, UserBuf,
};
use rmx_driver::task::Messages;
use rmx_driver::{Adapter, AdapterTables, Completion, Mr, Plain, Port, UserEntry};

use crate::carve::{fill, Carve, RMX_EP_ALIGN};
use crate::errors::{Error, RMX_ERR_BUSY, RMX_ERR_NO_RESOURCE, RMX_OK};
use crate::guard::{bytes, guard, out};
use crate::p2p::{peer, selection};
use crate::port_ops::{rmx_port_caps_t, rmx_port_ops_t, CPort};
use crate::requests::{rmx_request_t, RMX_REQUEST_NULL};
use crate::status::rmx_status_t;
use crate::version;

mod messages;
pub mod task;
use messages::EpReq;

/// `rmx_ep_config_t.rendezvous`: the core picks by what the port can do
/// (RGET, else RPUT, else PULL).
pub const RMX_RNDV_AUTO: u8 = 0;
/// The receiver's buffer is written by the sender (RDMA write).
pub const RMX_RNDV_RPUT: u8 = 1;
/// The sender's buffer is read by the receiver (RDMA read).
pub const RMX_RNDV_RGET: u8 = 2;
/// The receiver asks for frames, the sender sends them (no RDMA).
pub const RMX_RNDV_PULL: u8 = 3;

/// What an endpoint is: its rank, its port, its protocol settings and
/// its tables' sizes. A field left 0 takes its default.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmx_ep_config_t {
    /// `sizeof(rmx_ep_config_t)`, so a later library knows which fields
    /// a program set.
    pub size: u32,
    /// This endpoint's rank, below `ranks`.
    pub rank: u16,
    /// Ranks of the job: peers are named 0 … `ranks` − 1 in posts.
    pub ranks: u16,
    /// Largest payload sent eagerly in one packet (default 8192, at most
    /// the port's `mtu` less the core's 28-byte header).
    pub eager: u32,
    /// Messages one peer may have unconsumed here (default 64).
    pub credits: u16,
    /// `RMX_RNDV_*` (default `RMX_RNDV_AUTO`).
    pub rendezvous: u8,
    pub reserved: u8,
    /// Requests pending at once (default 2048).
    pub requests: u32,
    /// Send bounce slots, each `eager` bytes and a header (default 256).
    pub slots: u32,
    /// Receives posted and not yet matched (default 1024).
    pub posted: u32,
    /// Messages arrived and not yet received (default the larger of 1024
    /// and the port's receive buffers).
    pub unexpected: u32,
    /// What the port can do.
    pub caps: rmx_port_caps_t,
}

/// An endpoint in caller memory, from `rmx_ep_create` to
/// `rmx_ep_destroy`. Opaque.
pub struct rmx_ep_t {
    /// [`MAGIC`] while it lives: a pointer to something else, or to an
    /// endpoint destroyed, is refused rather than used.
    magic: u64,
    ep: Endpoint<rmx_core::storage::Slices<'static>>,
    nic: Adapter<CPort, Plain, CallerTables>,
    /// What each pending request holds, by its row.
    pending: &'static mut [Pending],
    /// Ranks of the job, and this endpoint's.
    ranks: u16,
    me: u16,
    /// Collectives started so far (their messages' tags carry it), and
    /// tasks not yet ended.
    collectives: u16,
    tasks: u32,
    /// The latest time the caller gave.
    now: u64,
    wcs: [Completion; 16],
}

const MAGIC: u64 = u64::from_be_bytes(*b"rmx-ep-1");

/// A pending request's user-buffer handle (to give back when it ends)
/// and, for a send, its length.
#[derive(Clone, Copy, Debug)]
struct Pending {
    buf: Option<UserBuf>,
    sent: Option<u32>,
}

const IDLE: Pending = Pending {
    buf: None,
    sent: None,
};

/// The adapter's tables, in the caller's block.
struct CallerTables;

impl AdapterTables for CallerTables {
    type Bytes = &'static mut [u8];
    type Users = &'static mut [UserEntry];
    type Regs = &'static mut [Option<Mr>];
}

/// A send that ended during the call: the high bit, and its length.
const DONE_SEND: u64 = 1 << 63;

/// The core's configuration and tables for `c`.
fn settle(c: &rmx_ep_config_t) -> Result<(Config, Sizes), Error> {
    if (c.size as usize) < std::mem::size_of::<rmx_ep_config_t>() {
        return Err(Error::arg(format!(
            "config.size is {}: set it to sizeof(rmx_ep_config_t) ({})",
            c.size,
            std::mem::size_of::<rmx_ep_config_t>()
        )));
    }
    let caps = c.caps.caps();
    let or = |v: u32, d: u32| if v == 0 { d } else { v };
    let eager = or(c.eager, 8192);
    let credits = if c.credits == 0 { 64 } else { c.credits };
    let mut cfg = match caps.lossy {
        true => Config::unreliable(eager, credits),
        false => Config::reliable(eager, credits),
    };
    // Inline sends as large as the port takes (`fit` bounds it).
    cfg.inline_max = u32::MAX;
    cfg.rendezvous = match c.rendezvous {
        RMX_RNDV_AUTO => None,
        RMX_RNDV_RPUT => Some(Protocol::Rput),
        RMX_RNDV_RGET => Some(Protocol::Rget),
        RMX_RNDV_PULL => Some(Protocol::Pull),
        r => return Err(Error::arg(format!("rendezvous {r} is none of RMX_RNDV_*"))),
    };
    if c.ranks == 0 || c.rank >= c.ranks {
        return Err(Error::arg(format!(
            "rank {} is not one of {} ranks",
            c.rank, c.ranks
        )));
    }
    let cfg = cfg.fit(&caps);
    cfg.validate().map_err(config_error)?;
    let mut sizes = Sizes::for_job(c.ranks, &cfg);
    let table = |v: u32, d: usize| if v == 0 { d } else { v as usize };
    sizes.requests = table(c.requests, sizes.requests);
    sizes.slots = table(c.slots, sizes.slots);
    sizes.posted = table(c.posted, sizes.posted);
    sizes.unexpected = table(c.unexpected, sizes.unexpected);
    sizes.holds = sizes.unexpected;
    sizes.check().map_err(config_error)?;
    Ok((cfg, sizes))
}

fn config_error(e: ConfigError) -> Error {
    Error::arg(format!("the configuration does not hold: {e:?}"))
}

/// Where each table lies in a block: the same for measuring and filling.
struct Plan {
    ep: usize,
    peers: usize,
    posted: usize,
    unexpected: usize,
    holds: usize,
    slots: usize,
    requests: usize,
    work: usize,
    pending: usize,
    users: usize,
    regs: usize,
    bounce: usize,
}

/// Registrations the adapter may hold: two per pending request, as a
/// rendezvous registers its buffer and may cache one more.
fn regs(sizes: &Sizes) -> usize {
    2 * sizes.requests
}

/// Bounce slots' bytes.
fn bounce_len(cfg: &Config, sizes: &Sizes) -> Option<usize> {
    Adapter::<CPort, Plain, CallerTables>::slot_size(cfg.eager_threshold as usize)
        .checked_mul(sizes.slots)
}

fn plan(c: &mut Carve, cfg: &Config, s: &Sizes) -> Option<Plan> {
    Some(Plan {
        ep: c.take::<rmx_ep_t>(1)?,
        peers: c.take::<Peer>(s.peers)?,
        posted: c.take::<PostedEntry>(s.posted)?,
        unexpected: c.take::<UnexpectedEntry>(s.unexpected)?,
        holds: c.take::<HoldEntry>(s.holds)?,
        slots: c.take::<SlotEntry>(s.slots)?,
        requests: c.take::<RequestEntry>(s.requests)?,
        work: c.take::<WorkEntry>(s.requests)?,
        pending: c.take::<Pending>(s.requests)?,
        users: c.take::<UserEntry>(s.requests)?,
        regs: c.take::<Option<Mr>>(regs(s))?,
        // Bounce slots on cache lines, as a NIC reads them best.
        bounce: c.take::<[u8; RMX_EP_ALIGN]>(bounce_len(cfg, s)?.div_ceil(RMX_EP_ALIGN))?,
    })
}

/// Writes the bytes an endpoint of `*config` needs into `*size` (the
/// block given to `rmx_ep_create`, aligned to `RMX_EP_ALIGN`). 0, or
/// `RMX_ERR_ARG` with the reason in `rmx_last_error`.
///
/// Contract: `config` and `size` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_size(config: *const rmx_ep_config_t, size: *mut usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { config.as_ref() }.ok_or_else(|| Error::arg("config is null"))?;
        // SAFETY: the caller's contract.
        let size = unsafe { out(size, "size") }?;
        let (cfg, sizes) = settle(c)?;
        let mut m = Carve::measure();
        plan(&mut m, &cfg, &sizes)
            .ok_or_else(|| Error::arg("the tables pass the address space"))?;
        *size = m.used(0);
        Ok(RMX_OK)
    })
}

/// Creates an endpoint of `*config` in the `size` bytes at `mem` (at
/// least what `rmx_ep_size` says, aligned to `RMX_EP_ALIGN`), over the
/// port `ops` with `port` as its callbacks' first argument; it in
/// `*ep`. The port's `reg` is called once here (for the bounce slots).
/// 0, or a negative code (`*ep` untouched, nothing kept). Use
/// `rmx_ep_create`, which passes `RMX_API_VERSION`.
///
/// Contract: `mem` is null or `size` writable bytes that the caller
/// neither reads, writes nor frees until `rmx_ep_destroy` returned 0;
/// `config`, `ops` and `ep` are null or valid; the callbacks keep the
/// contracts `rmx_port_ops_t` states for as long as the endpoint lives.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_create_version(
    version: u32,
    mem: *mut c_void,
    size: usize,
    config: *const rmx_ep_config_t,
    ops: *const rmx_port_ops_t,
    port: *mut c_void,
    ep: *mut *mut rmx_ep_t,
) -> c_int {
    guard(|| {
        version::check(version)?;
        // SAFETY: the caller's contract.
        let c = unsafe { config.as_ref() }.ok_or_else(|| Error::arg("config is null"))?;
        // SAFETY: the caller's contract.
        let ops = *unsafe { ops.as_ref() }.ok_or_else(|| Error::arg("ops is null"))?;
        // SAFETY: the caller's contract.
        let ep = unsafe { out(ep, "ep") }?;
        if let Some(name) = ops.missing() {
            return Err(Error::arg(format!("ops.{name} is null: it is required")));
        }
        let base = bytes(mem, size)? as usize;
        if mem.is_null() || !base.is_multiple_of(RMX_EP_ALIGN) {
            return Err(Error::arg(format!(
                "mem must be a block aligned to RMX_EP_ALIGN ({RMX_EP_ALIGN})"
            )));
        }
        let (cfg, sizes) = settle(c)?;
        let p = Carve::block(base, size)
            .and_then(|mut b| plan(&mut b, &cfg, &sizes))
            .ok_or_else(|| Error::arg(format!("{size} bytes are too few: ask rmx_ep_size")))?;
        // SAFETY: `plan` laid each table out inside the block, which the
        // caller's contract gives to the endpoint alone until destroyed.
        let made = unsafe { build(&p, c, cfg, &sizes, ops, port) }?;
        *ep = made;
        Ok(RMX_OK)
    })
}

/// The endpoint, in the block laid out by `p`.
///
/// # Safety
/// As [`fill`]'s, for every table of `p`, until `rmx_ep_destroy`.
unsafe fn build(
    p: &Plan,
    c: &rmx_ep_config_t,
    cfg: Config,
    s: &Sizes,
    ops: rmx_port_ops_t,
    port: *mut c_void,
) -> Result<*mut rmx_ep_t, Error> {
    let bounce = bounce_len(&cfg, s).unwrap_or(0);
    // SAFETY: the caller's contract, table by table.
    let (tables, pending, slots, users, regs) = unsafe {
        (
            Tables::<rmx_core::storage::Slices<'static>> {
                peers: fill(p.peers, s.peers, Peer::UNUSED),
                posted: fill(p.posted, s.posted, PostedEntry::FREE),
                unexpected: fill(p.unexpected, s.unexpected, UnexpectedEntry::FREE),
                holds: fill(p.holds, s.holds, HoldEntry::UNUSED),
                slots: fill(p.slots, s.slots, SlotEntry::UNUSED),
                requests: fill(p.requests, s.requests, RequestEntry::UNUSED),
                work: fill(p.work, s.requests, WorkEntry::UNUSED),
            },
            fill(p.pending, s.requests, IDLE),
            fill(p.bounce, bounce, 0u8),
            fill(p.users, s.requests, UserEntry::default()),
            fill(p.regs, regs(s), None),
        )
    };
    let ep = Endpoint::new(cfg, c.rank, c.ranks, tables).map_err(config_error)?;
    // SAFETY: `ops` was checked complete, and the caller's contract keeps
    // the callbacks' own.
    let cport = unsafe { CPort::new(ops, port, c.caps.caps()) };
    // SAFETY: the slots lie in the caller's block, which never moves.
    let nic = unsafe {
        Adapter::new(
            cport,
            Plain,
            cfg.eager_threshold as usize,
            slots,
            users,
            regs,
        )
    }
    .map_err(|e| {
        Error::new(
            RMX_ERR_NO_RESOURCE,
            format!("the port refused to register the bounce slots: {e:?}"),
        )
    })?;
    let at = p.ep as *mut rmx_ep_t;
    // SAFETY: `plan` placed and aligned the endpoint's own row.
    unsafe {
        at.write(rmx_ep_t {
            magic: MAGIC,
            ep,
            nic,
            pending,
            ranks: c.ranks,
            me: c.rank,
            collectives: 0,
            tasks: 0,
            now: 0,
            wcs: [Completion {
                wr_id: 0,
                result: Ok(()),
            }; 16],
        })
    };
    Ok(at)
}

/// `ep` as a live endpoint.
///
/// # Safety
/// `ep` is null, or points to memory at least an endpoint long that was
/// given to `rmx_ep_create` (live or destroyed) and is used by no other
/// call meanwhile.
unsafe fn live<'a>(ep: *mut rmx_ep_t) -> Result<&'a mut rmx_ep_t, Error> {
    if ep.is_null() || !(ep as usize).is_multiple_of(RMX_EP_ALIGN) {
        return Err(Error::arg("ep is null or not an endpoint"));
    }
    // SAFETY: the caller's contract; the magic is read before anything
    // else is trusted.
    let e = unsafe { &mut *ep };
    if e.magic != MAGIC {
        return Err(Error::arg("ep is not a live endpoint (destroyed?)"));
    }
    Ok(e)
}

impl rmx_ep_t {
    /// One progress round at `now`: arrivals and completions handed to
    /// the core, then its timers if one is due; how many packets and
    /// completions.
    fn progress(&mut self, now: u64) -> usize {
        self.now = self.now.max(now);
        // The caller's time stamps every arrival: no clock is read here.
        let round = rmx_driver::progress(
            &mut self.ep,
            &mut self.nic,
            &mut (),
            &mut self.wcs,
            &mut self.now,
            false,
            || now,
        );
        if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
            self.ep.poll(self.now, &mut self.nic);
            self.nic.port().doorbell();
        }
        round.packets + round.completions
    }

    /// Keeps what a started request holds until it ends; its C handle.
    fn keep(&mut self, r: EpReq, sent: Option<u32>) -> rmx_request_t {
        if r.req == Request::COMPLETE {
            return DONE_SEND | u64::from(sent.unwrap_or(0));
        }
        match self.pending.get_mut(r.req.slot()) {
            Some(p) => {
                *p = Pending { buf: r.buf, sent };
                u64::from(r.req.to_raw())
            }
            // The core hands out rows of its table only, as long as ours.
            None => unreachable!("a request row past the table"),
        }
    }
}

/// Moves the endpoint on at time `now_ns` (any monotonic clock in
/// nanoseconds; a time earlier than one given before counts as that one):
/// the port's arrivals and completions, then the core's timers if one is
/// due (retransmission on a lossy port, keepalives). How many packets and
/// completions it handled, or a negative code. Nothing moves but in calls.
///
/// Contract: `ep` is null or an endpoint from `rmx_ep_create`.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_progress(ep: *mut rmx_ep_t, now_ns: u64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        Ok(e.progress(now_ns).min(c_int::MAX as usize) as c_int)
    })
}

/// The time by which `rmx_ep_progress` must be called for the core's
/// timers, in `*deadline_ns`: 1, or 0 if no timer runs (only arrivals
/// move it then). For a driver that arms a timer instead of polling.
///
/// Contract: `ep` is null or an endpoint; `deadline_ns` null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_deadline(ep: *mut rmx_ep_t, deadline_ns: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let d = unsafe { out(deadline_ns, "deadline_ns") }?;
        Ok(match e.ep.poll_timeout() {
            Some(t) => {
                *d = t;
                1
            }
            None => 0,
        })
    })
}

/// Starts a send of `len` bytes at `buf` to rank `dest` with `tag`; its
/// request in `*req`. An eager message ends during the call (its request
/// still needs `rmx_ep_test`); a larger one when the receiver has it.
/// Posts may wait in the port until the next `rmx_ep_progress` or
/// `rmx_ep_test` rings its doorbell. 0, or a negative code (nothing sent).
///
/// Contract: `ep` is null or an endpoint; `buf` null or `len` readable
/// bytes, unchanged until the request ended; `req` null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_isend(
    ep: *mut rmx_ep_t,
    dest: c_int,
    tag: u32,
    buf: *const c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        let data = bytes(buf, len)?;
        let dest = peer(e.ranks, dest)?;
        let len32 = u32::try_from(len).map_err(|_| Error::from(rmx_core::SendError::TooLong))?;
        let ctx = rmx_core::wire::context::USER;
        // SAFETY: the caller's contract keeps the bytes until the
        // request ended.
        let r = unsafe { Messages::isend(e, dest, tag, ctx, data, len) }.map_err(sent_error)?;
        *req = e.keep(r, Some(len32));
        Ok(RMX_OK)
    })
}

/// A refused send's code: a full table says what to do.
fn sent_error(e: rmx_core::SendError) -> Error {
    match e {
        rmx_core::SendError::RequestTableFull => full(),
        e => e.into(),
    }
}

fn full() -> Error {
    Error::new(
        RMX_ERR_NO_RESOURCE,
        "every request row is in use: test some to their end",
    )
}

/// Starts a receive into `len` bytes at `buf` of a message from `src`
/// (or `RMX_ANY_SOURCE`) with `tag` (or `RMX_ANY_TAG`); its request in
/// `*req`. 0, or a negative code (nothing posted).
///
/// Contract: `ep` is null or an endpoint; `buf` null or `len` writable
/// bytes, untouched by the caller until the request ended; `req` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_irecv(
    ep: *mut rmx_ep_t,
    src: c_int,
    tag: i64,
    buf: *mut c_void,
    len: usize,
    req: *mut rmx_request_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        let data = bytes(buf, len)?;
        let (src, tag) = selection(e.ranks, src, tag)?;
        let ctx = rmx_core::wire::context::USER;
        // SAFETY: as for a send.
        let r =
            unsafe { Messages::irecv(e, src, tag, ctx, data.cast_mut(), len) }.map_err(|err| {
                match err {
                    RecvError::RequestTableFull => full(),
                    err => err.into(),
                }
            })?;
        *req = e.keep(r, None);
        Ok(RMX_OK)
    })
}

/// Tests `*req` once, without moving the endpoint (`rmx_ep_progress`
/// does): 1 once it ended well, 0 while it runs, or a negative code. A
/// request that ended (either way) is freed, its buffer the caller's
/// again, and `*req` becomes `RMX_REQUEST_NULL`; `status` (may be null)
/// gets how it ended. A negative code with `*req` unchanged is a refused
/// call (`RMX_ERR_REQUEST`: not a live request). A null request is ended.
///
/// Contract: `ep` is null or an endpoint; `req` and `status` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_test(
    ep: *mut rmx_ep_t,
    req: *mut rmx_request_t,
    status: *mut rmx_status_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let req = unsafe { out(req, "req") }?;
        // SAFETY: the caller's contract.
        let status = unsafe { status.as_mut() };
        e.nic.port().doorbell();
        let st = match *req {
            RMX_REQUEST_NULL => rmx_status_t {
                source: -1,
                ..Default::default()
            },
            h if h & DONE_SEND != 0 => rmx_status_t {
                source: -1,
                tag: 0,
                len: (h & u64::from(u32::MAX)) as usize,
                error: 0,
            },
            h => {
                let r = u32::try_from(h)
                    .map(Request::from_raw)
                    .map_err(|_| stale())?;
                let Some(st) = e.ep.test(r).map_err(|_| stale())? else {
                    return Ok(0);
                };
                let p = std::mem::replace(&mut e.pending[r.slot()], IDLE);
                if let Some(b) = p.buf {
                    e.nic.drop_user(b);
                }
                rmx_status_t::of(st, p.sent.map(|n| n as usize))
            }
        };
        *req = RMX_REQUEST_NULL;
        if let Some(s) = status {
            *s = st;
        }
        Ok(if st.error == 0 { 1 } else { st.error })
    })
}

fn stale() -> Error {
    Error::new(
        crate::errors::RMX_ERR_REQUEST,
        "not a live request of this endpoint",
    )
}

/// Cancels a receive that has not matched: 1 if cancelled (its
/// `rmx_ep_test` then ends it with `RMX_ERR_CANCELLED`), 0 if it had
/// matched or is a send (it ends as it would have), or a negative code.
/// It does not end the request: test it to its end.
///
/// Contract: `ep` is null or an endpoint; `req` null or valid.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_cancel(ep: *mut rmx_ep_t, req: *const rmx_request_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        // SAFETY: the caller's contract.
        let h = *unsafe { req.as_ref() }.ok_or_else(|| Error::arg("req is null"))?;
        if h == RMX_REQUEST_NULL || h & DONE_SEND != 0 {
            return Ok(0);
        }
        let r = u32::try_from(h)
            .map(Request::from_raw)
            .map_err(|_| stale())?;
        Ok(c_int::from(e.ep.cancel(r).map_err(|_| stale())?))
    })
}

/// Ends the endpoint: the port is drained (`drain`) and every
/// registration ended (`dereg`); the block is the caller's again. 0, or
/// `RMX_ERR_BUSY` while requests are pending (test them to their end, or
/// cancel receives first), or a negative code.
///
/// Contract: `ep` is null or an endpoint, used by no call after this.
#[no_mangle]
pub unsafe extern "C" fn rmx_ep_destroy(ep: *mut rmx_ep_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { live(ep) }?;
        let pending = e.pending.iter().filter(|p| p.buf.is_some()).count() + e.tasks as usize;
        if pending > 0 {
            return Err(Error::new(
                RMX_ERR_BUSY,
                format!("{pending} requests or tasks are pending: test them to their end first"),
            ));
        }
        e.magic = 0;
        // SAFETY: live, and never used again: the magic is gone. The
        // tables it borrows are plain data in the caller's block.
        unsafe { std::ptr::drop_in_place(ep) };
        Ok(RMX_OK)
    })
}
