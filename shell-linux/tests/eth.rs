//! Raw Ethernet frames between two ranks' threads, each in its own network
//! namespace of a lab (needs root; skipped with the reason otherwise).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use rmx_core::frame::{encode_header, EthAddr, Frame, FrameError, ETHERTYPE, FRAME_HEADER_LEN};
use rmx_linux::eth::{netns, RawSocket};
use rmx_linux::lab::{Lab, LabSpec, IFACE};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: not root; raw sockets and network namespaces need it");
    }
    root
}

/// Waits up to a second for a frame.
fn recv(s: &RawSocket, buf: &mut [u8]) -> usize {
    let t0 = Instant::now();
    loop {
        if let Some(n) = s.recv(buf).expect("recv") {
            return n;
        }
        assert!(t0.elapsed() < Duration::from_secs(1), "no frame arrived");
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[test]
fn frames_cross_between_namespaces_and_bad_ones_are_told_apart() {
    if !root() {
        return;
    }
    let spec = LabSpec {
        prefix: format!("rmxe{}", std::process::id() % 100_000),
        mtu: 9000,
        ..LabSpec::default()
    };
    if let Err(e) = Lab::up(&spec) {
        eprintln!("skipped: {e}");
        return;
    }
    let (tx_mac, rx_mac) = (mpsc::channel(), mpsc::channel::<[u8; 6]>());
    let (ns0, ns1) = (spec.netns(0), spec.netns(1));
    let sender = std::thread::spawn(move || {
        netns::enter(&ns0).expect("enter rank 0's namespace");
        let s = RawSocket::open(IFACE, ETHERTYPE, true).expect("socket");
        assert_eq!(s.mtu(), 9000);
        tx_mac.0.send(s.mac()).unwrap();
        let peer = rx_mac.1.recv().unwrap();
        let me = EthAddr {
            mac: s.mac(),
            endpoint: 1,
        };
        let to = EthAddr {
            mac: peer,
            endpoint: 2,
        };
        let mut f = vec![0u8; FRAME_HEADER_LEN + 8000];
        encode_header(&mut f, ETHERTYPE, to, me, 8000).unwrap();
        for (i, b) in f[FRAME_HEADER_LEN..].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        assert!(s.send(&f).unwrap());
        // Another version, and a frame cut inside its header.
        let mut v = f.clone();
        v[14] = 7;
        assert!(s.send(&v[..100]).unwrap());
        assert!(s.send(&f[..18]).unwrap());
        me
    });
    let receiver = std::thread::spawn(move || {
        netns::enter(&ns1).expect("enter rank 1's namespace");
        let s = RawSocket::open(IFACE, ETHERTYPE, true).expect("socket");
        rx_mac.0.send(s.mac()).unwrap();
        let _peer = tx_mac.1.recv().unwrap();
        let mut buf = vec![0u8; 9100];
        let n = recv(&s, &mut buf);
        let f = Frame::decode(&buf[..n], ETHERTYPE).expect("an rmx frame");
        assert_eq!((f.dst.mac, f.dst.endpoint), (s.mac(), 2));
        assert_eq!(f.packet.len(), 8000);
        assert!(f
            .packet
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));
        let src = f.src;
        let n = recv(&s, &mut buf);
        assert_eq!(
            Frame::decode(&buf[..n], ETHERTYPE),
            Err(FrameError::Version(7))
        );
        let n = recv(&s, &mut buf);
        assert_eq!(Frame::decode(&buf[..n], ETHERTYPE), Err(FrameError::Short));
        assert_eq!(
            s.recv(&mut buf).unwrap(),
            None,
            "nothing else, not our own frames"
        );
        src
    });
    let sent_from = sender.join();
    let seen_from = receiver.join();
    Lab::down(&spec).unwrap();
    assert_eq!(sent_from.expect("sender"), seen_from.expect("receiver"));
}

#[test]
fn bad_names_are_refused() {
    assert!(netns::enter("../x").is_err());
    assert!(netns::enter("").is_err());
    assert!(RawSocket::open("an-interface-name-too-long", ETHERTYPE, false).is_err());
    assert!(RawSocket::open("", ETHERTYPE, false).is_err());
}
