//! `loop`: an in-process software NIC with verbs semantics, so every protocol
//! runs without hardware. Ranks are threads of one process; each has a
//! protection domain (regions and keys), a shared receive queue
//! (`ring::RecvRing`), and a completion queue; each connection has a send
//! queue of bounded depth. Data of operations up to `sync_max` bytes moves on
//! the posting thread (as inline/PIO sends do); larger ones run on the NIC's own
//! thread (`engine::Engine`) and complete through the completion queue.
//!
//! A SEND holds its send-queue entry until the receiving NIC has taken the
//! packet, as on an RC connection, where the entry completes with the remote
//! acknowledgement. `loop` has no processor on the receiving side: the
//! receiving rank's poll is its NIC taking the packet, so a connection has at
//! most `sq_depth` packets that the peer has not yet polled.

// The engine copies whatever its jobs name and the ring hands raw buffers
// between threads: both stay inside this module, behind the checks of `Port`.
mod engine;
mod network;
pub mod pagemap;
pub mod region;
mod ring;
mod transport;

pub use ring::RecvWc;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use engine::{Engine, Job};
use region::{access, KeyError, Mr, Pd, RegisterError};
use ring::{RecvRing, Reposts};

/// `loop` in the transport registry: the default.
pub const ENTRY: crate::transport::Entry = crate::transport::Entry {
    name: "loop",
    about: "in-process software NIC with verbs semantics (default)",
    built: true,
    floor: "shared-memory floor",
    // RDMA read, write and write with immediate (the engine moves the
    // bytes).
    caps: crate::transport::RDMA,
    device: false,
    launched: None,
    info: None,
};

/// Sizes of the software NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LoopConfig {
    /// Receive buffers in each rank's shared receive queue.
    pub srq_depth: usize,
    /// Bytes of each receive buffer (largest SEND).
    pub buf_size: usize,
    /// Outstanding offloaded operations per connection (send queue depth).
    pub sq_depth: u32,
    /// Largest operation completed on the posting thread; larger ones run on
    /// the NIC's own thread.
    pub sync_max: usize,
    /// Largest inline send (`IBV_SEND_INLINE`): header and payload copied into
    /// the work request by the CPU, without a key check.
    pub inline_max: usize,
    /// Check, on every gather from registered user memory, that the pages are
    /// still those pinned at registration (see [`pagemap`]); a mismatch fails
    /// the work request with [`WcStatus::StaleRegistration`]. For tests: it
    /// costs a system call per send.
    pub verify_pages: bool,
    /// Largest RDMA operation; a rendezvous splits longer transfers.
    pub max_transfer: u32,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            srq_depth: 256,
            buf_size: 8192 + 64,
            sq_depth: 64,
            sync_max: 16384,
            inline_max: 256,
            verify_pages: false,
            max_transfer: 1 << 20,
        }
    }
}

/// Sizes a software NIC cannot have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopConfigError {
    /// `srq_depth`, `buf_size` and `sq_depth` must each be at least 1.
    Zero,
    /// A receive ring of `srq_depth` buffers of `buf_size` bytes cannot be
    /// reserved: its size passes the address space (or what the allocator
    /// gives), or it has more than 2³² buffers.
    RingTooLarge { srq_depth: usize, buf_size: usize },
}

impl std::fmt::Display for LoopConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopConfigError::Zero => {
                write!(f, "loop NIC: srq_depth, buf_size and sq_depth must be at least 1")
            }
            LoopConfigError::RingTooLarge { srq_depth, buf_size } => write!(
                f,
                "loop NIC: a receive ring of {srq_depth} buffers of {buf_size} bytes cannot be reserved: use fewer or smaller buffers"
            ),
        }
    }
}

impl std::error::Error for LoopConfigError {}

/// One gather/scatter entry: a registered local range.
pub use crate::transport::Sge;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOp {
    Send,
    Write,
    Read,
}

/// How an operation ended. Errors touch no memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// A local gather/scatter entry failed its key check.
    LocalProtection(KeyError),
    /// The remote address/key failed its check.
    RemoteAccess(KeyError),
    /// The message is larger than the receiver's buffers.
    LocalLength,
    /// The pages behind a registration changed since it was made: a real NIC
    /// would have sent the old pages' contents.
    StaleRegistration,
}

impl WcStatus {
    /// The status in the core's terms. Every failure `loop` reports is of
    /// one operation (a key, bound, length or registration check: nothing
    /// moved), never of the connection: a peer that is gone refuses the
    /// post itself.
    pub fn to_core(self) -> rmx_core::WcResult {
        match self {
            WcStatus::Success => Ok(()),
            WcStatus::RemoteAccess(_)
            | WcStatus::LocalProtection(_)
            | WcStatus::LocalLength
            | WcStatus::StaleRegistration => Err(rmx_core::RdmaError::Access),
        }
    }
}

/// A send-side completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    /// The connection (peer rank) the work request was posted on.
    pub qp: u16,
    pub op: WcOp,
    pub status: WcStatus,
    pub len: usize,
    /// The work requests this completion stands for: 1, or more where
    /// unsignalled inline SENDs complete with it
    /// ([`Port::post_send_inline_unsignalled`]).
    pub sends: u32,
}

