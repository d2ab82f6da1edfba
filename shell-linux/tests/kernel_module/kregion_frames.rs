//! Frames whose data the module copies from a region's pinned pages
//! (`RMX_SEND_REGION`, what a port through rmx.ko sends a registered
//! buffer's bytes with), run in the guest: the bytes are the region's,
//! across a page boundary, and the new pages' after the memory is
//! unmapped and mapped again at the same address; every bad request gets
//! its errno with nothing sent.

use std::time::Duration;

use rmx_core::wire::frame::{ETHERTYPE, FRAME_HEADER_LEN};
use rmx_kernel::request::ioctl;
use rmx_linux::kmod::{Desc, Device};

use super::kframes::{addr, frame, raw};
use super::kguest::{declare, dev, errno, map, module_count, pattern, store, unmap, PAGE};

/// `RMX_SEND_REGION`'s argument, bad values included.
#[repr(C)]
struct RawRegionFrame {
    buf: u64,
    len: u32,
    desc: u32,
    offset: u64,
    rlen: u64,
    flags: u32,
    pad: u32,
}

/// The next frame queued for `d`, waiting up to 5 s.
fn recv_one(d: &Device) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 17];
    assert!(
        d.frame_ready(Some(Duration::from_secs(5))).unwrap(),
        "a frame came"
    );
    let n = d.recv_frame(&mut buf).unwrap().expect("queued");
    buf.truncate(n);
    buf
}

#[test]
fn kguest_a_frame_takes_its_data_from_a_region_and_the_new_pages_after_a_remap() {
    let (Some(a), Some(b), Some(c)) = (dev(), dev(), dev()) else {
        return;
    };
    let ba = a.bind("lo", 21, ETHERTYPE).unwrap();
    let bb = b.bind("lo", 22, ETHERTYPE).unwrap();
    let (me, peer) = (addr(ba, 21), addr(bb, 22));
    let len = 4 * PAGE;
    let m = map(len, None);
    store(m, &pattern(5, len));
    let r = declare(&a, &[(m, len)]).unwrap();
    let before = module_count("region_frames");
    // 1000 bytes across the first page boundary.
    let (off, n) = (PAGE - 300, 1000);
    let head = frame(peer, me, 0, n)[..FRAME_HEADER_LEN].to_vec();
    let want = |seed| [&head[..], &pattern(seed, len)[off..off + n]].concat();
    assert!(a.send_frame_region(&head, r, off as u64, n as u64).unwrap());
    assert!(recv_one(&b) == want(5), "the region's bytes");
    // Freed and mapped again at the same address with new contents: the
    // next frame carries the new pages' bytes, never the old ones.
    unmap(m, len);
    assert_eq!(map(len, Some(m)), m);
    store(m, &pattern(6, len));
    assert!(a.send_frame_region(&head, r, off as u64, n as u64).unwrap());
    assert!(recv_one(&b) == want(6), "the new pages' bytes");
    assert_eq!(module_count("region_frames") - before, 2, "both counted");

    // Refusals, none of which sends anything.
    let base = RawRegionFrame {
        buf: head.as_ptr() as u64,
        len: head.len() as u32,
        desc: r.0,
        offset: off as u64,
        rlen: n as u64,
        flags: 0,
        pad: 0,
    };
    let refused = |d: &Device, change: &dyn Fn(&mut RawRegionFrame)| {
        let mut x = RawRegionFrame { ..base };
        change(&mut x);
        raw(
            d,
            ioctl::SEND_REGION,
            (&mut x as *mut RawRegionFrame).cast(),
        )
    };
    assert_eq!(refused(&c, &|_| {}), libc::ENOTCONN, "unbound");
    assert_eq!(refused(&a, &|x| x.flags = 1), libc::EINVAL, "flags");
    assert_eq!(refused(&a, &|x| x.pad = 1), libc::EINVAL, "pad");
    assert_eq!(refused(&a, &|x| x.buf = 16), libc::EFAULT, "bad headers");
    assert_eq!(
        refused(&a, &|x| x.desc = r.0 ^ 0x5a5a),
        libc::EBADF,
        "no such region"
    );
    assert_eq!(
        refused(&a, &|x| x.offset = (len - 10) as u64),
        libc::EINVAL,
        "past the region's end"
    );
    assert_eq!(
        refused(&a, &|x| x.offset = u64::MAX),
        libc::EINVAL,
        "an offset that overflows"
    );
    assert_eq!(refused(&a, &|x| x.rlen = u64::MAX), libc::EMSGSIZE);
    assert_eq!(
        refused(&a, &|x| x.rlen = ba.mtu as u64),
        libc::EMSGSIZE,
        "past the MTU with the headers"
    );
    let longer = frame(peer, me, 0, n + 1);
    assert_eq!(
        refused(&a, &|x| x.buf = longer.as_ptr() as u64),
        libc::EINVAL,
        "headers declaring a packet past the frame"
    );
    let spoofed = frame(peer, addr(ba, 99), 0, n);
    assert_eq!(
        refused(&a, &|x| x.buf = spoofed.as_ptr() as u64),
        libc::EINVAL,
        "another endpoint's headers"
    );
    assert_eq!(
        errno(b.send_frame_region(&head, Desc(r.0), 0, 8)),
        libc::EBADF,
        "another context's region"
    );
    unmap(m, len);
    assert_eq!(
        errno(a.send_frame_region(&head, r, off as u64, n as u64)),
        libc::EFAULT,
        "memory unmapped for good fails the send"
    );
    let mut buf = [0u8; 64];
    assert_eq!(
        b.recv_frame(&mut buf).unwrap(),
        None,
        "nothing refused was sent"
    );
    assert_eq!(module_count("region_frames") - before, 2);
    a.undeclare(r).unwrap();
    assert_eq!(a.pinned(), 0);
}
