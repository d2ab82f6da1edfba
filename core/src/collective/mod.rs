//! Collectives as sans-I/O schedules over the endpoint's point-to-point
//! messages ([`Plan`]), run step by step by any shell ([`Run`]), and the
//! integer reductions they apply ([`mod@reduce`]).
//! The fence designs of one-sided communication are built on them.

mod plan;
pub mod reduce;
mod run;

pub use plan::{Collective, Msg, Plan, PlanError, Round, Span, HALVING_FROM, MAX_DATA, MAX_ROUNDS};
pub use reduce::{reduce, Int, Op, ReduceError};
pub use run::{tag, Buffer, Post, Run, Step, CONTEXT};
