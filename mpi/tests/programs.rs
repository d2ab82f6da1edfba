//! C programs built once against the MPI standard ABI, by the reference
//! implementation's compiler wrapper (PyPI's `mpich` 5.0, `mpicc_abi`),
//! and run unchanged on MPICH's `libmpi_abi.so.1` and on rmx's (chosen by
//! `LD_LIBRARY_PATH`), which must give the same answers. Also: rmx's
//! library exports every function the reference does, its `mpi.h` gives
//! the reference's values, and a program started wrongly is told what to
//! set. Multi-process runs use raw sockets on `lo` (the `eth` transport),
//! which need root: without them, or without the reference (installed by
//! `.ci/test`), the tests say so and skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[path = "../../shell-linux/tests/slurm/mod.rs"]
mod slurm;

/// The version of PyPI's `mpich` the tests take as the reference.
const MPICH: &str = "5.0.2";

/// Where `.ci/test` installs the reference: a virtual environment under
/// the user's cache (shared by every checkout), or `RMX_MPICH_ABI`.
fn reference() -> Option<PathBuf> {
    let prefix = match std::env::var_os("RMX_MPICH_ABI") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            cache.join(format!("rmx/mpich-abi-{MPICH}"))
        }
    };
    if prefix.join("bin/mpicc_abi").exists() && prefix.join("lib/libmpi_abi.so.1").exists() {
        return Some(prefix);
    }
    eprintln!(
        "skipped: no MPICH {MPICH} with the standard ABI at {}: \
         `python3 -m venv {0} && {0}/bin/pip install mpich=={MPICH}` (as .ci/test does)",
        prefix.display()
    );
    None
}

/// Raw sockets on `lo`, which the `eth` transport needs between processes.
fn raw_sockets() -> bool {
    let ok = rmx_linux::eth::RawSocket::open("lo", rmx_core::wire::frame::ETHERTYPE, false).is_ok();
    if !ok {
        eprintln!("skipped: raw sockets on lo need root or CAP_NET_RAW");
    }
    ok
}

/// The reference and raw sockets, or why not (printed).
fn setup() -> Option<PathBuf> {
    let r = reference()?;
    raw_sockets().then_some(r)
}

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A directory holding rmx's library as `libmpi_abi.so.1`, for
/// `LD_LIBRARY_PATH` (cargo leaves it as `libmpi_abi.so` beside the test).
fn rmx_lib() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let deps = std::env::current_exe()
            .expect("test binary")
            .parent()
            .expect("deps")
            .to_path_buf();
        let so = deps.join("libmpi_abi.so");
        assert!(so.exists(), "{} was built with the tests", so.display());
        // In cargo's scratch folder for tests, one per profile, so that
        // nothing is left behind in /tmp and profiles never share a link.
        let profile = deps.parent().and_then(|p| p.file_name()).expect("profile");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("mpi-lib")
            .join(profile);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let link = dir.join("libmpi_abi.so.1");
        let _ = std::fs::remove_file(&link);
        match std::os::unix::fs::symlink(&so, &link) {
            // Another run of this profile made the same link meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            r => r.expect("symlink"),
        }
        dir
    })
}

/// `program` (from tests/c) built once with the reference's `mpicc_abi`.
fn built(mpich: &Path, program: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!("rmx-mpi-{program}-{}", std::process::id()));
    let done = Command::new(mpich.join("bin/mpicc_abi"))
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(here().join("tests/c"))
        .arg(here().join(format!("tests/c/{program}.c")))
        .arg("-o")
        .arg(&out)
        .output()
        .expect("mpicc_abi runs");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// Which library a run loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lib {
    Mpich,
    Rmx,
}

/// `bin` as `n` processes under the reference's hydra on `lib`, rmx on
/// `eth` over `lo`; with `env` besides.
fn hydra(mpich: &Path, lib: Lib, n: u32, bin: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("600").arg(mpich.join("bin/mpiexec"));
    c.args(["-launcher", "fork", "-n", &n.to_string()]);
    match lib {
        Lib::Mpich => c.env("LD_LIBRARY_PATH", mpich.join("lib")),
        Lib::Rmx => c
            .env("LD_LIBRARY_PATH", rmx_lib())
            .env("RMX_TRANSPORT", "eth")
            .env("RMX_IFACE", "lo"),
    };
    c.envs(env.iter().copied());
    c.arg(bin).output().expect("mpiexec runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every MPI function name a shared library exports.
fn exports(so: &Path) -> BTreeSet<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(so)
        .output()
        .expect("nm runs (binutils)");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("MPI_"))
        .map(str::to_string)
        .collect()
}

