//! Raw Ethernet frames between two ranks' threads, each in its own network
//! namespace of a lab (needs root; skipped with the reason otherwise).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use rmx_core::wire::frame::{
    encode_header, seal, EthAddr, Frame, FrameError, SealKey, ETHERTYPE, FRAME_HEADER_LEN,
};

/// The key these hand-made frames are sealed under.
const KEY: SealKey = SealKey::from_bytes([7; SealKey::LEN]);
use rmx_linux::eth::RawSocket;
use rmx_linux::lab::{Lab, LabSpec, IFACE};
use rmx_linux::netns;

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
        seal(&KEY, &mut f).unwrap();
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
        let f = Frame::decode(&buf[..n], ETHERTYPE)
            .and_then(|f| f.open(&KEY))
            .expect("an rmx frame");
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
            Frame::decode(&buf[..n], ETHERTYPE).and_then(|f| f.open(&KEY)),
            Err(FrameError::Version(7))
        );
        let n = recv(&s, &mut buf);
        assert_eq!(
            Frame::decode(&buf[..n], ETHERTYPE).and_then(|f| f.open(&KEY)),
            Err(FrameError::Short)
        );
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

/// Each rank of the hydra job below: in its lab namespace, open the
/// interface, swap addresses through PMI, and rank 0 sends rank 1 a frame.
#[test]
fn eth_rank_under_a_launcher() {
    if std::env::var_os("RMX_ETH_CHILD").is_none() {
        return;
    }
    let mut p = rmx_linux::pmi::Pmi::from_env()
        .expect("PMI")
        .expect("started by a PMI launcher");
    let s = RawSocket::open(IFACE, ETHERTYPE, false).expect("socket");
    let me = EthAddr {
        mac: s.mac(),
        endpoint: p.rank(),
    };
    let hex: String = me.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let all = p.exchange("eth", &hex).expect("exchange");
    let addr = |h: &str| {
        let b: Vec<u8> = (0..8)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        EthAddr::from_bytes(b.try_into().unwrap())
    };
    let peers: Vec<EthAddr> = all.iter().map(|h| addr(h)).collect();
    assert_ne!(peers[0].mac, peers[1].mac, "two namespaces, two interfaces");
    if p.rank() == 0 {
        let mut f = vec![0u8; FRAME_HEADER_LEN + 6];
        encode_header(&mut f, ETHERTYPE, peers[1], me, 6).unwrap();
        f[FRAME_HEADER_LEN..].copy_from_slice(b"from 0");
        seal(&KEY, &mut f).unwrap();
        assert!(s.send(&f).unwrap());
    } else {
        let mut buf = vec![0u8; 9100];
        let n = recv(&s, &mut buf);
        let f = Frame::decode(&buf[..n], ETHERTYPE)
            .and_then(|f| f.open(&KEY))
            .unwrap();
        assert_eq!((f.src, f.dst, f.packet), (peers[0], me, &b"from 0"[..]));
        println!("rank 1 got a frame from rank 0 at {:02x?}", f.src.mac);
    }
    p.barrier().expect("barrier");
    p.finalize().expect("finalize");
}

/// Hydra's MPMD form puts each rank in its own lab namespace.
#[test]
fn hydra_starts_ranks_in_lab_namespaces_that_find_each_other() {
    if !root() {
        return;
    }
    if !std::process::Command::new(rmx_linux::pmi::HYDRA)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: no mpiexec.hydra; install Debian's mpich, as .ci/test does");
        return;
    }
    let spec = LabSpec {
        prefix: format!("rmxh{}", std::process::id() % 100_000),
        ..LabSpec::default()
    };
    if let Err(e) = Lab::up(&spec) {
        eprintln!("skipped: {e}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let rank = |ns: &str| {
        vec![
            "-n",
            "1",
            "ip",
            "netns",
            "exec",
            ns,
            exe,
            "eth_rank_under_a_launcher",
            "--exact",
            "--nocapture",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let mut args: Vec<String> = ["-launcher", "fork", "-genv", "RMX_ETH_CHILD", "1"]
        .map(String::from)
        .to_vec();
    args.extend(rank(&spec.netns(0)));
    args.push(":".into());
    args.extend(rank(&spec.netns(1)));
    let out = std::process::Command::new(rmx_linux::pmi::HYDRA)
        .args(&args)
        .output();
    Lab::down(&spec).unwrap();
    let out = out.expect("run mpiexec");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("rank 1 got a frame from rank 0"), "{text}");
}
