//! rmx-driver: the layer between the core and a network, shared by every
//! shell. A transport implements [`Port`], shaped as a verbs queue pair
//! is (one post per work request with a gather list, a completion queue
//! polled into the caller's array, a shared receive pool, memory keys), so
//! that rdma-core, a kernel driver and rmx's software transports plug in
//! the same way. [`Adapter`] is the core's `Nic` over any port, with
//! fixed tables the embedder supplies, and [`progress`] one polling round;
//! [`ledger`] keeps a connection's posts for a device that completes
//! unsignalled sends with a later one; [`faulty`] injects a lossy wire's
//! faults below any port and [`delayed`] lands RDMA writes late; [`task`]
//! holds the steps every shell carries out alike (collectives), as
//! non-blocking state machines; with the `alloc` feature, [`heap`] holds
//! every table in vectors; [`embed`] is the core in an embedder's memory
//! over a port of C callbacks.
//! `no_std` and allocation-free: a Linux kernel module links it as it
//! links `rmx-core`; the std shell adds threads, locks and sleeping.
#![no_std]

mod adapter;
pub mod delayed;
pub mod embed;
pub mod faulty;
#[cfg(feature = "alloc")]
pub mod heap;
pub mod ledger;
mod port;
mod progress;
pub mod task;

pub use adapter::{Adapter, AdapterError, AdapterTables, Host, Plain, UserEntry};
pub use port::{Completion, Mr, Port, Recv, Sge, Work};
pub use progress::{complete, progress, receive, Round, Windows};
