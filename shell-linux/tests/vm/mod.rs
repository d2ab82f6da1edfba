//! A small qemu VM for tests that need a kernel this machine's cannot be:
//! Debian's own kernel (with modules such as netem, veth, rdma_rxe) booted
//! under TCG with a hand-made initramfs that holds busybox, the host
//! binaries a test names, their shared libraries, and the modules it asks
//! for. The guest runs one shell script and powers off; its console comes
//! back as the run's output. See `../shared/notes/test-vm.md` for the
//! facts this rests on.
//!
//! Kernel packages are downloaded once into `$RMX_VM_CACHE` (default
//! `target/rmx-vm`). Anything missing (root, qemu, busybox, the package)
//! is a [`Skip`] with the reason, so a test can say why it did not run.

pub mod rmx_ko;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why the VM cannot run here.
#[derive(Debug)]
pub struct Skip(pub String);

/// A guest kernel, unpacked.
pub struct Kernel {
    vmlinuz: PathBuf,
    modules: PathBuf,
}

/// What to run in the guest.
pub struct Job<'a> {
    /// Host files copied into the guest's [`JOB_DIR`] under their own
    /// names (with the shared libraries `ldd` lists for them, at their
    /// paths): a checkout anywhere on the host, under `/tmp` (a tmpfs in
    /// the guest) or in a path with spaces, runs the same. The script
    /// names them with [`in_guest`].
    pub files: &'a [&'a Path],
    /// Host files copied to the same paths in the guest (with their
    /// shared libraries): what programs load by name, such as
    /// libibverbs' providers and their `.driver` files.
    pub system: &'a [&'a Path],
    /// Modules to load, by name, dependencies first (found with modinfo).
    pub modules: &'a [&'a str],
    /// The script the guest runs (busybox sh, iproute2 first in PATH).
    pub script: &'a str,
    pub timeout: Duration,
}

/// How the guest's script ended.
pub struct Outcome {
    /// The script's exit status, if it got as far as reporting one.
    pub status: Option<i32>,
    /// Everything the guest printed on its console.
    pub console: String,
}

const MARK: &str = "RMX-VM-EXIT";

/// What init prints first: a console without it never got that far.
const BOOTED: &str = "RMX-VM-BOOTED";

/// How long the guest's kernel may take to reach init (it takes ~4 s of
/// guest time, seconds to a minute of wall time on a busy host).
const BOOT_LIMIT: Duration = Duration::from_secs(240);

/// Why a boot ended without the guest powering off.
enum Boot {
    /// The kernel never reached init: not the job's fault, worth one more boot.
    Hung(String),
    Failed(String),
}

/// Where a job's files are in the guest.
pub const JOB_DIR: &str = "/job";

/// The guest's path of the job file `host`, quoted for the script.
pub fn in_guest(host: &Path) -> String {
    let name = host.file_name().unwrap_or_default();
    quote(&Path::new(JOB_DIR).join(name))
}

/// `p` as one word of a shell command, whatever it contains.
fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn sh(cmd: &str, dir: &Path) -> Result<String, String> {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cache() -> PathBuf {
    std::env::var_os("RMX_VM_CACHE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rmx-vm"),
        PathBuf::from,
    )
}

/// Debian's kernel, downloaded and unpacked on first use.
pub fn kernel() -> Result<Kernel, Skip> {
    if let Ok(why) = std::env::var("RMX_VM_SKIP") {
        return Err(Skip(format!("RMX_VM_SKIP is set ({why})")));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Skip("not root: the guest's files are root's".into()));
    }
    for (cmd, pkg) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("cpio", "cpio"),
        ("modinfo", "kmod"),
        ("tc", "iproute2"),
    ] {
        if !have(cmd) {
            return Err(Skip(format!("no {cmd}: apt-get install {pkg}")));
        }
    }
    let dir = cache();
    std::fs::create_dir_all(&dir).map_err(|e| Skip(format!("{}: {e}", dir.display())))?;
    let unpacked = dir.join("kernel");
    if !unpacked.join("boot").exists() {
        let pkg = sh(
            "apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \\(linux-image-[^ ]*\\)/\\1/p' | head -1",
            &dir,
        )
        .map_err(Skip)?;
        let pkg = pkg.trim();
        if pkg.is_empty() {
            return Err(Skip(
                "apt knows no linux-image-amd64: apt-get update".into(),
            ));
        }
        sh(
            &format!("rm -f linux-image-*.deb && apt-get download {pkg}"),
            &dir,
        )
        .map_err(|e| Skip(format!("cannot download the guest kernel: {e}")))?;
        let tmp = dir.join("kernel.part");
        let _ = std::fs::remove_dir_all(&tmp);
        sh(
            &format!("dpkg-deb -x linux-image-*.deb {}", quote(&tmp)),
            &dir,
        )
        .map_err(Skip)?;
        std::fs::rename(&tmp, &unpacked).map_err(|e| Skip(e.to_string()))?;
    }
    let find = |sub: &str, prefix: &str| -> Result<PathBuf, Skip> {
        std::fs::read_dir(unpacked.join(sub))
            .map_err(|e| Skip(format!("{sub}: {e}")))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .ok_or_else(|| Skip(format!("no {prefix}* in the kernel package")))
    };
    Ok(Kernel {
        vmlinuz: find("boot", "vmlinuz-")?,
        modules: find("lib/modules", "")?,
    })
}

