//! The transports rmx knows, in one table: what `--transport` accepts,
//! what `rmx info` lists, and what a command refuses with a reason. Each
//! transport's module defines its own entry; a new transport adds its
//! module and one line here.

/// One transport: its name on command lines and in reports, a line about
/// it, whether this build carries it, and what its benchmarks' floor is
/// (the legend of the floor's curve).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub built: bool,
    pub floor: &'static str,
}

/// rdma-core verbs, named so that users asking for it learn why it fails.
const VERBS: Entry = Entry {
    name: "verbs",
    about: "rdma-core verbs RC queue pairs: not in this build yet",
    built: false,
    floor: "",
};

/// Every transport, the default first.
pub const TRANSPORTS: [Entry; 3] = [crate::loopnic::ENTRY, crate::eth::ENTRY, VERBS];

/// The transport `name` names, if this build carries it; else what to do.
pub fn find(name: &str) -> Result<&'static Entry, String> {
    match TRANSPORTS.iter().find(|t| t.name == name) {
        Some(t) if t.built => Ok(t),
        Some(t) => Err(format!(
            "transport `{}` is not available ({}); run with --transport loop, or see `rmx info`",
            t.name, t.about
        )),
        None => {
            let names: Vec<&str> = TRANSPORTS.iter().map(|t| t.name).collect();
            Err(format!(
                "unknown transport `{name}`; choose one of: {} (see `rmx info`)",
                names.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_is_found_refused_with_its_reason_or_unknown() {
        assert_eq!(find("loop").map(|t| t.name), Ok("loop"));
        assert_eq!(TRANSPORTS[0].name, "loop", "the default first");
        let verbs = find("verbs").unwrap_err();
        assert!(
            verbs.contains("not in this build") && verbs.contains("--transport loop"),
            "{verbs}"
        );
        let what = find("ib").unwrap_err();
        assert!(what.contains("choose one of: loop, eth, verbs"), "{what}");
    }
}
