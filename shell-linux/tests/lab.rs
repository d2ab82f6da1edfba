//! `rmx lab`: namespaces joined by veth pairs or a bridge, made and removed
//! for real (needs root; skipped with the reason otherwise).

use rmx_linux::lab::{Lab, LabSpec, IFACE};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A prefix of this test's own, so tests (and a user's lab) never meet.
fn spec(test: &str, ranks: u16) -> LabSpec {
    LabSpec {
        prefix: format!("rmxt{}{test}", std::process::id() % 100_000),
        ranks,
        ..LabSpec::default()
    }
}

/// Why this machine cannot make namespaces, if it cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    static PROBES: AtomicU32 = AtomicU32::new(0);
    let k = PROBES.fetch_add(1, Ordering::Relaxed);
    let probe = format!("rmxprobe{}x{k}", std::process::id());
    let quiet = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let ok = quiet(&["netns", "add", &probe]);
    quiet(&["netns", "del", &probe]);
    (!ok).then(|| "`ip netns add` refused (no CAP_SYS_ADMIN or no iproute2)".into())
}

macro_rules! need_root {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}; rmx lab needs root");
            return;
        }
    };
}

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn bad_values_are_refused_before_anything_is_made() {
    let base = LabSpec::default();
    for (bad, says) in [
        (
            LabSpec {
                ranks: 1,
                ..base.clone()
            },
            "--ranks",
        ),
        (
            LabSpec {
                ranks: 9999,
                ..base.clone()
            },
            "--ranks",
        ),
        (
            LabSpec {
                mtu: 40,
                ..base.clone()
            },
            "--mtu",
        ),
        (
            LabSpec {
                loss: 101.0,
                ..base.clone()
            },
            "--loss",
        ),
        (
            LabSpec {
                dup: -1.0,
                ..base.clone()
            },
            "--dup",
        ),
        (
            LabSpec {
                reorder: 5.0,
                ..base.clone()
            },
            "--delay",
        ),
        (
            LabSpec {
                delay_us: u64::MAX,
                ..base.clone()
            },
            "--delay",
        ),
        (
            LabSpec {
                prefix: "a b".into(),
                ..base.clone()
            },
            "prefix",
        ),
    ] {
        let e = Lab::up(&bad).unwrap_err();
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn two_ranks_are_joined_by_a_veth_pair_and_removed() {
    need_root!();
    let s = spec("two", 2);
    Lab::up(&s).expect("lab up");
    let st = Lab::status(&s).unwrap();
    assert_eq!(st.len(), 2);
    for (r, rank) in st.iter().enumerate() {
        assert_eq!(rank.netns, s.netns(r as u16));
        assert!(rank.up, "{rank:?}");
        assert_eq!(rank.mtu, 9000);
    }
    // Each end's peer is the other namespace's interface.
    let link = Command::new("ip")
        .args(["-n", &s.netns(0), "-d", "-o", "link", "show", IFACE])
        .output()
        .unwrap();
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(
        link.contains("veth") && link.contains(&s.netns(1)),
        "{link}"
    );
    let again = Lab::up(&s).unwrap_err();
    assert!(again.contains("already up"), "{again}");
    assert_eq!(Lab::down(&s).unwrap(), 2);
    assert!(!netns_list().contains(&s.prefix));
    assert_eq!(Lab::down(&s).unwrap(), 0);
}

#[test]
fn more_ranks_meet_at_a_bridge_with_the_mtu_asked_for() {
    need_root!();
    let s = LabSpec {
        mtu: 1500,
        ..spec("br", 4)
    };
    Lab::up(&s).expect("lab up");
    let st = Lab::status(&s).unwrap();
    assert_eq!(st.len(), 4);
    assert!(st.iter().all(|r| r.up && r.mtu == 1500), "{st:?}");
    let br = Command::new("ip")
        .args([
            "-n",
            &format!("{}-br", s.prefix),
            "-o",
            "link",
            "show",
            "master",
            "br0",
        ])
        .output()
        .unwrap();
    let ports = String::from_utf8_lossy(&br.stdout).lines().count();
    assert_eq!(ports, 4, "every rank's peer is a bridge port");
    assert_eq!(Lab::down(&s).unwrap(), 5, "four ranks and the bridge");
}

#[test]
fn faults_are_netem_or_a_clear_refusal_that_leaves_nothing() {
    need_root!();
    let s = LabSpec {
        loss: 1.0,
        delay_us: 20,
        ..spec("netem", 2)
    };
    match Lab::up(&s) {
        Ok(_) => {
            let st = Lab::status(&s).unwrap();
            assert!(st.iter().all(|r| r.qdisc.contains("netem")), "{st:?}");
            assert!(st[0].qdisc.contains("loss 1%"), "{st:?}");
            Lab::down(&s).unwrap();
        }
        Err(e) => {
            assert!(e.contains("netem"), "{e}");
            assert!(
                !netns_list().contains(&s.prefix),
                "a failed up removes what it made"
            );
        }
    }
}

/// `--transport eth` without `--iface` makes a lab for the run and removes
/// it when the run ends, when it fails, and when it is interrupted.
#[test]
fn a_benchmarks_own_lab_is_removed_after_the_run_a_failure_and_ctrl_c() {
    need_root!();
    let rmx = env!("CARGO_BIN_EXE_rmx");
    let ours = |pid: u32| {
        netns_list()
            .lines()
            .filter(|l| l.starts_with(&format!("rmxb{pid}")))
            .count()
    };
    // A run that ends.
    let mut c = Command::new(rmx)
        .args(["bench", "pingpong", "--transport", "eth"])
        .args(["--iters", "100", "--max-size", "64", "--json"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = c.id();
    assert!(c.wait().unwrap().success());
    assert_eq!(ours(pid), 0, "removed after the run");
    // A run that fails (its MTU leaves less than rmx needs): nothing stays.
    let out = Command::new(rmx)
        .args(["bench", "pingpong", "--transport", "eth", "--mtu", "80"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!netns_list().contains("rmxb"), "{}", netns_list());
    // A long run, interrupted once its lab is up.
    let mut c = Command::new(rmx)
        .args(["bench", "pingpong", "--transport", "eth"])
        .args(["--iters", "100000000", "--max-size", "8", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = c.id();
    let t0 = std::time::Instant::now();
    while ours(pid) < 2 {
        assert!(t0.elapsed().as_secs() < 20, "the lab never came up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let st = c.wait().unwrap();
    assert!(!st.success());
    assert_eq!(ours(pid), 0, "removed on Ctrl-C");
}
