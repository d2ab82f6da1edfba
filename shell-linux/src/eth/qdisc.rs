//! Whether an interface's queueing discipline must be kept: a socket that
//! bypasses the qdisc (`PACKET_QDISC_BYPASS`, a few hundred nanoseconds a
//! frame) also skips a netem or shaper someone put there on purpose, such
//! as `rmx lab up --loss`.

use std::process::Command;

/// Root qdiscs the kernel sets up by itself: nothing is lost by going past them.
const DEFAULTS: [&str; 6] = ["noqueue", "pfifo_fast", "fq_codel", "mq", "fq", "pfifo"];

/// The kind of `iface`'s root qdisc in this thread's network namespace, as
/// `tc qdisc show` names it; `None` if it cannot be told (no `tc`).
pub fn root_kind(iface: &str) -> Option<String> {
    let out = Command::new("tc")
        .args(["qdisc", "show", "dev", iface, "root"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_root(&text).map(str::to_owned)
}

fn parse_root(show: &str) -> Option<&str> {
    show.lines()
        .find(|l| l.contains(" root"))
        .and_then(|l| l.strip_prefix("qdisc "))
        .and_then(|l| l.split_whitespace().next())
}

/// Frames to `iface` must go through its qdisc: one was set on purpose.
pub fn must_keep(iface: &str) -> bool {
    root_kind(iface).is_some_and(|k| !DEFAULTS.contains(&k.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_qdisc_is_read_from_tc() {
        let netem = "qdisc netem 8001: root refcnt 2 limit 1000 delay 50us loss 5%\n";
        assert_eq!(parse_root(netem), Some("netem"));
        assert_eq!(
            parse_root("qdisc noqueue 0: root refcnt 2\n"),
            Some("noqueue")
        );
        assert_eq!(parse_root(""), None);
        assert_eq!(
            root_kind("lo").as_deref().map(|k| DEFAULTS.contains(&k)),
            Some(true)
        );
        assert!(!must_keep("no-such-interface"));
    }
}
