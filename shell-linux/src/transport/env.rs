//! The transport and its settings from the environment, for programs
//! that embed rmx and have no command line of their own (a C runtime, an
//! MPI library): `RMX_TRANSPORT` names it (as `--transport`; `loop` when
//! unset), `RMX_IFACE` and `RMX_DEVICE` give its interface or device (as
//! `--iface`, `--device`). Each variable is handed to the transports'
//! own option parsing, so a value means what the same flag means.

use clap::Parser;

use super::registry::Options;
use super::{Net, SetupError};
use crate::lab::TempLab;

/// The variables read, and the flag each stands for.
pub const VARS: &[(&str, &str)] = &[("RMX_IFACE", "--iface"), ("RMX_DEVICE", "--device")];

/// The variable naming the transport.
pub const TRANSPORT: &str = "RMX_TRANSPORT";

/// The transports' options, parsed as a command line would be.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct FromEnv {
    #[command(flatten)]
    net: Options,
}

/// Opens the network the environment names (through `get`, e.g.
/// `std::env::var`), and the lab made for it if any, for `threads` ranks
/// as threads of this process or (`launched`) for this process as one
/// rank a launcher started.
pub fn open(
    launched: bool,
    threads: u16,
    get: impl Fn(&str) -> Option<String>,
) -> Result<(Net, Option<TempLab>), SetupError> {
    let name = match get(TRANSPORT) {
        Some(t) => t,
        None if launched => return Err(unset_under_launcher()),
        None => "loop".to_string(),
    };
    let mut args = Vec::new();
    for (var, flag) in VARS {
        if let Some(v) = get(var) {
            args.push(flag.to_string());
            args.push(v);
        }
    }
    let parsed = FromEnv::try_parse_from(&args).map_err(|e| SetupError::Network {
        transport: "environment",
        why: format!(
            "{}: {}",
            VARS.iter().map(|v| v.0).collect::<Vec<_>>().join(", "),
            e.kind()
        ),
    })?;
    let name = name.trim();
    if !launched && threads > 2 {
        parsed
            .net
            .threads_share(name)
            .map_err(|give| SetupError::Network {
                transport: "environment",
                why: format!(
                    "{threads} ranks as threads of this process on {name} need {}",
                    as_vars(&give)
                ),
            })?;
    }
    parsed.net.open(name, launched).map_err(|e| match e {
        SetupError::Launched { .. } => unset_under_launcher(),
        SetupError::ForeignOption { flag, transport } => SetupError::Network {
            transport,
            why: format!("{} applies to {TRANSPORT}={transport} only", var_of(flag)),
        },
        e => e,
    })
}

/// A transport's advice in flags, in the variables' words.
fn as_vars(flags: &str) -> String {
    VARS.iter().fold(flags.to_string(), |s, (var, flag)| {
        s.replace(&format!("{flag} "), &format!("{var}="))
    })
}

/// The variable standing for `flag`.
fn var_of(flag: &str) -> &'static str {
    VARS.iter()
        .find(|(_, f)| *f == flag)
        .map_or(TRANSPORT, |(v, _)| v)
}

/// A launcher started this process, and the environment names no
/// transport that runs one rank per process: what to set.
fn unset_under_launcher() -> SetupError {
    let give: Vec<String> = super::registry::TRANSPORTS
        .iter()
        .filter(|e| e.built)
        .filter_map(|e| {
            let flags = e.launched?;
            let mut out = vec![format!("{TRANSPORT}={}", e.name)];
            for (var, flag) in VARS.iter().filter(|(_, f)| flags.contains(f)) {
                out.push(format!("{var}=<{}>", flag.trim_start_matches("--")));
            }
            Some(out.join(" "))
        })
        .collect();
    SetupError::Network {
        transport: "environment",
        why: format!(
            "a launcher started this process as one rank: set {}",
            give.join(", or ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// Unset, the transport is `loop`; a name or a value is the
    /// transports' own to check, in the variables' words.
    #[test]
    fn the_environment_names_the_transport_and_its_settings() {
        let (net, lab) = open(false, 2, env(&[])).expect("loop");
        assert_eq!(net.entry().name, "loop");
        assert!(lab.is_none());
        let e = open(false, 2, env(&[(TRANSPORT, "carrier-pigeon")])).unwrap_err();
        assert!(matches!(e, SetupError::UnknownTransport { .. }), "{e:?}");
        let e = open(false, 2, env(&[("RMX_IFACE", "lo")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "RMX_IFACE applies to RMX_TRANSPORT=eth only",
            "{e:?}"
        );
    }

    /// More than two threads on `eth` need the interface they share.
    #[test]
    fn threads_that_need_a_shared_interface_are_told_so() {
        let e = open(false, 3, env(&[(TRANSPORT, "eth")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("3 ranks as threads of this process on eth need RMX_IFACE=IF"),
            "{e}"
        );
    }

    /// Under a launcher, `loop` (or nothing) says which variables to set.
    #[test]
    fn a_launched_process_is_told_what_to_set() {
        for vars in [&[][..], &[(TRANSPORT, "loop")][..]] {
            let e = open(true, 1, env(vars)).unwrap_err().to_string();
            assert!(e.contains("set RMX_TRANSPORT=eth RMX_IFACE=<iface>"), "{e}");
        }
    }
}
