//! Whole jobs over the `eth` transport with the frames through rmx.ko
//! (`--frames module`), run in the guest: every protocol (eager, medium
//! fragments, PULL) byte-exact between threads on `lo` and between the
//! namespaces of a lab joined by a veth pair, and with frames lost,
//! duplicated and reordered.

use rmx_core::{Config, Source, TagSel};
use rmx_linux::eth::{EthNet, EthOpts, Faults};
use rmx_linux::job::{self, Net};
use rmx_linux::lab::{LabSpec, TempLab, IFACE};
use rmx_linux::rank::loop_config;

fn loaded() -> bool {
    let here = std::path::Path::new(rmx_linux::kmod::PATH).exists();
    if !here {
        eprintln!("skipped: no /dev/rmx (these run in the test VM)");
    }
    here
}

fn net(iface: &str, netns: Vec<String>, faults: Faults) -> Net {
    Net::Eth(EthNet {
        iface: iface.into(),
        netns,
        opts: EthOpts {
            module: true,
            rx_ring: false,
            faults,
            ..EthOpts::default()
        },
        launch: None,
    })
}

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + seed * 13) as u8).collect()
}

/// Empty, eager, medium (fragments up to 32 KiB), PULL.
const SIZES: [usize; 9] = [0, 1, 100, 4000, 8193, 32_768, 32_769, 1 << 20, 3 << 20];

/// Every size from rank 0 to each other rank and back, byte-exact: the
/// last rank's stats.
fn exchange(net: &Net, ranks: u16, cfg: Config) -> rmx_core::Stats {
    let out = job::run(ranks, cfg, net, |r| {
        let me = r.rank();
        for (i, &n) in SIZES.iter().enumerate() {
            for peer in 1..ranks {
                if me == 0 {
                    r.send(peer, i as u32, &pattern(i, n)).expect("send");
                    let mut buf = vec![0u8; n];
                    let st = r
                        .recv(Source::Rank(peer), TagSel::Tag(i as u32), &mut buf)
                        .expect("recv");
                    assert_eq!(st.len as usize, n);
                    assert_eq!(buf, pattern(i + peer as usize, n), "size {n} back");
                } else if me == peer {
                    let mut buf = vec![0xEEu8; n + 16];
                    let st = r
                        .recv(Source::Rank(0), TagSel::Tag(i as u32), &mut buf)
                        .expect("recv");
                    assert_eq!(st.len as usize, n, "size {n}");
                    assert_eq!(&buf[..n], &pattern(i, n)[..], "size {n} byte-exact");
                    assert!(buf[n..].iter().all(|&b| b == 0xEE), "nothing past {n}");
                    r.send(0, i as u32, &pattern(i + peer as usize, n))
                        .expect("send");
                }
            }
        }
        r.stats()
    });
    let last = out[ranks as usize - 1];
    assert!(last.fragments_in > 0, "medium messages came as fragments");
    assert!(last.rndv_recvs > 0, "larger ones were pulled");
    last
}

#[test]
fn kguest_a_job_on_lo_moves_every_size_through_the_module() {
    if !loaded() {
        return;
    }
    exchange(&net("lo", Vec::new(), Faults::default()), 3, loop_config());
}

#[test]
fn kguest_a_job_across_a_lab_moves_every_size_through_the_module() {
    if !loaded() {
        return;
    }
    let spec = LabSpec {
        prefix: format!("rmxk{}", std::process::id() % 100_000),
        ranks: 2,
        mtu: 1500,
        ..LabSpec::default()
    };
    let lab = TempLab::up(spec).expect("a lab in the guest");
    let netns = (0..2).map(|r| lab.spec().netns(r)).collect();
    exchange(&net(IFACE, netns, Faults::default()), 2, loop_config());
}

#[test]
fn kguest_a_job_through_the_module_survives_lost_duplicated_and_reordered_frames() {
    if !loaded() {
        return;
    }
    let faults = rmx_linux::transport::faulty::percent(3.0, 2.0, 2.0, 7).unwrap();
    let st = exchange(&net("lo", Vec::new(), faults), 2, loop_config());
    assert!(
        st.out_of_order > 0 || st.duplicates > 0,
        "faults were seen: {st:?}"
    );
}
