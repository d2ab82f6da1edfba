//! One-sided communication: windows exposed to a group, operations on
//! them, and the fence designs that end an epoch ([`Design`]). The
//! operations' wire format, the window descriptor and the checks an
//! operation meets at origin and target are in [`crate::wire::onesided`].

mod design;
mod epoch;

pub use crate::wire::onesided::{
    channel, imm, imm_window, tag, Descriptor, Float, OpHeader, RmaError, RmaKind, Window, CONTEXT,
    FIRST, HEADER, INLINE, MAX_GETS,
};
pub use design::{Design, Opening, Steps, TargetCompletion};
pub use epoch::{Arrival, Data, Epoch, EpochError, Outcome, Reduction, Step, Target};
