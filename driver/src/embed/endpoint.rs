//! One endpoint and its adapter laid out in a block the embedder gives,
//! over a port of C callbacks ([`CPort`]). Its requests are handed out as
//! 64-bit handles that a C caller may keep, and forge: a handle is
//! checked against the core's request table before anything it names is
//! touched.

use core::ffi::c_void;

use rmx_core::storage::{
    HoldEntry, Peer, PostedEntry, RequestEntry, Slices, SlotEntry, UnexpectedEntry, WorkEntry,
};
use rmx_core::{
    Config, Endpoint, Protocol, RecvError, Request, SendError, Sizes, Source, Status, Tables,
    TagSel, UserBuf,
};

use super::carve::{fill, Carve, ALIGN};
use super::ops::{rmx_port_caps_t, rmx_port_ops_t, CPort};
use super::request::EpReq;
use super::EmbedError;
use crate::adapter::{Adapter, AdapterTables, Plain, UserEntry};
use crate::port::{Completion, Mr, Port};
use crate::task::Messages;

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

/// An endpoint in caller memory, from its creation to its destruction.
/// Opaque.
// Laid out as C, the magic first, so that checking a pointer reads its
// first 8 bytes only.
#[repr(C)]
pub struct rmx_ep_t {
    /// [`MAGIC`] while it lives: a pointer to something else, or to an
    /// endpoint destroyed, is refused rather than used.
    magic: u64,
    pub(super) ep: Endpoint<Slices<'static>>,
    pub(super) nic: Adapter<CPort, Plain, CallerTables>,
    /// What each pending request holds, by its row.
    pending: &'static mut [Pending],
    /// Ranks of the job, and this endpoint's.
    pub(super) ranks: u16,
    pub(super) me: u16,
    /// Collectives started so far (their messages' tags carry it), and
    /// tasks not yet ended.
    pub(super) collectives: u16,
    pub(super) tasks: u32,
    /// Windows created so far (their numbers).
    pub(super) windows: u16,
    /// The latest time the caller gave.
    pub(super) now: u64,
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
pub(super) struct CallerTables;

impl AdapterTables for CallerTables {
    type Bytes = &'static mut [u8];
    type Users = &'static mut [UserEntry];
    type Regs = &'static mut [Option<Mr>];
}

/// A request's handle that names none.
pub const RMX_REQUEST_NULL: u64 = 0;

/// A send that ended during the call: the high bit, and its length.
const DONE_SEND: u64 = 1 << 63;

/// The core's configuration and tables for `c`.
fn settle(c: &rmx_ep_config_t) -> Result<(Config, Sizes), EmbedError> {
    if (c.size as usize) < core::mem::size_of::<rmx_ep_config_t>() {
        return Err(EmbedError::Arg(
            "config.size: set it to sizeof(rmx_ep_config_t)",
        ));
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
        _ => return Err(EmbedError::Arg("config.rendezvous is none of RMX_RNDV_*")),
    };
    if c.ranks == 0 || c.rank >= c.ranks {
        return Err(EmbedError::Arg("config.rank is not one of config.ranks"));
    }
    let cfg = cfg.fit(&caps);
    cfg.validate().map_err(EmbedError::Config)?;
    let mut sizes = Sizes::for_job(c.ranks, &cfg);
    let table = |v: u32, d: usize| if v == 0 { d } else { v as usize };
    sizes.requests = table(c.requests, sizes.requests);
    sizes.slots = table(c.slots, sizes.slots);
    sizes.posted = table(c.posted, sizes.posted);
    sizes.unexpected = table(c.unexpected, sizes.unexpected);
    sizes.holds = sizes.unexpected;
    sizes.check().map_err(EmbedError::Config)?;
    Ok((cfg, sizes))
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
        bounce: c.take::<[u8; ALIGN]>(bounce_len(cfg, s)?.div_ceil(ALIGN))?,
    })
}

/// The bytes an endpoint of `c` needs, in a block aligned to [`ALIGN`].
pub fn size(c: &rmx_ep_config_t) -> Result<usize, EmbedError> {
    let (cfg, sizes) = settle(c)?;
    let mut m = Carve::measure();
    plan(&mut m, &cfg, &sizes).ok_or(EmbedError::Arg("the tables pass the address space"))?;
    Ok(m.used(0))
}

