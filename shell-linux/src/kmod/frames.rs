//! rmx frames through the module: a context bound to an interface as one
//! endpoint sends whole frames from it and receives the frames sent to
//! it, demultiplexed in the kernel. The module checks that a frame it
//! sends comes from the bound endpoint; a raw socket would not.

use std::io;

use rmx_core::wire::frame::Mac;
use rmx_kernel::request::ioctl;

use super::Device;

/// `RMX_BIND`'s argument, as the module lays it out.
#[repr(C)]
pub(super) struct BindArg {
    name: [u8; 16],
    endpoint: u16,
    ethertype: u16,
    mtu: u32,
    mac: Mac,
    pad: [u8; 2],
}

/// `RMX_SEND`'s and `RMX_RECV`'s argument.
#[repr(C)]
pub(super) struct FrameArg {
    buf: u64,
    len: u32,
    flags: u32,
}

/// `RMX_SEND_REGION`'s argument.
#[repr(C)]
pub(super) struct RegionFrameArg {
    buf: u64,
    len: u32,
    desc: u32,
    offset: u64,
    rlen: u64,
    flags: u32,
    pad: u32,
}

/// `RMX_RECV`'s flag: a frame longer than the buffer is cut, not kept.
pub(super) const RECV_CUT: u32 = 1;

/// The interface a context is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    pub mac: Mac,
    pub mtu: u32,
}

impl Device {
    /// Binds this context as `endpoint` to the interface `iface` (of this
    /// process's network namespace), for frames of `ethertype`: once per
    /// context, one context per interface, EtherType and endpoint
    /// (`EADDRINUSE`). Needs CAP_NET_RAW, as a raw socket does.
    pub fn bind(&self, iface: &str, endpoint: u16, ethertype: u16) -> io::Result<Bound> {
        let mut name = [0u8; 16];
        if iface.is_empty() || iface.len() >= name.len() || iface.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{iface:?} is not an interface name (1 to 15 bytes)"),
            ));
        }
        name[..iface.len()].copy_from_slice(iface.as_bytes());
        let mut a = BindArg {
            name,
            endpoint,
            ethertype,
            mtu: 0,
            mac: [0; 6],
            pad: [0; 2],
        };
        self.ioctl(ioctl::BIND, &mut a)?;
        Ok(Bound {
            mac: a.mac,
            mtu: a.mtu,
        })
    }

    /// Sends `frame`, a whole Ethernet frame carrying an rmx frame from
    /// the bound endpoint. `Ok(false)`: the interface's queue is full
    /// (`ENOBUFS`), nothing was sent; try again.
    pub fn send_frame(&self, frame: &[u8]) -> io::Result<bool> {
        let mut a = FrameArg {
            buf: frame.as_ptr() as u64,
            len: u32::try_from(frame.len())
                .map_err(|_| io::Error::from_raw_os_error(libc::EMSGSIZE))?,
            flags: 0,
        };
        match self.ioctl(ioctl::SEND, &mut a) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends the frame of `head` followed by the `len` bytes at `offset`
    /// of region `d`, which the module copies from the region's pinned
    /// pages (pinning them as it goes): the data never passes through
    /// this process. As [`send_frame`](Self::send_frame) otherwise;
    /// a region or range the context does not hold is refused as
    /// [`read`](Self::read) refuses it, with nothing sent.
    pub fn send_frame_region(
        &self,
        head: &[u8],
        d: super::Desc,
        offset: u64,
        len: u64,
    ) -> io::Result<bool> {
        let mut a = RegionFrameArg {
            buf: head.as_ptr() as u64,
            len: u32::try_from(head.len())
                .map_err(|_| io::Error::from_raw_os_error(libc::EMSGSIZE))?,
            desc: d.0,
            offset,
            rlen: len,
            flags: 0,
            pad: 0,
        };
        match self.ioctl(ioctl::SEND_REGION, &mut a) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Takes the oldest frame sent to this endpoint into `buf`: its
    /// length, or `None` when none is queued. A frame longer than `buf`
    /// is `EMSGSIZE` and stays queued.
    pub fn recv_frame(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.recv(buf, 0)
    }

    /// [`recv_frame`](Self::recv_frame), but a frame longer than `buf` is
    /// taken cut to it: the length returned is the whole frame's.
    pub fn recv_frame_cut(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.recv(buf, RECV_CUT)
    }

    fn recv(&self, buf: &mut [u8], flags: u32) -> io::Result<Option<usize>> {
        let mut a = FrameArg {
            buf: buf.as_mut_ptr() as u64,
            len: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            flags,
        };
        match self.ioctl(ioctl::RECV, &mut a) {
            Ok(n) => Ok(Some(n as usize)),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether a frame is queued for [`recv_frame`](Self::recv_frame),
    /// waiting up to `timeout` (`None`: as long as it takes) for one.
    /// A descriptor of this context to sleep on in `poll(2)` (for
    /// `POLLRDBAND`: a frame is queued), kept by whoever sleeps.
    pub fn poll_fd(&self) -> io::Result<std::os::fd::OwnedFd> {
        Ok(self.file.try_clone()?.into())
    }

    pub fn frame_ready(&self, timeout: Option<std::time::Duration>) -> io::Result<bool> {
        self.wait_for(libc::POLLRDBAND, timeout)
    }
}
