//! `eth`: rmx packets in raw Ethernet frames (as Open-MX carries MX), one
//! AF_PACKET socket per endpoint. The wire is lossy: the core's reliability
//! layer (sequences, acknowledgements, retransmission) carries everything,
//! and PULL moves large messages, one frame per reply.
//!
//! Sends are gathered by the socket call straight from the memory the core
//! names (a bounce slot's header, a user buffer). A post queues the frame;
//! the queued frames leave together when the rank rings
//! [`Port::doorbell`](crate::transport::Port::doorbell) (at the end of a progress round, in a wait or
//! test) or when the batch is full: one `sendmsg(2)` for a lone frame, one
//! `sendmmsg(2)` for more. Each completes at the completion poll after it
//! left, so a window of sends holds the connection's send entries meanwhile
//! and the core packs the messages that find none free into one frame
//! (coalescing).
//!
//! With [`EthOpts::module`] the frames go through rmx.ko instead of a
//! socket: the module routes each to its endpoint in the kernel (checking
//! that a frame sent comes from the endpoint sending it), one request per
//! frame; there is no ring and no local path then. A registered user
//! buffer is then a region of the module, found in a [`RegionCache`]
//! (declared once, pinned by the module on demand): a frame whose data
//! lies in one leaves with that data copied by the module from the
//! region's pinned pages, never by this process.
//!
//! Receives come through a PACKET_MMAP ring by default ([`RxRing`]), else
//! in batches of one `recvmmsg(2)`, into a pool of frame buffers that the
//! core holds and gives back as it does `loop`'s. Every frame is checked
//! before the core sees it; frames that are short, of another version, for
//! another endpoint or from no rank of the job are counted ([`Counters`])
//! and dropped. Faults (loss, duplication, reordering) can be injected on
//! receive where the kernel has no netem.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::AsRawFd;

use rmx_core::wire::frame::{self, EthAddr, Frame, FrameError, SealKey, Sealer, FRAME_HEADER_LEN};
use rmx_core::{Caps, PostError, RegError};

use super::local::{self, LocalError, LocalPath};
use super::regs::{Reg, Regs};
use super::ring::RxRing;
use super::RawSocket;
use crate::kmod::cache::{Mode, RegionCache};
use crate::kmod::{Desc, Device};
use crate::transport::{Completion, Counters, Events, FdEvents, Mr, Recv, Sge, Transport, Work};

/// Frames one system call moves at most.
const BATCH: usize = 32;
/// Gather entries a frame has at most besides its Ethernet header.
const MAX_SGES: usize = 3;

/// How an `eth` endpoint is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthOpts {
    /// rmx's EtherType on this network (every rank must use the same).
    pub ethertype: u16,
    /// Frame buffers of the receive pool (the core's `rx_buffers`).
    pub rx_buffers: u32,
    /// Send straight to the driver, past the qdisc, unless the interface
    /// has a qdisc set on purpose (netem, a shaper): that one is kept.
    pub bypass_qdisc: bool,
    /// Largest packet a frame carries, below the interface's MTU if that is
    /// larger (loopback's 64 KiB): bounds the receive pool's memory.
    pub max_packet: u32,
    /// Frames sent by one `sendmmsg` at most (1: each frame at its post).
    pub batch: u32,
    /// Receive through a PACKET_MMAP ring (polling an empty ring costs no
    /// system call) rather than `recvmmsg`.
    pub rx_ring: bool,
    /// Frames through rmx.ko (`/dev/rmx`) rather than an AF_PACKET socket.
    pub module: bool,
    /// Through rmx.ko: when the module pins a registered buffer's pages.
    pub pinning: Mode,
    /// Faults the job injects on receive (as a [`crate::transport::Faulty`]
    /// decorator around the port; the port itself injects none).
    pub faults: crate::transport::Faults,
}

impl Default for EthOpts {
    fn default() -> Self {
        EthOpts {
            ethertype: frame::ETHERTYPE,
            rx_buffers: 512,
            bypass_qdisc: true,
            max_packet: 16384,
            batch: 16,
            rx_ring: true,
            module: false,
            pinning: Mode::Decoupled,
            faults: crate::transport::Faults::default(),
        }
    }
}

