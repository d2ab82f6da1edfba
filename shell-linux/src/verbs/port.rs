//! A rank's verbs port: one RC queue pair per peer on the rank's shared
//! completion and receive queues, made the first time either end sends to
//! the other (the core's [`rmx_core::handshake`] over the datagram channel `oob::Oob`),
//! work requests built from the driver layer's [`Work`] one for one, and
//! registrations by `ibv_reg_mr`.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr;
use std::sync::Arc;

use ibverbs_sys as ib;
use rustc_hash::FxHashMap;
use rmx_core::handshake::{Action, Kind, Msg, State};
use rmx_core::{Caps, PostError, RdmaError, RdmaOp, RegError, WcResult};
use rmx_driver::ledger::{Ledger, Post};

use super::address::Address;
use super::batch::Batch;
use super::device::{poll, wc, Async, Device, Select, Sizes};
use super::oob::Oob;
use super::pool::Pool;
use super::qp::Qp;
use super::MAX_SGE;
use crate::clock::now_ns;
use crate::transport::{
    Completion, Counters, Events, FdEvents, Mr, Notifier, Recv, Sge, Transport, Work,
};

/// Completions taken from a queue per poll.
const WCS: usize = 32;

/// Work requests held for one doorbell, across all queue pairs (a full
/// batch is posted before another request is held).
const BATCH: usize = 64;

/// One connection: the queue pair and its posts not yet completed, in a
/// [`Ledger`] (each goes to the device with its place in the connection's
/// order as its work request id, so a completion names every unsignalled
/// post before it as done too).
struct Conn {
    qp: Qp,
    sent: Ledger<Vec<Post>>,
    /// The doorbell (`VerbsPort::rung`) after which this connection last
    /// posted.
    rung: u32,
    /// The queue pair went to the error state: every post is refused.
    down: bool,
}

/// The id kept for a post the port made itself (a drain's flush), whose
/// completion the core is not told of.
const OWN: u64 = u64::MAX;

impl Conn {
    /// Takes the posts up to device id `id` into `dones` (but the port's
    /// own), `id`'s with `result`; an error fails the connection. A run of
    /// successful inline sends to `peer`, the rank at the other end, goes
    /// as one completion. How many signalled ones it took; `None` for an
    /// id not outstanding.
    fn complete(
        &mut self,
        peer: u16,
        id: u64,
        result: WcResult,
        dones: &mut VecDeque<Completion>,
    ) -> Option<u32> {
        let taken = self.sent.complete_runs(id, result, peer, |wr_id, result| {
            if wr_id != OWN {
                dones.push_back(Completion { wr_id, result });
            }
        });
        self.down |= taken.is_some() && result.is_err();
        taken
    }
}

/// What a peer published.
struct Peer {
    gid: [u8; 16],
    mtu: u32,
    ud_qpn: u32,
    nonce: u32,
}

/// Empty polls between looks at the handshake channel while no connection
/// is being made (a request from a peer is answered within as many).
const OOB_EVERY: u32 = 32;

/// Nanoseconds between reads of the device's asynchronous events (a
/// system call each): a broken queue pair or a low receive queue is
/// acted on within this.
const ASYNC_EVERY_NS: u64 = 1_000_000;

pub struct VerbsPort {
    me: u16,
    ranks: u16,
    sizes: Sizes,
    /// This rank's secret, in its address and every handshake message.
    nonce: u32,
    peers: Vec<Peer>,
    conns: Vec<Option<Conn>>,
    states: Vec<State>,
    /// Peers whose connection is being made.
    unsettled: usize,
    polls: u32,
    /// When the asynchronous events were last read.
    async_at: u64,
    /// Spare receive buffers posted that the core has not been told of.
    spare_posted: u32,
    /// Peers by queue pair number, looked up per send completion: a
    /// multiply for a hash, not SipHash (the numbers are the device's, not
    /// a peer's choice).
    by_qpn: FxHashMap<u32, u16>,
    oob: Oob,
    counters: super::VerbsCounters,
    /// Registrations by the key handed out (the lkey of a local one, the
    /// rkey of one peers may access).
    mrs: HashMap<u32, *mut ib::ibv_mr>,
    /// rkey → lkey, where a device makes them differ.
    lkeys: HashMap<u32, u32>,
    /// Completions taken from the device and not yet handed to the core
    /// (one device completion may stand for several posts).
    dones: VecDeque<Completion>,
    /// Receive completions taken from the device, the next at `rx_at`,
    /// `rx_n` of them: handed out one per
    /// [`poll_recv`](rmx_driver::Port::poll_recv).
    rwcs: [ib::ibv_wc; WCS],
    rx_at: usize,
    rx_n: usize,
    /// Sends held for the doorbell.
    batch: Batch,
    /// Signalled posts not yet completed, over every connection: while
    /// none is, the send queue is polled only once in `OOB_EVERY` rounds
    /// (a waiting rank's loop is shorter by one provider call; only a
    /// failure gives an unsignalled send an entry).
    awaited: u32,
    /// Calls of `poll_cq`, for that once in `OOB_EVERY`.
    cq_polls: u32,
    /// Doorbells rung: a connection that posted since the last one holds
    /// its next send for the next.
    rung: u32,
    /// The receive queue gave some completions, fewer than a poll takes:
    /// the next call that finds nothing taken does not poll it again,
    /// which ends a progress round's receive loop without a second, empty
    /// provider call (a caller polling in a loop still reaches the queue
    /// every other call).
    rx_drained: bool,
    /// Where completions are polled into: kept, not zeroed per poll (a
    /// waiting rank polls in a tight loop; 1.5 KiB of zeroes each time was
    /// a tenth of its time under emulation).
    wcs: [ib::ibv_wc; WCS],
    events: Events,
    pool: Pool,
    dev: Arc<Device>,
}

