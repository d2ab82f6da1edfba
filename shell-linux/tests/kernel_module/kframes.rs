//! rmx frames through the module, run in the guest: contexts bound to
//! `lo` and to a veth pair exchange frames demultiplexed by endpoint in
//! the kernel; bad requests get an errno; an interface removed under a
//! binding leaves it refusing sends, not the kernel waiting on it.

use std::process::Command;

use rmx_core::wire::frame::{encode_header, EthAddr, ETHERTYPE, FRAME_HEADER_LEN};
use rmx_kernel::request::ioctl;
use rmx_linux::kmod::{Bound, Device};

use super::kguest::{dev, errno};

/// A frame from `src` to `dst` carrying `len` bytes made from `seed`.
pub(crate) fn frame(dst: EthAddr, src: EthAddr, seed: usize, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; FRAME_HEADER_LEN + len];
    encode_header(&mut f, ETHERTYPE, dst, src, len).unwrap();
    for (i, b) in f[FRAME_HEADER_LEN..].iter_mut().enumerate() {
        *b = (i * 7 + seed * 13) as u8;
    }
    f
}

pub(crate) fn addr(b: Bound, endpoint: u16) -> EthAddr {
    EthAddr {
        mac: b.mac,
        endpoint,
    }
}

fn ip(args: &str) {
    let st = Command::new("ip")
        .args(args.split(' '))
        .status()
        .expect("ip runs");
    assert!(st.success(), "ip {args}");
}

/// Sends `n` frames of growing size from `a` (as `from`) to `to` and
/// checks `b` receives each byte for byte, in order, and `other` none.
fn exchange(a: &Device, b: &Device, other: &Device, from: EthAddr, to: EthAddr, mtu: u32) {
    let max = mtu as usize - (FRAME_HEADER_LEN - 14);
    let sizes: Vec<usize> = (0..40).map(|i| (i * 97) % (max + 1)).chain([max]).collect();
    for (i, &len) in sizes.iter().enumerate() {
        assert!(
            a.send_frame(&frame(to, from, i, len)).unwrap(),
            "frame {i} sent"
        );
    }
    let mut buf = vec![0u8; mtu as usize + 14];
    for (i, &len) in sizes.iter().enumerate() {
        let mut got = None;
        for _ in 0..1000 {
            got = b.recv_frame(&mut buf).unwrap();
            if got.is_some() {
                break;
            }
            assert!(b
                .frame_ready(Some(std::time::Duration::from_millis(5)))
                .is_ok());
        }
        let n = got.unwrap_or_else(|| panic!("frame {i} arrived"));
        assert_eq!(&buf[..n], &frame(to, from, i, len)[..], "frame {i} whole");
    }
    assert_eq!(b.recv_frame(&mut buf).unwrap(), None, "nothing more");
    assert_eq!(
        other.recv_frame(&mut buf).unwrap(),
        None,
        "nothing for another endpoint"
    );
}

