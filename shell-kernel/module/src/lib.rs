//! The Rust half of rmx's Linux module. One open of `/dev/rmx` is one
//! [`Ctx`]: rmx-kernel's regions over storage the C glue allocates (the
//! slot table, the page userspace maps). Every operation here runs under
//! the context's lock, which the notifier's callback also takes; the glue
//! runs what may sleep on the kernel's side (pinning, the notifier's
//! sequence, inserting and removing notifiers) between these calls,
//! without the lock.
//!
//! A context bound to an interface also sends and receives rmx frames
//! there: [`frames`] reads their headers with rmx-core's own decoder.
//!
//! Other modules embed rmx itself through it: `endpoint` exports
//! rmx-driver's embedded endpoint under librmx's names (`rmx_ep_*`).
//!
//! `exports` is the C ABI the glue links against, built only for the
//! module (`x86_64-unknown-none`); the operations themselves are plain
//! Rust over any [`rmx_kernel::Kernel`], tested on the host.
#![no_std]

pub mod ctx;
#[cfg(target_os = "none")]
pub mod endpoint;
#[cfg(target_os = "none")]
pub mod exports;
pub mod frames;

pub use ctx::{Ctx, SLOTS};
