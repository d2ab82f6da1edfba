//! rmx-core's protocols in virtual time, for group sizes no machine here
//! can run and for networks harsher than any real one.
//!
//! Every simulated rank ([`node::Node`]) runs the shipped core: an
//! [`Endpoint`](rmx_core::Endpoint) over the driver's adapter and a port
//! of its own ([`port`]), the same progress round as every shell, a
//! one-sided [`Epoch`](rmx_core::onesided::Epoch) per window, and the
//! driver's fence and collective tasks. What the simulator adds is what a
//! shell adds (memory, the bytes of messages) and a network ([`net`]) timed by the LogGP model ([`model`])
//! with seeded loss, duplication, reordering and late RDMA landings. A
//! [`job::Job`] runs one program per rank and checks every window against
//! a reference after every fence.

pub mod collective;
pub mod fence;
pub mod flood;
pub mod heap;
pub mod job;
pub mod mem;
pub mod messages;
pub mod model;
pub mod net;
pub mod node;
pub mod port;
pub mod req;
pub mod rng;
pub mod window;
