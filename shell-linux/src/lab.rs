//! `rmx lab`: a network on one machine for the `eth` transport, with real
//! faults. N network namespaces, each with one interface named [`IFACE`],
//! joined by a veth pair (two ranks) or through a bridge in a namespace of
//! its own (more); link addresses exist only inside those namespaces.
//! Faults are the kernel's netem qdisc on each rank's interface. Needs
//! root (CAP_NET_ADMIN); everything it makes is removed by [`Lab::down`],
//! also when `up` fails half way.

use std::process::Command;

/// The interface each rank's namespace has.
pub const IFACE: &str = "rmxeth";

/// What `rmx lab up` builds.
#[derive(Clone, Debug, PartialEq)]
pub struct LabSpec {
    /// Namespaces are `{prefix}0`, `{prefix}1`, … and `{prefix}-br`.
    pub prefix: String,
    pub ranks: u16,
    pub mtu: u32,
    /// Per cent of frames lost, duplicated, reordered on each interface.
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
    /// Added to every frame, microseconds.
    pub delay_us: u64,
}

impl Default for LabSpec {
    fn default() -> Self {
        LabSpec {
            prefix: "rmx".into(),
            ranks: 2,
            mtu: 9000,
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            delay_us: 0,
        }
    }
}

/// The largest lab: bridge ports and namespaces are cheap, but a job on
/// one 2-core machine is no larger.
pub const MAX_RANKS: u16 = 256;

impl LabSpec {
    /// Values the kernel accepts, or what to change.
    pub fn check(&self) -> Result<(), String> {
        let name_ok = !self.prefix.is_empty()
            && self.prefix.len() <= 32
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !name_ok {
            return Err(format!(
                "lab prefix {:?}: 1 to 32 letters, digits or '_'",
                self.prefix
            ));
        }
        if !(2..=MAX_RANKS).contains(&self.ranks) {
            return Err(format!(
                "--ranks {}: a lab has 2 to {MAX_RANKS} ranks",
                self.ranks
            ));
        }
        if !(68..=65535).contains(&self.mtu) {
            return Err(format!("--mtu {}: 68 to 65535 bytes", self.mtu));
        }
        for (name, p) in [
            ("loss", self.loss),
            ("dup", self.dup),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=100.0).contains(&p) {
                return Err(format!("--{name} {p}: a percentage, 0 to 100"));
            }
        }
        if self.delay_us > 10_000_000 {
            return Err(format!(
                "--delay {}: at most 10 s (10000000 µs)",
                self.delay_us
            ));
        }
        if self.reorder > 0.0 && self.delay_us == 0 {
            return Err("--reorder needs --delay: netem reorders by sending some frames at once and delaying the rest".into());
        }
        Ok(())
    }

    fn faulty(&self) -> bool {
        self.loss > 0.0 || self.dup > 0.0 || self.reorder > 0.0 || self.delay_us > 0
    }

    /// The namespace of rank `r`.
    pub fn netns(&self, r: u16) -> String {
        format!("{}{r}", self.prefix)
    }

    fn bridge_ns(&self) -> String {
        format!("{}-br", self.prefix)
    }
}