/// Creates an endpoint of `c` in the `len` bytes at `mem`, over the port
/// `ops` with `port` as its callbacks' first argument. The port's `reg`
/// is called once here (for the bounce slots).
///
/// # Safety
/// `mem` is null or `len` writable bytes that nothing else reads, writes
/// or frees until [`destroy`] returned `Ok`; the callbacks keep the
/// contracts [`rmx_port_ops_t`] states for as long as the endpoint lives.
pub unsafe fn create(
    mem: *mut u8,
    len: usize,
    c: &rmx_ep_config_t,
    ops: &rmx_port_ops_t,
    port: *mut c_void,
) -> Result<*mut rmx_ep_t, EmbedError> {
    if let Some(name) = ops.missing() {
        return Err(EmbedError::MissingCallback(name));
    }
    let base = mem as usize;
    if mem.is_null() || !base.is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg(
            "mem must be a block aligned to RMX_EP_ALIGN",
        ));
    }
    let (cfg, sizes) = settle(c)?;
    let p = Carve::block(base, len)
        .and_then(|mut b| plan(&mut b, &cfg, &sizes))
        .ok_or(EmbedError::Arg("the block is too short: ask its size"))?;
    // SAFETY: `plan` laid each table out inside the block, which the
    // caller's contract gives to the endpoint alone until destroyed.
    unsafe { build(&p, c, cfg, &sizes, *ops, port) }
}

