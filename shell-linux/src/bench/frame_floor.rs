//! The floors of the `eth` transport, measured over the same link in the
//! same run: bare Ethernet frames between the two ranks' threads, no
//! protocol at all, sent and received the way the transport does it at
//! its fastest: a ping-pong that sends as many frames as a size needs
//! (gathered by the socket call) and busy-polls a PACKET_MMAP ring for the
//! answer, copying it out; and a stream of frames in batches of one
//! `sendmmsg` each, whose rate the receiver counts with `recvmmsg` (on a
//! veth the ring is slower here: the kernel copies into it on the sender's
//! core, which then limits the stream).
//!
//! The frames carry their own EtherType (rmx's plus one), so the ranks'
//! sockets never see them. A ping-pong frame starts with its sender's side
//! (one byte): on loopback each socket also receives the frames it sends,
//! and a side must not take its own ping for the answer. A frame lost on the way would stall a floor:
//! each waits at most [`PATIENCE_NS`] and then reports no figure.

use std::io;
use std::os::fd::AsRawFd;

use rmx_core::wire::frame::{Mac, ETH_HEADER_LEN};

use crate::clock::now_ns;
use crate::eth::ring::RxRing;
use crate::eth::RawSocket;
use crate::rank::Rank;
use rmx_core::{Source, TagSel};

/// Drives the ranks of the floor's thread once ([`Rank::tend`]). A floor's
/// wait that hears nothing for a while calls it: the other thread may not
/// have joined the floor yet, waiting on one of those ranks for a packet
/// (its last one lost) that only a driven rank resends.
pub type Tend<'a> = &'a mut dyn FnMut();

/// The floors' EtherType: IEEE's second local experimental one.
pub const FLOOR_ETHERTYPE: u16 = 0x88B6;
/// How long a floor waits for a frame before it gives up.
pub const PATIENCE_NS: u64 = 2_000_000_000;
/// How long a floor's wait hears nothing before it tends the thread's
/// ranks (see [`Tend`]).
const TEND_AFTER_NS: u64 = 1_000_000;
/// Frames per `sendmmsg`/`recvmmsg`.
const BATCH: usize = 32;
/// First payload byte of a stream's last frame (data frames carry 0).
const END: u8 = 0xEE;
/// First payload byte of a stream receiver's count of frames so far.
const CREDIT: u8 = 0xCC;
/// Frames a stream's sender may have sent beyond the receiver's last
/// count.
const WINDOW: u64 = 256;

/// Where the floors run: the interface the ranks use.
pub struct WireFloor {
    iface: String,
}

/// Tag of the rank messages that swap the floor sockets' addresses.
const MAC_TAG: u32 = 0xFFFF_FF00;

/// One side of a [`WireFloor`], in its rank's thread and namespace.
pub struct WireSide {
    sock: RawSocket,
    me: u16,
    head: [u8; ETH_HEADER_LEN],
    /// Largest payload of one frame (the interface's MTU).
    mtu: usize,
    /// The latency floor receives off a ring; the stream with `recvmmsg`.
    ring: Option<RxRing>,
    /// Streams run so far.
    round: u32,
    /// This side's number, the first byte of its ping-pong frames.
    tag: [u8; 1],
}

impl WireFloor {
    pub fn new(iface: &str) -> WireFloor {
        WireFloor {
            iface: iface.into(),
        }
    }

    /// Rank `r`'s side (ranks 0 and 1) for [`WireSide::pingpong`] (`ring`)
    /// or [`WireSide::stream`]. Both ranks call this at once: they swap
    /// their sockets' addresses as rmx messages, so the floor works between
    /// threads and between processes alike. `None` where both sides are on
    /// one interface of one host (not `lo`): no frame goes from one to the
    /// other there (rmx takes its local path), so there is no wire floor.
    pub fn side(&self, r: &mut Rank, ring: bool) -> io::Result<Option<WireSide>> {
        let me = r.rank();
        let opened = RawSocket::open(&self.iface, FLOOR_ETHERTYPE, true);
        let mut mine = [0u8; 7];
        if let Ok(s) = &opened {
            mine[0] = 1;
            mine[1..].copy_from_slice(&s.mac());
        }
        let peer = 1 - me.min(1);
        let mut theirs = [0u8; 7];
        r.send(peer, MAC_TAG, &mine)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        let st = r
            .recv(Source::Rank(peer), TagSel::Tag(MAC_TAG), &mut theirs)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        if let Some(f) = st.fault {
            return Err(io::Error::other(format!(
                "rank {peer} did not send its address ({f:?})"
            )));
        }
        let sock = opened?;
        if theirs[0] != 1 {
            return Err(io::Error::other("the other side could not open its socket"));
        }
        let peer: Mac = std::array::from_fn(|i| theirs[1 + i]);
        if crate::eth::local::is_local(sock.mac(), peer) {
            return Ok(None);
        }
        sock.set_buffers(64 << 20);
        let mut head = [0u8; ETH_HEADER_LEN];
        head[..6].copy_from_slice(&peer);
        head[6..12].copy_from_slice(&sock.mac());
        head[12..].copy_from_slice(&FLOOR_ETHERTYPE.to_be_bytes());
        let mtu = sock.mtu() as usize;
        let ring = if ring {
            Some(RxRing::new(sock.as_raw_fd(), ETH_HEADER_LEN + mtu, 1024)?)
        } else {
            None
        };
        Ok(Some(WireSide {
            sock,
            me,
            head,
            mtu,
            ring,
            round: 0,
            tag: [me.min(1) as u8],
        }))
    }
}

