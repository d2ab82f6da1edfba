//! librmx: rmx for C runtimes and drivers (`include/rmx.h`).
//!
//! Ranks over rmx's transports ([`job`]): initialised from the launcher
//! (PMI-1 or PMIx, one rank per process) or run as threads of one process;
//! non-blocking sends and receives, and collectives, returning requests
//! the caller tests or waits for ([`p2p`], [`collective`]); windows with
//! puts, gets and accumulates closed by fences ([`window`]). And the core
//! itself for a runtime or driver with its own network ([`embedded`]):
//! one endpoint in the caller's memory over a port of C callbacks, driven
//! by the caller's clock, which rmx.ko exports under the same names.
//!
//! What every entry point keeps: a panic inside rmx never crosses into C
//! (it becomes `RMX_ERR_INTERNAL`); null and out-of-range arguments are
//! errors; a request handle is checked, so a stale or forged one is an
//! error; a request's buffer is never touched after the request ended
//! (cancel waits for the end); a rank's calls may come from any thread,
//! one at a time (each call holds the rank's lock).

#![allow(non_camel_case_types)]
// The C functions state their contract in prose ("Contract: …"), which the
// header carries.
#![allow(clippy::missing_safety_doc)]

pub mod collective;
pub mod embedded;
mod end;
pub mod errors;
mod guard;
mod held;
pub mod job;
pub mod p2p;
pub mod port_consts;
pub mod rank;
mod requests;
pub mod started;
pub mod status;
pub mod version;
pub mod window;

pub use errors::*;
pub use version::*;