/// Flushes of a port whose memory is being given back, 50 µs apart at
/// least, before the frames its socket refuses are given up as lost.
const DRAIN_TRIES: u32 = 1000;

/// A frame posted and not yet handed to the socket.
#[derive(Clone, Copy)]
struct Queued {
    wr_id: u64,
    head: [u8; FRAME_HEADER_LEN],
    sges: [Sge; MAX_SGES],
    n: u8,
    /// The destination rank, when it is on this host ([`LocalPath`]).
    local: Option<u16>,
    /// Through rmx.ko: the last entry's registration key, module region
    /// and offset there, when the module sends its bytes from the region.
    region: Option<(u32, Desc, u64)>,
}

impl Queued {
    /// No gather entries at all.
    const NO_IOVECS: [libc::iovec; MAX_SGES + 1] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_SGES + 1];

    /// The frame's header then its gather entries, for the socket.
    fn iovecs(&self) -> [libc::iovec; MAX_SGES + 1] {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_SGES + 1];
        iov[0] = libc::iovec {
            iov_base: self.head.as_ptr() as *mut libc::c_void,
            iov_len: FRAME_HEADER_LEN,
        };
        for (v, s) in iov[1..].iter_mut().zip(&self.sges[..self.n as usize]) {
            *v = libc::iovec {
                iov_base: s.addr as *mut libc::c_void,
                iov_len: s.len,
            };
        }
        iov
    }
}

/// What moves a port's frames.
enum Link {
    /// An AF_PACKET socket of the port's own.
    Socket(RawSocket),
    /// rmx.ko, bound to the interface as the port's endpoint, and the
    /// regions of the buffers registered; a frame is gathered into
    /// `scratch` to leave, but for data the module takes from a region.
    Module {
        cache: RegionCache<Device>,
        scratch: Vec<u8>,
    },
}

/// Regions a port through rmx.ko keeps declared at most (the module's
/// table holds 256 per context).
const CACHED_REGIONS: usize = 255;

/// The largest packet a frame carries on an interface of MTU `mtu`, and
/// the bytes of one receive buffer.
fn sizes(iface: &str, mtu: u32, opts: &EthOpts) -> io::Result<(u32, usize)> {
    let max_packet = frame::max_packet(mtu)
        .min(opts.max_packet)
        .min(u16::MAX as u32);
    if (max_packet as usize) < rmx_core::wire::HEADER_LEN + 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{iface}: MTU {mtu} leaves {max_packet} bytes per packet; rmx needs {}",
                rmx_core::wire::HEADER_LEN + 64
            ),
        ));
    }
    let buf_size = (FRAME_HEADER_LEN + max_packet as usize).div_ceil(64) * 64;
    Ok((max_packet, buf_size))
}

/// Appends the bytes of `sges` to `out`.
///
/// Every entry is one [`Regs::check`] found inside a registration, which
/// keeps it readable until the frame naming it completes.
fn gather(out: &mut Vec<u8>, sges: &[Sge]) {
    for s in sges {
        // SAFETY: the entries were checked, as said above.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len) });
    }
}

/// One endpoint on one interface.
pub struct EthPort {
    link: Link,
    opts: EthOpts,
    me: EthAddr,
    rank: u16,
    /// The job's secret: frames without its seal are dropped.
    key: SealKey,
    /// Addresses by rank, and ranks by address.
    peers: Vec<EthAddr>,
    ranks: HashMap<EthAddr, u16>,
    /// Largest packet: the interface's MTU less the rmx header, capped.
    max_packet: u32,
    /// The receive pool: `buf_size` bytes per buffer, each a whole frame.
    rx: Vec<u8>,
    buf_size: usize,
    /// Packet length of each buffer, and whether the core holds it.
    lens: Vec<u32>,
    held: Vec<bool>,
    free: Vec<u32>,
    /// Buffers with a checked packet, not yet polled.
    ready: VecDeque<u32>,
    /// Registered ranges; a gather entry must lie in its key's.
    regs: Regs,
    queue: Vec<Queued>,
    done: Vec<Completion>,
    ring: Option<RxRing>,
    /// Frames to and from endpoints on this interface of this host.
    local: Option<LocalPath>,
    counters: Counters,
    events: FdEvents,
}

