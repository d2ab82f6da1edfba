//! An AF_PACKET raw socket bound to one interface and one EtherType:
//! whole Ethernet frames in and out, non-blocking.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use rmx_core::wire::frame::Mac;

/// A raw socket on one interface.
pub struct RawSocket {
    /// Shared with whoever sleeps in `poll(2)` on it.
    fd: Arc<OwnedFd>,
    ifindex: i32,
    mac: Mac,
    mtu: u32,
    ethertype: u16,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An `ifreq` naming `iface`.
fn ifreq(iface: &str) -> io::Result<libc::ifreq> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{iface:?} is not an interface name (1 to 15 bytes)"),
        ));
    }
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &s) in r.ifr_name.iter_mut().zip(name) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

impl RawSocket {
    /// Opens a socket on `iface` for frames of `ethertype`. `bypass_qdisc`
    /// sends straight to the driver (`PACKET_QDISC_BYPASS`, faster); leave
    /// it off where a qdisc such as netem must see the frames. Needs
    /// CAP_NET_RAW.
    pub fn open(iface: &str, ethertype: u16, bypass_qdisc: bool) -> io::Result<RawSocket> {
        let mut req = ifreq(iface)?;
        let proto = (ethertype.to_be()) as libc::c_int;
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe {
            check(libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto,
            ))?
        };
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = CString::new(iface).expect("checked by ifreq");
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: ioctls that fill `req` for the interface it names.
        let (mac, mtu) = unsafe {
            check(libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req))?;
            let hw = req.ifr_ifru.ifru_hwaddr.sa_data;
            let mac: Mac = std::array::from_fn(|i| hw[i] as u8);
            check(libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req))?;
            (mac, req.ifr_ifru.ifru_mtu as u32)
        };
        // SAFETY: sockaddr_ll is plain old data.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = ethertype.to_be();
        sa.sll_ifindex = ifindex;
        // SAFETY: binds to a sockaddr_ll of the right size.
        unsafe {
            check(libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            ))?;
        }
        if bypass_qdisc {
            let one: libc::c_int = 1;
            // SAFETY: an int option.
            unsafe {
                check(libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_QDISC_BYPASS,
                    &one as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as u32,
                ))?;
            }
        }
        Ok(RawSocket {
            fd: Arc::new(fd),
            ifindex,
            mac,
            mtu,
            ethertype,
        })
    }

    /// Takes only frames for endpoint `endpoint` (the rmx header's
    /// destination endpoint, bytes 16–17): a socket filter drops the rest
    /// in the kernel. Every endpoint on an interface is shown every frame
    /// of the EtherType (on `lo`, every frame of every job); unfiltered, a
    /// rank whose socket is read rarely (a benchmark's idle setup) finds
    /// its ring full of other endpoints' frames and loses its own — for
    /// seconds while another endpoint streams.
    pub fn only_endpoint(&self, endpoint: u16) -> io::Result<()> {
        let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let prog = [
            // A = the half-word at 16 (big-endian, as the header has it).
            ins(
                (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16,
                0,
                0,
                16,
            ),
            // Ours: take the whole frame; else drop it.
            ins(
                (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                0,
                1,
                u32::from(endpoint),
            ),
            ins((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, u32::MAX),
            ins((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, 0),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr().cast_mut(),
        };
        // SAFETY: a filter program the kernel copies during the call.
        unsafe {
            check(libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &fprog as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::sock_fprog>() as u32,
            ))?;
        }
        Ok(())
    }

    /// The descriptor, for a thread that sleeps in `poll(2)` on it.
    pub fn fd(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.fd)
    }

    /// Asks the kernel for `bytes` of receive and of send buffer: a burst
    /// of frames (a PULL window) then waits there instead of being dropped.
    /// Above the system's limit it takes the forcing option (needs
    /// CAP_NET_ADMIN), else what the limit allows.
    pub fn set_buffers(&self, bytes: usize) {
        let v = bytes.min(i32::MAX as usize) as libc::c_int;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            for opt in [force, plain] {
                // SAFETY: an int option.
                let r = unsafe {
                    libc::setsockopt(
                        self.fd.as_raw_fd(),
                        libc::SOL_SOCKET,
                        opt,
                        &v as *const _ as *const libc::c_void,
                        std::mem::size_of::<libc::c_int>() as u32,
                    )
                };
                if r == 0 {
                    break;
                }
            }
        }
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// The interface's MTU: what a frame carries after its Ethernet header.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }

    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Sends one whole frame; `false` if the socket's queue is full now.
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: send(2) reads `frame.len()` bytes of `frame`.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if r >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
            _ => Err(e),
        }
    }

    /// Receives one frame into `buf`: its length, or `None` if none waits.
    /// A frame longer than `buf` is cut (the length says so: it is `buf.len()`).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: recv(2) writes at most `buf.len()` bytes into `buf`.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(None),
            _ => Err(e),
        }
    }
}

impl AsRawFd for RawSocket {
    /// For `poll(2)`.
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