/// Why a post was refused: nothing was done, try again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostErr {
    /// Send queue of this connection is full.
    SqFull,
    /// The peer's shared receive queue has no free buffer (RNR).
    Rnr,
    /// No such rank.
    BadPeer,
    /// Larger than an inline send may be.
    TooLong,
}

/// Events so far, and threads sleeping until the next one.
#[derive(Default)]
struct EventCount {
    count: u64,
    sleepers: u32,
}

struct Hca {
    ring: RecvRing,
    pd: Pd,
    /// Page frames of user registrations (key -> start, frames), kept when
    /// `verify_pages` is on.
    frames: RwLock<HashMap<u32, (usize, Vec<u64>)>>,
    cq: Mutex<VecDeque<Wc>>,
    cq_len: AtomicUsize,
    /// Receive positions below this have been polled (taken by the rank).
    polled: CachePadded<AtomicU64>,
    /// Events a progress thread sleeps on: completions in the CQ and
    /// solicited packets in the ring (verbs' completion channel).
    events: Mutex<EventCount>,
    wake: Condvar,
    /// Armed by a sleeper ([`Channel::arm`]): the next packet delivered here,
    /// or taken from here by a peer, raises an event, solicited or not.
    armed: CachePadded<AtomicBool>,
    /// Its port was handed out: a second one would poll and repost the same
    /// receive buffers, handing a buffer back while the other still reads it.
    port_taken: AtomicBool,
    /// An eventfd every event also writes, once someone sleeps outside rmx
    /// ([`Channel::fd`]).
    efd: std::sync::OnceLock<std::os::fd::OwnedFd>,
}

impl Hca {
    fn complete(&self, wc: Wc) {
        self.cq
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(wc);
        self.cq_len.fetch_add(1, Ordering::Release);
        self.signal();
    }

    /// Makes a packet in the ring visible, raising an event if it is
    /// solicited or a sleeper armed the NIC for any packet.
    #[inline]
    fn deliver(&self, pos: u64, len: u32, imm: Option<u32>, src: u16, solicited: bool) {
        self.ring.publish(pos, len, imm, src);
        self.delivered(solicited);
    }

    /// [`deliver`](Self::deliver) of a packet whose bytes the caller just
    /// wrote at `data`.
    ///
    /// # Safety
    /// As [`RecvRing::publish_at`].
    #[inline]
    unsafe fn deliver_at(&self, data: *mut u8, pos: u64, len: u32, src: u16, solicited: bool) {
        // SAFETY: the caller's contract.
        unsafe { self.ring.publish_at(data, pos, len, None, src) };
        self.delivered(solicited);
    }

    #[inline]
    fn delivered(&self, solicited: bool) {
        if solicited {
            self.signal();
        } else {
            self.fire_armed();
        }
    }

    /// Publishes the immediate claimed at `pos` once its write landed; a
    /// write that did not (its memory gone) leaves an empty packet in the
    /// claimed place instead, which the core drops as malformed, so the
    /// ring goes on.
    fn deliver_imm(&self, pos: u64, imm: u32, src: u16, landed: bool) {
        self.deliver(pos, 0, landed.then_some(imm), src, false);
    }

    /// Raises one event if a sleeper armed for any packet. No fence orders
    /// this load after the delivery's store: a sleeper arming at that very
    /// moment can miss the event, which is why every sleep is bounded.
    #[inline]
    fn fire_armed(&self) {
        if self.armed.load(Ordering::Relaxed) && self.armed.swap(false, Ordering::AcqRel) {
            self.signal();
        }
    }

    /// Counts an event and wakes whoever sleeps on this NIC.
    fn signal(&self) {
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.count += 1;
        // A notification is a system call: none when nobody sleeps.
        if ev.sleepers > 0 {
            self.wake.notify_all();
        }
        if let Some(fd) = self.efd.get() {
            crate::eventfd::bump(fd);
        }
    }
}

/// A rank's completion channel: a handle on its NIC events, for a thread that sleeps until the
/// NIC has something for the rank (a progress thread).
#[derive(Clone)]
pub struct Channel {
    shared: Arc<Shared>,
    rank: u16,
}

impl Channel {
    /// Events so far.
    pub fn count(&self) -> u64 {
        self.shared.hcas[self.rank as usize]
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .count
    }