impl EthPort {
    /// Opens endpoint `endpoint` on `iface`. The port becomes a rank of a
    /// job with [`connect`](Self::connect), once every rank's
    /// [`addr`](Self::addr) is known. Needs CAP_NET_RAW.
    pub fn open(iface: &str, endpoint: u16, opts: EthOpts) -> io::Result<EthPort> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if opts.rx_buffers < 2 || opts.rx_buffers > 1 << 16 {
            return Err(bad(format!(
                "{} receive buffers: give 2 to 65536",
                opts.rx_buffers
            )));
        }
        if opts.batch == 0 || opts.batch as usize > BATCH {
            return Err(bad(format!("batch {}: give 1 to {BATCH}", opts.batch)));
        }
        if opts.module {
            return EthPort::through_module(iface, endpoint, opts);
        }
        let bypass = opts.bypass_qdisc && !super::qdisc::must_keep(iface);
        let sock = RawSocket::open(iface, opts.ethertype, bypass)?;
        sock.only_endpoint(endpoint)?;
        let (max_packet, buf_size) = sizes(iface, sock.mtu(), &opts)?;
        let n = opts.rx_buffers as usize;
        // Room for a window of full frames in the kernel while the core is busy.
        sock.set_buffers((buf_size * n).clamp(1 << 20, 64 << 20));
        let me = EthAddr {
            mac: sock.mac(),
            endpoint,
        };
        let local = if local::is_local(me.mac, me.mac) {
            Some(LocalPath::open(opts.ethertype, me).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("endpoint {endpoint}'s local path: {e} (is another job using it?)"),
                )
            })?)
        } else {
            None
        };
        let events = match &local {
            Some(l) => FdEvents::new(std::sync::Arc::new(local::either(
                sock.as_raw_fd(),
                l.raw_fd(),
            )?))?,
            None => FdEvents::new(sock.fd())?,
        };
        let ring = if opts.rx_ring {
            Some(RxRing::new(
                sock.as_raw_fd(),
                FRAME_HEADER_LEN + max_packet as usize,
                n,
            )?)
        } else {
            None
        };
        EthPort::new(
            Link::Socket(sock),
            me,
            opts,
            (max_packet, buf_size),
            events,
            ring,
            local,
        )
    }

    /// [`open`](Self::open) with the frames through rmx.ko.
    fn through_module(iface: &str, endpoint: u16, opts: EthOpts) -> io::Result<EthPort> {
        let dev = Device::open()?;
        let bound = dev.bind(iface, endpoint, opts.ethertype).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("binding endpoint {endpoint} of rmx.ko to {iface}: {e}"),
            )
        })?;
        let sizes = sizes(iface, bound.mtu, &opts)?;
        let events = FdEvents::when(std::sync::Arc::new(dev.poll_fd()?), libc::POLLRDBAND)?;
        let me = EthAddr {
            mac: bound.mac,
            endpoint,
        };
        let scratch = Vec::with_capacity(FRAME_HEADER_LEN + sizes.0 as usize);
        let cache = RegionCache::new(dev, opts.pinning, CACHED_REGIONS)?;
        EthPort::new(
            Link::Module { cache, scratch },
            me,
            opts,
            sizes,
            events,
            None,
            None,
        )
    }

    fn new(
        link: Link,
        me: EthAddr,
        opts: EthOpts,
        (max_packet, buf_size): (u32, usize),
        events: FdEvents,
        ring: Option<RxRing>,
        local: Option<LocalPath>,
    ) -> io::Result<EthPort> {
        let n = opts.rx_buffers as usize;
        Ok(EthPort {
            ring,
            local,
            me,
            link,
            opts,
            rank: 0,
            // No frame is taken before the job's key arrives.
            key: super::new_key().map_err(io::Error::other)?,
            peers: Vec::new(),
            ranks: HashMap::new(),
            max_packet,
            rx: vec![0u8; buf_size * n],
            buf_size,
            lens: vec![0; n],
            held: vec![false; n],
            free: (0..n as u32).rev().collect(),
            ready: VecDeque::new(),
            regs: Regs::default(),
            queue: Vec::with_capacity(BATCH),
            done: Vec::new(),
            counters: Counters::default(),
            events,
        })
    }

    /// This endpoint's address, for the bootstrap to pass to the others.
    pub fn addr(&self) -> EthAddr {
        self.me
    }

    /// Largest packet a frame of this port carries.
    pub fn max_packet(&self) -> u32 {
        self.max_packet
    }

    /// What this port tells the job's other ranks: its address, and the
    /// random key it was opened with, offered for the job's frames (the
    /// job seals under rank 0's).
    pub fn address(&self) -> Vec<u8> {
        let mut b = self.me.to_bytes().to_vec();
        b.extend_from_slice(&self.key.to_bytes());
        b
    }

    /// Makes this port rank `rank` of the job whose ranks told `all` (by
    /// rank, each what [`address`](Self::address) gave).
    pub fn join(&mut self, rank: u16, all: &[Vec<u8>]) -> Result<(), String> {
        const LEN: usize = EthAddr::LEN + SealKey::LEN;
        let mut addrs = Vec::with_capacity(all.len());
        let mut key = None;
        for (r, b) in all.iter().enumerate() {
            let b: &[u8; LEN] = b.as_slice().try_into().map_err(|_| {
                format!(
                    "rank {rank}: rank {r} has no eth address ({} bytes)",
                    b.len()
                )
            })?;
            let (a, k) = b.split_at(EthAddr::LEN);
            addrs.push(EthAddr::from_bytes(a.try_into().expect("8 bytes")));
            key.get_or_insert(SealKey::from_bytes(k.try_into().expect("16 bytes")));
        }
        let key = key.ok_or("a job of no ranks")?;
        self.connect(rank, &addrs, key)
    }

    /// Makes this port rank `rank` of a job whose ranks have the addresses
    /// `peers` (by rank) and seal their frames under `key`. `Err` if
    /// `peers[rank]` is not this port or two ranks share an address.
    pub fn connect(&mut self, rank: u16, peers: &[EthAddr], key: SealKey) -> Result<(), String> {
        if peers.len() > u16::MAX as usize + 1 {
            return Err(format!("{} ranks: at most 65536", peers.len()));
        }
        if peers.get(rank as usize) != Some(&self.me) {
            return Err(format!(
                "rank {rank}'s address in the job is not this endpoint's ({:?})",
                self.me
            ));
        }
        let mut ranks = HashMap::with_capacity(peers.len());
        for (r, &a) in peers.iter().enumerate() {
            if ranks.insert(a, r as u16).is_some() {
                return Err(format!("two ranks share the address {a:?}"));
            }
        }
        let me = self.me;
        if !self.local.as_mut().is_some_and(|l| l.connect(me, peers)) {
            // No peer on this host: polling stays on the wire alone.
            self.local = None;
        }
        self.rank = rank;
        self.key = key;
        self.peers = peers.to_vec();
        self.ranks = ranks;
        Ok(())
    }

    /// Checks a received frame in buffer `b` of `len` bytes; queues it for
    /// the core or gives the buffer back.
    fn accept(&mut self, b: u32, len: usize) {
        let at = b as usize * self.buf_size;
        let bytes = &self.rx[at..at + len];
        let c = &mut self.counters;
        let (peers, ranks) = (&self.peers, &self.ranks);
        let refused = match Frame::decode(bytes, self.opts.ethertype) {
            Err(FrameError::Short | FrameError::NotOurs) => &mut c.short,
            Err(FrameError::Version(_)) => &mut c.version,
            Err(FrameError::Length) => &mut c.length,
            Err(FrameError::Seal) => &mut c.forged,
            // Before the seal: frames for other endpoints are not hashed.
            Ok(f) if f.dst != self.me => &mut c.unknown_endpoint,
            Ok(f) => match f.open(&self.key) {
                Err(_) => &mut c.forged,
                // The packet must also name the rank its frame comes from:
                // the core takes the source from the packet. Ranks'
                // addresses are unique, so the rank the packet names
                // having this frame's source address is the same check as
                // the address mapping to that rank, without hashing it.
                Ok(f) => match f.packet.get(2..4) {
                    Some(n)
                        if peers.get(u16::from_le_bytes([n[0], n[1]]) as usize) == Some(&f.src) =>
                    {
                        return self.take(b, f.packet.len() as u32);
                    }
                    None if ranks.contains_key(&f.src) => {
                        return self.take(b, f.packet.len() as u32);
                    }
                    _ => &mut c.unknown_source,
                },
            },
        };
        *refused += 1;
        self.free.push(b);
    }

    /// Hands the core a frame that passed every check: buffer `b` with a
    /// packet of `plen` bytes.
    fn take(&mut self, b: u32, plen: u32) {
        self.lens[b as usize] = plen;
        self.counters.frames_in += 1;
        self.ready.push_back(b);
    }

    /// Copies what the ring holds, up to a batch, into free buffers.
    fn fill_from_ring(&mut self) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let mut got = [(0u32, 0usize, 0u8, false); BATCH];
        let mut n = 0;
        while n < BATCH {
            let Some(slot) = ring.peek() else {
                break;
            };
            let Some(b) = self.free.pop() else {
                break;
            };
            let len = slot.bytes.len().min(self.buf_size);
            let at = b as usize * self.buf_size;
            self.rx[at..at + len].copy_from_slice(&slot.bytes[..len]);
            got[n] = (b, len, slot.pkttype, slot.cut || len < slot.bytes.len());
            ring.release();
            n += 1;
        }
        for &(b, len, pkttype, cut) in &got[..n] {
            self.classify(b, len, pkttype, cut);
        }
    }

    /// A frame received into buffer `b`: dropped if it was our own on the
    /// way out or cut, else checked.
    fn classify(&mut self, b: u32, len: usize, pkttype: u8, cut: bool) {
        // Our own frames, seen on the way out by this socket or another
        // endpoint's on the interface, were never sent to us.
        if pkttype == libc::PACKET_OUTGOING {
            self.free.push(b);
        } else if cut {
            self.counters.length += 1;
            self.free.push(b);
        } else {
            self.accept(b, len);
        }
    }

    /// Takes up to a batch of free buffers for one receive call: their
    /// numbers into `bufs` and an entry naming each into `iov`; how many.
    fn take_free(&mut self, bufs: &mut [u32; BATCH], iov: &mut [libc::iovec; BATCH]) -> usize {
        let n = self.free.len().min(BATCH);
        let base = self.rx.as_mut_ptr();
        for i in 0..n {
            let b = self.free.pop().expect("counted above");
            bufs[i] = b;
            iov[i] = libc::iovec {
                // SAFETY: buffer `b` lies inside the pool.
                iov_base: unsafe { base.add(b as usize * self.buf_size) }.cast(),
                iov_len: self.buf_size,
            };
        }
        n
    }

    /// Receives what the local path has, up to a batch, into free buffers.
    fn fill_local(&mut self) {
        if self.local.is_none() {
            return;
        }
        let mut bufs = [0u32; BATCH];
        let mut iov = [Queued::NO_IOVECS[0]; BATCH];
        let n = self.take_free(&mut bufs, &mut iov);
        let mut got = [(0usize, false); BATCH];
        let k = match &self.local {
            // SAFETY: each entry names one free buffer of the pool, which
            // no other reference reaches now.
            Some(l) => unsafe { l.recv_many(&mut iov[..n], &mut got[..n]) },
            None => 0,
        };
        for &b in bufs[k..n].iter().rev() {
            self.free.push(b);
        }
        for i in 0..k {
            let (len, cut) = got[i];
            self.classify(bufs[i], len.min(self.buf_size), libc::PACKET_HOST, cut);
        }
    }

    /// Takes what the module queued for this endpoint, up to a batch,
    /// into free buffers; a frame longer than a buffer is cut (and
    /// dropped as such).
    fn fill_from_module(&mut self) {
        let Link::Module { cache, .. } = &self.link else {
            return;
        };
        let dev = cache.device();
        let mut got = [(0u32, 0usize); BATCH];
        let mut n = 0;
        while n < BATCH {
            let Some(b) = self.free.pop() else {
                break;
            };
            let at = b as usize * self.buf_size;
            match dev.recv_frame_cut(&mut self.rx[at..at + self.buf_size]) {
                Ok(Some(len)) => {
                    got[n] = (b, len);
                    n += 1;
                }
                Ok(None) | Err(_) => {
                    self.free.push(b);
                    break;
                }
            }
        }
        for &(b, len) in &got[..n] {
            let cut = len > self.buf_size;
            self.classify(b, len.min(self.buf_size), libc::PACKET_HOST, cut);
        }
    }

    /// Receives what the socket has, up to a batch, into free buffers.
    fn fill(&mut self) {
        if matches!(self.link, Link::Module { .. }) {
            return self.fill_from_module();
        }
        self.fill_local();
        if self.ring.is_some() {
            return self.fill_from_ring();
        }
        let mut bufs = [0u32; BATCH];
        let mut iov = [Queued::NO_IOVECS[0]; BATCH];
        let n = self.take_free(&mut bufs, &mut iov);
        if n == 0 {
            return;
        }
        // SAFETY: plain old data; zeroes are valid values.
        let mut names: [libc::sockaddr_ll; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            let h = &mut hdrs[i].msg_hdr;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut names[i] as *mut libc::sockaddr_ll).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        }
        let Link::Socket(sock) = &self.link else {
            return;
        };
        // SAFETY: `n` headers, each naming one free buffer of the pool (no
        // other reference to those bytes exists now) and its own address.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let got = r.max(0) as usize;
        for i in 0..got {
            let cut = hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let len = hdrs[i].msg_len as usize;
            self.classify(bufs[i], len, names[i].sll_pkttype, cut);
        }
        for &b in bufs[got..n].iter().rev() {
            self.free.push(b);
        }
    }

    /// Hands `queue` to the socket in one `sendmmsg`: how many frames it
    /// took, or -1 (errno set).
    fn send_batch(sock: &RawSocket, queue: &[Queued]) -> libc::c_int {
        // SAFETY: plain old data; zeroes are valid values.
        let mut iov: [[libc::iovec; MAX_SGES + 1]; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let n = queue.len();
        for (i, q) in queue.iter().enumerate() {
            iov[i] = q.iovecs();
            hdrs[i].msg_hdr.msg_iov = iov[i].as_mut_ptr();
            hdrs[i].msg_hdr.msg_iovlen = 1 + q.n as usize;
        }
        // SAFETY: each entry names its frame header (in `self.queue`,
        // not moved during the call) and ranges `check` found inside
        // registered memory, which stays valid until the completion.
        unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) }
    }

    /// Hands up to the first `n` queued frames to the wire: how many it
    /// took (0: none, the wire is full for now).
    fn send_wire(&mut self, n: usize) -> io::Result<usize> {
        let r = match &mut self.link {
            Link::Module { cache, scratch } => {
                let dev = cache.device();
                let mut sent = 0;
                for q in &self.queue[..n] {
                    scratch.clear();
                    scratch.extend_from_slice(&q.head);
                    // A registration the module could not send from
                    // before is copied here from then on.
                    let region = q
                        .region
                        .filter(|&(key, ..)| self.regs.get(key).is_some_and(|r| !r.copied));
                    let sges = &q.sges[..q.n as usize];
                    let r = match region {
                        Some((key, d, off)) => {
                            let (head, data) = sges.split_at(sges.len() - 1);
                            gather(scratch, head);
                            match dev.send_frame_region(scratch, d, off, data[0].len as u64) {
                                Ok(sent) => {
                                    self.counters.region_frames += u64::from(sent);
                                    Ok(sent)
                                }
                                Err(_) => {
                                    // Past the pinned-page limit, or the
                                    // memory changed under the region:
                                    // the registration keeps it readable.
                                    self.regs.copy_from_now(key);
                                    self.counters.region_refused += 1;
                                    gather(scratch, data);
                                    dev.send_frame(scratch)
                                }
                            }
                        }
                        None => {
                            gather(scratch, sges);
                            dev.send_frame(scratch)
                        }
                    };
                    match r {
                        Ok(true) => sent += 1,
                        Ok(false) => break,
                        Err(e) if sent == 0 => return Err(e),
                        Err(_) => break,
                    }
                }
                return Ok(sent);
            }
            Link::Socket(sock) if n == 1 => {
                // One frame (a latency-bound send): one `sendmsg`, without
                // setting up a whole batch.
                let mut iov = self.queue[0].iovecs();
                // SAFETY: plain old data; zeroes are valid values.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = iov.as_mut_ptr();
                msg.msg_iovlen = 1 + self.queue[0].n as usize;
                // SAFETY: as in `send_batch`: the header and ranges `check` found registered.
                let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) };
                if r < 0 {
                    -1
                } else {
                    1
                }
            }
            Link::Socket(sock) => Self::send_batch(sock, &self.queue[..n]),
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Hands the queued frames for this host's endpoints, up to the next
    /// frame for the wire, to the local path. A frame for an endpoint that
    /// ended is lost, as on a wire.
    fn flush_local(&mut self) -> Result<(), PostError> {
        let Some(l) = &self.local else {
            return Ok(());
        };
        let n = self.queue[..self.queue.len().min(BATCH)]
            .iter()
            .take_while(|q| q.local.is_some())
            .count();
        let mut to = [0u16; BATCH];
        let mut iovs = [(Queued::NO_IOVECS, 0usize); BATCH];
        for (i, q) in self.queue[..n].iter().enumerate() {
            to[i] = q.local.unwrap_or(u16::MAX);
            iovs[i] = (q.iovecs(), 1 + q.n as usize);
        }
        // SAFETY: as in `send_batch`: the headers and ranges `check` found
        // registered.
        let (sent, res) = match unsafe { l.send_many(&to[..n], &mut iovs[..n]) } {
            Ok(k) => (k, Ok(())),
            Err(LocalError::Busy) => (0, Err(PostError::Busy)),
        };
        self.counters.frames_out += sent as u64;
        for q in self.queue.drain(..sent) {
            self.done.push(Completion {
                wr_id: q.wr_id,
                result: Ok(()),
            });
        }
        res
    }

    /// Hands every queued frame to the socket, a batch per call. Frames the
    /// socket refuses for lack of room stay queued.
    fn flush(&mut self) -> Result<(), PostError> {
        while !self.queue.is_empty() {
            if self.queue[0].local.is_some() {
                self.flush_local()?;
                continue;
            }
            // The frames up to the next local one, a batch at most.
            let n = self.queue[..self.queue.len().min(BATCH)]
                .iter()
                .take_while(|q| q.local.is_none())
                .count();
            let sent = match self.send_wire(n) {
                Ok(0) => return Err(PostError::Busy),
                Ok(sent) => sent,
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                            Err(PostError::Busy)
                        }
                        _ => {
                            // The interface is gone: every queued frame fails.
                            for q in self.queue.drain(..) {
                                self.done.push(Completion {
                                    wr_id: q.wr_id,
                                    result: Err(rmx_core::RdmaError::Down),
                                });
                            }
                            Err(PostError::Down)
                        }
                    };
                }
            };
            self.counters.frames_out += sent as u64;
            for q in self.queue.drain(..sent) {
                self.done.push(Completion {
                    wr_id: q.wr_id,
                    result: Ok(()),
                });
            }
        }
        Ok(())
    }
}