#[test]
fn kguest_frames_on_lo_reach_their_endpoint_whole_and_in_order() {
    let (Some(a), Some(b), Some(c)) = (dev(), dev(), dev()) else {
        return;
    };
    let ba = a.bind("lo", 1, ETHERTYPE).unwrap();
    let bb = b.bind("lo", 2, ETHERTYPE).unwrap();
    c.bind("lo", 3, ETHERTYPE).unwrap();
    assert!(ba.mtu >= 1500 && ba == bb, "{ba:?} {bb:?}");
    exchange(&a, &b, &c, addr(ba, 1), addr(bb, 2), ba.mtu);
    exchange(&b, &a, &c, addr(bb, 2), addr(ba, 1), ba.mtu);
    // To an endpoint nobody bound: dropped.
    a.send_frame(&frame(addr(ba, 9), addr(ba, 1), 0, 8))
        .unwrap();
    // poll says a frame is queued; a buffer too short keeps it queued.
    a.send_frame(&frame(addr(bb, 2), addr(ba, 1), 5, 100))
        .unwrap();
    assert!(b
        .frame_ready(Some(std::time::Duration::from_secs(5)))
        .unwrap());
    let mut small = [0u8; 64];
    assert_eq!(errno(b.recv_frame(&mut small)), libc::EMSGSIZE);
    let mut buf = [0u8; 200];
    assert_eq!(
        b.recv_frame(&mut buf).unwrap(),
        Some(FRAME_HEADER_LEN + 100)
    );
    assert_eq!(&buf[..130], &frame(addr(bb, 2), addr(ba, 1), 5, 100)[..]);
    assert_eq!(c.recv_frame(&mut buf).unwrap(), None);
    assert!(!c.frame_ready(Some(std::time::Duration::ZERO)).unwrap());
    // Cut to the buffer and taken: the whole frame's length is returned.
    let long = frame(addr(bb, 2), addr(ba, 1), 6, 300);
    a.send_frame(&long).unwrap();
    assert!(b
        .frame_ready(Some(std::time::Duration::from_secs(5)))
        .unwrap());
    assert_eq!(b.recv_frame_cut(&mut small).unwrap(), Some(long.len()));
    assert_eq!(&small[..], &long[..64]);
    assert_eq!(b.recv_frame(&mut buf).unwrap(), None, "taken, not kept");
}

#[repr(C)]
struct RawFrame {
    buf: u64,
    len: u32,
    flags: u32,
}

#[repr(C)]
struct RawBind {
    name: [u8; 16],
    endpoint: u16,
    ethertype: u16,
    mtu: u32,
    mac: [u8; 6],
    pad: [u8; 2],
}

pub(crate) fn raw(d: &Device, nr: u32, arg: *mut libc::c_void) -> i32 {
    // SAFETY: the tests pass the layout `nr` names, or a bad pointer the
    // module must refuse.
    let r = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(d), nr as _, arg) };
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    } else {
        0
    }
}

fn lo_bind(endpoint: u16) -> RawBind {
    let mut name = [0u8; 16];
    name[..2].copy_from_slice(b"lo");
    RawBind {
        name,
        endpoint,
        ethertype: ETHERTYPE,
        mtu: 0,
        mac: [0; 6],
        pad: [0; 2],
    }
}

