//! Frames between endpoints on the same interface of one host.
//!
//! A frame sent on a raw socket to the interface's own MAC leaves on the
//! wire and never comes back to another socket of the host (only `lo`
//! loops frames back), and a socket bound to one EtherType is shown no
//! outgoing frames. Open-MX gave such peers a path of their own (a copy in
//! the kernel, by shared memory); rmx does the same with a kernel copy: a
//! Unix datagram socket per endpoint, named in the abstract namespace by
//! the endpoint's address, so that every rank of a network namespace on
//! the interface can reach it and none outside. The frames are the wire's,
//! header and all, so the receiving port checks and counts them as it
//! does the wire's. A datagram socket keeps the order of one sender's
//! frames and never drops: a full receiver makes the sender retry later.
//!
//! Chosen over seeing outgoing frames on the raw socket (bound to every
//! EtherType with a filter): frames sent bypassing the qdisc, as rmx sends
//! them, are shown to no other socket, and every local rank would be
//! handed a copy of every frame each local rank sends.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use rmx_core::wire::frame::{EthAddr, Mac};

/// One endpoint's socket for frames from and to endpoints of its host.
pub struct LocalPath {
    fd: OwnedFd,
    ethertype: u16,
    /// The socket address of each rank on this host, by rank; named once,
    /// when the job's addresses are known.
    peers: Vec<Option<Name>>,
}

/// An endpoint's socket address.
#[derive(Clone, Copy)]
struct Name {
    sa: libc::sockaddr_un,
    len: libc::socklen_t,
}

/// Why a frame did not go: the peer's queue is full, try again later.
/// (A frame to an endpoint that ended is lost, as on a wire.)
#[derive(Debug, PartialEq, Eq)]
pub enum LocalError {
    Busy,
}

