//! Completions: which work request the NIC finished, named by the 64-bit id
//! the core gave it (verbs' `wr_id`), and how it ended. The encoding lives
//! here, once: a shell posts with [`WorkId::wr_id`] and hands the id and the
//! status back to [`crate::Endpoint::on_completion`], whatever its transport.

use crate::nic::{PostError, RdmaError, SlotId};

/// A work request the core asked the NIC for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkId {
    /// A send from a bounce slot (alone, gathered or solicited).
    Send(SlotId),
    /// An inline send to this peer (it names no buffer).
    Inline(u16),
    /// `count` inline sends to `peer` at once: the unsignalled ones a port
    /// completes together with the signalled one after them (or, before a
    /// later post of another kind completes, without it), reported as one
    /// completion rather than `count` (see the driver's `Work::Inline`).
    /// `count` is at least 1.
    Inlines { peer: u16, count: u32 },
    /// An RDMA write or read of the transfer with this wire id.
    Rdma(u32),
    /// A one-sided operation of a window's epoch
    /// ([`crate::onesided::Epoch`]): a put (with an immediate when `imm`)
    /// or a get aimed at `target`, posted in `epoch` (a completion of an
    /// epoch that ended without it is told apart), the `op`th operation
    /// posted to that target (modulo [`WINDOW_OPS`]), so that a completion
    /// reported twice is told from another operation's.
    Window {
        window: u16,
        target: u16,
        epoch: u16,
        op: u16,
        imm: bool,
    },
}

/// The kind lives in the top four bits; 0 there is never a core id.
const KIND_SHIFT: u32 = 60;
const VALUE: u64 = (1 << KIND_SHIFT) - 1;
/// Operation numbers a window's work id carries: the 11 bits left above
/// window, target, epoch and the immediate flag.
pub const WINDOW_OPS: u16 = 1 << 11;

impl WorkId {
    /// The id to post the work request with.
    pub const fn wr_id(self) -> u64 {
        match self {
            WorkId::Send(s) => 1 << KIND_SHIFT | s.0 as u64,
            WorkId::Inline(peer) => 2 << KIND_SHIFT | peer as u64,
            WorkId::Rdma(id) => 3 << KIND_SHIFT | id as u64,
            WorkId::Inlines { peer, count } => 5 << KIND_SHIFT | (count as u64) << 16 | peer as u64,
            WorkId::Window {
                window,
                target,
                epoch,
                op,
                imm,
            } => {
                4 << KIND_SHIFT
                    | ((op % WINDOW_OPS) as u64) << 49
                    | (epoch as u64) << 33
                    | (window as u64) << 17
                    | (target as u64) << 1
                    | imm as u64
            }
        }
    }

    /// The work request behind `wr_id`, if the core made that id.
    pub const fn from_wr_id(wr_id: u64) -> Option<WorkId> {
        let v = wr_id & VALUE;
        match wr_id >> KIND_SHIFT {
            1 if v <= u16::MAX as u64 => Some(WorkId::Send(SlotId(v as u16))),
            2 if v <= u16::MAX as u64 => Some(WorkId::Inline(v as u16)),
            3 if v <= u32::MAX as u64 => Some(WorkId::Rdma(v as u32)),
            4 => Some(WorkId::Window {
                window: (v >> 17) as u16,
                target: (v >> 1) as u16,
                epoch: (v >> 33) as u16,
                op: (v >> 49) as u16,
                imm: v & 1 == 1,
            }),
            5 if v >> 48 == 0 && v >> 16 >= 1 => Some(WorkId::Inlines {
                peer: v as u16,
                count: (v >> 16) as u32,
            }),
            _ => None,
        }
    }
}

/// How a work request ended: each transport maps its statuses onto this
/// (`Ok`, or a protection/access failure, or anything else as `Down`).
pub type WcResult = Result<(), RdmaError>;

impl From<RdmaError> for PostError {
    /// A post that completed at once with an error.
    fn from(e: RdmaError) -> PostError {
        match e {
            RdmaError::Access => PostError::Access,
            RdmaError::Down => PostError::Down,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_round_trips_and_foreign_ids_are_refused() {
        for w in [
            WorkId::Send(SlotId(0)),
            WorkId::Send(SlotId(u16::MAX)),
            WorkId::Inline(7),
            WorkId::Inlines { peer: 0, count: 1 },
            WorkId::Inlines {
                peer: u16::MAX,
                count: u32::MAX,
            },
            WorkId::Rdma(0),
            WorkId::Rdma(u32::MAX),
            WorkId::Window {
                window: u16::MAX,
                target: 0,
                epoch: 1,
                op: WINDOW_OPS - 1,
                imm: true,
            },
            WorkId::Window {
                window: 0,
                target: u16::MAX,
                epoch: u16::MAX,
                op: 0,
                imm: false,
            },
        ] {
            assert_eq!(WorkId::from_wr_id(w.wr_id()), Some(w));
        }
        for foreign in [
            0,
            5,
            u64::MAX,
            1 << 60 | 1 << 16,
            3 << 60 | 1 << 32,
            6 << 60 | 1 << 49,
            // No inline sends counted, or a count wider than 32 bits.
            5 << 60,
            5 << 60 | 7,
            5 << 60 | 1 << 48 | 1 << 16,
        ] {
            assert_eq!(WorkId::from_wr_id(foreign), None, "{foreign:#x}");
        }
    }
}