// SAFETY: the raw registrations are only used through libibverbs, which is
// thread-safe; the port moves between threads whole.
unsafe impl Send for VerbsPort {}

/// The completion channel behind a verbs port's [`Events`].
struct Channel(Arc<Device>);

impl Notifier for Channel {
    fn arm(&self) {
        self.0.arm(false);
    }

    fn take(&self) {
        self.0.take_events();
    }
}

impl VerbsPort {
    /// The port's own bytes per peer, beside what the provider maps for a
    /// connected one ([`footprint`](super::footprint)): its slot, handshake
    /// state and published address, an entry of the queue-pair map,
    /// and the core's id of each post it may have outstanding.
    pub fn connection_bytes(sq_depth: u32) -> usize {
        std::mem::size_of::<Option<Conn>>()
            + std::mem::size_of::<State>()
            + std::mem::size_of::<Peer>()
            + std::mem::size_of::<(u32, u16)>()
            + 1
            + sq_depth as usize * std::mem::size_of::<Post>()
    }

    /// Rank `me`'s port of a job of `ranks`: the device opened, the
    /// receive pool posted, the handshake channel up; no connection yet.
    pub fn open(sel: &Select, sizes: Sizes, me: u16, ranks: u16) -> Result<VerbsPort, String> {
        let sizes = Sizes {
            peers: ranks as u32,
            ..sizes
        };
        let dev = Arc::new(Device::open(sel, sizes)?);
        let pool = Pool::new(&dev, sizes.rx_buffers, sizes.rx_spare, sizes.buf_size)?;
        // Without the event (a device that lacks it), the core's own
        // watermark still asks for the spare buffers.
        dev.arm_srq_limit(sizes.rx_low);
        let oob = Oob::open(&dev, ranks)?;
        let mut nonce = [0u8; 4];
        getrandom::fill(&mut nonce).map_err(|e| format!("no random bytes: {e}"))?;
        // SAFETY: dup(2) of the channel's descriptor, owned at once; the
        // copy shares the open file (and its O_NONBLOCK).
        let fd = unsafe { libc::dup(dev.channel_fd()) };
        if fd < 0 {
            return Err(format!("dup: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let watched = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let notifier: Arc<dyn Notifier> = Arc::new(Channel(Arc::clone(&dev)));
        let events = FdEvents::notified(watched, Some(notifier))
            .map(Events::Fd)
            .map_err(|e| format!("eventfd: {e}"))?;
        dev.arm(true);
        Ok(VerbsPort {
            me,
            ranks,
            sizes,
            nonce: u32::from_le_bytes(nonce),
            peers: Vec::new(),
            conns: (0..ranks).map(|_| None).collect(),
            states: vec![State::Idle; ranks as usize],
            unsettled: 0,
            polls: 0,
            async_at: 0,
            spare_posted: 0,
            by_qpn: FxHashMap::default(),
            oob,
            counters: super::VerbsCounters::default(),
            mrs: HashMap::new(),
            lkeys: HashMap::new(),
            dones: VecDeque::with_capacity(WCS),
            rwcs: [wc(); WCS],
            rx_at: 0,
            rx_n: 0,
            batch: Batch::new(BATCH, dev.facts.inline_max as usize),
            awaited: 0,
            cq_polls: 0,
            rung: 1,
            rx_drained: false,
            wcs: [wc(); WCS],
            events,
            pool,
            dev,
        })
    }

    /// What this rank publishes for the others to connect to.
    pub fn address(&self) -> Address {
        Address {
            gid: self.dev.facts.gid,
            mtu: self.dev.facts.mtu as u8,
            ud_qpn: self.oob.qpn(),
            nonce: self.nonce,
        }
    }

    /// Takes every rank's address; connects this rank to itself. The
    /// others connect when first addressed.
    pub fn connect(&mut self, all: &[Vec<u8>]) -> Result<(), String> {
        if all.len() != self.ranks as usize {
            return Err(format!(
                "rank {}: {} addresses for {} ranks",
                self.me,
                all.len(),
                self.ranks
            ));
        }
        self.peers = all
            .iter()
            .enumerate()
            .map(|(r, b)| {
                Address::decode(b)
                    .map(|a| Peer {
                        gid: a.gid,
                        mtu: a.mtu as u32,
                        ud_qpn: a.ud_qpn,
                        nonce: a.nonce,
                    })
                    .map_err(|e| format!("rank {r}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let me = self.me;
        let (qpn, psn) = self.queue_pair(me)?;
        self.join(me, qpn, psn)
    }

    /// Ranks 0 and 1 of a job of two, both in this process, on the device
    /// `sel` names, joined to each other directly (no handshake): tests,
    /// and the instruction count over an in-process device.
    pub fn pair(sel: &Select, sizes: Sizes) -> Result<(VerbsPort, VerbsPort), String> {
        let mut a = VerbsPort::open(sel, sizes, 0, 2)?;
        let mut b = VerbsPort::open(sel, sizes, 1, 2)?;
        let all = [a.address().encode(), b.address().encode()];
        a.connect(&all)?;
        b.connect(&all)?;
        let (qa, pa) = a.queue_pair(1)?;
        let (qb, pb) = b.queue_pair(0)?;
        a.join(1, qb, pb)?;
        b.join(0, qa, pa)?;
        Ok((a, b))
    }

    /// Connects to `peer`'s queue pair `qpn` (first PSN `psn`) without a
    /// handshake, where both ends know each other's numbers (a rank to
    /// itself; tests): sends may go at once.
    pub fn join(&mut self, peer: u16, qpn: u32, psn: u32) -> Result<(), String> {
        self.connect_to(peer, qpn, psn)?;
        self.states[peer as usize] = State::Ready { qpn };
        self.settle();
        Ok(())
    }

    /// This end's queue pair for `peer` (number, first PSN), made if not
    /// yet.
    pub fn queue_pair(&mut self, peer: u16) -> Result<(u32, u32), String> {
        let slot = self
            .conns
            .get_mut(peer as usize)
            .ok_or_else(|| format!("no rank {peer}"))?;
        if slot.is_none() {
            let qp = Qp::create(&self.dev, self.sizes.sq_depth)?;
            self.by_qpn.insert(qp.num(), peer);
            *slot = Some(Conn {
                qp,
                sent: Ledger::new(vec![Post::default(); self.sizes.sq_depth.max(1) as usize]),
                rung: 0,
                down: false,
            });
            self.counters.connections += 1;
        }
        let c = slot.as_ref().expect("made above");
        Ok((c.qp.num(), c.qp.psn))
    }

    /// Connects this end's queue pair for `peer` to the peer's `qpn`
    /// (first PSN `psn`); makes it first if need be.
    fn connect_to(&mut self, peer: u16, qpn: u32, psn: u32) -> Result<(), String> {
        self.queue_pair(peer)?;
        let p = self
            .peers
            .get(peer as usize)
            .ok_or_else(|| format!("no address of rank {peer}"))?;
        let (gid, mtu) = (p.gid, p.mtu.min(self.dev.facts.mtu));
        let c = self.conns[peer as usize].as_ref().expect("made above");
        c.qp.connect(&self.dev, gid, qpn, psn, mtu)
            .map_err(|e| format!("rank {}: to rank {peer}: {e}", self.me))
    }

    /// Sends handshake message `kind` to `peer`, naming this end's queue
    /// pair for it.
    fn tell(&mut self, peer: u16, kind: Kind) -> Result<(), String> {
        let (qpn, psn) = self.queue_pair(peer)?;
        let msg = Msg {
            kind,
            from: self.me,
            nonce: self.nonce,
            qpn,
            psn,
        };
        let p = &self.peers[peer as usize];
        let (gid, ud) = (p.gid, p.ud_qpn);
        self.oob.send(&self.dev, peer, gid, ud, &msg.encode())
    }

    /// Does what the handshake asks for `peer`; a failure fails the peer.
    fn act(&mut self, peer: u16, action: Action) {
        let r = match action {
            Action::Nothing => Ok(()),
            // Restart is unsupported: the state is failed already.
            Action::Restarted => Err(String::new()),
            Action::Ask => self.tell(peer, Kind::Req),
            Action::Answer => self.tell(peer, Kind::Rep),
            Action::Confirm => self.tell(peer, Kind::Rtu),
            Action::ConnectAndAnswer { qpn, psn } => self
                .connect_to(peer, qpn, psn)
                .and_then(|()| self.tell(peer, Kind::Rep)),
            Action::ConnectAndConfirm { qpn, psn } => self
                .connect_to(peer, qpn, psn)
                .and_then(|()| self.tell(peer, Kind::Rtu)),
        };
        if r.is_err() {
            self.states[peer as usize] = State::Failed;
        }
        self.settle();
    }

    fn settle(&mut self) {
        self.unsettled = self
            .states
            .iter()
            .filter(|s| matches!(s, State::Asked { .. } | State::Answered { .. }))
            .count();
    }

    /// Answers what came on the handshake channel.
    fn poll_handshakes(&mut self) {
        let mut got: [Option<Msg>; 8] = [None; 8];
        let mut n = 0;
        let forged = &mut self.counters.link.forged;
        self.oob.poll(&self.dev, |b| match Msg::decode(b) {
            Ok(m) if n < got.len() => {
                got[n] = Some(m);
                n += 1;
            }
            // Not a handshake message of rmx's: counted as not from a rank.
            _ => *forged += 1,
        });
        let now = now_ns();
        for m in got.into_iter().flatten() {
            let genuine = self
                .peers
                .get(m.from as usize)
                .is_some_and(|p| p.nonce == m.nonce);
            if !genuine || m.from == self.me {
                self.counters.link.forged += 1;
                continue;
            }
            let action = self.states[m.from as usize].on_msg(self.me, &m, now);
            self.act(m.from, action);
        }
    }

    /// Whether sends to `peer` may go: asks for the connection (again)
    /// if not, and looks for answers.
    // Once per post: inlined, a connection that is up costs one look.
    #[inline(always)]
    fn ready(&mut self, peer: u16) -> Result<(), PostError> {
        match self.states.get(peer as usize) {
            Some(State::Ready { .. }) => Ok(()),
            None | Some(State::Failed) => Err(PostError::Down),
            _ => self.connecting(peer),
        }
    }

    /// [`ready`](Self::ready) for a connection being made.
    #[inline(never)]
    fn connecting(&mut self, peer: u16) -> Result<(), PostError> {
        let action = self.states[peer as usize].want(now_ns());
        self.act(peer, action);
        self.poll_handshakes();
        match self.states[peer as usize] {
            State::Ready { .. } => Ok(()),
            State::Failed => Err(PostError::Down),
            _ => Err(PostError::Busy),
        }
    }

    /// Acts on the device's asynchronous events: a low receive queue gets
    /// the spare buffers at once (before senders meet receiver-not-ready),
    /// a queue pair in error fails its connection (posts to it are `Down`
    /// from now on, which a waiting rank's keepalive meets), a broken
    /// device every connection.
    fn poll_async(&mut self) {
        let mut got = Vec::new();
        self.dev.take_async(|e| got.push(e));
        for e in got {
            match e {
                Async::SrqLimit => {
                    self.counters.srq_limit += 1;
                    self.pool.flush(&self.dev);
                    self.spare_posted += self.pool.post_spare(&self.dev);
                }
                Async::QpFailed(qpn) => {
                    self.counters.async_errors += 1;
                    let peer = self.by_qpn.get(&qpn).copied();
                    if let Some(c) = peer
                        .and_then(|p| self.conns.get_mut(p as usize))
                        .and_then(Option::as_mut)
                    {
                        c.down = true;
                    }
                }
                Async::DeviceFailed => {
                    self.counters.async_errors += 1;
                    for c in self.conns.iter_mut().flatten() {
                        c.down = true;
                    }
                }
                Async::Other => {}
            }
        }
    }

    /// Queue pairs this port has made (one per peer it talked with).
    pub fn connections(&self) -> usize {
        self.conns.iter().flatten().count()
    }

    /// Everything this port counted, its own kinds beside every
    /// transport's.
    pub fn verbs_counters(&self) -> super::VerbsCounters {
        self.counters
    }

    /// The device as it was opened.
    pub fn facts(&self) -> &super::device::Facts {
        &self.dev.facts
    }

    fn lkey(&self, key: u32) -> u32 {
        match self.lkeys.is_empty() {
            true => key,
            false => self.lkeys.get(&key).copied().unwrap_or(key),
        }
    }

    /// A gather entry as verbs takes it: 32-bit lengths, so a longer one
    /// is refused rather than cut.
    fn sge(&self, s: &Sge) -> Result<ib::ibv_sge, PostError> {
        Ok(ib::ibv_sge {
            addr: s.addr as u64,
            length: u32::try_from(s.len).map_err(|_| PostError::Unsupported)?,
            lkey: self.lkey(s.key),
        })
    }

    unsafe fn reg(&mut self, addr: usize, len: usize, remote: bool) -> Result<Mr, RegError> {
        use ib::ibv_access_flags as A;
        let access = match remote {
            true => {
                A::IBV_ACCESS_LOCAL_WRITE | A::IBV_ACCESS_REMOTE_WRITE | A::IBV_ACCESS_REMOTE_READ
            }
            false => A::IBV_ACCESS_LOCAL_WRITE,
        };
        // SAFETY: the caller keeps the range valid until it is deregistered.
        let mr = unsafe { ib::ibv_reg_mr(self.dev.pd, addr as *mut _, len, access.0 as i32) };
        if mr.is_null() {
            return Err(RegError::NoResources);
        }
        // SAFETY: a registration made just now.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        let key = if remote { rkey } else { lkey };
        if self.mrs.contains_key(&key) {
            // SAFETY: registered just now, used by nothing.
            unsafe { ib::ibv_dereg_mr(mr) };
            return Err(RegError::NoResources);
        }
        self.mrs.insert(key, mr);
        if key != lkey {
            self.lkeys.insert(key, lkey);
        }
        Ok(Mr { addr, len, key })
    }

    /// Posts `wr` (gather list `sges`; an inline send's bytes `parts`) on
    /// `peer`'s queue pair, or holds it for the doorbell while the queue
    /// pair has work outstanding: the first send of a burst leaves at
    /// once, the rest together. A solicited send (a rendezvous control
    /// packet, which a peer's progress thread may wait for) rings at once.
    fn post_wr(
        &mut self,
        peer: u16,
        wr: &mut ib::ibv_send_wr,
        sges: &mut [ib::ibv_sge; MAX_SGE],
        parts: &[&[u8]],
    ) -> Result<(), PostError> {
        self.ready(peer)?;
        let rung = self.rung;
        let c = self
            .conns
            .get_mut(peer as usize)
            .and_then(Option::as_mut)
            .ok_or(PostError::Down)?;
        if c.down {
            return Err(PostError::Down);
        }
        if c.sent.is_full() {
            return Err(PostError::Busy);
        }
        let held = c.sent.awaited() > 0 || c.rung == rung;
        c.rung = rung;
        let post = Post {
            wr_id: wr.wr_id,
            signalled: wr.send_flags & ib::ibv_send_flags::IBV_SEND_SIGNALED.0 != 0,
        };
        if held {
            return self.hold(peer, wr, sges, parts, post);
        }
        wr.wr_id = c.sent.next_id();
        wr.sg_list = sges.as_mut_ptr();
        let mut bad = ptr::null_mut();
        let rc = post_send(&self.dev, &c.qp, wr, &mut bad);
        if rc == 0 {
            c.sent.note(post);
            self.awaited += u32::from(post.signalled);
            return Ok(());
        }
        match rc {
            libc::ENOMEM => Err(PostError::Busy),
            libc::EINVAL => Err(PostError::Unsupported),
            _ => Err(PostError::Down),
        }
    }

    /// Holds `wr`, the post `post` to `peer` (whose connection is up and
    /// has room), for the doorbell; a full batch goes first.
    fn hold(
        &mut self,
        peer: u16,
        wr: &mut ib::ibv_send_wr,
        sges: &mut [ib::ibv_sge; MAX_SGE],
        parts: &[&[u8]],
        post: Post,
    ) -> Result<(), PostError> {
        if self.batch.is_full() {
            self.flush();
        }
        let c = self.conns[peer as usize].as_mut().expect("found by the caller");
        if c.down {
            // The flush found the connection broken.
            return Err(PostError::Down);
        }
        wr.wr_id = c.sent.next_id();
        c.sent.note(post);
        self.awaited += u32::from(post.signalled);
        self.batch.hold(peer, wr, sges, parts);
        self.counters.batched += 1;
        if wr.send_flags & ib::ibv_send_flags::IBV_SEND_SOLICITED.0 != 0 {
            self.flush();
        }
        Ok(())
    }

    /// Posts the held sends, if any: a doorbell with none held (most of a
    /// waiting rank's rounds) costs only the look.
    #[inline(always)]
    fn flush(&mut self) {
        if !self.batch.is_empty() {
            self.flush_held();
        }
    }

    /// Posts the held sends. One the provider refuses fails its
    /// connection, and completes (for the core) as `Down`, with every
    /// post held behind it.
    #[inline(never)]
    fn flush_held(&mut self) {
        // The first request not posted to each peer that had one refused
        // (its connection's later ones were held after it).
        let mut refused = [(0u16, 0u64); BATCH];
        let mut n = 0;
        let (dev, conns) = (&self.dev, &self.conns);
        let counters = &mut self.counters;
        self.batch.flush(
            |peer, first| {
                counters.doorbells += 1;
                let mut bad = ptr::null_mut();
                match conns.get(peer as usize).and_then(Option::as_ref) {
                    // SAFETY: a list linked by the batch, whose requests
                    // and gather lists live through the call.
                    Some(c) => (post_send(dev, &c.qp, unsafe { &mut *first }, &mut bad), bad),
                    None => (libc::ENOTCONN, ptr::null_mut()),
                }
            },
            |peer, id| {
                if !refused[..n].iter().any(|&(p, _)| p == peer) {
                    refused[n] = (peer, id);
                    n += 1;
                }
            },
        );
        for &(peer, id) in &refused[..n] {
            let Some(c) = self.conns.get_mut(peer as usize).and_then(Option::as_mut) else {
                continue;
            };
            c.down = true;
            let dones = &mut self.dones;
            let signalled = c.sent.unpost_from(id, |p| {
                if p.wr_id != OWN {
                    dones.push_back(Completion {
                        wr_id: p.wr_id,
                        result: Err(RdmaError::Down),
                    });
                }
            });
            self.awaited -= signalled;
        }
    }

    /// Handshakes of connections being set up, and now and then the
    /// device's asynchronous events.
    #[inline(never)]
    fn poll_out_of_band(&mut self) {
        self.poll_handshakes();
        let now = now_ns();
        if now.saturating_sub(self.async_at) >= ASYNC_EVERY_NS {
            self.async_at = now;
            self.poll_async();
        }
    }

    /// Takes up to `WCS` receive completions into `rwcs`; whether there
    /// were any.
    #[inline(never)]
    fn poll_receives(&mut self) -> bool {
        let n = poll(&self.dev, self.dev.rcq, &mut self.rwcs);
        self.rx_drained = n > 0 && n < WCS;
        self.rx_at = 0;
        self.rx_n = n;
        n > 0
    }

    /// The packet receive completion `w` brought, or `None` for a failed
    /// or unexpected one (its buffer goes straight back; the packet is
    /// counted).
    #[inline(always)]
    fn received(&mut self, w: ib::ibv_wc) -> Option<Recv> {
        let buf = w.wr_id() as u32;
        if self.unsettled > 0 && w.is_valid() {
            self.heard_on(w.qp_num);
        }
        let recv = match (w.is_valid(), w.opcode()) {
            (true, ib::ibv_wc_opcode::IBV_WC_RECV) => self
                .pool
                .filled(buf, w.len() as u32)
                .then_some(Recv { buf, imm: None }),
            (true, ib::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM) => {
                self.pool.filled(buf, 0).then_some(Recv {
                    buf,
                    imm: Some(u32::from_be(w.imm_data)),
                })
            }
            _ => None,
        };
        if recv.is_none() {
            self.refused(buf);
        }
        recv
    }

    /// A packet arrived on queue pair `qpn` while connections are being
    /// made: its peer's connection is up.
    #[inline(never)]
    fn heard_on(&mut self, qpn: u32) {
        if let Some(&p) = self.by_qpn.get(&qpn) {
            self.states[p as usize].heard();
            self.settle();
        }
    }

    /// A receive completion that brought no packet: its buffer goes
    /// straight back, and it is counted.
    #[inline(never)]
    fn refused(&mut self, buf: u32) {
        self.counters.link.length += 1;
        if self.pool.filled(buf, 0) {
            self.pool.repost(&self.dev, buf);
        }
    }

    /// Takes up to `want` entries from the send completion queue into
    /// `dones`, each with the unsignalled posts it completes before it;
    /// an error fails the connection (its queue pair is in the error
    /// state).
    fn poll_sends(&mut self, want: usize) {
        let n = poll(&self.dev, self.dev.scq, &mut self.wcs[..want.clamp(1, WCS)]);
        for i in 0..n {
            let w = self.wcs[i];
            let result = match w.error() {
                None => Ok(()),
                Some((status, _)) => Err(wc_error(status)),
            };
            let dones = &mut self.dones;
            let taken = self.by_qpn.get(&w.qp_num).and_then(|&p| {
                let c = self.conns.get_mut(p as usize)?.as_mut()?;
                c.complete(p, w.wr_id(), result, dones)
            });
            match taken {
                Some(n) => self.awaited = self.awaited.saturating_sub(n),
                None => self.counters.stray_completions += 1,
            }
        }
    }

    /// [`poll_cq`](rmx_driver::Port::poll_cq) once something may be
    /// there: sends' completions (`due`), then what is kept, into `out`.
    #[inline(never)]
    fn poll_cq_due(&mut self, out: &mut [Completion], due: bool) -> usize {
        if due && self.dones.len() < out.len() {
            self.poll_sends(out.len() - self.dones.len());
        }
        let n = out.len().min(self.dones.len());
        for o in &mut out[..n] {
            *o = self.dones.pop_front().expect("counted above");
        }
        n
    }

    /// Posts a signalled, empty RDMA write behind every connection's
    /// unsignalled sends, so that they complete: nothing else would
    /// before the queue pair goes.
    fn post_flushes(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            // Unsignalled sends at the back: only a later post completes them.
            if c.down || !c.sent.quiet_tail() || c.sent.is_full() {
                continue;
            }
            let mut wr = ib::ibv_send_wr {
                wr_id: c.sent.next_id(),
                opcode: ib::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
                send_flags: ib::ibv_send_flags::IBV_SEND_SIGNALED.0,
                num_sge: 0,
                ..Default::default()
            };
            let mut bad = ptr::null_mut();
            if post_send(&self.dev, &c.qp, &mut wr, &mut bad) == 0 {
                c.sent.note(Post {
                    wr_id: OWN,
                    signalled: true,
                });
                self.awaited += 1;
            }
        }
    }
}

/// `ibv_post_send` (an inline in verbs.h: the provider's op).
fn post_send(
    dev: &Device,
    qp: &Qp,
    wr: &mut ib::ibv_send_wr,
    bad: &mut *mut ib::ibv_send_wr,
) -> i32 {
    // SAFETY: the provider's op on a live queue pair; the caller keeps the
    // work requests and their gather lists alive through the call, and
    // every address in them is checked against its key by the device.
    unsafe {
        match (*dev.ctx).ops.post_send {
            Some(f) => f(qp.qp, wr, bad),
            None => libc::EOPNOTSUPP,
        }
    }
}

/// A failed completion in the core's terms: a key or bound check (nothing
/// moved at the target), or the connection gone.
fn wc_error(status: ib::ibv_wc_status::Type) -> RdmaError {
    use ib::ibv_wc_status as S;
    match status {
        S::IBV_WC_LOC_PROT_ERR
        | S::IBV_WC_LOC_ACCESS_ERR
        | S::IBV_WC_REM_ACCESS_ERR
        | S::IBV_WC_REM_INV_REQ_ERR
        | S::IBV_WC_LOC_LEN_ERR => RdmaError::Access,
        _ => RdmaError::Down,
    }
}

impl rmx_driver::Port for VerbsPort {
    fn caps(&self) -> Caps {
        Caps {
            rdma_write: true,
            rdma_read: true,
            write_imm: true,
            max_transfer: self.dev.facts.max_msg.min(1 << 30),
            inline_max: self.dev.facts.inline_max,
            send_queue: self.sizes.sq_depth,
            rx_buffers: self.sizes.rx_buffers,
            mtu: self.sizes.buf_size,
            lossy: false,
            cheap_gather: false,
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.reg(addr, len, false) }
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.reg(addr, len, true) }
    }

    fn deregister(&mut self, mr: Mr) {
        if let Some(m) = self.mrs.remove(&mr.key) {
            self.lkeys.remove(&mr.key);
            // SAFETY: registered here, deregistered once.
            unsafe { ib::ibv_dereg_mr(m) };
        }
    }

    // Each caller posts one kind of work: inlined, the match folds to
    // that kind and the post costs no call of its own.
    #[inline(always)]
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        let mut sges = [ib::ibv_sge::default(); MAX_SGE];
        let mut parts: [&[u8]; 2] = [&[], &[]];
        let mut wr = ib::ibv_send_wr {
            wr_id,
            ..Default::default()
        };
        use ib::ibv_wr_opcode as O;
        let mut signalled = true;
        match work {
            Work::Send { sges: s, solicited } => {
                if s.len() > MAX_SGE {
                    return Err(PostError::Unsupported);
                }
                for (d, s) in sges.iter_mut().zip(s) {
                    *d = self.sge(s)?;
                }
                wr.num_sge = s.len() as i32;
                wr.opcode = O::IBV_WR_SEND;
                if solicited {
                    wr.send_flags = ib::ibv_send_flags::IBV_SEND_SOLICITED.0;
                }
            }
            Work::Inline { head, body, signal } => {
                if head.len() + body.len() > self.dev.facts.inline_max as usize {
                    return Err(PostError::Unsupported);
                }
                parts = [head, body];
                let mut n = 0;
                for p in parts.iter().filter(|p| !p.is_empty()) {
                    sges[n] = ib::ibv_sge {
                        addr: p.as_ptr() as u64,
                        length: p.len() as u32,
                        lkey: 0,
                    };
                    n += 1;
                }
                wr.num_sge = n as i32;
                wr.opcode = O::IBV_WR_SEND;
                wr.send_flags = ib::ibv_send_flags::IBV_SEND_INLINE.0;
                signalled = signal;
            }
            Work::Rdma { op, local, remote } => {
                sges[0] = self.sge(&local)?;
                wr.num_sge = 1;
                wr.opcode = match op {
                    RdmaOp::Write => O::IBV_WR_RDMA_WRITE,
                    RdmaOp::Read => O::IBV_WR_RDMA_READ,
                };
                wr.wr.rdma = ib::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: remote.addr,
                    rkey: remote.key.0,
                };
            }
            Work::WriteImm { local, remote, imm } => {
                sges[0] = self.sge(&local)?;
                wr.num_sge = 1;
                wr.opcode = O::IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.wr.rdma = ib::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: remote.addr,
                    rkey: remote.key.0,
                };
                wr.__bindgen_anon_1.imm_data = imm.to_be();
            }
        }
        if signalled {
            wr.send_flags |= ib::ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        self.post_wr(peer, &mut wr, &mut sges, &parts)?;
        self.counters.unsignalled += u64::from(!signalled);
        Ok(None)
    }

    // Every progress round calls it at least once: inlined, with the
    // device's poll and the occasional out-of-band work out of line.
    #[inline]
    fn poll_recv(&mut self) -> Option<Recv> {
        self.polls = self.polls.wrapping_add(1);
        if self.unsettled > 0 || self.polls.is_multiple_of(OOB_EVERY) {
            self.poll_out_of_band();
        }
        loop {
            if self.rx_at < self.rx_n {
                let w = self.rwcs[self.rx_at];
                self.rx_at += 1;
                if let Some(r) = self.received(w) {
                    return Some(r);
                }
                continue;
            }
            if std::mem::take(&mut self.rx_drained) || !self.poll_receives() {
                return None;
            }
        }
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        self.pool.bytes(buf)
    }

    /// The spare buffers, posted now or at the queue's limit event.
    fn rx_pool_low(&mut self, _free: u32) -> u32 {
        self.pool.flush(&self.dev);
        let n = self.spare_posted + self.pool.post_spare(&self.dev);
        self.spare_posted = 0;
        n
    }

    fn repost(&mut self, buf: u32) -> bool {
        self.pool.repost(&self.dev, buf)
    }

    #[inline]
    fn doorbell(&mut self) {
        self.flush();
        self.rung = self.rung.wrapping_add(1);
    }

    // Every progress round calls it: inlined, a round with nothing
    // signalled in flight and nothing kept pays no call.
    #[inline]
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        self.cq_polls = self.cq_polls.wrapping_add(1);
        let due = self.awaited > 0 || self.cq_polls.is_multiple_of(OOB_EVERY);
        if !due && self.dones.is_empty() {
            return 0;
        }
        self.poll_cq_due(out, due)
    }

    /// Polls until every connection's posts have completed (or failed),
    /// keeping the completions for the core; unsignalled sends are made
    /// to complete by a signalled post behind them.
    fn drain(&mut self) {
        self.flush();
        self.post_flushes();
        let start = std::time::Instant::now();
        let idle = |p: &VerbsPort| {
            p.conns
                .iter()
                .flatten()
                .all(|c| c.sent.is_empty() || c.down)
        };
        while !idle(self) && start.elapsed() < std::time::Duration::from_secs(10) {
            self.poll_sends(WCS);
        }
    }
}

impl Transport for VerbsPort {
    fn rank(&self) -> u16 {
        self.me
    }

    fn events(&self) -> Events {
        self.events.clone()
    }

    fn counters(&self) -> Counters {
        self.counters.link
    }
}

impl Drop for VerbsPort {
    fn drop(&mut self) {
        // Queue pairs first: nothing reads or writes a registration after.
        self.conns.clear();
        for (_, m) in self.mrs.drain() {
            // SAFETY: registered here, deregistered once.
            unsafe { ib::ibv_dereg_mr(m) };
        }
    }
}