impl rmx_driver::Port for EthPort {
    fn caps(&self) -> Caps {
        Caps {
            rx_buffers: self.opts.rx_buffers,
            mtu: self.max_packet,
            ..super::CAPS
        }
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        let key = self.regs.add(Reg {
            addr,
            len,
            region: None,
            copied: false,
        })?;
        Ok(Mr { addr, len, key })
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        let Link::Module { cache, .. } = &mut self.link else {
            // SAFETY: the caller's contract; the socket only reads.
            return unsafe { rmx_driver::Port::register(self, addr, len) };
        };
        // SAFETY: the caller's contract; the port only reads through the
        // region (the module's copy in `send_frame_region`).
        let region =
            unsafe { cache.acquire(addr as u64, len as u64) }.map_err(|_| RegError::NoResources)?;
        self.regs
            .add(Reg {
                addr,
                len,
                region: Some(region),
                copied: false,
            })
            .map(|key| Mr { addr, len, key })
            .inspect_err(|_| cache.release(region.0))
    }

    fn deregister(&mut self, mr: Mr) {
        if self.regs.get(mr.key).map(|r| (r.addr, r.len)) != Some((mr.addr, mr.len)) {
            return;
        }
        // Queued frames may still read it: they leave first.
        self.drain();
        let reg = self.regs.remove(mr.key, mr.addr, mr.len);
        if let (Some((d, _)), Link::Module { cache, .. }) =
            (reg.and_then(|r| r.region), &mut self.link)
        {
            cache.release(d);
        }
    }

    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        // Messages only: no RDMA, and every send is a frame the socket
        // call gathers (nothing is sent inline).
        let Work::Send { sges, .. } = work else {
            return Err(PostError::Unsupported);
        };
        let Some(&dst) = self.peers.get(peer as usize) else {
            return Err(PostError::Down);
        };
        if sges.len() > MAX_SGES {
            return Err(PostError::Unsupported);
        }
        let total = self.regs.check(sges)?;
        if total > self.max_packet as usize {
            return Err(PostError::Unsupported);
        }
        if self.queue.len() >= self.opts.batch as usize {
            self.flush()?;
        }
        let mut q = Queued {
            wr_id,
            head: [0; FRAME_HEADER_LEN],
            sges: [Sge {
                addr: 0,
                len: 0,
                key: 0,
            }; MAX_SGES],
            n: sges.len() as u8,
            local: self
                .local
                .as_ref()
                .is_some_and(|l| l.reaches(peer))
                .then_some(peer),
            region: None,
        };
        frame::encode_header(&mut q.head, self.opts.ethertype, dst, self.me, total)
            .expect("a packet within max_packet fits the length field");
        let mut seal = Sealer::new(&self.key, &q.head);
        for (i, s) in sges.iter().enumerate() {
            if i + 1 == sges.len() && seal.complete() {
                // Unsealed data in a module region: the module copies it.
                q.region = self.regs.region_of(s).map(|(d, off)| (s.key, d, off));
                if q.region.is_some() {
                    break;
                }
            }
            // SAFETY: `check` found the range inside a registration, which
            // its contract keeps readable until this send completes.
            seal.packet(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len) });
        }
        seal.sign(&mut q.head);
        q.sges[..sges.len()].copy_from_slice(sges);
        self.queue.push(q);
        if self.opts.batch == 1 {
            // No batching: the frame leaves now and its completion is polled.
            let _ = self.flush();
        }
        Ok(None)
    }

    #[inline]
    fn doorbell(&mut self) {
        if !self.queue.is_empty() {
            let _ = self.flush();
        }
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        if self.ready.is_empty() {
            self.fill();
        }
        let b = self.ready.pop_front()?;
        self.held[b as usize] = true;
        Some(Recv { buf: b, imm: None })
    }

    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        if !*self.held.get(buf as usize)? {
            return None;
        }
        let at = buf as usize * self.buf_size + FRAME_HEADER_LEN;
        Some(&self.rx[at..at + self.lens[buf as usize] as usize])
    }

    fn repost(&mut self, buf: u32) -> bool {
        match self.held.get_mut(buf as usize) {
            Some(h @ true) => *h = false,
            _ => return false,
        }
        self.free.push(buf);
        true
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        let n = self.done.len().min(out.len());
        for (o, c) in out.iter_mut().zip(self.done.drain(..n)) {
            *o = c;
        }
        n
    }

    fn drain(&mut self) {
        // Frames still queued name memory the caller is about to free: they
        // leave, or are lost as on a wire. A socket that refuses them for
        // now is busy (a local peer full, a host's transmit queue): only a
        // socket that fails (`flush` ends the queue itself then) is the
        // interface gone.
        let mut tries = 0;
        while !self.queue.is_empty() {
            if self.flush().is_ok() {
                continue;
            }
            tries += 1;
            if tries > DRAIN_TRIES {
                tries = 0;
                // The frames for a local peer that takes nothing (it may be
                // draining towards this endpoint in turn, or be descheduled)
                // are lost, so the wire's frames behind them leave; a wire
                // frame the socket kept refusing is lost likewise. The
                // reliability layer sends again what it awaits.
                let local = self.queue.iter().take_while(|q| q.local.is_some()).count();
                for q in self.queue.drain(..local.max(1)) {
                    self.counters.frames_lost += 1;
                    self.done.push(Completion {
                        wr_id: q.wr_id,
                        result: Ok(()),
                    });
                }
                continue;
            }
            // A local peer may be waiting on this endpoint's queue just
            // as this one waits on its: take what it sent meanwhile.
            self.fill_local();
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

impl Transport for EthPort {
    fn rank(&self) -> u16 {
        self.rank
    }

    fn events(&self) -> Events {
        Events::Fd(self.events.clone())
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}
