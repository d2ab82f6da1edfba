//! Ranks that are processes, started by MPICH's hydra (`mpiexec`), find each
//! other through PMI-1: over the socket it hands each rank (`PMI_FD`) and
//! over its port model (`-pmi-port`: `PMI_PORT` and `PMI_ID`).

use std::process::Command;

use rmx_linux::pmi::Pmi;

/// What each rank runs under `mpiexec`; run directly, it has nothing to do.
#[test]
fn rank_under_a_launcher() {
    if std::env::var_os("RMX_PMI_CHILD").is_none() {
        return;
    }
    let mut p = Pmi::from_env()
        .expect("PMI connection")
        .expect("started by a PMI launcher");
    let mine = format!("{:04x}beef", p.rank());
    let all = p.exchange("addr", &mine).expect("exchange");
    for (r, v) in all.iter().enumerate() {
        assert_eq!(v, &format!("{r:04x}beef"), "rank {r}'s address");
    }
    println!("rank {} of {}: {}", p.rank(), p.size(), all.join(","));
    p.finalize().expect("finalize");
}

/// Hydra's `mpiexec`, if Debian's `mpich` is installed.
fn mpiexec() -> Option<&'static str> {
    let found = Command::new(rmx_linux::pmi::HYDRA)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: no mpiexec.hydra; install Debian's mpich (`apt-get install mpich`), as .ci/test does");
    }
    found.then_some(rmx_linux::pmi::HYDRA)
}

fn job(extra: &[&str]) {
    let Some(mpiexec) = mpiexec() else { return };
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(mpiexec)
        .args([
            "-launcher",
            "fork",
            "-n",
            "3",
            "-genv",
            "RMX_PMI_CHILD",
            "1",
        ])
        .args(extra)
        .arg(&exe)
        .args([
            "rank_under_a_launcher",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .output()
        .expect("run mpiexec");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let all = "0000beef,0001beef,0002beef";
    for r in 0..3 {
        let line = format!("rank {r} of 3: {all}");
        assert!(
            stdout.contains(&line),
            "no {line:?} in:\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn hydra_starts_ranks_that_exchange_addresses_over_pmi_fd() {
    job(&[]);
}

#[test]
fn hydra_starts_ranks_that_exchange_addresses_over_pmi_port() {
    job(&["-pmi-port"]);
}

#[test]
fn a_process_not_started_by_a_launcher_has_no_pmi() {
    if std::env::var_os("PMI_FD").is_some() || std::env::var_os("PMI_PORT").is_some() {
        return; // this test binary itself runs under a launcher
    }
    assert!(Pmi::from_env().unwrap().is_none());
}

/// What only this test's own process sees: a `PMI_FD` that names stdout or
/// a regular file is refused instead of being taken over (and closed).
#[test]
fn a_pmi_fd_that_is_no_socket_is_refused() {
    if std::env::var_os("RMX_PMI_FD_PROBE").is_none() {
        let exe = std::env::current_exe().unwrap();
        for fd in ["1", "-3", "99999999999"] {
            let out = Command::new(&exe)
                .args([
                    "a_pmi_fd_that_is_no_socket_is_refused",
                    "--exact",
                    "--nocapture",
                ])
                .env("RMX_PMI_FD_PROBE", "1")
                .env("PMI_FD", fd)
                .env("PMI_RANK", "0")
                .env("PMI_SIZE", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "PMI_FD={fd}: {out:?}");
        }
        return;
    }
    let e = Pmi::from_env().err().expect("refused");
    assert!(matches!(e, rmx_linux::pmi::PmiError::Env(_)), "{e}");
    println!("refused: {e}");
}
