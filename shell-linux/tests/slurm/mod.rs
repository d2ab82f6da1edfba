//! A private one-node Slurm for a test: munged, slurmctld and slurmd of
//! Debian's `slurm-wlm` and `munge`, started as root with their state,
//! sockets, logs and ports of their own under a temporary directory, and
//! stopped when dropped. `srun` runs against it through `SLURM_CONF`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct Slurm {
    dir: PathBuf,
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

fn hostname() -> Result<String, String> {
    let out = Command::new("hostname")
        .arg("-s")
        .output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn ok(o: std::io::Result<Output>, what: &str) -> Result<(), String> {
    let o = o.map_err(|e| format!("{what}: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("{what}: {}", String::from_utf8_lossy(&o.stderr)))
    }
}

impl Slurm {
    /// Starts the daemons; `Err` says why Slurm cannot run here.
    pub fn start() -> Result<Slurm, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: the daemons run as root".into());
        }
        for (cmd, pkg) in [
            ("srun", "slurm-wlm"),
            ("slurmd", "slurm-wlm"),
            ("slurmctld", "slurm-wlm"),
            ("munged", "munge"),
        ] {
            if !have(cmd) {
                return Err(format!("no {cmd}: apt-get install {pkg}"));
            }
        }
        let key = Path::new("/etc/munge/munge.key");
        if !key.exists() {
            return Err("no /etc/munge/munge.key: reinstall munge".into());
        }
        let dir = std::env::temp_dir().join(format!("rmx-slurm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["state", "spool", "log", "run", "munge", "tmp"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        // From here the daemons started are stopped on the way out.
        let s = Slurm { dir };
        let d = s.dir.display().to_string();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(s.dir.join("munge"), std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        ok(
            Command::new("munged")
                .arg("--force")
                .arg(format!("--socket={d}/munge/sock"))
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--pid-file={d}/munge/pid"))
                .arg(format!("--log-file={d}/munge/log"))
                .arg(format!("--seed-file={d}/munge/seed"))
                .output(),
            "munged",
        )?;
        let host = hostname()?;
        // Ports of this test's own, away from a system Slurm's 6817/6818.
        let port = 20_000 + (std::process::id() % 20_000) * 2;
        let conf = [
            "ClusterName=rmxtest".to_string(),
            format!("SlurmctldHost={host}"),
            format!("SlurmctldPort={port}"),
            format!("SlurmdPort={}", port + 1),
            "AuthType=auth/munge".into(),
            format!("AuthInfo=socket={d}/munge/sock"),
            "CredType=cred/munge".into(),
            "SlurmUser=root".into(),
            "SlurmdUser=root".into(),
            format!("StateSaveLocation={d}/state"),
            format!("SlurmdSpoolDir={d}/spool"),
            // The PMIx plugin's per-step directories live here, not in
            // the machine's /tmp, where one left by an aborted run would
            // refuse the same step of the next.
            format!("TmpFS={d}/tmp"),
            format!("SlurmctldPidFile={d}/run/slurmctld.pid"),
            format!("SlurmdPidFile={d}/run/slurmd.pid"),
            format!("SlurmctldLogFile={d}/log/slurmctld.log"),
            format!("SlurmdLogFile={d}/log/slurmd.log"),
            "ProctrackType=proctrack/linuxproc".into(),
            "TaskPlugin=task/none".into(),
            "MpiDefault=none".into(),
            "ReturnToService=2".into(),
            "SchedulerType=sched/builtin".into(),
            "SelectType=select/cons_tres".into(),
            "SelectTypeParameters=CR_Core".into(),
            "JobCompType=jobcomp/none".into(),
            "AccountingStorageType=accounting_storage/none".into(),
            format!("NodeName={host} CPUs=2 State=UNKNOWN"),
            format!(
                "PartitionName=rmx Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
            ),
        ]
        .join("\n");
        std::fs::write(s.conf(), conf + "\n").map_err(|e| e.to_string())?;
        ok(
            Command::new("slurmctld")
                .arg("-f")
                .arg(s.conf())
                .arg("-i")
                .output(),
            "slurmctld",
        )?;
        ok(
            Command::new("slurmd").arg("-f").arg(s.conf()).output(),
            "slurmd",
        )?;
        let start = Instant::now();
        loop {
            let o = s.command("sinfo").args(["-h", "-o", "%t"]).output();
            if o.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
                return Ok(s);
            }
            if start.elapsed() > Duration::from_secs(30) {
                let log = std::fs::read_to_string(s.dir.join("log/slurmd.log")).unwrap_or_default();
                return Err(format!("the node never became idle; slurmd.log:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// A Slurm command (`srun`, `sinfo`) aimed at this instance.
    pub fn command(&self, cmd: &str) -> Command {
        let mut c = Command::new(cmd);
        c.env("SLURM_CONF", self.conf());
        c
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for pid in ["run/slurmd.pid", "run/slurmctld.pid", "munge/pid"] {
            let Ok(p) = std::fs::read_to_string(self.dir.join(pid)) else {
                continue;
            };
            if let Ok(p) = p.trim().parse::<i32>() {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(p, libc::SIGTERM) };
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
