//! Test harnesses for rmx-core: a deterministic network simulator of
//! two-sided traffic ([`streams`]) with virtual time and seeded faults, and
//! reference models, over an in-memory implementation of the core's
//! [`Nic`](rmx_core::Nic) ([`memnic`]) that reports every post's fate as
//! the test chooses. Heap tables and the generator are the simulator's
//! ([`rmx_sim`]), re-exported under their old paths.

pub use rmx_sim::{heap, rng};

pub mod linear;
pub mod memnic;
pub mod reuse;
pub mod streams;
