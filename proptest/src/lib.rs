//! Test harnesses for rmx-core: a deterministic network simulator of
//! two-sided traffic ([`streams`]) with virtual time and seeded faults, and
//! reference models. The in-memory NIC, heap tables and generator are
//! the simulator crate's ([`rmx_sim`]), re-exported under their old paths.

pub use rmx_sim::{heap, memnic, rng};

pub mod linear;
pub mod reuse;
pub mod streams;
