//! The `verbs` transport on Soft-RoCE (rdma_rxe) in the test VM: a guest
//! boots with the kernel's rxe driver, makes `rxe0` on a veth pair, and
//! runs `rmx` there between threads and between processes of MPICH's
//! hydra. Skips with the reason where the VM or the `verbs` feature is
//! missing.

mod vm;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Modules the guest loads for Soft-RoCE (dependencies come with them).
const MODULES: &[&str] = &["crc32_generic", "rdma_rxe", "ib_uverbs", "veth"];

/// The guest's set-up: a veth pair, an address, and `rxe0` on it.
const RXE: &str = "
/usr/sbin/ip link add veth0 type veth peer name veth1
/usr/sbin/ip addr add 10.9.0.1/24 dev veth0
/usr/sbin/ip link set veth0 up
/usr/sbin/ip link set veth1 up
/usr/bin/rdma link add rxe0 type rxe netdev veth0 || exit 90
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
";

fn which(cmd: &str) -> Option<PathBuf> {
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// libibverbs and its rxe provider, which it loads by name.
fn provider() -> Result<Vec<PathBuf>, String> {
    let files = [
        "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
        "/etc/libibverbs.d/rxe.driver",
    ];
    let mut out: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
    for c in ["rdma", "mpiexec.hydra", "hydra_pmi_proxy"] {
        out.push(which(c).ok_or_else(|| format!("no {c} on this machine"))?);
    }
    match out.iter().find(|p| !p.exists()) {
        Some(p) => Err(format!(
            "no {}: apt-get install ibverbs-providers rdma-core mpich",
            p.display()
        )),
        None => Ok(out),
    }
}

/// Boots the guest with rxe0 up, runs `script` with the rmx binary at
/// `$RMX`, and returns its console; `None` (with the reason printed)
/// where it cannot run here.
fn in_vm(script: &str, timeout: Duration) -> Option<vm::Outcome> {
    in_vm_with(script, &[], timeout)
}

/// [`in_vm`], with `files` copied into the guest's job folder beside rmx.
fn in_vm_with(script: &str, files: &[&Path], timeout: Duration) -> Option<vm::Outcome> {
    in_vm_with_system(script, files, &[], timeout)
}

/// [`in_vm_with`], with `more` host files at their own paths in the guest.
fn in_vm_with_system(
    script: &str,
    files: &[&Path],
    more: &[&Path],
    timeout: Duration,
) -> Option<vm::Outcome> {
    if !cfg!(feature = "verbs") {
        eprintln!("skipped: built without the `verbs` feature (cargo test --features verbs)");
        return None;
    }
    let kernel = match vm::kernel() {
        Ok(k) => k,
        Err(vm::Skip(why)) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let system = match provider() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let rmx = Path::new(env!("CARGO_BIN_EXE_rmx"));
    let system: Vec<&Path> = system
        .iter()
        .map(PathBuf::as_path)
        .chain(more.iter().copied())
        .collect();
    let script = format!("{RXE}\nRMX={}\n{script}", vm::in_guest(rmx));
    let out = kernel
        .run(&vm::Job {
            files: &[&[rmx], files].concat(),
            system: &system,
            modules: MODULES,
            script: &script,
            timeout,
        })
        .expect("the guest ran");
    Some(out)
}

#[test]
fn pingpong_runs_over_rxe_between_threads_and_processes() {
    let Some(out) = in_vm(
        "set -e
timeout 60 $RMX bench pingpong --transport verbs --device rxe0 --max-size 64 --iters 200 --warmup 20
echo THREADS-DONE
timeout 30 mpiexec.hydra -launcher fork -n 2 $RMX bench pingpong --transport verbs --device rxe0 --max-size 65536 --iters 200 --warmup 20 2>&1; echo rc=$?
",
        Duration::from_secs(200),
    ) else {
        return;
    };
    eprintln!("{}", out.console);
    assert_eq!(out.status, Some(0), "guest console:\n{}", out.console);
}

/// A rank whose peer process is killed ends with the error that names it:
/// RC acknowledges in the kernel, so a rank waiting to receive learns of
/// the death only by sending, which its keepalive ping does; the ping
/// fails with the connection once the dead queue pair's retries run out.
#[test]
fn a_killed_peer_process_ends_the_job_with_the_error_that_names_it() {
    let Some(out) = in_vm(
        "export RMX
(timeout 120 mpiexec.hydra -launcher fork -disable-auto-cleanup -n 2 sh -c '$RMX bench pingpong --transport verbs --device rxe0 --min-size 8 --max-size 8 --iters 1000000000 --warmup 7777 2>/tmp/rank$PMI_RANK.err; echo rc=$? >> /tmp/rank$PMI_RANK.err' > /tmp/job.out 2>&1; echo job-rc=$? >> /tmp/job.out) &
sleep 5
for p in /proc/[0-9]*; do
  if [ \"$(readlink $p/exe)\" = \"$RMX\" ] && grep -q PMI_RANK=1 $p/environ 2>/dev/null; then victim=${p#/proc/}; fi
done
echo victim=$victim
start=$(date +%s)
kill -9 $victim
wait
echo took=$(( $(date +%s) - start ))s
cat /tmp/job.out
echo RANK0:; cat /tmp/rank0.err
",
        Duration::from_secs(300),
    ) else {
        return;
    };
    eprintln!("{}", out.console);
    assert_eq!(out.status, Some(0), "guest console:\n{}", out.console);
    assert!(
        out.console
            .lines()
            .any(|l| l.trim().starts_with("victim=") && l.trim().len() > "victim=".len()),
        "rank 1 found: {}",
        out.console
    );
    // Rank 0's own standard error, written by it in the guest: what it
    // said does not depend on the launcher forwarding it before the end
    // (hydra's SIGUSR1 ends the `sh` around rmx, which rmx ignores).
    let rank0 = out.console.split("RANK0:").nth(1).unwrap_or_default();
    assert!(
        rank0.contains("rmx: rank 0: rank 1 stopped answering"),
        "{}",
        out.console
    );
    assert!(!out.console.contains("job-rc=0"), "{}", out.console);
    assert!(
        !out.console.contains("job-rc=124"),
        "timed out: {}",
        out.console
    );
}

/// The JSON document a guest script printed between `START` and the
/// next `JSON-END` line.
fn json_between(console: &str, start: &str) -> serde_json::Value {
    let from = console
        .find(start)
        .unwrap_or_else(|| panic!("no {start}:\n{console}"))
        + start.len();
    let to = from + console[from..].find("JSON-END").expect("JSON-END");
    serde_json::from_str(console[from..to].trim())
        .unwrap_or_else(|e| panic!("{start}: {e}:\n{}", &console[from..to]))
}

/// `rmx info`, `rmx model memory` and `rmx calibrate` on a device: the
/// per-connection bytes its provider maps, measured, and registration
/// by `ibv_reg_mr`.
#[test]
fn info_model_and_calibrate_measure_the_device() {
    let Some(out) = in_vm(
        "dmesg -n 1
echo JSON-INFO; $RMX info --json; echo JSON-END
echo JSON-MODEL; $RMX model memory --transport verbs --procs 64 --wqes 10 --json; echo JSON-END
echo JSON-CAL; $RMX calibrate --transport verbs --dry-run --json; echo JSON-END
",
        Duration::from_secs(300),
    ) else {
        return;
    };
    assert_eq!(out.status, Some(0), "guest console:\n{}", out.console);
    let info = json_between(&out.console, "JSON-INFO");
    let v = &info["verbs"];
    assert_eq!(v["device"], "rxe0", "{v}");
    let qp = v["provider_qp_bytes"].as_u64().expect("measured");
    assert!(qp >= 10 * 64, "{v}");
    assert!(v["per_connection_bytes"].as_u64().unwrap() > qp, "{v}");
    assert_eq!(
        info["config"]["fence_designs"]["verbs"],
        serde_json::json!(["def", "naive", "opt", "ri"])
    );
    let model = json_between(&out.console, "JSON-MODEL");
    let rows = model["results"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for r in rows {
        let p = r["provider_qp_bytes"].as_u64().expect("measured per row");
        assert!(r["per_connection_bytes"].as_u64().unwrap() > p, "{r}");
    }
    let cal = json_between(&out.console, "JSON-CAL");
    assert_eq!(cal["config"]["registration"], "verbs");
    let reg = cal["results"][0]["reg_ns"].as_u64().expect("reg_ns");
    assert!(reg > 0, "{cal}");
}

/// `rmx bench pin` in the guest with rmx.ko loaded and rxe0 up: Table 1
/// for the module, mlock and ibv_reg_mr, and the validity checks.
#[test]
fn bench_pin_gives_table_1_for_the_module_mlock_and_ibv_reg_mr() {
    let Some((_, ko)) = vm::rmx_ko::kernel_and_module() else {
        return;
    };
    let Some(out) = in_vm_with(
        &format!(
            "insmod {} || exit 91
echo JSON-PIN; $RMX bench pin --json --iters 5 --transport verbs --device rxe0; echo JSON-END
echo PINNED=$(cat /sys/module/rmx/parameters/pinned_pages)
",
            vm::in_guest(&ko)
        ),
        &[&ko],
        Duration::from_secs(600),
    ) else {
        return;
    };
    assert_eq!(out.status, Some(0), "guest console:\n{}", out.console);
    let doc = json_between(&out.console, "JSON-PIN");
    let rows = doc["results"].as_array().expect("rows");
    for m in ["rmx.ko", "mlock", "ibv_reg_mr"] {
        let mine: Vec<_> = rows.iter().filter(|r| r["method"] == m).collect();
        assert_eq!(mine.len(), 13, "{m}: 1 ... 4096 pages\n{doc}");
        assert!(
            mine.iter()
                .all(|r| r["pin_unpin_us"].as_f64().unwrap() > 0.0),
            "{m}"
        );
        assert!(doc["fit"][m]["ns_per_page"].is_f64(), "{m}");
    }
    let checks = doc["validity"].as_array().expect("validity");
    assert_eq!(checks.len(), 3, "{doc}");
    assert!(out.console.contains("PINNED=0"), "{}", out.console);
    eprintln!("{}", serde_json::to_string_pretty(&doc).unwrap());
}

/// The guest tests below, run inside the VM on `rxe0`, one at a time.
#[test]
fn in_the_test_vm_every_protocol_runs_over_rxe() {
    let exe = std::env::current_exe().expect("this test's binary");
    let Some(out) = in_vm_with(
        &format!("{} guest_ --nocapture --test-threads 1", vm::in_guest(&exe)),
        &[&exe],
        Duration::from_secs(1200),
    ) else {
        return;
    };
    eprintln!("{}", out.console);
    assert_eq!(out.status, Some(0), "guest console:\n{}", out.console);
    assert!(
        !out.console.contains("skipped: no RDMA device"),
        "the guest tests found rxe0"
    );
}

#[cfg(feature = "verbs")]
#[path = "common/onesided.rs"]
mod onesided;
#[cfg(feature = "verbs")]
#[path = "common/reference.rs"]
mod reference;

/// Tests that need an RDMA device: in the VM (above), or on a host that
/// has one; elsewhere they say so and pass.
#[cfg(feature = "verbs")]
mod guest {
    use rmx_core::wire::rendezvous::Protocol;
    use rmx_core::{Coalesce, Config, MemKey, Remote, Source, TagSel};
    use rmx_driver::Port as _;
    use rmx_linux::job::{self, Net};
    use rmx_linux::rank::loop_config;
    use rmx_linux::transport::{Completion, Mr, Sge, Transport as _, Work};
    use rmx_linux::verbs::{Select, Sizes, VerbsOptions, VerbsPort};

    /// The verbs network on the first device, if this machine has one.
    fn net() -> Option<Net> {
        if rmx_linux::verbs::device::names().is_empty() {
            eprintln!("skipped: no RDMA device (these run in the test VM)");
            return None;
        }
        Some(Net::Verbs(VerbsOptions::default().open().expect("verbs")))
    }

    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + seed * 13) as u8).collect()
    }

    /// Empty, inline, eager, one receive buffer and one past it, and
    /// rendezvous sizes up to 16 MiB.
    const SIZES: [usize; 11] = [
        0,
        1,
        100,
        200,
        4000,
        8192,
        8193,
        65_536,
        1 << 20,
        4 << 20,
        16 << 20,
    ];

    fn exchange(net: &Net, cfg: Config) -> rmx_core::Stats {
        let out = job::run(2, cfg, net, |r| {
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
                    assert!(buf[..n] == pattern(i, n)[..], "size {n} byte-exact");
                    assert!(buf[n..].iter().all(|&b| b == 0xEE), "nothing past {n}");
                }
            }
            r.stats()
        });
        out[1]
    }

    #[test]
    fn guest_every_rendezvous_and_eager_path_is_byte_exact() {
        let Some(net) = net() else { return };
        for rndv in [
            None,
            Some(Protocol::Rput),
            Some(Protocol::Rget),
            Some(Protocol::Pull),
        ] {
            let cfg = Config {
                rendezvous: rndv,
                ..loop_config()
            };
            let st = exchange(&net, cfg);
            eprintln!("{rndv:?}: {st:?}");
            assert!(
                st.rndv_recvs > 0,
                "{rndv:?}: the large ones went by rendezvous"
            );
        }
    }

    /// The coalescing paper's smallest queue: 5 send entries, messages
    /// packed once they are all in use.
    #[test]
    fn guest_coalescing_at_five_send_entries_keeps_every_message() {
        let Some(net) = net() else { return };
        let cfg = Config {
            send_wqes: 5,
            coalesce: Coalesce::WhenFull,
            ..loop_config()
        };
        let out = job::run(2, cfg, &net, |r| {
            let me = r.rank();
            const N: usize = 2000;
            if me == 0 {
                let bufs: Vec<Vec<u8>> = (0..N).map(|i| pattern(i, 8 + i % 64)).collect();
                let reqs: Vec<_> = bufs
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        // SAFETY: `bufs` outlives the requests, waited below.
                        unsafe { r.isend_raw(1, i as u32, b.as_ptr(), b.len()) }.expect("isend")
                    })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
            } else {
                for i in 0..N {
                    let mut b = [0u8; 80];
                    let st = r.recv(Source::Rank(0), TagSel::Any, &mut b).expect("recv");
                    assert_eq!(st.tag as usize, i, "in order");
                    let n = 8 + i % 64;
                    assert_eq!(&b[..n], &pattern(i, n)[..]);
                }
            }
            r.stats()
        });
        eprintln!("sender: coalesced {}", out[0].coalesced);
        assert!(out[0].coalesced > 0, "a 5-entry queue filled and packed");
    }

    /// One-way traffic with no progress thread: the sender's first eager
    /// send completes buffered, before its connection is made, and the
    /// sender then waits at the benchmark's barrier, which must keep
    /// making progress (it did not: the receiver gave the sender up).
    #[test]
    fn guest_progress_with_one_way_traffic_and_no_progress_thread() {
        let Some(net) = net() else { return };
        let o = rmx_linux::bench::Opts {
            transport: "verbs".into(),
            min_size: 1,
            max_size: 1,
            iters: 5,
            warmup: 2,
            eager_reuse: None,
            quiet: true,
        };
        let r = rmx_linux::bench::progress::run(
            &o,
            loop_config(),
            &net,
            rmx_linux::bench::Side::Send,
            &[Protocol::Pull],
            &[false],
        );
        assert_eq!(r.results.len(), 3, "l0 and two delays");
    }

    /// A receiver busy elsewhere while 3000 messages come: its shared
    /// receive queue runs dry, senders wait (credits, receiver-not-ready),
    /// and every message arrives once, in order.
    #[test]
    fn guest_a_flood_into_a_receiver_not_ready_loses_nothing() {
        let Some(net) = net() else { return };
        job::run(2, loop_config(), &net, |r| {
            const N: usize = 3000;
            if r.rank() == 0 {
                for i in 0..N {
                    r.send(1, 7, &pattern(i, 100)).expect("send");
                }
            } else {
                std::thread::sleep(std::time::Duration::from_secs(2));
                for i in 0..N {
                    let mut b = [0u8; 100];
                    r.recv(Source::Rank(0), TagSel::Tag(7), &mut b)
                        .expect("recv");
                    assert_eq!(&b[..], &pattern(i, 100)[..], "message {i}");
                }
            }
        });
    }

    #[test]
    fn guest_wildcards_across_four_ranks() {
        let Some(net) = net() else { return };
        let per = 200u32;
        job::run(4, loop_config(), &net, |r| {
            let me = r.rank();
            if me == 0 {
                let mut next = [0u32; 4];
                for _ in 0..3 * per {
                    let mut b = [0u8; 3000];
                    let st = r.recv(Source::Any, TagSel::Any, &mut b).unwrap();
                    let src = st.source as usize;
                    assert!((1..4).contains(&src));
                    assert_eq!(st.tag, next[src], "per-source order under wildcards");
                    let n = 100 + st.tag as usize * 10 % 2900;
                    assert_eq!(st.len as usize, n);
                    assert_eq!(&b[..n], &pattern(src + st.tag as usize, n)[..]);
                    next[src] += 1;
                }
            } else {
                for t in 0..per {
                    let n = 100 + t as usize * 10 % 2900;
                    r.send(0, t, &pattern(me as usize + t as usize, n)).unwrap();
                }
            }
        });
    }

    /// Eight ranks on a ring each talk with two neighbours: each makes the
    /// queue pairs it uses (its own and its two neighbours'), not seven,
    /// whichever end sends first.
    #[test]
    fn guest_connections_are_made_on_demand_for_the_peers_a_rank_talks_to() {
        let Some(net) = net() else { return };
        let n = 8u16;
        let made = job::run(n, loop_config(), &net, |r| {
            let me = r.rank();
            let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
            for round in 0..20u32 {
                let data = pattern(me as usize + round as usize, 300);
                // Odd ranks receive first: both ends of a pair ask at once
                // on some rings, one at a time on others.
                if me % 2 == 1 {
                    let mut b = [0u8; 300];
                    r.recv(Source::Rank(prev), TagSel::Tag(round), &mut b)
                        .expect("recv");
                    assert_eq!(&b[..], &pattern(prev as usize + round as usize, 300)[..]);
                    r.send(next, round, &data).expect("send");
                } else {
                    r.send(next, round, &data).expect("send");
                    let mut b = [0u8; 300];
                    r.recv(Source::Rank(prev), TagSel::Tag(round), &mut b)
                        .expect("recv");
                    assert_eq!(&b[..], &pattern(prev as usize + round as usize, 300)[..]);
                }
            }
            r.with_port(|p: &VerbsPort| p.verbs_counters().connections)
                .expect("a verbs port")
        });
        assert_eq!(made, vec![3; n as usize], "self, next and previous only");
    }

    #[test]
    fn guest_one_sided_matches_the_model_in_every_design() {
        let Some(net) = net() else { return };
        for design in rmx_core::onesided::Design::ALL {
            super::onesided::random_operations(&net, design, 0..3);
        }
    }

    #[test]
    fn guest_collectives_give_the_reference_results() {
        let Some(net) = net() else { return };
        for n in [2u16, 3, 4] {
            job::run(n, loop_config(), &net, super::reference::collectives);
        }
    }

    /// Kilobytes of `field` in `file` (`/proc/self/status`, `/proc/meminfo`).
    /// What one queue pair costs at the coalescing paper's send depths
    /// (what `rmx model memory --transport verbs` reports): the address
    /// space the provider maps into the process and what of it is
    /// resident, per queue pair of 64, each connected.
    #[test]
    fn guest_memory_per_queue_pair_grows_with_its_send_depth() {
        if net().is_none() {
            return;
        }
        let sel = Select {
            device: rmx_linux::verbs::device::names().first().cloned(),
            ..Select::default()
        };
        let per: Vec<_> = [5u32, 10, 200]
            .iter()
            .map(|&d| rmx_linux::verbs::footprint::measure(&sel, d, 64).expect("measured"))
            .collect();
        for q in &per {
            eprintln!(
                "send depth {}: per connected queue pair {} B mapped, {} B resident",
                q.depth, q.mapped, q.resident
            );
        }
        assert!(
            per[2].mapped > per[0].mapped,
            "a deeper send queue maps more: {per:?}"
        );
        assert!(
            per[2].mapped >= 200 * 64,
            "at least a 64-byte entry per send: {per:?}"
        );
        assert!(rmx_linux::verbs::footprint::measure(&sel, 5, 0).is_err());
    }

    /// Two ports of this thread, connected to each other.
    fn pair() -> (VerbsPort, VerbsPort) {
        pair_sized(Sizes::default())
    }

    /// [`pair`] with `sizes`.
    fn pair_sized(sizes: Sizes) -> (VerbsPort, VerbsPort) {
        let sel = Select {
            device: rmx_linux::verbs::device::names().first().cloned(),
            ..Select::default()
        };
        VerbsPort::pair(&sel, sizes).expect("two ports joined")
    }

    /// The next send completion, held sends posted first (as a rank's wait
    /// does).
    fn completion(p: &mut VerbsPort) -> Completion {
        p.doorbell();
        let mut out = [Completion {
            wr_id: 0,
            result: Ok(()),
        }];
        let t = std::time::Instant::now();
        while p.poll_cq(&mut out) == 0 {
            assert!(t.elapsed().as_secs() < 30, "no completion");
        }
        out[0]
    }

    /// `src` registered at `a` for local access, `dst` at `b` for remote.
    ///
    /// # Safety
    /// Both buffers outlive the ports' registrations.
    unsafe fn register_both(
        a: &mut VerbsPort,
        b: &mut VerbsPort,
        src: &[u8],
        dst: &mut [u8],
    ) -> (Mr, Mr) {
        // SAFETY: the caller's contract.
        unsafe {
            (
                a.register(src.as_ptr() as usize, src.len()).unwrap(),
                b.register_user(dst.as_mut_ptr() as usize, dst.len())
                    .unwrap(),
            )
        }
    }

    /// An RDMA write of all of `local` to `remote`.
    fn write_from(local: &Mr, remote: Remote) -> Work<'static> {
        Work::Rdma {
            op: rmx_core::RdmaOp::Write,
            local: Sge {
                addr: local.addr,
                len: local.len,
                key: local.key,
            },
            remote,
        }
    }

    /// An RDMA write with a key the target never gave, or past the end of
    /// its region, fails as an access error and writes nothing; the
    /// connection is then down (RC queue pairs enter the error state).
    #[test]
    fn guest_a_bad_rkey_or_bound_is_an_access_error_and_writes_nothing() {
        if net().is_none() {
            return;
        }
        let src = vec![0xABu8; 4096];
        for case in ["key", "bound"] {
            let (mut a, mut b) = pair();
            let mut dst = vec![0u8; 4096];
            // SAFETY: both buffers outlive the ports' registrations.
            let (sm, dm) = unsafe { register_both(&mut a, &mut b, &src, &mut dst) };
            let remote = match case {
                "key" => Remote {
                    addr: dm.addr as u64,
                    key: MemKey(dm.key ^ 0x5a5a_0000),
                },
                _ => Remote {
                    addr: dm.addr as u64 + 2048,
                    key: MemKey(dm.key),
                },
            };
            let work = write_from(&sm, remote);
            assert_eq!(a.post(1, 42, work), Ok(None));
            let c = completion(&mut a);
            assert_eq!(c.wr_id, 42);
            assert_eq!(c.result, Err(rmx_core::RdmaError::Access), "bad {case}");
            assert!(dst.iter().all(|&x| x == 0), "bad {case}: nothing written");
            assert_eq!(
                a.post(1, 43, work),
                Err(rmx_core::PostError::Down),
                "the connection failed with it"
            );
            // rxe raises no asynchronous event at the target (the core's
            // rendezvous carries the fault there): the target's next send
            // to the peer fails instead, refused or completed in error.
            let head = [0u8; 8];
            let sent = b.post(
                0,
                44,
                Work::Inline {
                    head: &head,
                    body: &[],
                    signal: true,
                },
            );
            eprintln!(
                "{case}: the target's send {sent:?}, {:?}",
                b.verbs_counters()
            );
            if sent.is_ok() {
                let c = completion(&mut b);
                assert_eq!(c.wr_id, 44);
                assert_eq!(c.result, Err(rmx_core::RdmaError::Down), "bad {case}");
            } else {
                assert_eq!(sent, Err(rmx_core::PostError::Down), "bad {case}");
            }
        }
    }

    /// A send to a queue pair with work outstanding waits for the
    /// doorbell; there the held ones leave as one list, in order, inline
    /// bytes as they were when posted.
    #[test]
    fn guest_sends_behind_outstanding_work_leave_together_at_the_doorbell() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair();
        let mut head = [0u8; 8];
        for i in 0..4u8 {
            head.fill(i);
            let work = Work::Inline {
                head: &head,
                body: &[],
                signal: true,
            };
            assert_eq!(a.post(1, u64::from(i), work), Ok(None));
        }
        // Overwritten after the posts: held sends carry their own copy.
        head.fill(0xEE);
        let ids = |c: Vec<Completion>| c.iter().map(|c| c.wr_id).collect::<Vec<_>>();
        let mut got = ids(completions(&mut a, 4, 500));
        assert_eq!(got, [0], "only the first left before the doorbell");
        a.doorbell();
        got.extend(ids(completions(&mut a, 3, 30_000)));
        assert_eq!(got, [0, 1, 2, 3], "the rest, in order, after it");
        let want: Vec<Vec<u8>> = (0..4).map(|i| vec![i; 8]).collect();
        assert_eq!(packets(&mut b, 500), want);
        let c = a.verbs_counters();
        assert_eq!((c.batched, c.doorbells), (3, 1), "{c:?}");
    }

    /// Posts an 8-byte inline send of `id`'s byte from `a` to rank 1 and
    /// rings the doorbell.
    fn inline_to_1(a: &mut VerbsPort, id: u8, signal: bool) {
        let head = [id; 8];
        let work = Work::Inline {
            head: &head,
            body: &[],
            signal,
        };
        assert_eq!(a.post(1, u64::from(id), work), Ok(None));
        a.doorbell();
    }

    /// Completions `a` reports within `ms` milliseconds, or until `n`.
    fn completions(a: &mut VerbsPort, n: usize, ms: u64) -> Vec<Completion> {
        let mut out = [Completion {
            wr_id: 0,
            result: Ok(()),
        }; 2];
        let mut got = Vec::new();
        let t = std::time::Instant::now();
        while got.len() < n && t.elapsed() < std::time::Duration::from_millis(ms) {
            let k = a.poll_cq(&mut out);
            got.extend_from_slice(&out[..k]);
        }
        got
    }

    /// The packets `b` receives within `ms` milliseconds, each handed back.
    fn packets(b: &mut VerbsPort, ms: u64) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(ms) {
            if let Some(r) = b.poll_recv() {
                seen.push(b.rx_bytes(r.buf).expect("a packet").to_vec());
                b.repost(r.buf);
            }
        }
        seen
    }

    /// Unsignalled sends leave at once but report nothing until a later
    /// signalled one completes; then each is reported, in order, before
    /// it (a poll taking fewer than there are gets the rest next time).
    #[test]
    fn guest_unsignalled_sends_complete_with_the_next_signalled_one_in_order() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair();
        for id in 10..13 {
            inline_to_1(&mut a, id, false);
        }
        assert_eq!(
            packets(&mut b, 300),
            (10..13).map(|i| vec![i; 8]).collect::<Vec<_>>(),
            "unsignalled sends leave at once"
        );
        assert_eq!(
            completions(&mut a, 1, 300),
            [],
            "and complete on their own never"
        );
        inline_to_1(&mut a, 13, true);
        let got = completions(&mut a, 4, 30_000);
        let ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [10, 11, 12, 13]);
        assert!(got.iter().all(|c| c.result.is_ok()), "{got:?}");
        assert_eq!(completions(&mut a, 1, 200), [], "each once");
        let c = a.verbs_counters();
        assert_eq!((c.unsignalled, c.stray_completions), (3, 0), "{c:?}");
    }

    /// A drain makes unsignalled sends complete with a signalled, empty
    /// RDMA write behind them: it takes no receive buffer at the peer,
    /// the core is told of the sends only, and the connection stays up.
    #[test]
    fn guest_a_drain_completes_unsignalled_sends_with_an_empty_write() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair();
        inline_to_1(&mut a, 1, false);
        inline_to_1(&mut a, 2, false);
        rmx_driver::Port::drain(&mut a);
        let got = completions(&mut a, 3, 2_000);
        assert_eq!(
            got,
            [1, 2].map(|wr_id| Completion {
                wr_id,
                result: Ok(())
            })
        );
        assert_eq!(packets(&mut b, 300), [vec![1u8; 8], vec![2u8; 8]]);
        inline_to_1(&mut a, 3, true);
        assert_eq!(completion(&mut a).wr_id, 3, "still connected");
        assert_eq!(packets(&mut b, 300), [vec![3u8; 8]]);
    }

    /// An error completes the unsignalled sends before it as sent (a
    /// failed request has its own entry; those before it did not fail),
    /// then itself with its error; the connection is then down.
    #[test]
    fn guest_an_error_completes_the_unsignalled_sends_before_it() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair();
        let src = [7u8; 64];
        let mut dst = vec![0u8; 64];
        // SAFETY: both buffers outlive the ports' registrations.
        let (sm, dm) = unsafe { register_both(&mut a, &mut b, &src, &mut dst) };
        inline_to_1(&mut a, 1, false);
        inline_to_1(&mut a, 2, false);
        let work = write_from(
            &sm,
            Remote {
                addr: dm.addr as u64,
                key: MemKey(dm.key ^ 0x5a5a_0000),
            },
        );
        assert_eq!(a.post(1, 3, work), Ok(None));
        a.doorbell();
        let got = completions(&mut a, 3, 30_000);
        let want = [
            (1, Ok(())),
            (2, Ok(())),
            (3, Err(rmx_core::RdmaError::Access)),
        ]
        .map(|(wr_id, result)| Completion { wr_id, result });
        assert_eq!(got, want);
        assert!(dst.iter().all(|&x| x == 0), "nothing written");
        let head = [9u8; 8];
        let work = Work::Inline {
            head: &head,
            body: &[],
            signal: false,
        };
        assert_eq!(a.post(1, 4, work), Err(rmx_core::PostError::Down));
        assert_eq!(packets(&mut b, 200), [vec![1u8; 8], vec![2u8; 8]]);
    }

    /// An unsignalled send that fails with nothing signalled behind it
    /// still reports its error: the peer's queue pair is gone, the send
    /// exhausts its retries, and the device gives it an entry of its own.
    #[test]
    fn guest_a_lone_unsignalled_send_that_fails_reports_it() {
        if net().is_none() {
            return;
        }
        let (mut a, b) = pair();
        drop(b);
        inline_to_1(&mut a, 5, false);
        let got = completions(&mut a, 1, 30_000);
        assert_eq!(
            got,
            [Completion {
                wr_id: 5,
                result: Err(rmx_core::RdmaError::Down)
            }]
        );
    }

    /// Sends `n` 8-byte inline packets from `a` to rank 1, each completed.
    fn send_inline(a: &mut VerbsPort, n: u8) {
        for i in 0..n {
            let head = [i; 8];
            let work = Work::Inline {
                head: &head,
                body: &[],
                signal: true,
            };
            assert_eq!(a.post(1, i as u64, work), Ok(None));
            completion(a);
        }
    }

    /// The shared receive queue's limit event posts the spare buffers at
    /// once, and the core's low-pool call reports them (once) to lend.
    #[test]
    fn guest_the_receive_queue_limit_posts_the_spare_buffers() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair_sized(Sizes {
            rx_buffers: 32,
            rx_spare: 16,
            rx_low: 24,
            ..Sizes::default()
        });
        // 12 packets leave 20 of 32 posted: below the limit of 24.
        let mut got = Vec::new();
        send_inline(&mut a, 12);
        let t = std::time::Instant::now();
        while (got.len() < 12 || b.verbs_counters().srq_limit == 0) && t.elapsed().as_secs() < 10 {
            if let Some(r) = b.poll_recv() {
                got.push(r.buf);
            }
        }
        assert_eq!(got.len(), 12);
        assert_eq!(b.verbs_counters().srq_limit, 1, "{:?}", b.verbs_counters());
        assert_eq!(b.rx_pool_low(20), 16, "the spare ones, posted at the event");
        assert_eq!(b.rx_pool_low(20), 0, "told once");
        // All 48 are usable: 36 more arrive with 12 still held.
        send_inline(&mut a, 36);
        let t = std::time::Instant::now();
        while got.len() < 48 && t.elapsed().as_secs() < 10 {
            if let Some(r) = b.poll_recv() {
                got.push(r.buf);
            }
        }
        assert_eq!(
            got.len(),
            48,
            "every buffer, spare ones included, took a packet"
        );
        let mut seen = got.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 48, "no buffer twice");
        for buf in got {
            assert!(b.repost(buf));
            assert!(!b.repost(buf), "a buffer goes back once");
        }
    }

    /// Buffers handed back go to the receive queue in batches (2 for a
    /// pool of 32) only while enough stay posted: a queue drained dry gets
    /// the first one back at once, and every buffer cycles with nothing
    /// lost.
    #[test]
    fn guest_buffers_handed_back_reach_a_dry_queue_at_once_and_none_is_lost() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair_sized(Sizes {
            rx_buffers: 32,
            rx_spare: 0,
            rx_low: 0,
            ..Sizes::default()
        });
        let take = |b: &mut VerbsPort, n: usize| {
            let mut got = Vec::new();
            let t = std::time::Instant::now();
            while got.len() < n && t.elapsed().as_secs() < 30 {
                if let Some(r) = b.poll_recv() {
                    got.push(r);
                }
            }
            got
        };
        send_inline(&mut a, 32);
        let got: Vec<u32> = take(&mut b, 32).iter().map(|r| r.buf).collect();
        assert_eq!(got.len(), 32, "every posted buffer took a packet");
        // The queue is dry: one buffer handed back is posted at once, and
        // the next packet lands in it (held back, the sender would meet
        // an empty queue and fail).
        assert!(b.repost(got[0]));
        send_inline(&mut a, 1);
        let one = take(&mut b, 1);
        assert_eq!(one.iter().map(|r| r.buf).collect::<Vec<_>>(), vec![got[0]]);
        assert_eq!(b.rx_bytes(one[0].buf), Some(&[0u8; 8][..]));
        // Every buffer back, then 5 rounds of 16 through them.
        for &buf in &got {
            assert!(b.repost(buf));
            assert!(!b.repost(buf), "a buffer goes back once");
        }
        for round in 0..5u8 {
            for i in 0..16u8 {
                let head = [round * 16 + i; 8];
                let work = Work::Inline {
                    head: &head,
                    body: &[],
                    signal: true,
                };
                assert_eq!(a.post(1, i as u64, work), Ok(None));
                assert_eq!(completion(&mut a).result, Ok(()));
            }
            let rx = take(&mut b, 16);
            assert_eq!(rx.len(), 16, "round {round}");
            for (i, r) in rx.iter().enumerate() {
                let want = [round * 16 + i as u8; 8];
                assert_eq!(b.rx_bytes(r.buf), Some(&want[..]), "in order, intact");
                assert!(b.repost(r.buf));
            }
        }
        assert_eq!(b.counters().length, 0);
    }

    /// Writes, reads and writes with immediate between two ports land
    /// byte-exact, and the immediate consumes a receive at the target.
    #[test]
    fn guest_rdma_write_read_and_immediate_land_exactly() {
        if net().is_none() {
            return;
        }
        let (mut a, mut b) = pair();
        let src: Vec<u8> = pattern(3, 1 << 20);
        let mut dst = vec![0u8; 1 << 20];
        let mut back = vec![0u8; 1 << 20];
        // SAFETY: the buffers outlive the ports.
        let (sm, dm, bm) = unsafe {
            (
                a.register(src.as_ptr() as usize, src.len()).unwrap(),
                b.register_user(dst.as_mut_ptr() as usize, dst.len())
                    .unwrap(),
                a.register(back.as_mut_ptr() as usize, back.len()).unwrap(),
            )
        };
        let sge = |m: rmx_linux::transport::Mr| Sge {
            addr: m.addr,
            len: m.len,
            key: m.key,
        };
        let remote = Remote {
            addr: dm.addr as u64,
            key: MemKey(dm.key),
        };
        let w = Work::Rdma {
            op: rmx_core::RdmaOp::Write,
            local: sge(sm),
            remote,
        };
        assert_eq!(a.post(1, 1, w), Ok(None));
        assert_eq!(completion(&mut a).result, Ok(()));
        assert!(dst == src, "write");
        let r = Work::Rdma {
            op: rmx_core::RdmaOp::Read,
            local: sge(bm),
            remote,
        };
        assert_eq!(a.post(1, 2, r), Ok(None));
        assert_eq!(
            completion(&mut a),
            Completion {
                wr_id: 2,
                result: Ok(())
            }
        );
        assert!(back == src, "read");
        let wi = Work::WriteImm {
            local: Sge { len: 16, ..sge(sm) },
            remote,
            imm: 0xDEAD_BEEF,
        };
        assert_eq!(a.post(1, 3, wi), Ok(None));
        assert_eq!(completion(&mut a).result, Ok(()));
        let t = std::time::Instant::now();
        let got = loop {
            if let Some(r) = b.poll_recv() {
                break r;
            }
            assert!(t.elapsed().as_secs() < 30, "no immediate");
        };
        assert_eq!(got.imm, Some(0xDEAD_BEEF));
        assert_eq!(b.rx_bytes(got.buf), Some(&[][..]));
        assert!(b.repost(got.buf));
        assert!(!b.repost(got.buf), "a buffer is handed back once");
        // An inline send lands in a receive buffer as one packet.
        assert_eq!(
            a.post(
                1,
                4,
                Work::Inline {
                    head: b"head",
                    body: b"body",
                    signal: true
                }
            ),
            Ok(None)
        );
        assert_eq!(completion(&mut a).result, Ok(()));
        let t = std::time::Instant::now();
        let got = loop {
            if let Some(r) = b.poll_recv() {
                break r;
            }
            assert!(t.elapsed().as_secs() < 30, "no packet");
        };
        assert_eq!(b.rx_bytes(got.buf), Some(&b"headbody"[..]));
        // A gather entry past verbs' 32-bit lengths, a rank that is not
        // in the job: refused, nothing posted.
        let huge = Sge {
            len: 1 << 32,
            ..sge(sm)
        };
        assert_eq!(
            a.post(
                1,
                6,
                Work::Send {
                    sges: &[huge],
                    solicited: false
                }
            ),
            Err(rmx_core::PostError::Unsupported)
        );
        assert_eq!(
            a.post(
                9,
                7,
                Work::Inline {
                    head: b"x",
                    body: &[],
                    signal: true
                }
            ),
            Err(rmx_core::PostError::Down)
        );
        let too_long = vec![0u8; a.facts().inline_max as usize + 1];
        assert_eq!(
            a.post(
                1,
                5,
                Work::Inline {
                    head: &too_long,
                    body: &[],
                    signal: true
                }
            ),
            Err(rmx_core::PostError::Unsupported)
        );
    }
}

