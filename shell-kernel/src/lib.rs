//! rmx-kernel: the Linux module's shell. Its logic is the Open-MX paper's
//! decoupled pinning (sections 3.1–3.3): userspace declares a region (a
//! vector of user segments) once and gets an integer descriptor; the
//! module pins its pages only when a communication needs them, chunk by
//! chunk so the first pages are usable at once ([`schedule`]), lets
//! accessors touch only the pinned prefix ([`Regions::span`]: an overlap
//! miss otherwise), unpins when an MMU notifier says the memory changed
//! or when too many pages are pinned, and pins again on next use. The
//! region stays declared throughout: userspace never synchronises with
//! an invalidation; a per-region generation counter it can read without
//! a system call tells it one happened.
//!
//! Everything the kernel does (pin and unpin pages, the notifier's
//! read-begin/retry sequence) is behind [`Kernel`], so the logic is
//! tested on the host with a mock kernel; the module's C glue implements
//! it. `no_std`, no allocation: tables are storage the glue supplies.
#![no_std]
#![forbid(unsafe_code)]

pub mod error;
pub mod kernel;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
pub mod region;
pub mod regions;
pub mod request;
pub mod schedule;

pub use error::Error;
pub use kernel::Kernel;
pub use region::{Piece, Region, Segment, MAX_SEGMENTS, PAGE};
pub use regions::{Desc, Job, Pinned, Regions, Slot, Step};