    /// Sleeps until the count differs from `seen` or `timeout` passes;
    /// returns the count.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        let hca = &self.shared.hcas[self.rank as usize];
        let mut g = hca.events.lock().unwrap_or_else(|e| e.into_inner());
        g.sleepers += 1;
        let (mut g, _) = hca
            .wake
            .wait_timeout_while(g, timeout, |e| e.count == seen)
            .unwrap_or_else(|e| e.into_inner());
        g.sleepers -= 1;
        g.count
    }

    /// Makes the next packet for this rank (or taken from it) raise an
    /// event even if unsolicited, as `ibv_req_notify_cq` with
    /// `solicited_only = 0` does; arm, read [`count`](Self::count), poll
    /// once more, then [`wait`](Self::wait). Solicited packets and
    /// completions always raise one.
    pub fn arm(&self) {
        self.shared.hcas[self.rank as usize]
            .armed
            .store(true, Ordering::SeqCst);
    }

    /// Wakes the sleeper (to stop it).
    pub fn kick(&self) {
        self.shared.hcas[self.rank as usize].signal();
    }

    /// A descriptor readable once an event came since the last
    /// [`clear`](Self::clear): for a sleeper outside rmx (`poll(2)`,
    /// `epoll`). Made at the first call; every event writes it after.
    pub fn fd(&self) -> std::io::Result<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let hca = &self.shared.hcas[self.rank as usize];
        if hca.efd.get().is_none() {
            let fd = crate::eventfd::eventfd()?;
            // Two threads racing: one descriptor wins, the other closes.
            let _ = hca.efd.set(fd);
        }
        Ok(hca.efd.get().expect("set above").as_raw_fd())
    }

    /// Makes [`fd`](Self::fd) unreadable until the next event.
    pub fn clear(&self) {
        if let Some(fd) = self.shared.hcas[self.rank as usize].efd.get() {
            crate::eventfd::drain(fd);
        }
    }
}

struct Shared {
    cfg: LoopConfig,
    /// Each its own allocation, so a port holds its own NIC directly.
    hcas: Vec<Arc<Hca>>,
    engine: Engine,
}

/// The software fabric: create it once, take one [`Port`] per rank.
#[derive(Clone)]
pub struct Fabric {
    shared: Arc<Shared>,
}

impl Fabric {
    /// A fabric of `ranks` NICs sized by `cfg`, which is refused where a
    /// size is 0 or a product of sizes would not fit.
    pub fn new(ranks: usize, cfg: LoopConfig) -> Result<Fabric, LoopConfigError> {
        if cfg.srq_depth == 0 || cfg.buf_size == 0 || cfg.sq_depth == 0 {
            return Err(LoopConfigError::Zero);
        }
        let too_large = LoopConfigError::RingTooLarge {
            srq_depth: cfg.srq_depth,
            buf_size: cfg.buf_size,
        };
        let hcas = (0..ranks)
            .map(|_| {
                Some(Arc::new(Hca {
                    ring: RecvRing::new(cfg.srq_depth, cfg.buf_size)?,
                    pd: Pd::default(),
                    frames: RwLock::new(HashMap::new()),
                    cq: Mutex::new(VecDeque::new()),
                    cq_len: AtomicUsize::new(0),
                    polled: CachePadded::new(AtomicU64::new(0)),
                    events: Mutex::new(EventCount::default()),
                    wake: Condvar::new(),
                    armed: CachePadded::new(AtomicBool::new(false)),
                    port_taken: AtomicBool::new(false),
                    efd: std::sync::OnceLock::new(),
                }))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or(too_large)?;
        Ok(Fabric {
            shared: Arc::new(Shared {
                cfg,
                hcas,
                engine: Engine::start(),
            }),
        })
    }

    pub fn ranks(&self) -> usize {
        self.shared.hcas.len()
    }

    /// The port of `rank`. Each rank has one port for the fabric's life:
    /// panics if `rank` is not one of the fabric's or its port was already
    /// taken ([`try_port`](Self::try_port) says so instead).
    pub fn port(&self, rank: u16) -> Port {
        let n = self.ranks();
        self.try_port(rank).unwrap_or_else(|| {
            panic!("rank {rank} of {n}: no such rank, or its port was already taken")
        })
    }

    /// The port of `rank`, unless there is no such rank or its port was
    /// already taken.
    pub fn try_port(&self, rank: u16) -> Option<Port> {
        let n = self.ranks();
        let hca = self.shared.hcas.get(rank as usize)?;
        if hca.port_taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Port {
            rank,
            own: Arc::clone(hca),
            shared: Arc::clone(&self.shared),
            head: 0,
            told: 0,
            taken_from: NONE_TAKEN,
            seen: vec![0; n],
            reposts: Reposts::default(),
            held: vec![false; hca.ring.depth()],
            keys: region::KeyCache::default(),
            outstanding: vec![0; n],
            untaken: (0..n).map(|_| VecDeque::new()).collect(),
            untaken_n: 0,
            untaken_loud: 0,
            reap_due: false,
            quiet: vec![(0, 0); n],
        })
    }
}

/// The NIC of rank `peer`.
fn hca_of(shared: &Shared, peer: u16) -> Result<&Hca, PostErr> {
    shared
        .hcas
        .get(peer as usize)
        .map(|h| &**h)
        .ok_or(PostErr::BadPeer)
}

/// Builds the completions of one work request.
fn completion(wr_id: u64, qp: u16, op: WcOp) -> impl Fn(WcStatus, usize) -> Wc + Copy + Send {
    move |status, len| Wc {
        wr_id,
        qp,
        op,
        status,
        len,
        sends: 1,
    }
}

/// Checks local gather/scatter entries against the port's own domain.
fn check_local(
    pd: &Pd,
    cache: &mut region::KeyCache,
    sges: &[Sge],
    need: u8,
) -> Result<usize, WcStatus> {
    let mut total = 0;
    for s in sges {
        pd.check_cached(cache, s.key, s.addr, s.len, need)
            .map_err(WcStatus::LocalProtection)?;
        total += s.len;
    }
    Ok(total)
}

/// Is a send-queue entry of connection `peer` free? The post that takes it
/// counts it once it cannot fail any more, so a refused post never undoes one.
fn sq_room(outstanding: &[u32], depth: u32, peer: u16) -> Result<(), PostErr> {
    if outstanding[peer as usize] >= depth {
        return Err(PostErr::SqFull);
    }
    Ok(())
}

/// A send-queue entry of connection `peer` and a position in the ring of its
/// NIC `dst`, or why not (`SqFull`, `Rnr`). Nothing is taken when it fails.
fn claim_send(
    outstanding: &[u32],
    seen: &mut [u64],
    depth: u32,
    peer: u16,
    dst: &Hca,
) -> Result<u64, PostErr> {
    sq_room(outstanding, depth, peer)?;
    dst.ring.claim(&mut seen[peer as usize]).ok_or(PostErr::Rnr)
}

/// [`Port::taken_from`]: no packet taken since the last tell.
const NONE_TAKEN: u32 = u32::MAX;
/// [`Port::taken_from`]: packets of more than one rank taken.
const MANY_TAKEN: u32 = u32::MAX - 1;

/// One rank's view of the NIC. Not shared between threads.
pub struct Port {
    rank: u16,
    /// This rank's NIC (`shared.hcas[rank]`), reached without an index.
    own: Arc<Hca>,
    shared: Arc<Shared>,
    head: u64,
    /// The `head` last published as `polled`.
    told: u64,
    /// The rank whose packets were taken since then, if all were one's
    /// ([`NONE_TAKEN`], [`MANY_TAKEN`]): only it is woken when told.
    taken_from: u32,
    /// Cached `released` of each peer's receive ring.
    seen: Vec<u64>,
    reposts: Reposts,
    /// Receive buffers polled and not yet reposted: the only ones whose
    /// bytes may be read, and the only ones that may be reposted.
    held: Vec<bool>,
    keys: region::KeyCache,
    /// Work requests per connection whose completion is not yet polled: as
    /// in verbs, a send-queue entry frees when its CQE is polled.
    outstanding: Vec<u32>,
    /// SENDs per connection delivered into the peer's ring but not yet taken
    /// by it, oldest first; consecutive unsignalled inline ones share an
    /// entry.
    untaken: Vec<VecDeque<Untaken>>,
    untaken_n: usize,
    /// Of those, the ones that complete on their own (all but unsignalled
    /// inline SENDs): while there are none, and no connection holds half
    /// its send queue, a completion poll need not look at the others.
    untaken_loud: usize,
    /// Some connection held half its send queue at its last post: the
    /// next completion poll takes what the peers took.
    reap_due: bool,
    /// Per connection: unsignalled inline SENDs taken by the peer whose
    /// completion waits for the next signalled SEND, and the last one's
    /// wr_id.
    quiet: Vec<(u32, u64)>,
}

/// A SEND in a peer's ring that the peer has not taken yet, or a run of
/// unsignalled inline ones: posted one after another, they are taken in
/// that order, so the run is taken once its last one is.
#[derive(Clone, Copy, Debug)]
struct Untaken {
    /// The position of the SEND (of a run: its last one's).
    pos: u64,
    /// Its wr_id (of a run: its last one's).
    wr_id: u64,
    len: usize,
    /// A signalled inline SEND (`Some(true)`); a run of `count` unsignalled
    /// ones, which complete with the next signalled one
    /// (`Some(false)`); `None`: a SEND from memory.
    inline: Option<bool>,
    count: u32,
}

impl Port {
    /// Bytes this port keeps per connection (cached ring state, entry count,
    /// the queue of sends not yet taken), before the entries themselves.
    pub const CONNECTION_BYTES: usize = std::mem::size_of::<u64>()
        + std::mem::size_of::<u32>()
        + std::mem::size_of::<VecDeque<(u64, u64, usize)>>();