/// The abstract socket address of endpoint `addr` on frames of `ethertype`.
fn address(ethertype: u16, addr: EthAddr) -> Name {
    // SAFETY: plain old data; zeroes are valid values.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let m = addr.mac;
    let name = format!(
        "rmx-eth/{ethertype:04x}/{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}/{}",
        m[0], m[1], m[2], m[3], m[4], m[5], addr.endpoint
    );
    // sun_path[0] stays 0: the abstract namespace.
    for (d, &s) in sa.sun_path[1..].iter_mut().zip(name.as_bytes()) {
        *d = s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    Name {
        sa,
        len: len as libc::socklen_t,
    }
}

/// Whether frames to `mac` from an endpoint on the interface of `mine`
/// take the local path: the same MAC, on an interface that does not loop
/// its frames back by itself (`lo`'s MAC is all zeros).
pub fn is_local(mine: Mac, mac: Mac) -> bool {
    mac == mine && mine != [0; 6]
}

impl LocalPath {
    /// Opens the socket of endpoint `me`. `EADDRINUSE` if another endpoint
    /// of the host already has that address.
    pub fn open(ethertype: u16, me: EthAddr) -> io::Result<LocalPath> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let n = address(ethertype, me);
        // SAFETY: binds to an address of `n.len` valid bytes.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&n.sa as *const libc::sockaddr_un).cast(),
                n.len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let path = LocalPath {
            fd,
            ethertype,
            peers: Vec::new(),
        };
        path.set_buffers(8 << 20);
        Ok(path)
    }

    fn set_buffers(&self, bytes: libc::c_int) {
        for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
            // SAFETY: an int option; a refusal leaves the default.
            unsafe {
                libc::setsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&bytes as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }

    /// Names the ranks of a job (`peers`, by rank) that endpoint `me`
    /// reaches through this path; whether there is any.
    pub fn connect(&mut self, me: EthAddr, peers: &[EthAddr]) -> bool {
        let ethertype = self.ethertype;
        self.peers = peers
            .iter()
            .map(|&p| (p != me && is_local(me.mac, p.mac)).then(|| address(ethertype, p)))
            .collect();
        self.peers.iter().any(Option::is_some)
    }

    /// Whether frames to rank `peer` take this path.
    pub fn reaches(&self, peer: u16) -> bool {
        self.peers.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Sends frame `i`, gathered from the first `iovs[i].1` entries of
    /// `iovs[i].0`, to rank `to[i]`, in order, in one system call: how
    /// many went (a frame to an endpoint that ended counts, lost as on a
    /// wire; so does one to a rank this path does not
    /// [`reach`](Self::reaches)), or why the first did not.
    ///
    /// # Safety
    /// Every entry counted of every `iovs[i]` names readable memory.
    pub unsafe fn send_many<const K: usize>(
        &self,
        to: &[u16],
        iovs: &mut [([libc::iovec; K], usize)],
    ) -> Result<usize, LocalError> {
        const MAX: usize = 32;
        let mut n = to.len().min(iovs.len()).min(MAX);
        // SAFETY: plain old data; zeroes are valid values.
        let mut hdrs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            let Some(Some(name)) = self.peers.get(to[i] as usize) else {
                // No such local rank: it is lost; the frames before it go.
                if i == 0 {
                    return Ok(1);
                }
                n = i;
                break;
            };
            let h = &mut hdrs[i].msg_hdr;
            // The kernel only reads the name.
            h.msg_name = (&name.sa as *const libc::sockaddr_un).cast_mut().cast();
            h.msg_namelen = name.len;
            h.msg_iov = iovs[i].0.as_mut_ptr();
            h.msg_iovlen = iovs[i].1.min(K);
        }
        // SAFETY: `n` headers naming valid addresses; the caller vouches
        // for the gather entries.
        let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
        if r > 0 {
            return Ok(r as usize);
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Err(LocalError::Busy),
            // The first frame's endpoint is gone: that frame is lost.
            _ => Ok(1),
        }
    }

    /// Receives up to `iov.len()` frames in one system call, frame `i`
    /// into `iov[i]`, its length and whether it was cut into `got[i]`: how
    /// many came.
    ///
    /// # Safety
    /// Every entry of `iov` names writable memory no one else reaches.
    pub unsafe fn recv_many(&self, iov: &mut [libc::iovec], got: &mut [(usize, bool)]) -> usize {
        const MAX: usize = 32;
        let n = iov.len().min(got.len()).min(MAX);
        // SAFETY: plain old data; zeroes are valid values.
        let mut hdrs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `n` headers each naming one entry the caller vouches for.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let k = r.max(0) as usize;
        for i in 0..k {
            let cut = hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            got[i] = (hdrs[i].msg_len as usize, cut);
        }
        k
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll descriptor readable while either of two descriptors is: what a
/// rank sleeps on to wake for the wire and the local path alike.
pub fn either(a: RawFd, b: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 with flags only.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for fd in [a, b] {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: adds a valid descriptor with a valid event.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(endpoint: u16) -> EthAddr {
        EthAddr {
            mac: [2, 0, 0, 0, 0, 1],
            endpoint,
        }
    }

    /// Sends `bytes` to rank `to` as one frame of two gather entries.
    fn send(p: &LocalPath, to: u16, x: &[u8], y: &[u8]) -> Result<usize, LocalError> {
        let iov = [
            libc::iovec {
                iov_base: x.as_ptr() as *mut _,
                iov_len: x.len(),
            },
            libc::iovec {
                iov_base: y.as_ptr() as *mut _,
                iov_len: y.len(),
            },
        ];
        // SAFETY: both entries name live slices.
        unsafe { p.send_many(&[to], &mut [(iov, 2)]) }
    }

    fn recv(p: &LocalPath, buf: &mut [u8]) -> Option<(usize, bool)> {
        let mut iov = [libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        }];
        let mut got = [(0, false)];
        // SAFETY: the entry names `buf`, writable for its length.
        (unsafe { p.recv_many(&mut iov, &mut got) } == 1).then_some(got[0])
    }

    #[test]
    fn frames_reach_the_named_rank_in_order_and_a_gone_one_is_lost() {
        let base = std::process::id() as u16;
        let job = [
            addr(base),
            addr(base.wrapping_add(1)),
            addr(base.wrapping_add(2)),
        ];
        let mut a = LocalPath::open(0x88B5, job[0]).expect("a");
        let b = LocalPath::open(0x88B5, job[1]).expect("b");
        assert!(
            LocalPath::open(0x88B5, job[0]).is_err(),
            "one owner per address"
        );
        assert!(a.connect(job[0], &job));
        assert!(!a.reaches(0) && a.reaches(1) && a.reaches(2) && !a.reaches(3));
        for i in 0..3u8 {
            assert_eq!(send(&a, 1, &[i; 3], &[i + 10; 2]), Ok(1));
        }
        let mut buf = [0u8; 4];
        for i in 0..3u8 {
            assert_eq!(recv(&b, &mut buf), Some((4, true)), "cut to the buffer");
            assert_eq!(buf, [i, i, i, i + 10]);
        }
        assert_eq!(recv(&b, &mut buf), None);
        // Rank 2 has no socket (it ended); rank 0 is this endpoint itself.
        assert_eq!(send(&a, 2, &[1], &[]), Ok(1), "lost, as on a wire");
        assert_eq!(send(&a, 0, &[1], &[]), Ok(1), "no path to itself");
        assert_eq!(recv(&b, &mut buf), None);
        let lo = EthAddr {
            mac: [0; 6],
            endpoint: 1,
        };
        assert!(
            !a.connect(
                EthAddr {
                    mac: [0; 6],
                    endpoint: 0
                },
                &[lo]
            ),
            "lo loops back by itself"
        );
    }
}