impl WireSide {
    /// Largest payload of one frame: the interface's MTU.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Frames a message of `size` bytes takes (an empty one takes one).
    pub fn frames(&self, size: usize) -> usize {
        size.div_ceil(self.mtu).max(1)
    }

    /// The frame's Ethernet header then `body`, for the socket to gather.
    fn gather(&self, body: &[u8]) -> [libc::iovec; 2] {
        [
            libc::iovec {
                iov_base: self.head.as_ptr() as *mut libc::c_void,
                iov_len: ETH_HEADER_LEN,
            },
            libc::iovec {
                iov_base: body.as_ptr() as *mut libc::c_void,
                iov_len: body.len(),
            },
        ]
    }

    fn send(&self, body: &[u8]) -> io::Result<()> {
        let iov = self.gather(body);
        // SAFETY: plain old data; zeroes are valid values.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = 2;
        // SAFETY: the two entries name live buffers of their lengths.
        patiently(|| unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, 0) }).map(|_| ())
    }

    /// Sends `body` behind this side's tag as one frame.
    fn send_tagged(&self, body: &[u8]) -> io::Result<()> {
        let iov = [
            libc::iovec {
                iov_base: self.head.as_ptr() as *mut libc::c_void,
                iov_len: ETH_HEADER_LEN,
            },
            libc::iovec {
                iov_base: self.tag.as_ptr() as *mut libc::c_void,
                iov_len: 1,
            },
            libc::iovec {
                iov_base: body.as_ptr() as *mut libc::c_void,
                iov_len: body.len(),
            },
        ];
        // SAFETY: plain old data; zeroes are valid values.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = 3;
        // SAFETY: the three entries name live buffers of their lengths.
        patiently(|| unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, 0) }).map(|_| ())
    }

    /// The next frame (off the ring if there is one), its payload copied
    /// into `body`: the payload's length, or `None` if none waits.
    fn try_recv(&mut self, body: &mut [u8]) -> Option<usize> {
        let Some(ring) = self.ring.as_mut() else {
            let mut frame = [0u8; ETH_HEADER_LEN + 64];
            let n = self.sock.recv(&mut frame).ok()??;
            let len = n.saturating_sub(ETH_HEADER_LEN).min(body.len());
            body[..len].copy_from_slice(&frame[ETH_HEADER_LEN..ETH_HEADER_LEN + len]);
            return Some(len);
        };
        let len = {
            let slot = ring.peek()?;
            let payload = slot.bytes.get(ETH_HEADER_LEN..).unwrap_or(&[]);
            let n = payload.len().min(body.len());
            body[..n].copy_from_slice(&payload[..n]);
            payload.len()
        };
        ring.release();
        Some(len)
    }

    /// The next ping-pong frame of the other side off the ring, its data
    /// (after the tag) copied into `body`; `None` if none waits. Frames of
    /// this side are passed over.
    fn try_recv_peer(&mut self, body: &mut [u8]) -> Option<usize> {
        let ring = self.ring.as_mut()?;
        loop {
            let got = {
                let slot = ring.peek()?;
                let payload = slot.bytes.get(ETH_HEADER_LEN..).unwrap_or(&[]);
                let theirs = payload.first().is_some_and(|&t| t != self.tag[0]);
                let data = payload.get(1..).unwrap_or(&[]);
                let n = data.len().min(body.len());
                if theirs {
                    body[..n].copy_from_slice(&data[..n]);
                }
                theirs.then_some(data.len())
            };
            ring.release();
            if got.is_some() {
                return got;
            }
        }
    }

    /// Busy-polls the ring for one frame of the other side and copies its
    /// data into `body` (as a receive from the ring must); `None` after
    /// [`PATIENCE_NS`].
    fn recv(&mut self, body: &mut [u8], tend: Tend<'_>) -> Option<usize> {
        let mut since = 0;
        for spin in 0u64.. {
            if let Some(n) = self.try_recv_peer(body) {
                return Some(n);
            }
            if spin % 1024 == 0 {
                let now = now_ns();
                if since == 0 {
                    since = now;
                } else if now - since > PATIENCE_NS {
                    return None;
                } else if now - since > TEND_AFTER_NS {
                    tend();
                }
            }
        }
        None
    }

    /// `rounds` round trips of `size` bytes (side 0 first), each message
    /// as many frames as it needs; elapsed ns, or `None` if a frame was lost.
    pub fn pingpong(
        &mut self,
        rounds: u64,
        size: usize,
        sbuf: &[u8],
        rbuf: &mut [u8],
        tend: Tend<'_>,
    ) -> Option<u64> {
        let t0 = now_ns();
        for _ in 0..rounds {
            if self.me == 0 {
                self.message_out(&sbuf[..size])?;
                self.message_in(&mut rbuf[..size], tend)?;
            } else {
                self.message_in(&mut rbuf[..size], tend)?;
                self.message_out(&sbuf[..size])?;
            }
        }
        Some(now_ns() - t0)
    }

    fn message_out(&self, data: &[u8]) -> Option<()> {
        if data.is_empty() {
            return self.send_tagged(&[]).ok();
        }
        for chunk in data.chunks(self.mtu - 1) {
            self.send_tagged(chunk).ok()?;
        }
        Some(())
    }

    fn message_in(&mut self, data: &mut [u8], tend: Tend<'_>) -> Option<()> {
        let mtu = self.mtu - 1;
        let n = data.len().div_ceil(mtu).max(1);
        for i in 0..n {
            let at = (i * mtu).min(data.len());
            let end = (at + mtu).min(data.len());
            self.recv(&mut data[at..end], &mut *tend)?;
        }
        Some(())
    }

    /// Side 0 streams `frames` frames of `payload` bytes in batches of one
    /// `sendmmsg` each, never more than `WINDOW` ahead of what side 1
    /// said it counted (as the transport's PULL window paces its frames,
    /// so the receiver's socket never overflows and drops what it would
    /// have to count), then an end mark until side 1 answers; side 1
    /// counts what arrives and credits it every quarter window. Both
    /// return the frames per second side 1 saw (first frame to end mark),
    /// or `None` if the stream stalled.
    pub fn stream(&mut self, frames: u64, payload: usize, tend: Tend<'_>) -> Option<f64> {
        let payload = payload.clamp(1, self.mtu);
        // End marks, credits and answers name their stream: one left over
        // from an earlier stream must not end, pace or answer this one.
        self.round = self.round.wrapping_add(1);
        let mut end = [END, 0, 0, 0, 0];
        end[1..].copy_from_slice(&self.round.to_le_bytes());
        let mut credit = [CREDIT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        credit[1..5].copy_from_slice(&self.round.to_le_bytes());
        if self.me == 0 {
            let body = vec![0u8; payload];
            let (mut sent, mut counted) = (0u64, 0u64);
            let mut got = [0u8; 13];
            let mut tended = now_ns();
            while sent < frames {
                // The thread's ranks are driven while it streams too: a
                // peer of theirs may be listening to them.
                if now_ns() - tended > TEND_AFTER_NS {
                    tend();
                    tended = now_ns();
                }
                // Credits that came meanwhile; at a full window, wait for
                // one (a lost one is taken as given after a millisecond).
                let full = sent - counted >= WINDOW;
                let deadline = now_ns() + 1_000_000;
                loop {
                    match self.try_recv(&mut got) {
                        Some(13) if got[..5] == credit[..5] => {
                            let c = u64::from_le_bytes(std::array::from_fn(|i| got[5 + i]));
                            counted = counted.max(c.min(sent));
                            if sent - counted < WINDOW {
                                break;
                            }
                        }
                        Some(_) => {}
                        None if !full || now_ns() > deadline => break,
                        None => std::hint::spin_loop(),
                    }
                }
                if full && sent - counted >= WINDOW {
                    counted = sent;
                }
                let room = (WINDOW - (sent - counted)).min(frames - sent);
                let n = room.min(BATCH as u64) as usize;
                sent += self.send_batch(&body, n)? as u64;
            }
            // The end mark, until the counter answers with its rate.
            let t0 = now_ns();
            loop {
                self.send(&end).ok()?;
                let mut got = [0u8; 13];
                let deadline = now_ns() + 1_000_000;
                while now_ns() < deadline {
                    if let Some(n) = self.try_recv(&mut got) {
                        if n == 13 && got[..5] == end {
                            let rate: [u8; 8] = std::array::from_fn(|i| got[5 + i]);
                            return Some(f64::from_le_bytes(rate));
                        }
                    }
                }
                if now_ns() - t0 > PATIENCE_NS {
                    return None;
                }
                tend();
            }
        } else {
            let mut buf = vec![0u8; self.mtu];
            let mut frames = vec![0u8; BATCH * (ETH_HEADER_LEN + self.mtu)];
            let mut count = 0u64;
            let mut first = 0u64;
            let mut since = now_ns();
            let (started, mut tended) = (since, since);
            'stream: loop {
                // Driven every millisecond, whatever arrives: frames of
                // another job's floor on the interface (every floor socket
                // is shown them) must not keep this thread from its ranks,
                // nor keep it here past its patience.
                let now = now_ns();
                if now - tended > TEND_AFTER_NS {
                    tend();
                    tended = now_ns();
                }
                if now - started > 2 * PATIENCE_NS {
                    return None;
                }
                let lens = self.recv_batch(&mut frames);
                if lens.is_empty() {
                    if now_ns() - since > PATIENCE_NS {
                        return None;
                    }
                    continue;
                }
                since = now_ns();
                for (i, &n) in lens.iter().enumerate() {
                    let at = i * (ETH_HEADER_LEN + self.mtu) + ETH_HEADER_LEN;
                    if n > ETH_HEADER_LEN && frames[at] == END {
                        if n >= ETH_HEADER_LEN + 5 && frames[at..at + 5] == end {
                            break 'stream;
                        }
                        continue; // an earlier stream's end mark
                    }
                    if n > ETH_HEADER_LEN && frames[at] == CREDIT {
                        continue; // a credit (on loopback, this side's own)
                    }
                    if count == 0 {
                        first = now_ns();
                    }
                    count += 1;
                    if count.is_multiple_of(WINDOW / 4) {
                        credit[5..].copy_from_slice(&count.to_le_bytes());
                        self.send(&credit).ok()?;
                    }
                }
            }
            let secs = (now_ns() - first) as f64 / 1e9;
            let r = if count > 1 {
                (count - 1) as f64 / secs
            } else {
                0.0
            };
            let mut reply = [0u8; 13];
            reply[..5].copy_from_slice(&end);
            reply[5..].copy_from_slice(&r.to_le_bytes());
            // Answer each end mark still coming, for a while.
            let until = now_ns() + 20_000_000;
            self.send(&reply).ok()?;
            while now_ns() < until {
                if let Some(n) = self.try_recv(&mut buf) {
                    if n >= 5 && buf[..5] == end {
                        self.send(&reply).ok()?;
                    }
                } else {
                    tend();
                }
            }
            Some(r)
        }
    }

    /// Receives up to a batch of frames into `frames` (slots of a whole
    /// frame each) with one `recvmmsg`; their lengths.
    fn recv_batch(&self, frames: &mut [u8]) -> Vec<usize> {
        let slot = ETH_HEADER_LEN + self.mtu;
        let n = (frames.len() / slot).min(BATCH);
        // SAFETY: plain old data; zeroes are valid values.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, c) in frames.chunks_mut(slot).take(n).enumerate() {
            iov[i] = libc::iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: slot,
            };
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `n` headers, each naming its own slot of `frames`.
        let r = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        (0..r.max(0) as usize)
            .map(|i| hdrs[i].msg_len as usize)
            .collect()
    }

    /// Sends `n` frames carrying `body` in one `sendmmsg`; how many left.
    fn send_batch(&self, body: &[u8], n: usize) -> Option<usize> {
        let iov = self.gather(body);
        // SAFETY: plain old data; zeroes are valid values.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for h in hdrs.iter_mut().take(n) {
            h.msg_hdr.msg_iov = iov.as_ptr() as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 2;
        }
        let sent = patiently(|| {
            // SAFETY: `n` headers, each naming the same two live buffers.
            unsafe {
                libc::sendmmsg(self.sock.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) as isize
            }
        });
        sent.ok().filter(|&r| r > 0)
    }
}

/// Repeats a send while the device has no room (`EAGAIN`, `ENOBUFS`), at
/// most [`PATIENCE_NS`]: a peer that stopped reading must end the floor's
/// measurement, not spin it for ever.
fn patiently(mut send: impl FnMut() -> isize) -> io::Result<usize> {
    let mut since = 0;
    for spin in 0u64.. {
        let r = send();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS)) {
            return Err(e);
        }
        if spin % 1024 == 0 {
            let now = now_ns();
            if since == 0 {
                since = now;
            } else if now - since > PATIENCE_NS {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the link stayed full",
                ));
            }
        }
    }
    unreachable!("the loop returns")
}