/// UCX's transports, which it loads by path.
fn ucx_modules() -> Vec<PathBuf> {
    std::fs::read_dir("/usr/lib/x86_64-linux-gnu/ucx")
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The experiments beside their anchors, in one guest run, alternating:
/// `cargo test --release --features verbs --test verbs anchors -- --ignored --nocapture`.
/// Prints every tool's own output; the ratios are read from it. Not a
/// test: a measurement, run by hand (CI gates on no time).
#[test]
#[ignore = "a measurement: run by hand"]
fn anchors() {
    let mut tools = Vec::new();
    for c in [
        "ib_send_lat",
        "ib_write_lat",
        "ib_send_bw",
        "ib_write_bw",
        "ucx_perftest",
    ] {
        match which(c) {
            Some(p) => tools.push(p),
            None => {
                eprintln!("skipped: no {c}: apt-get install perftest ucx-utils");
                return;
            }
        }
    }
    let ucx = ucx_modules();
    let rounds: u32 = std::env::var("RMX_ANCHOR_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let script = format!(
        r#"
for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    case "$(cat $g)" in 0000:0000:0000:0000:0000:ffff:*) G=${{g##*/}}; break;; esac
done
echo "GID index $G"
pair() {{ "$@" >/tmp/server.txt 2>&1 & sleep 1; "$@" 127.0.0.1; wait; }}
export UCX_NET_DEVICES=rxe0:1 UCX_TLS=rc_verbs,ud_verbs,self
for round in $(seq {rounds}); do
  echo "=== round $round"
  echo "--- ib_send_lat 8 B"
  pair ib_send_lat -d rxe0 -x $G -s 8 -n 5000 -F
  echo "--- rmx pingpong 8 B, 2 processes"
  mpiexec.hydra -launcher fork -n 2 $RMX bench pingpong --transport verbs --min-size 8 --max-size 8 --iters 5000
  echo "--- ucx_perftest tag_lat 8 B (UCP over rc_verbs)"
  pair ucx_perftest -t tag_lat -s 8 -n 5000
  echo "--- ib_write_lat 8 B"
  pair ib_write_lat -d rxe0 -x $G -s 8 -n 5000 -F
  echo "--- ib_send_bw 8 B"
  pair ib_send_bw -d rxe0 -x $G -s 8 -n 20000 -F
  echo "--- rmx msgrate 8 B, 2 processes"
  mpiexec.hydra -launcher fork -n 2 $RMX bench msgrate --transport verbs --min-size 8 --max-size 8 --iters 20000
  echo "--- ib_write_bw 4 MiB"
  pair ib_write_bw -d rxe0 -x $G -s 4194304 -n 50 -F
  echo "--- rmx bw 4 MiB, 2 processes"
  mpiexec.hydra -launcher fork -n 2 $RMX bench bw --transport verbs --min-size 4194304 --max-size 4194304 --iters 500
done
echo "=== sizes, once"
echo "--- ib_send_lat sizes"
pair ib_send_lat -d rxe0 -x $G -a -n 200 -F
echo "--- ib_write_lat sizes"
pair ib_write_lat -d rxe0 -x $G -a -n 200 -F
echo "--- rmx pingpong sizes, 2 processes"
mpiexec.hydra -launcher fork -n 2 $RMX bench pingpong --transport verbs --min-size 2 --max-size 4194304 --iters 200
"#
    );
    let mut system: Vec<&Path> = tools.iter().map(PathBuf::as_path).collect();
    system.extend(ucx.iter().map(PathBuf::as_path));
    let Some(out) = in_vm_with_system(&script, &[], &system, Duration::from_secs(3000)) else {
        return;
    };
    println!("{}", out.console);
}

/// Runs the shell script in `$RMX_VM_SCRIPT` in a guest with rxe0 up and
/// rmx at `$RMX` (and the host files `$RMX_VM_FILES`, separated by `:`,
/// in the job folder beside it; `$RMX_VM_SYSTEM` at their own paths),
/// printing its console (also to the file `$RMX_VM_CONSOLE` as it comes;
/// the guest is stopped after `$RMX_VM_TIMEOUT` seconds, default 3000;
/// `$RMX_VM_SMP` vCPUs, default 2; `$RMX_VM_APPEND` added to the guest
/// kernel's command line; UCX's transports come with `ucx_perftest`):
/// for measurements by hand, e.g.
/// `RMX_VM_SCRIPT='$RMX bench overlap --transport verbs' cargo test
/// --release --features verbs --test verbs script -- --ignored --nocapture`.
#[test]
#[ignore = "runs a script given by hand"]
fn script() {
    let Ok(script) = std::env::var("RMX_VM_SCRIPT") else {
        eprintln!("skipped: set RMX_VM_SCRIPT");
        return;
    };
    let files: Vec<PathBuf> = std::env::var("RMX_VM_FILES")
        .map(|f| f.split(':').map(PathBuf::from).collect())
        .unwrap_or_default();
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    // Files programs load by path (UCX's transports): at their own paths.
    let mut system: Vec<PathBuf> = std::env::var("RMX_VM_SYSTEM")
        .map(|f| f.split(':').map(PathBuf::from).collect())
        .unwrap_or_default();
    if system.iter().any(|p| p.ends_with("ucx_perftest")) {
        system.extend(ucx_modules());
    }
    let system: Vec<&Path> = system.iter().map(PathBuf::as_path).collect();
    let secs = std::env::var("RMX_VM_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    if let Some(out) = in_vm_with_system(&script, &files, &system, Duration::from_secs(secs)) {
        println!("{}", out.console);
    }
}
