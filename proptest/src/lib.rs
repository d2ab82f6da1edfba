//! Test harnesses for rmx-core: an in-memory NIC ([`memnic`]) and a deterministic
//! network simulator ([`sim`]) with virtual time and seeded faults.

pub mod heap;
pub mod linear;
pub mod memnic;
pub mod reuse;
pub mod rng;
pub mod sim;
