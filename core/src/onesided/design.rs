//! The four ways a fence can end an epoch (the fence paper's section 3),
//! as decisions a shell carries out: which operations move as RDMA and
//! which as messages, how a target learns what to wait for, and how the
//! next epoch is opened.

use crate::nic::Caps;

/// A fence design, chosen per window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Design {
    /// Fence-Def: operations are queued and sent as two-sided messages
    /// inside the closing fence, after a reduce_scatter of per-target
    /// counts. Needs no RDMA; overlaps nothing.
    Def,
    /// Fence-Imm-Naive: puts and gets issued at once as RDMA; a finish
    /// message on every channel used, a reduce_scatter of channel counts,
    /// then a flag from every rank to every other to open the next epoch.
    ImmNaive,
    /// Fence-Imm-Opt: as Naive, with a barrier instead of the all-pairs flags.
    ImmOpt,
    /// Fence-Imm-RI: puts as RDMA write with immediate, counted by the
    /// target; an allreduce of per-target counts replaces the finish
    /// messages; then a barrier.
    ImmRi,
}

/// How a target learns that every operation aimed at it has landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetCompletion {
    /// A reduce_scatter of per-target operation counts, then that many
    /// messages (each operation is one).
    CountedMessages,
    /// A reduce_scatter of channels used, then one finish message from
    /// each origin, sent after its RDMA on that channel completed locally
    /// (operations on one channel arrive in order).
    FinishMessages,
    /// An allreduce of per-target counts, then that many immediates.
    Immediates,
}

/// How the next epoch is opened, so that no operation reaches a window
/// whose rank has not finished the fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Nothing to do: operations are held until the closing fence.
    None,
    /// A flag from every rank to every other.
    AllPairs,
    /// A barrier.
    Barrier,
}

/// What one fence call does, once its assertions are taken into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steps {
    pub completion: Option<TargetCompletion>,
    pub opening: Opening,
}

impl Design {
    pub const ALL: [Design; 4] = [Design::Def, Design::ImmNaive, Design::ImmOpt, Design::ImmRi];

    /// The name `--design` and reports use.
    pub const fn name(self) -> &'static str {
        match self {
            Design::Def => "def",
            Design::ImmNaive => "naive",
            Design::ImmOpt => "opt",
            Design::ImmRi => "ri",
        }
    }

    pub fn parse(s: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Puts and gets move as RDMA when issued.
    pub const fn immediate(self) -> bool {
        !matches!(self, Design::Def)
    }

    /// The transport can carry this design.
    pub const fn offered(self, caps: &Caps) -> bool {
        match self {
            Design::Def => true,
            Design::ImmNaive | Design::ImmOpt => caps.rdma_write && caps.rdma_read,
            Design::ImmRi => caps.rdma_write && caps.rdma_read && caps.write_imm,
        }
    }

    pub const fn completion(self) -> TargetCompletion {
        match self {
            Design::Def => TargetCompletion::CountedMessages,
            Design::ImmNaive | Design::ImmOpt => TargetCompletion::FinishMessages,
            Design::ImmRi => TargetCompletion::Immediates,
        }
    }

    pub const fn opening(self) -> Opening {
        match self {
            Design::Def => Opening::None,
            Design::ImmNaive => Opening::AllPairs,
            Design::ImmOpt | Design::ImmRi => Opening::Barrier,
        }
    }

    /// A fence's steps under MPI's assertions (the paper left them out):
    /// `no_precede` (no operation ends here) skips the completion;
    /// `no_succeed` (none starts before the next fence) skips the opening.
    pub const fn steps(self, no_precede: bool, no_succeed: bool) -> Steps {
        Steps {
            completion: if no_precede {
                None
            } else {
                Some(self.completion())
            },
            opening: if no_succeed {
                Opening::None
            } else {
                self.opening()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for d in Design::ALL {
            assert_eq!(Design::parse(d.name()), Some(d));
        }
        assert_eq!(Design::parse("fast"), None);
    }

    #[test]
    fn a_transport_offers_what_its_capabilities_carry() {
        let none = Caps::default();
        let rdma = Caps {
            rdma_write: true,
            rdma_read: true,
            ..Caps::default()
        };
        let imm = Caps {
            write_imm: true,
            ..rdma
        };
        let offered = |c: &Caps| Design::ALL.into_iter().filter(|d| d.offered(c)).count();
        assert_eq!(offered(&none), 1);
        assert_eq!(offered(&rdma), 3);
        assert_eq!(offered(&imm), 4);
        assert!(!Design::ImmRi.offered(&rdma));
    }

    #[test]
    fn assertions_skip_the_steps_they_allow() {
        let all = Design::ImmRi.steps(false, false);
        assert_eq!(all.completion, Some(TargetCompletion::Immediates));
        assert_eq!(all.opening, Opening::Barrier);
        assert_eq!(Design::ImmRi.steps(true, false).completion, None);
        assert_eq!(Design::ImmNaive.steps(false, true).opening, Opening::None);
        assert_eq!(Design::Def.steps(false, false).opening, Opening::None);
    }
}