/// Runs `cmd args`; the error says which command failed and what it printed.
fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e} (install iproute2)"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The namespaces that exist now.
fn namespaces() -> Result<Vec<String>, String> {
    Ok(run("ip", &["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect())
}

/// A lab that is up.
#[derive(Debug)]
pub struct Lab {
    pub spec: LabSpec,
}

/// The lab's namespaces among `all`.
fn ours(spec: &LabSpec, all: &[String]) -> Vec<String> {
    all.iter()
        .filter(|n| {
            n.strip_prefix(spec.prefix.as_str()).is_some_and(|rest| {
                rest == "-br" || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .cloned()
        .collect()
}

impl Lab {
    /// Builds the lab `spec` describes.
    pub fn up(spec: &LabSpec) -> Result<Lab, String> {
        spec.check()?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "rmx lab needs root (CAP_NET_ADMIN) to make network namespaces: run it with sudo"
                    .into(),
            );
        }
        if !ours(spec, &namespaces()?).is_empty() {
            return Err(format!(
                "a lab with prefix {:?} is already up: `rmx lab down` first",
                spec.prefix
            ));
        }
        let lab = Lab { spec: spec.clone() };
        match lab.build() {
            Ok(()) => Ok(lab),
            Err(e) => {
                let _ = Lab::down(spec);
                Err(e)
            }
        }
    }

    fn build(&self) -> Result<(), String> {
        let s = &self.spec;
        let mtu = s.mtu.to_string();
        for r in 0..s.ranks {
            run("ip", &["netns", "add", &s.netns(r)])?;
            run("ip", &["-n", &s.netns(r), "link", "set", "lo", "up"])?;
        }
        if s.ranks == 2 {
            let (a, b) = (s.netns(0), s.netns(1));
            run(
                "ip",
                &[
                    "-n", &a, "link", "add", IFACE, "mtu", &mtu, "type", "veth", "peer", "name",
                    IFACE, "netns", &b, "mtu", &mtu,
                ],
            )?;
        } else {
            let br = s.bridge_ns();
            run("ip", &["netns", "add", &br])?;
            run(
                "ip",
                &[
                    "-n", &br, "link", "add", "br0", "mtu", &mtu, "type", "bridge",
                ],
            )?;
            run("ip", &["-n", &br, "link", "set", "br0", "up"])?;
            for r in 0..s.ranks {
                let port = format!("p{r}");
                run(
                    "ip",
                    &[
                        "-n",
                        &s.netns(r),
                        "link",
                        "add",
                        IFACE,
                        "mtu",
                        &mtu,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        &port,
                        "netns",
                        &br,
                        "mtu",
                        &mtu,
                    ],
                )?;
                run(
                    "ip",
                    &["-n", &br, "link", "set", &port, "master", "br0", "up"],
                )?;
            }
        }
        for r in 0..s.ranks {
            let ns = s.netns(r);
            run("ip", &["-n", &ns, "link", "set", IFACE, "up"])?;
            if s.faulty() {
                self.netem(&ns)?;
            }
        }
        Ok(())
    }

    /// netem on `ns`'s interface with the spec's faults.
    fn netem(&self, ns: &str) -> Result<(), String> {
        let s = &self.spec;
        let mut args: Vec<String> = ["-n", ns, "qdisc", "add", "dev", IFACE, "root", "netem"]
            .map(String::from)
            .to_vec();
        if s.delay_us > 0 {
            args.extend(["delay".into(), format!("{}us", s.delay_us)]);
        }
        for (what, p) in [
            ("loss", s.loss),
            ("duplicate", s.dup),
            ("reorder", s.reorder),
        ] {
            if p > 0.0 {
                args.extend([what.into(), format!("{p}%")]);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run("tc", &args).map_err(|e| {
            if e.contains("unknown") {
                format!("{e}: this kernel has no netem qdisc (module sch_netem), so faults cannot be injected; load the module or run without --loss/--dup/--reorder/--delay")
            } else {
                e
            }
        })?;
        Ok(())
    }

    /// Removes every namespace of the lab `spec` names (deleting a
    /// namespace deletes its interfaces, and so their veth peers).
    pub fn down(spec: &LabSpec) -> Result<usize, String> {
        let gone = ours(spec, &namespaces()?);
        for ns in &gone {
            run("ip", &["netns", "del", ns])?;
        }
        Ok(gone.len())
    }

    /// One line per rank: namespace, interface state, MTU, qdisc.
    pub fn status(spec: &LabSpec) -> Result<Vec<RankStatus>, String> {
        let mut all = ours(spec, &namespaces()?);
        all.retain(|n| !n.ends_with("-br"));
        all.sort_by_key(|n| n[spec.prefix.len()..].parse::<u32>().unwrap_or(u32::MAX));
        all.iter()
            .map(|ns| {
                let link = run("ip", &["-n", ns, "-o", "link", "show", IFACE])?;
                let mtu = link
                    .split_whitespace()
                    .skip_while(|w| *w != "mtu")
                    .nth(1)
                    .and_then(|m| m.parse().ok())
                    .unwrap_or(0);
                let qdisc = run("tc", &["-n", ns, "qdisc", "show", "dev", IFACE])?;
                Ok(RankStatus {
                    netns: ns.clone(),
                    up: link.contains("LOWER_UP"),
                    mtu,
                    qdisc: qdisc.lines().next().unwrap_or("").trim().to_string(),
                })
            })
            .collect()
    }
}

/// What `rmx lab status` reports of a rank's namespace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RankStatus {
    pub netns: String,
    pub up: bool,
    pub mtu: u32,
    pub qdisc: String,
}

/// Labs of this process that a signal must still remove.
static PENDING: std::sync::Mutex<Vec<LabSpec>> = std::sync::Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<LabSpec>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A lab made for one run (`--transport eth` without `--iface`): removed
/// when dropped, so also when the run fails, and on Ctrl-C or SIGTERM.
#[derive(Debug)]
pub struct TempLab {
    spec: LabSpec,
}

impl TempLab {
    /// Makes the lab `spec` names; `Err` says why (and removes what it made).
    pub fn up(spec: LabSpec) -> Result<TempLab, String> {
        static HANDLER: std::sync::Once = std::sync::Once::new();
        HANDLER.call_once(|| {
            // Another handler of the embedding program wins: then only
            // dropping the lab removes it.
            let _ = ctrlc::set_handler(|| {
                for s in pending().drain(..) {
                    let _ = Lab::down(&s);
                }
                std::process::exit(130);
            });
        });
        pending().push(spec.clone());
        match Lab::up(&spec) {
            Ok(_) => Ok(TempLab { spec }),
            Err(e) => {
                pending().retain(|s| s != &spec);
                Err(e)
            }
        }
    }

    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }
}

impl Drop for TempLab {
    fn drop(&mut self) {
        pending().retain(|s| s != &self.spec);
        let _ = Lab::down(&self.spec);
    }
}
