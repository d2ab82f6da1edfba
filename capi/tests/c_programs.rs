//! C programs the project writes, built against `include/rmx.h` and
//! linked to this build's librmx (shared, and static), run as a user
//! would run them.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../shell-linux/tests/slurm/mod.rs"]
mod slurm;

/// Where this cargo run put librmx.so and librmx.a: beside the test
/// binary (`target/<profile>/deps`; only `cargo build` copies them up).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    exe.parent().expect("deps dir").to_path_buf()
}

/// The libraries a static librmx needs besides libc's: libibverbs when
/// the build carries the verbs transport (its features are this test's).
fn static_deps() -> Vec<&'static str> {
    let mut libs = vec!["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"];
    if rmx_linux::transport::registry::find("verbs").is_ok_and(|e| e.built) {
        libs.push("-libverbs");
    }
    libs
}

/// Compiles `program` (in tests/c) against the header and librmx, shared
/// or static; the binary.
fn build(program: &str, link_static: bool) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let libs = lib_dir();
    // Tests run in parallel and may build the same program: each build
    // its own file (one test removing its binary must not pull another's).
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "rmx-capi-{program}-{}-{}-{}",
        if link_static { "static" } else { "shared" },
        std::process::id(),
        BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(here.join("include"))
        .arg("-I")
        .arg(here.join("tests/c"))
        .arg(here.join("tests/c").join(format!("{program}.c")))
        .arg("-o")
        .arg(&out);
    if link_static {
        cc.arg(libs.join("librmx.a")).args(static_deps());
    } else {
        cc.arg("-L")
            .arg(&libs)
            .arg("-lrmx")
            .arg(format!("-Wl,-rpath,{}", libs.display()));
    }
    let done = cc.output().expect("cc runs (install gcc)");
    assert!(
        done.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// Runs `bin` (with `env`); its standard output.
fn run(bin: &Path, env: &[(&str, &str)]) -> String {
    let out = Command::new(bin)
        .envs(env.iter().copied())
        // cargo's own path would find a stale target/<profile>/librmx.so
        // before the binary's run path.
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .env_remove("PMIX_SERVER_URI41")
        .output()
        .expect("the program runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{}: {stdout}\n{stderr}",
        bin.display()
    );
    let _ = std::fs::remove_file(bin);
    stdout
}

/// Ranks as threads: every protocol's sizes byte-exact, wildcards,
/// truncation, cancel, collectives, and refused arguments as codes.
#[test]
fn ranks_as_threads_from_c_shared_and_static() {
    for link_static in [false, true] {
        let bin = build("threads", link_static);
        assert!(run(&bin, &[]).contains("threads: ok"));
    }
}

/// The core embedded (`rmx_ep_*`): two endpoints in the program's memory
/// over a port written in C, every rendezvous (and a port without RDMA)
/// byte-exact, a lossy port carried by the core's timers, collectives and
/// windows, refusals as codes.
#[test]
fn an_embedded_endpoint_over_a_port_in_c() {
    for link_static in [false, true] {
        let bin = build("embedded", link_static);
        let out = run(&bin, &[]);
        assert!(out.contains("embedded: ok"), "{out}");
        for pass in ["auto", "rput", "rget", "pull", "lossy", "no-rdma"] {
            assert!(out.contains(&format!("embedded: {pass} ok")), "{out}");
        }
    }
}

/// Windows: puts, gets and accumulates in every fence design, fences
/// blocking and started, a window under a fence refusing other calls.
#[test]
fn windows_from_c() {
    let bin = build("windows", false);
    assert!(run(&bin, &[]).contains("windows: ok"));
}

/// Hydra's `mpiexec`, if installed, and raw sockets (the `eth` transport
/// on `lo`), which need root or CAP_NET_RAW.
fn hydra_and_raw_sockets() -> Option<&'static str> {
    let hydra = rmx_linux::pmi::HYDRA;
    let found = Command::new(hydra)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: no {hydra}; install Debian's mpich (`apt-get install mpich`), as .ci/test does");
        return None;
    }
    if rmx_linux::eth::RawSocket::open("lo", rmx_core::wire::frame::ETHERTYPE, false).is_err() {
        eprintln!("skipped: raw sockets on lo need root or CAP_NET_RAW");
        return None;
    }
    Some(hydra)
}

/// Runs `bin args` under hydra as 2 processes with `env`; stdout, and
/// whether every process exited 0.
fn under_hydra(hydra: &str, bin: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, bool) {
    let mut c = Command::new(hydra);
    c.env_remove("LD_LIBRARY_PATH");
    c.args(["-launcher", "fork", "-n", "2"]);
    for (k, v) in env {
        c.args(["-genv", k, v]);
    }
    let out = c.arg(bin).args(args).output().expect("mpiexec runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprintln!("{stdout}\n{stderr}");
    }
    (stdout, out.status.success())
}

/// One rank per process under hydra (PMI-1), on `eth` over `lo` as the
/// environment says: rmx_init … rmx_finalize, and rmx_run; started
/// without a transport, the program is told what to set.
#[test]
fn ranks_as_processes_under_hydra_from_c() {
    let Some(hydra) = hydra_and_raw_sockets() else {
        return;
    };
    let bin = build("launched", false);
    let eth = [("RMX_TRANSPORT", "eth"), ("RMX_IFACE", "lo")];
    let (out, ok) = under_hydra(hydra, &bin, &[], &eth);
    assert!(
        ok && out.contains("rank 0: ok") && out.contains("rank 1: ok"),
        "{out}"
    );
    let (out, ok) = under_hydra(hydra, &bin, &["run"], &eth);
    assert!(ok && out.matches("rmx_run: ok").count() == 2, "{out}");
    let (out, ok) = under_hydra(hydra, &bin, &[], &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("rmx_init: transport, network or launcher could not be set up: a launcher started this process as one rank: set RMX_TRANSPORT=eth RMX_IFACE=<iface>"),
        "{out}"
    );
    let _ = std::fs::remove_file(&bin);
}

/// The same program, one rank per process, under Open MPI's `mpirun`
/// (PMIx) and Slurm's `srun` (`--mpi=pmi2` and `--mpi=pmix`), on `eth`
/// over `lo`.
#[test]
fn ranks_as_processes_under_mpirun_and_srun_from_c() {
    if hydra_and_raw_sockets().is_none() {
        return;
    }
    let bin = build("launched", false);
    let both = |out: &std::process::Output, how: &str| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("rank 0: ok") && stdout.contains("rank 1: ok"),
            "{how}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let openmpi = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"));
    if openmpi {
        let out = Command::new("mpirun")
            .env_remove("LD_LIBRARY_PATH")
            .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
            .args(["-x", "RMX_TRANSPORT=eth", "-x", "RMX_IFACE=lo"])
            .arg(&bin)
            .output()
            .expect("mpirun runs");
        both(&out, "mpirun");
    } else {
        eprintln!("skipped mpirun: no Open MPI; install Debian's openmpi-bin, as .ci/test does");
    }
    match slurm::Slurm::start() {
        Ok(slurm) => {
            for mpi in ["--mpi=pmi2", "--mpi=pmix"] {
                let out = slurm
                    .command("srun")
                    .env_remove("LD_LIBRARY_PATH")
                    .env("RMX_TRANSPORT", "eth")
                    .env("RMX_IFACE", "lo")
                    .args([mpi, "-n", "2"])
                    .arg(&bin)
                    .output()
                    .expect("srun runs");
                both(&out, mpi);
            }
        }
        Err(why) => eprintln!("skipped srun: {why}"),
    }
    let _ = std::fs::remove_file(&bin);
}
