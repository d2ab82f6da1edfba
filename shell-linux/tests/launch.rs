//! `rmx bench` as one rank per process under MPICH's hydra `mpiexec`, over
//! the `eth` transport: on loopback, and in lab namespaces through hydra's
//! MPMD form; under Open MPI's `mpirun` (PMIx); and under Slurm's
//! `srun --mpi=pmi2` and `--mpi=pmix` on a private one-node Slurm. Needs
//! root (raw sockets) and mpiexec (Open MPI, Slurm for their tests);
//! skipped with the reason otherwise.

mod slurm;

use std::process::Command;

use rmx_linux::lab::{LabSpec, TempLab, IFACE};

fn ready() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root; raw sockets need it");
        return false;
    }
    let found = Command::new(rmx_linux::pmi::HYDRA)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: no mpiexec.hydra; install Debian's mpich, as .ci/test does");
    }
    found
}

const RMX: &str = env!("CARGO_BIN_EXE_rmx");

/// Runs mpiexec with `args`; its stdout, after checking it succeeded.
fn mpiexec(args: &[String]) -> String {
    let out = Command::new(rmx_linux::pmi::HYDRA)
        .args(["-launcher", "fork"])
        .args(args)
        .output()
        .expect("run mpiexec");
    succeeded(out)
}

