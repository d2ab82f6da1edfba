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

/// A port through the module sends a registered buffer's data from its
/// region; where the region cannot be pinned that far (past the guest's
/// 1 MiB pinned-page limit) the port sends the data copied instead. The
/// receiver gets the buffer's bytes either way.
#[test]
fn kguest_a_port_sends_from_a_region_and_copies_past_the_pin_limit() {
    use rmx_core::wire::frame::SealKey;
    use rmx_core::wire::{Header, Kind, HEADER_LEN};
    use rmx_linux::eth::{EthOpts, EthPort};
    use rmx_linux::transport::{Port, Sge, Transport, Work};
    if dev().is_none() {
        return;
    }
    let opts = EthOpts {
        module: true,
        rx_ring: false,
        ..EthOpts::default()
    };
    let mut a = EthPort::open("lo", 31, opts).unwrap();
    let mut b = EthPort::open("lo", 32, opts).unwrap();
    let (key, peers) = (SealKey::from_bytes([7; 16]), [a.addr(), b.addr()]);
    a.connect(0, &peers, key).unwrap();
    b.connect(1, &peers, key).unwrap();
    let len = 2 << 20;
    let m = map(len, None);
    let bytes = pattern(9, len);
    store(m, &bytes);
    let n = 1000;
    let mut head = [0u8; HEADER_LEN];
    Header {
        kind: Kind::Data,
        src: 0,
        context: 0,
        tag: 1,
        len: n as u32,
        seq: 0,
        ack: 0,
        credit: 0,
    }
    .encode(&mut head)
    .unwrap();
    // SAFETY: both stay valid and unchanged until deregistered below.
    let hmr = unsafe { a.register(head.as_ptr() as usize, HEADER_LEN) }.unwrap();
    // SAFETY: as above.
    let umr = unsafe { a.register_user(m, len) }.unwrap();
    for off in [PAGE + 10, 1_600_000] {
        let sges = [
            Sge {
                addr: head.as_ptr() as usize,
                len: HEADER_LEN,
                key: hmr.key,
            },
            Sge {
                addr: m + off,
                len: n,
                key: umr.key,
            },
        ];
        let work = Work::Send {
            sges: &sges,
            solicited: false,
        };
        assert_eq!(a.post(1, 5, work), Ok(None));
        a.doorbell();
        let mut got = None;
        for _ in 0..500 {
            got = b.poll_recv();
            if got.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = got.expect("the frame arrived");
        let packet = b.rx_bytes(r.buf).unwrap();
        assert!(packet[..HEADER_LEN] == head, "headers at {off}");
        assert!(packet[HEADER_LEN..] == bytes[off..off + n], "data at {off}");
        assert!(b.repost(r.buf));
    }
    let c = a.counters();
    assert_eq!(
        (c.region_frames, c.region_refused),
        (1, 1),
        "the first from its region, the second copied: {c:?}"
    );
    a.deregister(umr);
    a.deregister(hmr);
    unmap(m, len);
}