#[test]
fn kguest_bad_frame_requests_get_an_errno_and_lose_nothing() {
    let (Some(a), Some(b)) = (dev(), dev()) else {
        return;
    };
    let mut buf = [0u8; 64];
    assert_eq!(errno(a.send_frame(&buf)), libc::ENOTCONN, "unbound");
    assert_eq!(errno(a.recv_frame(&mut buf)), libc::ENOTCONN, "unbound");
    assert_eq!(errno(a.bind("rmxnone0", 1, ETHERTYPE)), libc::ENODEV);
    assert_eq!(
        errno(a.bind("lo", 1, 0x0100)),
        libc::EINVAL,
        "a length, not an EtherType"
    );
    let mut unterminated = lo_bind(1);
    unterminated.name = [b'x'; 16];
    assert_eq!(
        raw(&a, ioctl::BIND, (&mut unterminated as *mut RawBind).cast()),
        libc::EINVAL
    );
    let mut dirty = lo_bind(1);
    dirty.mtu = 7;
    assert_eq!(
        raw(&a, ioctl::BIND, (&mut dirty as *mut RawBind).cast()),
        libc::EINVAL
    );
    assert_eq!(raw(&a, ioctl::BIND, 16 as *mut libc::c_void), libc::EFAULT);
    let ba = a.bind("lo", 11, ETHERTYPE).unwrap();
    assert_eq!(
        errno(a.bind("lo", 12, ETHERTYPE)),
        libc::EISCONN,
        "bound once"
    );
    assert_eq!(errno(b.bind("lo", 11, ETHERTYPE)), libc::EADDRINUSE);
    let bb = b.bind("lo", 12, ETHERTYPE).unwrap();
    let (me, peer) = (addr(ba, 11), addr(bb, 12));
    // Sends must come from the bound endpoint, fit the MTU, be rmx frames.
    assert_eq!(
        errno(a.send_frame(&frame(peer, addr(ba, 12), 0, 8))),
        libc::EINVAL,
        "spoofed endpoint"
    );
    let other = EthAddr {
        mac: [2, 9, 9, 9, 9, 9],
        endpoint: 11,
    };
    assert_eq!(
        errno(a.send_frame(&frame(peer, other, 0, 8))),
        libc::EINVAL,
        "spoofed MAC"
    );
    let mut short = frame(peer, me, 0, 8);
    short.truncate(FRAME_HEADER_LEN + 4);
    assert_eq!(
        errno(a.send_frame(&short)),
        libc::EINVAL,
        "packet past the frame"
    );
    assert_eq!(errno(a.send_frame(&[0u8; 10])), libc::EMSGSIZE);
    let mut big = frame(peer, me, 0, 100);
    big.resize(ba.mtu as usize + 15, 0); // a byte past the MTU
    assert_eq!(errno(a.send_frame(&big)), libc::EMSGSIZE);
    let mut f = RawFrame {
        buf: 16,
        len: 64,
        flags: 0,
    };
    assert_eq!(
        raw(&a, ioctl::SEND, (&mut f as *mut RawFrame).cast()),
        libc::EFAULT
    );
    let ok = frame(peer, me, 3, 20);
    let mut f = RawFrame {
        buf: ok.as_ptr() as u64,
        len: ok.len() as u32,
        flags: 1,
    };
    assert_eq!(
        raw(&a, ioctl::SEND, (&mut f as *mut RawFrame).cast()),
        libc::EINVAL,
        "flags"
    );
    assert_eq!(
        b.recv_frame(&mut buf).unwrap(),
        None,
        "nothing refused was sent"
    );
    // A receive into a bad buffer keeps the frame.
    assert!(a.send_frame(&ok).unwrap());
    assert!(b
        .frame_ready(Some(std::time::Duration::from_secs(5)))
        .unwrap());
    let mut f = RawFrame {
        buf: 16,
        len: 64,
        flags: 0,
    };
    assert_eq!(
        raw(&b, ioctl::RECV, (&mut f as *mut RawFrame).cast()),
        libc::EFAULT
    );
    assert_eq!(b.recv_frame(&mut buf).unwrap(), Some(ok.len()));
    assert_eq!(&buf[..ok.len()], &ok[..]);
}

#[test]
fn kguest_frames_cross_a_veth_pair_and_a_removed_interface_lets_go() {
    let (Some(a), Some(b)) = (dev(), dev()) else {
        return;
    };
    ip("link add rmxk0 type veth peer name rmxk1");
    ip("link set rmxk0 up");
    ip("link set rmxk1 up");
    let ba = a.bind("rmxk0", 0, ETHERTYPE).unwrap();
    let bb = b.bind("rmxk1", 0, ETHERTYPE).unwrap();
    assert_ne!(ba.mac, bb.mac);
    let third = dev().unwrap();
    third.bind("rmxk1", 5, ETHERTYPE).unwrap();
    exchange(&a, &b, &third, addr(ba, 0), addr(bb, 0), ba.mtu.min(bb.mtu));
    // Endpoints sharing one end of the pair: the module delivers what the
    // wire would never bring back.
    let beside = dev().unwrap();
    beside.bind("rmxk0", 7, ETHERTYPE).unwrap();
    exchange(&a, &beside, &b, addr(ba, 0), addr(ba, 7), ba.mtu);
    exchange(&beside, &a, &b, addr(ba, 7), addr(ba, 0), ba.mtu);
    // Removing the pair under the bindings: sends refused, nothing hangs.
    ip("link del rmxk0");
    let f = frame(addr(bb, 0), addr(ba, 0), 0, 8);
    assert_eq!(errno(a.send_frame(&f)), libc::ENODEV);
    let mut buf = [0u8; 64];
    assert_eq!(b.recv_frame(&mut buf).unwrap(), None);
    drop((a, b, third, beside));
}