/// A launcher's stdout, after checking it succeeded (both streams shown
/// if not).
fn succeeded(out: std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// One JSON report (rank 0's), with a positive figure under `key` per row.
fn one_report(stdout: &str, key: &str) -> serde_json::Value {
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("JSON");
    assert_eq!(docs.len(), 1, "only rank 0 reports:\n{stdout}");
    let r = docs.into_iter().next().unwrap();
    assert_eq!(r["config"]["transport"], "eth");
    let rows = r["results"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for row in rows {
        assert!(row[key].as_f64().is_some_and(|v| v > 0.0), "{row}");
    }
    r
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn pingpong_runs_as_two_processes_on_loopback() {
    if !ready() {
        return;
    }
    let out = mpiexec(&args(&[
        "-n",
        "2",
        RMX,
        "bench",
        "pingpong",
        "--transport",
        "eth",
        "--iface",
        "lo",
        "--iters",
        "300",
        "--warmup",
        "30",
        "--max-size",
        "20000",
        "--json",
    ]));
    let r = one_report(&out, "latency_us");
    // Eager, and above the eager threshold (PULL): 1 B to 16 KiB.
    assert_eq!(r["results"].as_array().unwrap().len(), 15);
}

/// Open MPI's `mpirun` bootstraps through PMIx: rmx loads the PMIx
/// library and swaps addresses through it.
#[test]
fn pingpong_runs_as_two_processes_under_open_mpis_mpirun() {
    if !ready() {
        return;
    }
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"));
    if !found {
        eprintln!("skipped: no Open MPI mpirun; install Debian's openmpi-bin, as .ci/test does");
        return;
    }
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .args([
            RMX,
            "bench",
            "pingpong",
            "--transport",
            "eth",
            "--iface",
            "lo",
        ])
        .args(["--iters", "300", "--max-size", "16384", "--json"])
        .output()
        .expect("run mpirun");
    let stdout = succeeded(out);
    let r = one_report(&stdout, "latency_us");
    assert_eq!(r["results"].as_array().unwrap().len(), 15, "1 B to 16 KiB");
    assert_eq!(r["config"]["nic"]["launch"], "rank 0 of 2 (PMIx)");
}

/// Slurm's pmi2 plugin answers the PMI-1 client on PMI_FD, and its pmix
/// plugin serves PMIx: `srun` starts the ranks as it would an MPI job's.
#[test]
fn pingpong_runs_as_two_processes_under_slurm_srun() {
    if !ready() {
        return;
    }
    let slurm = match slurm::Slurm::start() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    for (mpi, protocol) in [("--mpi=pmi2", "PMI"), ("--mpi=pmix", "PMIx")] {
        srun_pingpong(&slurm, mpi, protocol);
    }
}

fn srun_pingpong(slurm: &slurm::Slurm, mpi: &str, protocol: &str) {
    let out = slurm
        .command("srun")
        .args([mpi, "-n", "2", RMX, "bench", "pingpong"])
        .args(["--transport", "eth", "--iface", "lo", "--iters", "500"])
        .args(["--max-size", "16384", "--json"])
        .output()
        .expect("run srun");
    let stdout = succeeded(out);
    let r = one_report(&stdout, "latency_us");
    assert_eq!(
        r["results"].as_array().unwrap().len(),
        15,
        "{mpi}: 1 B to 16 KiB"
    );
    assert_eq!(
        r["config"]["nic"]["launch"],
        format!("rank 0 of 2 ({protocol})").as_str(),
        "{mpi}"
    );
}

#[test]
fn msgrate_runs_in_lab_namespaces_through_hydras_mpmd_form() {
    if !ready() {
        return;
    }
    let spec = LabSpec {
        prefix: format!("rmxl{}", std::process::id() % 100_000),
        ..LabSpec::default()
    };
    let lab = match TempLab::up(spec) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let rank = |r: u16| {
        args(&[
            "-n",
            "1",
            "ip",
            "netns",
            "exec",
            &lab.spec().netns(r),
            RMX,
            "bench",
            "msgrate",
            "--transport",
            "eth",
            "--iface",
            IFACE,
            "--iters",
            "2000",
            "--max-size",
            "64",
            "--min-size",
            "8",
            "--json",
        ])
    };
    let mut a = rank(0);
    a.push(":".into());
    a.extend(rank(1));
    let r = one_report(&mpiexec(&a), "msg_per_s");
    for row in r["results"].as_array().unwrap() {
        assert!(
            row["floor_msg_per_s"].as_f64().is_some_and(|v| v > 0.0),
            "{row}"
        );
    }
}

#[test]
fn a_launched_benchmark_refuses_what_it_cannot_run() {
    if !ready() {
        return;
    }
    let out = Command::new(rmx_linux::pmi::HYDRA)
        .args(["-launcher", "fork", "-n", "2", RMX, "bench", "pingpong"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--transport eth --iface"), "{err}");
    let out = Command::new(rmx_linux::pmi::HYDRA)
        .args(["-launcher", "fork", "-n", "3", RMX, "bench", "pingpong"])
        .args(["--transport", "eth", "--iface", "lo"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mpiexec.hydra -n 2"), "{err}");
}

/// This process's place in the job mpiexec started, and the eth transport
/// on loopback between its ranks.
fn launched_on_lo() -> (rmx_linux::job::Launch, rmx_linux::job::Net) {
    use rmx_linux::eth::EthNet;
    use rmx_linux::job::{Launch, Net};
    let pmi = rmx_linux::pmi::Pmi::from_env()
        .unwrap()
        .expect("started by mpiexec");
    let launch = Launch::new(pmi);
    let net = Net::Eth(EthNet {
        iface: "lo".into(),
        netns: Vec::new(),
        opts: rmx_linux::eth::EthOpts::default(),
        launch: Some(launch.clone()),
    });
    (launch, net)
}

/// One rank of the four-process job below (run only under mpiexec).
#[test]
fn four_process_rank() {
    if std::env::var_os("RMX_LAUNCH_CHILD").is_none() {
        return;
    }
    use rmx_core::{Source, TagSel};
    use rmx_linux::job;
    let (launch, net) = launched_on_lo();
    let n = launch.size();
    let out = job::run(n, rmx_linux::rank::loop_config(), &net, |r| {
        let me = r.rank();
        if me == 0 {
            // Every other rank's messages, by wildcard, each in its order.
            let mut next = vec![0u32; n as usize];
            for _ in 0..(n as u32 - 1) * 50 {
                let mut b = vec![0u8; 20_000];
                let st = r.recv(Source::Any, TagSel::Any, &mut b).unwrap();
                let src = st.source as usize;
                assert_eq!(st.tag, next[src]);
                let len = 100 + st.tag as usize * 397;
                assert_eq!(st.len as usize, len);
                assert!(b[..len].iter().all(|&x| x == src as u8));
                next[src] += 1;
            }
            next.iter().skip(1).all(|&k| k == 50)
        } else {
            for t in 0..50u32 {
                let len = 100 + t as usize * 397;
                r.send(0, t, &vec![me as u8; len]).unwrap();
            }
            true
        }
    });
    assert!(out[0]);
    launch.finalize().unwrap();
    println!("rank {} of {n} done", launch.rank());
}

/// Four processes under hydra over loopback: wildcard receives at rank 0
/// take every other rank's messages, eager and PULL, each in its order.
#[test]
fn four_processes_exchange_over_eth_with_wildcards() {
    if !ready() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = mpiexec(&args(&[
        "-genv",
        "RMX_LAUNCH_CHILD",
        "1",
        "-n",
        "4",
        exe.to_str().unwrap(),
        "four_process_rank",
        "--exact",
        "--nocapture",
    ]));
    assert_eq!(out.matches("done").count(), 4, "{out}");
}

/// A peer process that stops (SIGSTOP: alive to the launcher, silent on
/// the wire) mid-job: the other rank gives it up and the job ends with an
/// error naming it, never a hang.
#[test]
fn a_stopped_peer_process_ends_the_job_with_an_error_naming_it() {
    if !ready() {
        return;
    }
    let marker = format!("{}", 7_000 + std::process::id() % 1000);
    let mut child = Command::new(rmx_linux::pmi::HYDRA)
        .args(["-launcher", "fork", "-n", "2", RMX, "bench", "pingpong"])
        .args(["--transport", "eth", "--iface", "lo", "--min-size", "8"])
        .args([
            "--max-size",
            "8",
            "--iters",
            "1000000000",
            "--warmup",
            &marker,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mpiexec");
    // Rank 1's process, by its command line and PMI_RANK.
    let rank1 = || -> Option<i32> {
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
            let has = |hay: &[u8], needle: &[u8]| hay.split(|&b| b == 0).any(|w| w == needle);
            if has(&cmd, marker.as_bytes()) && has(&env, b"PMI_RANK=1") && has(&cmd, RMX.as_bytes())
            {
                return Some(pid);
            }
        }
        None
    };
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pid = rank1().expect("rank 1's process");
    // SAFETY: kill(2) on a process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the job still ran a minute after rank 1 stopped");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // SAFETY: as above; the launcher may have ended it already.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("rmx: rank 0: rank 1 stopped answering"),
        "{err}"
    );
}

/// One rank of the jobs below (run only under mpiexec): allreduces, or
/// epochs of accumulates into every rank fenced (`RMX_LAUNCH_DIE=fence`),
/// until one fails; rank 3 goes silent part way (fences: it says its
/// process id, and the test stops the process wherever it is).
#[test]
fn allreduce_until_a_peer_dies_rank() {
    let Some(what) = std::env::var_os("RMX_LAUNCH_DIE") else {
        return;
    };
    use rmx_core::collective::{Int, Op};
    use rmx_linux::job;
    let fences = what == "fence";
    let (launch, net) = launched_on_lo();
    let n = launch.size();
    job::run(n, rmx_linux::rank::loop_config(), &net, |r| {
        let me = r.rank();
        let mut win = r.win_create(4, 1).expect("a window");
        if fences && me == 3 {
            println!("rank 3 is process {}", std::process::id());
        }
        for i in 0..u32::MAX {
            if me == 3 && i == 300 && !fences {
                // Silent from here on, as a dead process is (the launcher
                // would kill the others at a death).
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
            let ended = if fences {
                let one = 1u32.to_ne_bytes();
                let mut e = Ok(());
                for t in (0..n).filter(|&t| t != me) {
                    e = e.and_then(|()| win.accumulate(r, t, 0, &one, Op::Sum, Int::U32));
                }
                e.and_then(|()| win.fence(r)).map_err(|e| format!("{e:?}"))
            } else {
                let mut v = i.to_ne_bytes();
                let e = r.allreduce(&mut v, Int::U32, Op::Sum);
                if e.is_ok() {
                    assert_eq!(u32::from_ne_bytes(v), i.wrapping_mul(n as u32));
                }
                e.map_err(|e| format!("{e:?}"))
            };
            if let Err(e) = ended {
                println!("rank {me} ended after {i}: {e}");
                return;
            }
        }
    });
}

/// Runs the job above under hydra with `what` (`RMX_LAUNCH_DIE`) until
/// three survivors ended (or 90 s passed), kills it, and checks that each
/// of the three ended with `PeerFailed`.
fn every_survivor_fails(what: &str) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(rmx_linux::pmi::HYDRA)
        .args(["-launcher", "fork"])
        .args(["-genv", "RMX_LAUNCH_DIE", what, "-n", "4"])
        .arg(exe)
        .args(["allreduce_until_a_peer_dies_rank", "--exact", "--nocapture"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("run mpiexec");
    let group = child.id() as i32;
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let start = std::time::Instant::now();
    let mut ended = Vec::new();
    while ended.len() < 3 && start.elapsed() < std::time::Duration::from_secs(90) {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            if let Some(pid) = l.strip_prefix("rank 3 is process ") {
                let pid: i32 = pid.parse().expect("a process id");
                std::thread::spawn(move || {
                    // Well into its fences, wherever it is in one.
                    std::thread::sleep(std::time::Duration::from_millis(700));
                    // SAFETY: kill(2) on a process of this test's job.
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                });
            }
            if l.contains("ended after") {
                ended.push(l);
            }
        }
    }
    // SAFETY: kill(2) on the process group this test started.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    ended.sort();
    assert_eq!(ended.len(), 3, "survivors that ended: {ended:?}");
    for (me, l) in ended.iter().enumerate() {
        assert!(l.starts_with(&format!("rank {me} ended after")), "{l}");
        assert!(l.contains("Failed(PeerFailed)"), "{l}");
    }
}

/// A rank of four that goes silent during allreduces under hydra (as a
/// process killed without the launcher's cleanup is): the ranks that
/// waited on it ended `PeerFailed`, but rank 0, waiting in a later round
/// on a live rank that had left the allreduce, waited for ever. Every
/// survivor's allreduce now ends with an error. (The processes then wait
/// for the silent one at the launcher's end of job: the test ends them.)
#[test]
fn a_silent_peer_in_an_allreduce_ends_every_survivors_allreduce() {
    if !ready() {
        return;
    }
    every_survivor_fails("allreduce");
}

/// The same in epochs of accumulates, rank 3 stopped (SIGSTOP) wherever it
/// is: a fence waits for operations from any origin, and a survivor whose
/// reduction had ended could wait there for ever on the stopped rank's.
#[test]
fn a_silent_peer_in_an_epoch_ends_every_survivors_fence() {
    if !ready() {
        return;
    }
    every_survivor_fails("fence");
}
