//! Why a job could not start: a transport not found or not built, an
//! option given to the wrong one, a network or port that did not open,
//! or the launcher's bootstrap failing. One enum, so that a C caller can
//! switch on the kind; its `Display` is what the command line prints.

use std::fmt;

/// Why a job's network, ports or bootstrap could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// `--transport` names no transport of this shell.
    UnknownTransport {
        name: String,
        known: Vec<&'static str>,
    },
    /// A known transport this build does not carry (`about` says what it
    /// needs).
    NotBuilt {
        transport: &'static str,
        about: &'static str,
    },
    /// One transport's option was given to a job on another.
    ForeignOption {
        flag: &'static str,
        transport: &'static str,
    },
    /// Faults were asked of a transport the core runs without its
    /// reliability layer; `lossy`: the transports it runs with it.
    Reliable {
        transport: &'static str,
        lossy: Vec<&'static str>,
    },
    /// A launcher started this process as one rank of `transport`, which
    /// cannot run so as set up; `give`: what would (the flags of each
    /// transport that can).
    Launched {
        transport: &'static str,
        give: Vec<String>,
    },
    /// The transport's network could not be made from its settings (an
    /// interface, a device, a lab, a size): the transport's words.
    Network {
        transport: &'static str,
        why: String,
    },
    /// Rank `rank`'s thread could not enter its network namespace.
    Placement { rank: u16, why: String },
    /// Rank `rank`'s port on `what` (an interface, a device) did not open.
    Port {
        rank: u16,
        what: String,
        why: String,
    },
    /// Rank `rank`'s port could not join its peers (their addresses, or a
    /// connection): the transport's words.
    Join { rank: u16, why: String },
    /// Rank `peer` could not open its port, as rank `rank` was told.
    PeerPort { rank: u16, peer: u16 },
    /// The launcher gave rank `rank` something that is no address for
    /// rank `peer` under `key`.
    BadAddress {
        rank: u16,
        peer: u16,
        key: String,
        value: String,
    },
    /// The launcher's process-management interface failed.
    Pmi(String),
    /// The launcher was already told this rank is done.
    Finalized,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTransport { name, known } => write!(
                f,
                "unknown transport `{name}`; choose one of: {} (see `rmx info`)",
                known.join(", ")
            ),
            Self::NotBuilt { transport, about } => write!(
                f,
                "transport `{transport}` is not available ({about}); run with --transport loop, or see `rmx info`"
            ),
            Self::ForeignOption { flag, transport } => {
                write!(f, "{flag} applies to --transport {transport} only")
            }
            Self::Reliable { transport, lossy } => write!(
                f,
                "faults need a lossy transport's reliability layer; `{transport}` is reliable: use --transport {}",
                lossy.join(" or --transport ")
            ),
            Self::Launched { give, .. } => write!(
                f,
                "under a launcher each process is one rank: give {}",
                give.join(" or ")
            ),
            Self::Network { why, .. } | Self::Placement { why, .. } | Self::Join { why, .. } => {
                f.write_str(why)
            }
            Self::Port { rank, what, why } => write!(f, "rank {rank}: cannot open {what}: {why}"),
            Self::PeerPort { rank, peer } => {
                write!(f, "rank {rank}: rank {peer} could not open its port")
            }
            Self::BadAddress {
                rank,
                peer,
                key,
                value,
            } => write!(
                f,
                "rank {rank}: rank {peer}'s address {value:?} from the launcher is not hex: is another program using the key {key} in this job?"
            ),
            Self::Pmi(e) => write!(f, "PMI: {e}"),
            Self::Finalized => f.write_str("PMI was finalized"),
        }
    }
}

impl std::error::Error for SetupError {}

/// The command line and reports carry errors as text.
impl From<SetupError> for String {
    fn from(e: SetupError) -> String {
        e.to_string()
    }
}