/// rmx's library exports exactly the functions the reference does, so
/// any program built against the standard ABI links; its SONAME is the
/// standard's.
#[test]
fn every_function_of_the_standard_abi_is_exported() {
    let Some(mpich) = reference() else {
        return;
    };
    let ours = exports(&rmx_lib().join("libmpi_abi.so.1"));
    let theirs = exports(&mpich.join("lib/libmpi_abi.so.1"));
    let missing: Vec<_> = theirs.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    let d = Command::new("readelf")
        .arg("-d")
        .arg(rmx_lib().join("libmpi_abi.so.1"))
        .output()
        .expect("readelf runs");
    assert!(String::from_utf8_lossy(&d.stdout).contains("[libmpi_abi.so.1]"));
}

/// Every constant of rmx's `mpi.h` has the value the reference's header
/// gives it (printed by one C program built against each).
#[test]
fn the_headers_values_are_the_standards() {
    let Some(mpich) = reference() else {
        return;
    };
    let header = std::fs::read_to_string(here().join("include/mpi.h")).expect("mpi.h");
    let mut names = BTreeSet::new();
    for line in header.lines() {
        let t = line.trim();
        let name = if let Some(rest) = t.strip_prefix("#define ") {
            rest.split_whitespace().next()
        } else if t.starts_with("MPI_") && t.contains(" = ") {
            t.split_whitespace().next()
        } else {
            None
        };
        if let Some(n) = name.filter(|n| n.starts_with("MPI_") && *n != "MPI_H") {
            names.insert(n.to_string());
        }
    }
    assert!(names.len() > 250, "{} constants found", names.len());
    let mut c = String::from(
        "#include <mpi.h>\n#include <stdio.h>\n#include <stdint.h>\nint main(void) {\n",
    );
    for n in &names {
        c += &format!("    printf(\"{n} %lld\\n\", (long long)(intptr_t)({n}));\n");
    }
    c += "    printf(\"sizeof(MPI_Status) %zu\\n\", sizeof(MPI_Status));\n    return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("rmx-mpi-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("values.c"), c).expect("write");
    let run = |cc: &mut Command, name: &str| {
        let bin = dir.join(name);
        let o = cc
            .arg(dir.join("values.c"))
            .arg("-o")
            .arg(&bin)
            .output()
            .expect("cc runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = Command::new(&bin)
            .env("LD_LIBRARY_PATH", mpich.join("lib"))
            .output()
            .expect("runs");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let ours = run(
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Werror", "-I"])
            .arg(here().join("include")),
        "ours",
    );
    let theirs = run(&mut Command::new(mpich.join("bin/mpicc_abi")), "theirs");
    for (a, b) in ours.lines().zip(theirs.lines()) {
        assert_eq!(a, b, "rmx's mpi.h against the reference");
    }
    assert_eq!(ours.lines().count(), names.len() + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The behaviour suite, one binary, on MPICH and on rmx with 2 and 3
/// ranks: the same lines.
#[test]
fn the_suite_gives_the_same_answers_on_mpich_and_rmx() {
    let Some(mpich) = setup() else {
        return;
    };
    let bin = built(&mpich, "suite");
    for n in [2, 3] {
        let runs: Vec<_> = [Lib::Mpich, Lib::Rmx]
            .into_iter()
            .map(|lib| {
                let o = hydra(&mpich, lib, n, &bin, &[]);
                let (out, err) = text(&o);
                assert!(o.status.success(), "{lib:?} with {n} ranks:\n{out}\n{err}");
                assert!(out.contains(&format!("suite: {n} ranks passed")), "{out}");
                out
            })
            .collect();
        assert_eq!(runs[0], runs[1], "{n} ranks: MPICH's lines, then rmx's");
    }
    let _ = std::fs::remove_file(&bin);
}

/// The benchmark programs, one binary each, on both libraries (short
/// runs): each checks its own data, and both give a line per size.
#[test]
fn the_benchmark_programs_run_on_mpich_and_rmx() {
    let Some(mpich) = setup() else {
        return;
    };
    for (program, n) in [
        ("latency", 2),
        ("bw", 2),
        ("mbw_mr", 4),
        ("put_latency", 2),
        ("allreduce", 3),
        ("barrier", 3),
    ] {
        let bin = built(&mpich, program);
        let sizes: Vec<Vec<String>> = [Lib::Mpich, Lib::Rmx]
            .into_iter()
            .map(|lib| {
                let o = hydra(&mpich, lib, n, &bin, &[("BENCH_SCALE", "1")]);
                let (out, err) = text(&o);
                assert!(o.status.success(), "{program} on {lib:?}:\n{out}\n{err}");
                out.lines()
                    .filter(|l| !l.starts_with('#'))
                    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                    .collect()
            })
            .collect();
        assert!(!sizes[0].is_empty(), "{program} printed figures");
        if program != "barrier" {
            assert_eq!(sizes[0], sizes[1], "{program}: the same sizes");
        }
        let _ = std::fs::remove_file(&bin);
    }
}

/// A program built against rmx's own `mpi.h` and linked to rmx's library
/// runs on it, and on MPICH's (the same ABI both ways).
#[test]
fn a_program_built_against_rmxs_header_runs_on_both() {
    let Some(mpich) = setup() else {
        return;
    };
    let bin = std::env::temp_dir().join(format!("rmx-mpi-own-suite-{}", std::process::id()));
    let done = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(here().join("include"))
        .arg("-I")
        .arg(here().join("tests/c"))
        .arg(here().join("tests/c/suite.c"))
        .arg("-o")
        .arg(&bin)
        .arg(rmx_lib().join("libmpi_abi.so.1"))
        .output()
        .expect("cc runs");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    for lib in [Lib::Rmx, Lib::Mpich] {
        let o = hydra(&mpich, lib, 2, &bin, &[]);
        let (out, err) = text(&o);
        assert!(
            o.status.success() && out.contains("suite: 2 ranks passed"),
            "{lib:?}:\n{out}\n{err}"
        );
    }
    let _ = std::fs::remove_file(&bin);
}

/// The same binary on rmx under Open MPI's `mpirun` (PMIx) and Slurm's
/// `srun` (PMI-2 and PMIx), as under hydra.
#[test]
fn the_suite_runs_under_mpirun_and_srun() {
    let Some(mpich) = setup() else {
        return;
    };
    let bin = built(&mpich, "suite");
    let ok = |o: &Output, how: &str| {
        let (out, err) = text(o);
        assert!(
            o.status.success() && out.contains("suite: 2 ranks passed"),
            "{how}:\n{out}\n{err}"
        );
    };
    let openmpi = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"));
    if openmpi {
        let o = Command::new("timeout")
            .args([
                "600",
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                "2",
            ])
            .args(["-x", "RMX_TRANSPORT=eth", "-x", "RMX_IFACE=lo", "-x"])
            .arg(format!("LD_LIBRARY_PATH={}", rmx_lib().display()))
            .arg(&bin)
            .output()
            .expect("mpirun runs");
        ok(&o, "mpirun");
    } else {
        eprintln!("skipped mpirun: no Open MPI; install Debian's openmpi-bin, as .ci/test does");
    }
    match slurm::Slurm::start() {
        Ok(s) => {
            for mpi in ["--mpi=pmi2", "--mpi=pmix"] {
                let o = s
                    .command("srun")
                    .env("LD_LIBRARY_PATH", rmx_lib())
                    .env("RMX_TRANSPORT", "eth")
                    .env("RMX_IFACE", "lo")
                    .args([mpi, "-n", "2"])
                    .arg(&bin)
                    .output()
                    .expect("srun runs");
                ok(&o, mpi);
            }
        }
        Err(why) => eprintln!("skipped srun: {why}"),
    }
    let _ = std::fs::remove_file(&bin);
}

/// Started without a launcher, or under one without a transport, a
/// program is told what to do, and fails.
#[test]
fn a_program_started_wrongly_says_what_to_set() {
    let Some(mpich) = reference() else {
        return;
    };
    let bin = built(&mpich, "barrier");
    let alone = Command::new(&bin)
        .env("LD_LIBRARY_PATH", rmx_lib())
        .env_remove("PMI_FD")
        .env_remove("PMI_RANK")
        .env_remove("PMIX_RANK")
        .env_remove("SLURM_PROCID")
        .output()
        .expect("runs");
    let (_, err) = text(&alone);
    assert!(!alone.status.success());
    assert!(
        err.contains("MPI_Init") && err.contains("mpiexec -n N"),
        "{err}"
    );
    let launched = {
        let mut c = Command::new("timeout");
        c.arg("300")
            .arg(mpich.join("bin/mpiexec"))
            .args(["-launcher", "fork", "-n", "2"]);
        c.env("LD_LIBRARY_PATH", rmx_lib())
            .env_remove("RMX_TRANSPORT");
        c.arg(&bin).output().expect("mpiexec runs")
    };
    let (_, err) = text(&launched);
    assert!(!launched.status.success());
    assert!(
        err.contains("set RMX_TRANSPORT=eth RMX_IFACE=<iface>"),
        "{err}"
    );
    let _ = std::fs::remove_file(&bin);
}