impl Kernel {
    /// The guest kernel's release (`6.1.0-56-amd64`): what a module built
    /// for it must be built against.
    #[allow(dead_code)]
    pub fn release(&self) -> String {
        self.modules
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }

    /// The module `name`'s file and those it depends on, dependencies first.
    fn module_files(&self, name: &str, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let want = name.replace('-', "_");
        let path = walk(&self.modules)
            .into_iter()
            .find(|p| {
                let f = p.file_name().unwrap_or_default().to_string_lossy();
                let stem = f.split(".ko").next().unwrap_or_default().replace('-', "_");
                f.contains(".ko") && stem == want
            })
            .ok_or_else(|| format!("module {name} is not in the guest kernel"))?;
        if out.contains(&path) {
            return Ok(());
        }
        let deps = sh(
            &format!("modinfo -F depends {}", quote(&path)),
            Path::new("/"),
        )?;
        for d in deps.trim().split(',').filter(|d| !d.is_empty()) {
            self.module_files(d, out)?;
        }
        if !out.contains(&path) {
            out.push(path);
        }
        Ok(())
    }

    /// Boots the guest on `job` and waits for it to power off.
    pub fn run(&self, job: &Job) -> Result<Outcome, String> {
        let root = tempdir()?;
        let r = root.path();
        for d in [
            "bin", "sbin", "usr/bin", "usr/sbin", "lib", "lib64", "modules", "etc", "var",
        ] {
            std::fs::create_dir_all(r.join(d)).map_err(|e| e.to_string())?;
        }
        let busybox = sh("command -v busybox", Path::new("/"))?;
        copy_to(Path::new(busybox.trim()), &r.join("bin/busybox"))?;
        // iproute2 rather than busybox's: it has netns and tc.
        let tools: Vec<PathBuf> = ["ip", "tc"]
            .iter()
            .map(|c| {
                sh(&format!("command -v {c}"), Path::new("/")).map(|p| PathBuf::from(p.trim()))
            })
            .collect::<Result<_, _>>()?;
        let job_dir = r.join(JOB_DIR.trim_start_matches('/'));
        let placed = tools
            .iter()
            .map(|f| (f.as_path(), r.join(f.strip_prefix("/").unwrap_or(f))))
            .chain(
                job.files
                    .iter()
                    .map(|f| (*f, job_dir.join(f.file_name().unwrap_or_default()))),
            )
            .chain(
                job.system
                    .iter()
                    .map(|f| (*f, r.join(f.strip_prefix("/").unwrap_or(f)))),
            );
        for (f, to) in placed {
            copy_to(f, &to)?;
            let libs = sh(&format!("ldd {} || true", quote(f)), Path::new("/"))?;
            for lib in libs.split_whitespace().filter(|w| w.starts_with('/')) {
                let lib = Path::new(lib);
                copy_to(lib, &r.join(lib.strip_prefix("/").unwrap_or(lib)))?;
            }
        }
        let mut mods = Vec::new();
        for m in job.modules {
            self.module_files(m, &mut mods)?;
        }
        let mut order = String::new();
        for m in &mods {
            let name = m
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if let Some(stem) = name.strip_suffix(".xz") {
                sh(
                    &format!(
                        "xz -dc {} > {}",
                        quote(m),
                        quote(&r.join("modules").join(stem))
                    ),
                    r,
                )?;
                order.push_str(stem);
            } else {
                copy_to(m, &r.join("modules").join(&name))?;
                order.push_str(&name);
            }
            order.push('\n');
        }
        write(&r.join("modules.order"), &order)?;
        write(&r.join("run.sh"), job.script)?;
        write(&r.join("init"), &init_script())?;
        sh(
            "chmod +x init && find . | cpio -o -H newc 2>/dev/null | gzip -1 > ../initrd.gz",
            r,
        )?;
        let initrd = r.parent().unwrap_or(r).join("initrd.gz");
        let mut boot = self.boot(job, &initrd);
        if let Err(Boot::Hung(why)) = &boot {
            // The guest's kernel, not the job, failed: boot it once more.
            eprintln!("vm: {why}; booting once more");
            boot = self.boot(job, &initrd);
        }
        let _ = std::fs::remove_file(&initrd);
        let console = boot.map_err(|b| match b {
            Boot::Hung(why) | Boot::Failed(why) => why,
        })?;
        let status = console
            .lines()
            .find_map(|l| l.trim().strip_prefix(MARK))
            .and_then(|s| s.trim().parse().ok());
        Ok(Outcome { status, console })
    }
    /// Boots the guest on `job` with `initrd` and waits for it to power
    /// off: its console. A guest whose init has not started within
    /// [`BOOT_LIMIT`] is [`Boot::Hung`].
    fn boot(&self, job: &Job, initrd: &Path) -> Result<String, Boot> {
        let mut child = Command::new("qemu-system-x86_64")
            .args(["-accel", "tcg,thread=multi", "-cpu", "max", "-m", "1024"])
            .arg("-smp")
            .arg(std::env::var("RMX_VM_SMP").unwrap_or_else(|_| "2".into()))
            .args([
                "-nic",
                "none",
                "-display",
                "none",
                "-no-reboot",
                "-serial",
                "stdio",
            ])
            .args(["-monitor", "none"])
            .arg("-kernel")
            .arg(&self.vmlinuz)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(append())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Boot::Failed(format!("cannot start qemu: {e}")))?;
        let mut stdout = child.stdout.take().expect("piped");
        // A long measurement's console is also written to
        // `$RMX_VM_CONSOLE` as it comes, so a guest that runs out of time
        // does not take what it printed with it.
        let mut copy =
            std::env::var_os("RMX_VM_CONSOLE").and_then(|p| std::fs::File::create(p).ok());
        let booted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = booted.clone();
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
                s.extend_from_slice(&buf[..n]);
                if let Some(f) = copy.as_mut() {
                    let _ = std::io::Write::write_all(f, &buf[..n]);
                }
                if !seen.load(std::sync::atomic::Ordering::Relaxed)
                    && s.windows(BOOTED.len()).any(|w| w == BOOTED.as_bytes())
                {
                    seen.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            String::from_utf8_lossy(&s).into_owned()
        });
        let start = Instant::now();
        let limit = BOOT_LIMIT.min(job.timeout);
        let ended = loop {
            let failed = |e: std::io::Error| Boot::Failed(e.to_string());
            if child.try_wait().map_err(failed)?.is_some() {
                break None;
            }
            let hung =
                !booted.load(std::sync::atomic::Ordering::Relaxed) && start.elapsed() > limit;
            if hung || start.elapsed() > job.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break Some(hung);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let console = reader.join().unwrap_or_default();
        let Some(hung) = ended else {
            return Ok(console);
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        if hung {
            return Err(Boot::Hung(format!(
                "the guest's kernel did not reach init within {limit:?} (qemu said {:?}; console {:?})",
                err.trim(),
                console
            )));
        }
        Err(Boot::Failed(format!(
            "the guest did not power off within {:?} (qemu said {:?}); its console:\n{console}",
            job.timeout,
            err.trim()
        )))
    }
}