/// The endpoint, in the block laid out by `p`.
///
/// # Safety
/// As [`fill`]'s, for every table of `p`, until [`destroy`].
unsafe fn build(
    p: &Plan,
    c: &rmx_ep_config_t,
    cfg: Config,
    s: &Sizes,
    ops: rmx_port_ops_t,
    port: *mut c_void,
) -> Result<*mut rmx_ep_t, EmbedError> {
    let bounce = bounce_len(&cfg, s).unwrap_or(0);
    // SAFETY: the caller's contract, table by table.
    let (tables, pending, slots, users, regs) = unsafe {
        (
            Tables::<Slices<'static>> {
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
    let ep = Endpoint::new(cfg, c.rank, c.ranks, tables).map_err(EmbedError::Config)?;
    // SAFETY: `create` checked `ops` complete, and its caller's contract
    // keeps the callbacks' own.
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
    .map_err(EmbedError::Adapter)?;
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
            windows: 0,
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
/// `ep` is null, or points to at least 8 readable bytes: memory given to
/// [`create`] (live or destroyed, used by no other call meanwhile), or
/// anything else, which is refused.
pub unsafe fn live<'a>(ep: *mut rmx_ep_t) -> Result<&'a mut rmx_ep_t, EmbedError> {
    if ep.is_null() || !(ep as usize).is_multiple_of(ALIGN) {
        return Err(EmbedError::Arg("ep is null or not an endpoint"));
    }
    // SAFETY: the caller's contract (8 readable bytes, aligned above); the
    // magic is the first field, and only it is read before it matches.
    if unsafe { ep.cast::<u64>().read() } != MAGIC {
        return Err(EmbedError::Arg("ep is not a live endpoint (destroyed?)"));
    }
    // SAFETY: a live endpoint, by its magic (the caller's contract).
    Ok(unsafe { &mut *ep })
}

/// Ends the endpoint: the port is drained and every registration ended;
/// the block is the caller's again. Refused while requests or tasks are
/// pending.
///
/// # Safety
/// As [`live`]; `ep` is used by no call after this returned `Ok`.
pub unsafe fn destroy(ep: *mut rmx_ep_t) -> Result<(), EmbedError> {
    // SAFETY: the caller's contract.
    let e = unsafe { live(ep) }?;
    let pending = e.pending.iter().filter(|p| p.buf.is_some()).count() + e.tasks as usize;
    if pending > 0 {
        return Err(EmbedError::Busy(pending));
    }
    e.magic = 0;
    // SAFETY: live, and never used again: the magic is gone. The tables
    // it borrows are plain data in the caller's block.
    unsafe { core::ptr::drop_in_place(ep) };
    Ok(())
}

impl rmx_ep_t {
    /// Ranks of the job.
    pub fn ranks(&self) -> u16 {
        self.ranks
    }

    /// One progress round at `now` (a time earlier than one given before
    /// counts as that one): arrivals and completions handed to the core,
    /// then its timers if one is due; how many packets and completions.
    pub fn progress(&mut self, now: u64) -> usize {
        self.now = self.now.max(now);
        // The caller's time stamps every arrival: no clock is read here.
        let round = crate::progress(
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

    /// When the core's next timer is due, if one runs.
    pub fn deadline(&self) -> Option<u64> {
        self.ep.poll_timeout()
    }

    /// Keeps what a started request holds until it ends; its handle.
    fn keep(&mut self, r: EpReq, sent: Option<u32>) -> u64 {
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

    /// Starts a send of `len` bytes at `data` to `dest` with `tag`; its
    /// handle.
    ///
    /// # Safety
    /// The bytes stay valid and unchanged until the request ended.
    pub unsafe fn isend(
        &mut self,
        dest: u16,
        tag: u32,
        data: *const u8,
        len: usize,
    ) -> Result<u64, EmbedError> {
        let len32 = u32::try_from(len).map_err(|_| EmbedError::Send(SendError::TooLong))?;
        let ctx = rmx_core::wire::context::USER;
        // SAFETY: the caller's contract.
        let r =
            unsafe { Messages::isend(self, dest, tag, ctx, data, len) }.map_err(|e| match e {
                SendError::RequestTableFull => EmbedError::Full,
                e => EmbedError::Send(e),
            })?;
        Ok(self.keep(r, Some(len32)))
    }

    /// Starts a receive into `len` bytes at `data`; its handle.
    ///
    /// # Safety
    /// The bytes stay valid, and untouched, until the request ended.
    pub unsafe fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        data: *mut u8,
        len: usize,
    ) -> Result<u64, EmbedError> {
        let ctx = rmx_core::wire::context::USER;
        // SAFETY: the caller's contract.
        let r =
            unsafe { Messages::irecv(self, src, tag, ctx, data, len) }.map_err(|e| match e {
                RecvError::RequestTableFull => EmbedError::Full,
                e => EmbedError::Recv(e),
            })?;
        Ok(self.keep(r, None))
    }

    /// Tests request `h` once: how it ended (and, for a send, its length)
    /// once it did, its handle then spent; `None` while it runs. A null
    /// handle has ended, with no status.
    pub fn test(&mut self, h: u64) -> Result<Option<Ended>, EmbedError> {
        self.nic.port().doorbell();
        if h == RMX_REQUEST_NULL {
            return Ok(Some(Ended::Null));
        }
        if h & DONE_SEND != 0 {
            return Ok(Some(Ended::Sent((h & u64::from(u32::MAX)) as usize)));
        }
        let r = u32::try_from(h)
            .map(Request::from_raw)
            .map_err(|_| EmbedError::Stale)?;
        let Some(st) = self.ep.test(r).map_err(|_| EmbedError::Stale)? else {
            return Ok(None);
        };
        let p = core::mem::replace(&mut self.pending[r.slot()], IDLE);
        if let Some(b) = p.buf {
            self.nic.drop_user(b);
        }
        Ok(Some(match p.sent {
            Some(n) => Ended::SendDone(st, n as usize),
            None => Ended::Received(st),
        }))
    }

    /// Cancels request `h` if it is a receive that has not matched:
    /// `true` then (its test reports it cancelled).
    pub fn cancel(&mut self, h: u64) -> Result<bool, EmbedError> {
        if h == RMX_REQUEST_NULL || h & DONE_SEND != 0 {
            return Ok(false);
        }
        let r = u32::try_from(h)
            .map(Request::from_raw)
            .map_err(|_| EmbedError::Stale)?;
        self.ep.cancel(r).map_err(|_| EmbedError::Stale)
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The null handle: nothing ran.
    Null,
    /// A send that ended during its call, of so many bytes.
    Sent(usize),
    /// A send that ended later (its status), of so many bytes.
    SendDone(Status, usize),
    Received(Status),
}
