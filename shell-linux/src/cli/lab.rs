//! `rmx lab`: network namespaces joined by veth pairs or a bridge, for `eth` jobs on one host.

use super::*;

pub(crate) fn lab(cmd: LabCmd) -> Result<(), String> {
    use rmx_linux::lab::{Lab, LabSpec, IFACE};
    match cmd {
        LabCmd::Up {
            ranks,
            mtu,
            loss,
            dup,
            reorder,
            delay,
        } => {
            let spec = LabSpec {
                ranks,
                mtu,
                loss,
                dup,
                reorder,
                delay_us: delay,
                ..LabSpec::default()
            };
            Lab::up(&spec)?;
            println!(
                "lab up: {ranks} ranks in namespaces {}0 … {}{}, interface {IFACE}, MTU {mtu}",
                spec.prefix,
                spec.prefix,
                ranks - 1
            );
            Ok(())
        }
        LabCmd::Down => {
            let n = Lab::down(&LabSpec::default())?;
            println!("lab down: {n} namespaces removed");
            Ok(())
        }
        LabCmd::Exec { cmd, dry_run } => {
            let ranks = Lab::status(&LabSpec::default())?;
            if ranks.is_empty() {
                return Err("no lab is up: make one with `sudo rmx lab up`".into());
            }
            let mut args: Vec<String> = Vec::new();
            for (i, r) in ranks.iter().enumerate() {
                if i > 0 {
                    args.push(":".into());
                }
                args.extend(["-n", "1", "ip", "netns", "exec", &r.netns].map(String::from));
                args.extend(cmd.iter().cloned());
            }
            if dry_run {
                println!("{} {}", rmx_linux::pmi::HYDRA, args.join(" "));
                return Ok(());
            }
            let hydra = rmx_linux::pmi::HYDRA;
            let st = std::process::Command::new(hydra)
                .args(&args)
                .status()
                .map_err(|e| format!("cannot run {hydra}: {e} (install Debian's mpich)"))?;
            if st.success() {
                Ok(())
            } else {
                Err(format!("the job ended with {st}"))
            }
        }
        LabCmd::Status { json } => {
            let st = Lab::status(&LabSpec::default())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&st).expect("json"));
            } else if st.is_empty() {
                println!("no lab is up (`rmx lab up` makes one)");
            } else {
                for r in st {
                    let state = if r.up { "up" } else { "down" };
                    println!(
                        "{:<8} {IFACE} {state:<5} mtu {:<6} {}",
                        r.netns, r.mtu, r.qdisc
                    );
                }
            }
            Ok(())
        }
    }
}