    pub fn rank(&self) -> u16 {
        self.rank
    }

    pub fn config(&self) -> LoopConfig {
        self.shared.cfg
    }

    /// Registers local memory in this rank's protection domain.
    ///
    /// # Safety
    /// As [`Pd::register`]: the range stays valid for the NIC's accesses
    /// until it is deregistered and every operation naming it completed.
    /// Safe code cannot register (so cannot aim the NIC anywhere):
    ///
    /// ```compile_fail
    /// let f = rmx_linux::loopnic::Fabric::new(1, Default::default()).unwrap();
    /// let mr = f.port(0).register_access(0x1000, 4096, 2);
    /// ```
    pub unsafe fn register_access(
        &self,
        addr: usize,
        len: usize,
        rights: u8,
    ) -> Result<Mr, RegisterError> {
        // SAFETY: the caller's contract is the domain's.
        unsafe { self.own.pd.register(addr, len, rights) }
    }

    /// Ends a registration; `BadKey` for a key this domain does not hold.
    pub fn deregister_checked(&self, mr: Mr) -> Result<(), KeyError> {
        self.own.pd.deregister(mr)
    }

    /// Registers user memory for the NIC to read, walking its pages as a real
    /// registration does when it pins them (`MADV_POPULATE_READ` faults every
    /// page in). Unlike `mlock` this leaves the application's `madvise` and
    /// `munmap` working as before — as pinning for a NIC does. Fails for
    /// memory that is not mapped.
    ///
    /// # Safety
    /// As [`register_access`](Self::register_access): peers may read and write the range
    /// through the key (a rendezvous), so it must stay valid for that until
    /// deregistered and every operation naming it completed.
    pub unsafe fn register_pages(&self, addr: usize, len: usize) -> std::io::Result<Mr> {
        // SAFETY: populating only faults pages in; any range is safe to pass.
        if unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_READ) } != 0 {
            let e = std::io::Error::last_os_error();
            // Kernels before 5.14 lack it: the registration is then key-only.
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e);
            }
        }
        // Local and remote access, as a rendezvous needs (RDMA read of a
        // sender's buffer, RDMA write into a receiver's).
        let all = access::LOCAL_WRITE | access::REMOTE_READ | access::REMOTE_WRITE;
        // SAFETY: the caller's contract is the domain's.
        let mr = unsafe { self.own.pd.register(addr, len, all) }
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
        if self.shared.cfg.verify_pages {
            if let Some(f) = pagemap::frames(addr, len) {
                let mut t = self.own.frames.write().unwrap_or_else(|e| e.into_inner());
                t.insert(mr.key, (addr, f));
            }
        }
        Ok(mr)
    }

    /// Ends a [`register_pages`](Self::register_pages) registration.
    pub fn deregister_pages(&self, mr: Mr) -> Result<(), KeyError> {
        self.own.pd.deregister(mr)?;
        if self.shared.cfg.verify_pages {
            let mut t = self.own.frames.write().unwrap_or_else(|e| e.into_inner());
            t.remove(&mr.key);
        }
        Ok(())
    }

    /// With `verify_pages`: are the pages behind each entry still the ones
    /// registered?
    fn pages_unchanged(&self, sges: &[Sge]) -> bool {
        let t = self.own.frames.read().unwrap_or_else(|e| e.into_inner());
        sges.iter().all(|s| {
            let Some((start, f)) = t.get(&s.key) else {
                return true;
            };
            let first = (s.addr - start / 4096 * 4096) / 4096;
            match pagemap::frames(s.addr, s.len) {
                Some(now) => f.get(first..first + now.len()) == Some(&now[..]),
                None => false,
            }
        })
    }

    /// This rank's NIC events, for a thread that sleeps on them.
    pub fn events(&self) -> Channel {
        Channel {
            shared: Arc::clone(&self.shared),
            rank: self.rank,
        }
    }

    /// SEND with a gather list. Consumes one receive buffer at `peer`.
    /// `Ok(Some(wc))`: completed during the call; `Ok(None)`: completes in the CQ.
    pub fn post_send(
        &mut self,
        peer: u16,
        wr_id: u64,
        sges: &[Sge],
    ) -> Result<Option<Wc>, PostErr> {
        self.send(peer, wr_id, sges, false)
    }

    /// SEND that also raises an event at `peer` once delivered (verbs'
    /// `IBV_SEND_SOLICITED`), waking a thread sleeping on its [`Channel`].
    pub fn post_send_solicited(
        &mut self,
        peer: u16,
        wr_id: u64,
        sges: &[Sge],
    ) -> Result<Option<Wc>, PostErr> {
        self.send(peer, wr_id, sges, true)
    }

    #[inline]
    fn send(
        &mut self,
        peer: u16,
        wr_id: u64,
        sges: &[Sge],
        solicited: bool,
    ) -> Result<Option<Wc>, PostErr> {
        let dst = hca_of(&self.shared, peer)?;
        let done = completion(wr_id, peer, WcOp::Send);
        let total = match check_local(&self.own.pd, &mut self.keys, sges, 0) {
            Ok(t) => t,
            Err(st) => return Ok(Some(done(st, 0))),
        };
        if self.shared.cfg.verify_pages && !self.pages_unchanged(sges) {
            return Ok(Some(done(WcStatus::StaleRegistration, 0)));
        }
        if total > dst.ring.buf_size() {
            return Ok(Some(done(WcStatus::LocalLength, 0)));
        }
        let big = total > self.shared.cfg.sync_max;
        let pos = claim_send(
            &self.outstanding,
            &mut self.seen,
            self.shared.cfg.sq_depth,
            peer,
            dst,
        )?;
        let base = dst.ring.data_ptr(pos);
        if !big {
            let mut off = 0;
            for s in sges {
                // SAFETY: source checked against a registered region; the claimed
                // buffer has room for `total` bytes.
                unsafe { crate::copy::copy_bytes(base.add(off), s.addr as *const u8, s.len) };
                off += s.len;
            }
            // SAFETY: `base` is the data area of `pos`, claimed above.
            unsafe { dst.deliver_at(base, pos, total as u32, self.rank, solicited) };
            self.until_taken(peer, pos, wr_id, total, None);
            return Ok(None);
        }
        // Large: the NIC thread gathers. One job per entry; the last one completes.
        self.outstanding[peer as usize] += 1;
        let me = self.rank;
        let mut off = 0;
        let n = sges.len();
        for (k, s) in sges.iter().enumerate() {
            let then: Box<dyn FnOnce() + Send> = if k + 1 == n {
                let shared = Arc::clone(&self.shared);
                Box::new(move || {
                    let dst = &shared.hcas[peer as usize];
                    dst.deliver(pos, total as u32, None, me, solicited);
                    shared.hcas[me as usize].complete(done(WcStatus::Success, total));
                })
            } else {
                Box::new(|| {})
            };
            self.shared.engine.submit(Job {
                dst: base as usize + off,
                src: s.addr,
                len: s.len,
                guard: None,
                then: Box::new(move |_| then()),
            });
            off += s.len;
        }
        Ok(None)
    }

    /// Inline SEND of `head` then `body` (at most `inline_max` bytes together):
    /// copied during the call, no key check; it completes (with `wr_id`)
    /// once the peer takes it.
    #[inline]
    pub fn post_send_inline(
        &mut self,
        peer: u16,
        wr_id: u64,
        head: &[u8],
        body: &[u8],
    ) -> Result<(), PostErr> {
        self.send_inline(peer, wr_id, head, body, true)
    }

    /// [`post_send_inline`](Self::post_send_inline) unsignalled, as verbs
    /// posts without `IBV_SEND_SIGNALED`: it holds its send-queue entry
    /// until the peer takes it, but completes only with the next signalled
    /// SEND of the connection, whose completion then counts it
    /// ([`Wc::sends`]), or just before that SEND's if that one is not
    /// inline (a completion of its own, with this one's `wr_id`, counting
    /// every unsignalled SEND it stands for).
    #[inline]
    pub fn post_send_inline_unsignalled(
        &mut self,
        peer: u16,
        wr_id: u64,
        head: &[u8],
        body: &[u8],
    ) -> Result<(), PostErr> {
        self.send_inline(peer, wr_id, head, body, false)
    }

    // The small-message post: inlined, with the core's send, into one call.
    #[inline(always)]
    fn send_inline(
        &mut self,
        peer: u16,
        wr_id: u64,
        head: &[u8],
        body: &[u8],
        signalled: bool,
    ) -> Result<(), PostErr> {
        let dst = hca_of(&self.shared, peer)?;
        let total = head.len() + body.len();
        if total > self.shared.cfg.inline_max || total > dst.ring.buf_size() {
            return Err(PostErr::TooLong);
        }
        let pos = claim_send(
            &self.outstanding,
            &mut self.seen,
            self.shared.cfg.sq_depth,
            peer,
            dst,
        )?;
        let base = dst.ring.data_ptr(pos);
        // SAFETY: the claimed buffer has room for `total` bytes.
        unsafe {
            crate::copy::copy_bytes(base, head.as_ptr(), head.len());
            crate::copy::copy_bytes(base.add(head.len()), body.as_ptr(), body.len());
        }
        // SAFETY: `base` is the data area of `pos`, claimed above.
        unsafe { dst.deliver_at(base, pos, total as u32, self.rank, false) };
        self.until_taken(peer, pos, wr_id, total, Some(signalled));
        Ok(())
    }

    /// A SEND now in `peer`'s ring at `pos` holds its entry until taken.
    /// `inline`: an inline SEND, signalled or not (`None`: from memory).
    #[inline(always)]
    fn until_taken(&mut self, peer: u16, pos: u64, wr_id: u64, len: usize, inline: Option<bool>) {
        self.outstanding[peer as usize] += 1;
        let q = &mut self.untaken[peer as usize];
        match q.back_mut() {
            // The next of a run: each holds an entry of the send queue,
            // so a run is shorter than its depth.
            Some(run) if inline == Some(false) && run.inline == Some(false) => {
                *run = Untaken {
                    pos,
                    wr_id,
                    count: run.count + 1,
                    ..*run
                };
            }
            _ => q.push_back(Untaken {
                pos,
                wr_id,
                len,
                inline,
                count: 1,
            }),
        }
        self.untaken_n += 1;
        self.untaken_loud += usize::from(inline != Some(false));
        let depth = self.shared.cfg.sq_depth;
        self.reap_due |= self.outstanding[peer as usize] >= depth.div_ceil(2);
    }

    /// RDMA WRITE (with an immediate when `imm` is set, which consumes a receive
    /// buffer at `peer` and delivers the immediate there after the data).
    pub fn post_write(
        &mut self,
        peer: u16,
        wr_id: u64,
        local: Sge,
        remote_addr: usize,
        rkey: u32,
        imm: Option<u32>,
    ) -> Result<Option<Wc>, PostErr> {
        self.rdma(peer, wr_id, WcOp::Write, local, remote_addr, rkey, imm)
    }

    /// RDMA READ of `local.len` bytes from the peer into `local`.
    pub fn post_read(
        &mut self,
        peer: u16,
        wr_id: u64,
        local: Sge,
        remote_addr: usize,
        rkey: u32,
    ) -> Result<Option<Wc>, PostErr> {
        self.rdma(peer, wr_id, WcOp::Read, local, remote_addr, rkey, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn rdma(
        &mut self,
        peer: u16,
        wr_id: u64,
        op: WcOp,
        local: Sge,
        raddr: usize,
        rkey: u32,
        imm: Option<u32>,
    ) -> Result<Option<Wc>, PostErr> {
        let dst = hca_of(&self.shared, peer)?;
        let done = completion(wr_id, peer, op);
        let (lneed, rneed) = match op {
            WcOp::Read => (access::LOCAL_WRITE, access::REMOTE_READ),
            _ => (0, access::REMOTE_WRITE),
        };
        if let Err(st) = check_local(&self.own.pd, &mut self.keys, &[local], lneed) {
            return Ok(Some(done(st, 0)));
        }
        if let Err(e) = dst.pd.check(rkey, raddr, local.len, rneed) {
            return Ok(Some(done(WcStatus::RemoteAccess(e), 0)));
        }
        let big = local.len > self.shared.cfg.sync_max;
        if big {
            sq_room(&self.outstanding, self.shared.cfg.sq_depth, peer)?;
        }
        // The immediate's receive buffer is claimed now, so the post can refuse
        // (RNR) before any data moves; it is published after the data.
        let imm = match imm {
            Some(v) => {
                let pos = dst
                    .ring
                    .claim(&mut self.seen[peer as usize])
                    .ok_or(PostErr::Rnr)?;
                Some((pos, v))
            }
            None => None,
        };
        let (from, to) = match op {
            WcOp::Read => (raddr, local.addr),
            _ => (local.addr, raddr),
        };
        let me = self.rank;
        let len = local.len;
        // The peer's memory is checked again as the bytes move: its owner
        // may deregister (and free) it at any time.
        let status = |r: Result<(), KeyError>| match r {
            Ok(()) => WcStatus::Success,
            Err(e) => WcStatus::RemoteAccess(e),
        };
        if !big {
            // SAFETY: the local range was checked against a registered
            // region above; the remote one is checked under the domain's
            // lock while the bytes move.
            let mut copy =
                || unsafe { crate::copy::move_bytes(to as *mut u8, from as *const u8, len) };
            let r = dst.pd.access(rkey, raddr, len, rneed, &mut copy);
            if let Some((pos, v)) = imm {
                dst.deliver_imm(pos, v, me, r.is_ok());
            }
            return Ok(Some(done(status(r), len)));
        }
        self.outstanding[peer as usize] += 1;
        let shared = Arc::clone(&self.shared);
        let checker = Arc::clone(&self.shared);
        self.shared.engine.submit(Job {
            dst: to,
            src: from,
            len,
            guard: Some(Box::new(move |copy| {
                checker.hcas[peer as usize]
                    .pd
                    .access(rkey, raddr, len, rneed, copy)
            })),
            then: Box::new(move |r| {
                if let Some((pos, v)) = imm {
                    shared.hcas[peer as usize].deliver_imm(pos, v, me, r.is_ok());
                }
                shared.hcas[me as usize].complete(done(status(r), len));
            }),
        });
        Ok(None)
    }

    /// The NIC's own thread has operations of this port to finish: a waiter
    /// should leave it the core rather than spin.
    pub fn nic_working(&self) -> bool {
        // Entries held by SENDs the peer has not taken are not the NIC
        // thread's; the rest of the outstanding ones are.
        self.outstanding.iter().sum::<u32>() as usize > self.untaken_n
    }

    /// Waits until the NIC's thread has finished every operation this port
    /// posted, so the memory they name may be freed; their completions are
    /// polled and discarded. Dropping the port does this too.
    pub fn drain(&mut self) {
        let mut wcs = Vec::new();
        let mut spins = 0u32;
        while self.nic_working() {
            // An operation's completion is queued once its copy is done.
            self.poll_cq(&mut wcs);
            wcs.clear();
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// The next receive completion, if any.
    #[inline]
    pub fn poll_recv(&mut self) -> Option<RecvWc> {
        match self.own.ring.poll(self.head) {
            Some(wc) => {
                self.head += 1;
                self.held[wc.buf as usize] = true;
                self.taken_from = match self.taken_from {
                    NONE_TAKEN => wc.src as u32,
                    r if r == wc.src as u32 => r,
                    _ => MANY_TAKEN,
                };
                // Taken packets free their senders' entries. Told in batches
                // (every 16, and whenever the ring is empty), so a sender
                // polling for completions does not miss on this line per packet.
                if self.head.is_multiple_of(16) {
                    self.tell_taken();
                }
                Some(wc)
            }
            None => {
                if self.told != self.head {
                    self.tell_taken();
                }
                None
            }
        }
    }

    fn tell_taken(&mut self) {
        self.told = self.head;
        self.own.polled.store(self.head, Ordering::Release);
        // Taking frees the senders' entries: wake any that sleep on them
        // (only the one rank whose packets these were, if so).
        match std::mem::replace(&mut self.taken_from, NONE_TAKEN) {
            MANY_TAKEN => {
                for (r, h) in self.shared.hcas.iter().enumerate() {
                    if r != self.rank as usize {
                        h.fire_armed();
                    }
                }
            }
            r => {
                if let Some(h) = self.shared.hcas.get(r as usize) {
                    if r != self.rank as u32 {
                        h.fire_armed();
                    }
                }
            }
        }
    }

    /// The bytes of a received buffer, polled and not yet reposted; `None`
    /// for any other index (its memory belongs to the NIC or a sender).
    pub fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        if !self.held.get(buf as usize).copied().unwrap_or(false) {
            return None;
        }
        // SAFETY: `held`: this port polled the buffer and has not reposted
        // it, so no sender writes it; the borrow of `self` ends before
        // `repost` (which takes `&mut self`) can hand it back.
        Some(unsafe { self.own.ring.bytes(buf) })
    }

    /// Hands a polled buffer back to the NIC. `false` (and nothing done) for
    /// a buffer this port does not hold: giving back one still in the ring
    /// would let a sender overwrite a packet not yet read.
    #[inline]
    pub fn repost(&mut self, buf: u32) -> bool {
        match self.held.get_mut(buf as usize) {
            Some(h @ true) => *h = false,
            _ => return false,
        }
        self.reposts.repost(&self.own.ring, buf, self.head);
        true
    }

    /// Moves send-side completions into `out`: SENDs the peers have taken,
    /// and operations the NIC thread finished.
    #[inline]
    pub fn poll_cq(&mut self, out: &mut Vec<Wc>) -> usize {
        self.poll_cq_each(usize::MAX, |wc| out.push(wc))
    }

    /// As [`poll_cq`](Self::poll_cq), handing each of at most `max`
    /// completions to `f`; the rest stay queued for the next poll.
    #[inline]
    pub fn poll_cq_each(&mut self, max: usize, f: impl FnMut(Wc)) -> usize {
        // Most polls find nothing: that costs a few looks, not a call.
        if self.untaken_loud == 0 && !self.reap_due && self.own.cq_len.load(Ordering::Acquire) == 0
        {
            return 0;
        }
        self.poll_cq_found(max, f)
    }

    #[inline(never)]
    fn poll_cq_found(&mut self, max: usize, mut f: impl FnMut(Wc)) -> usize {
        let mut taken = 0;
        // Taken unsignalled SENDs free their entries as verbs frees them:
        // when a completion after them is polled (or the queue runs full).
        if self.untaken_loud > 0 || self.reap_due {
            self.reap_due = false;
            taken = self.reap_taken(max, &mut f);
        }
        let room = max - taken;
        let hca = &self.own;
        if room == 0 || hca.cq_len.load(Ordering::Acquire) == 0 {
            return taken;
        }
        let mut q = hca.cq.lock().unwrap_or_else(|e| e.into_inner());
        let (mut n, mut popped) = (0, 0);
        while n < room {
            let Some(&wc) = q.front() else {
                break;
            };
            // Unsignalled inline SENDs taken before complete first.
            if let Some(batch) = quiet_batch(&mut self.quiet[wc.qp as usize], wc.qp) {
                f(batch);
                n += 1;
                if n == room {
                    break;
                }
            }
            q.pop_front();
            popped += 1;
            self.outstanding[wc.qp as usize] -= 1;
            f(wc);
            n += 1;
        }
        hca.cq_len.fetch_sub(popped, Ordering::AcqRel);
        n + taken
    }

    fn reap_taken(&mut self, max: usize, f: &mut impl FnMut(Wc)) -> usize {
        let (mut n, mut popped, mut loud) = (0, 0, 0);
        for (peer, q) in self.untaken.iter_mut().enumerate() {
            if n == max {
                break;
            }
            let Some(&Untaken { pos: first, .. }) = q.front() else {
                continue;
            };
            let polled = self.shared.hcas[peer].polled.load(Ordering::Acquire);
            if first >= polled {
                continue;
            }
            let quiet = &mut self.quiet[peer];
            while let Some(&e) = q.front() {
                if e.pos >= polled || n == max {
                    break;
                }
                let mut wc = completion(e.wr_id, peer as u16, WcOp::Send)(WcStatus::Success, e.len);
                match e.inline {
                    Some(false) => {
                        // Completes with the next signalled SEND.
                        // (A count past u32::MAX, which no rank makes,
                        // saturates.)
                        *quiet = (quiet.0.saturating_add(e.count), e.wr_id);
                        q.pop_front();
                        popped += e.count as usize;
                        self.outstanding[peer] -= e.count;
                        continue;
                    }
                    Some(true) => wc.sends = wc.sends.saturating_add(std::mem::take(&mut quiet.0)),
                    None => {
                        if let Some(batch) = quiet_batch(quiet, peer as u16) {
                            f(batch);
                            n += 1;
                            if n == max {
                                break;
                            }
                        }
                    }
                }
                q.pop_front();
                popped += 1;
                loud += 1;
                self.outstanding[peer] -= 1;
                f(wc);
                n += 1;
            }
        }
        self.untaken_n -= popped;
        self.untaken_loud -= loud;
        // Stopped by `max`: the rest at the next poll.
        self.reap_due |= n == max;
        n
    }
}

/// The completion of the unsignalled inline SENDs a connection's peer has
/// taken (`quiet`: how many, and the last one's wr_id), if any; none are
/// left waiting after it.
fn quiet_batch(quiet: &mut (u32, u64), qp: u16) -> Option<Wc> {
    let (sends, wr_id) = std::mem::take(quiet);
    (sends > 0).then(|| Wc {
        sends,
        ..completion(wr_id, qp, WcOp::Send)(WcStatus::Success, 0)
    })
}

impl Drop for Port {
    /// Operations still on the NIC's thread name this rank's memory.
    fn drop(&mut self) {
        self.drain();
    }
}

#[cfg(test)]
mod tests;
