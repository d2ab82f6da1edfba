//! rmx-linux: the userspace shell of rmx. It owns what the core may not:
//! memory, NICs, threads and clocks. Transports live in their own modules;
//! the `rmx` binary's commands and benchmarks are in `cli` and `bench`.
pub mod anon;
pub mod bench;
pub mod calibrate;
pub mod clock;
pub mod collective;
pub mod copy;
pub mod eth;
mod eventfd;
pub mod job;
pub mod kmod;
pub mod lab;
#[cfg(feature = "test-transport")]
pub mod late;
pub mod launch;
pub mod loopnic;
pub mod model;
pub mod monitor;
pub mod netns;
pub mod pmi;
pub mod rank;
pub mod reuse;
pub mod say;
pub mod transport;
pub mod verbs;
pub mod window;