fn init_script() -> String {
    format!(
        r#"#!/bin/busybox sh
/bin/busybox echo {BOOTED}
/bin/busybox mkdir -p /proc /sys /dev /run /tmp /var
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
ln -s /run /var/run
for m in $(cat /modules.order); do insmod /modules/$m || echo "insmod $m failed"; done
/usr/sbin/ip link set lo up
cd /tmp
sh /run.sh
echo "{MARK} $?"
poweroff -f
"#
    )
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn copy_to(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}

fn write(p: &Path, s: &str) -> Result<(), String> {
    std::fs::write(p, s).map_err(|e| format!("{}: {e}", p.display()))
}

/// A directory removed on drop (with the initrd made beside it).
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

fn tempdir() -> Result<TempDir, String> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("rmx-vm-{}-{n}", std::process::id()));
    let root = base.join("root");
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    Ok(TempDir(root))
}

/// The guest kernel's command line; `$RMX_VM_APPEND` adds to it (for a
/// profile, e.g. `nopti` to see what page-table isolation costs).
fn append() -> String {
    let mut a =
        String::from("console=ttyS0 panic=-1 quiet rdinit=/init tsc=reliable clocksource=tsc");
    if let Ok(x) = std::env::var("RMX_VM_APPEND") {
        a.push(' ');
        a.push_str(&x);
    }
    a
}
