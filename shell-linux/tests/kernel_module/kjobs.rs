//! Whole jobs over the `eth` transport with the frames through rmx.ko
//! (`--frames module`), run in the guest: every protocol (eager, medium
//! fragments, PULL) byte-exact between threads on `lo` and between the
//! namespaces of a lab joined by a veth pair, and with frames lost,
//! duplicated and reordered. A PULL's data leaves from the sender's
//! buffer as a module region, pinned on demand (decoupled) or around
//! each registration (synchronous).

use rmx_core::{Config, Source, TagSel};
use rmx_linux::eth::{EthNet, EthOpts, Faults};
use rmx_linux::job::{self, Net};
use rmx_linux::kmod::cache::Mode;
use rmx_linux::lab::{LabSpec, TempLab, IFACE};
use rmx_linux::rank::loop_config;

use super::kguest::module_count;

fn loaded() -> bool {
    let here = std::path::Path::new(rmx_linux::kmod::PATH).exists();
    if !here {
        eprintln!("skipped: no /dev/rmx (these run in the test VM)");
    }
    here
}

fn net(iface: &str, netns: Vec<String>, faults: Faults, pinning: Mode) -> Net {
    Net::Eth(EthNet {
        iface: iface.into(),
        netns,
        opts: EthOpts {
            module: true,
            rx_ring: false,
            faults,
            pinning,
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

const PIN_LIMIT: &str = "/sys/module/rmx/parameters/pin_limit";

/// The module's pinned-page limit for contexts opened while this lives,
/// the guest's own given back after (the region tests load the module
/// with a small one; a job's 3 MiB buffers need more).
struct Limit(String);

impl Limit {
    fn raise(pages: u32) -> Limit {
        let old = std::fs::read_to_string(PIN_LIMIT).expect("the module's parameter");
        std::fs::write(PIN_LIMIT, pages.to_string()).expect("root may set it");
        Limit(old.trim().to_string())
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        let _ = std::fs::write(PIN_LIMIT, &self.0);
    }
}

/// Every size from rank 0 to each other rank and back, byte-exact, with
/// the module's pinned-page limit raised to 256 MiB (`roomy`) or left at
/// the guest's 1 MiB: the last rank's stats, and how many frames the
/// module refused to send from a region, over all ranks.
fn exchange(net: &Net, ranks: u16, cfg: Config, roomy: bool) -> (rmx_core::Stats, u64) {
    // The guest is emulated (TCG) on a host that may be busy: its ranks'
    // threads can go unscheduled for seconds, longer than the 5 s after
    // which a silent peer is given up (seen: a 3 MiB receive ended
    // `PeerFailed` while the host compiled). These jobs test the data's
    // path, not failure detection: a peer is given up after two minutes.
    let cfg = Config {
        peer_timeout_ns: 120_000_000_000,
        ..cfg
    };
    let _limit = roomy.then(|| Limit::raise(1 << 16));
    let before = module_count("region_frames");
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
                    assert_eq!(
                        st.len as usize,
                        n,
                        "size {n} back from {peer}: {st:?} {:?}",
                        r.transport_counters()
                    );
                    assert_eq!(buf, pattern(i + peer as usize, n), "size {n} back");
                } else if me == peer {
                    let mut buf = vec![0xEEu8; n + 16];
                    let st = r
                        .recv(Source::Rank(0), TagSel::Tag(i as u32), &mut buf)
                        .expect("recv");
                    assert_eq!(
                        st.len as usize,
                        n,
                        "size {n}: {st:?} {:?}",
                        r.transport_counters()
                    );
                    assert_eq!(&buf[..n], &pattern(i, n)[..], "size {n} byte-exact");
                    assert!(buf[n..].iter().all(|&b| b == 0xEE), "nothing past {n}");
                    r.send(0, i as u32, &pattern(i + peer as usize, n))
                        .expect("send");
                }
            }
        }
        (r.stats(), r.transport_counters())
    });
    let last = out[ranks as usize - 1].0;
    assert!(last.fragments_in > 0, "medium messages came as fragments");
    assert!(last.rndv_recvs > 0, "larger ones were pulled");
    // The core gathers a PULL frame from the buffer when a send entry is
    // free, and copies it into a slot otherwise: some leave from regions.
    let from_regions: u64 = out.iter().map(|o| o.1.region_frames).sum();
    assert!(from_regions > 0, "PULL data left from regions: {out:?}");
    assert_eq!(
        module_count("region_frames") - before,
        from_regions,
        "as the module counted them"
    );
    let refused = out.iter().map(|o| o.1.region_refused).sum();
    (last, refused)
}

#[test]
fn kguest_a_job_on_lo_moves_every_size_through_the_module() {
    if !loaded() {
        return;
    }
    let (_, refused) = exchange(
        &net("lo", Vec::new(), Faults::default(), Mode::Decoupled),
        3,
        loop_config(),
        true,
    );
    assert_eq!(refused, 0, "every region within the limit was sent from");
}

#[test]
fn kguest_a_job_across_a_lab_moves_every_size_through_the_module_pinning_synchronously() {
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
    let (_, refused) = exchange(
        &net(IFACE, netns, Faults::default(), Mode::Synchronous),
        2,
        loop_config(),
        true,
    );
    assert_eq!(refused, 0, "every region within the limit was sent from");
}

#[test]
fn kguest_a_job_through_the_module_survives_lost_duplicated_and_reordered_frames_and_a_small_pin_limit(
) {
    if !loaded() {
        return;
    }
    let faults = rmx_linux::transport::faulty::percent(3.0, 2.0, 2.0, 7).unwrap();
    // With the guest's 1 MiB limit the 3 MiB buffers cannot be pinned
    // whole: a frame past it the core gathers from the buffer (not all
    // are: some it copies into a slot) is copied by the port, still
    // exact (`kregion_frames` checks that refusal frame by frame).
    let (st, _) = exchange(
        &net("lo", Vec::new(), faults, Mode::Decoupled),
        2,
        loop_config(),
        false,
    );
    assert!(
        st.out_of_order > 0 || st.duplicates > 0,
        "faults were seen: {st:?}"
    );
}
