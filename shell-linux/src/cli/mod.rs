//! The `rmx` command's subcommands, one module each: the binary's own
//! code (the library does not include it); `main.rs` parses and
//! dispatches.

mod args;
mod bench;
mod calibrate;
mod info;
mod lab;
mod model;
mod pin;
mod setup;
mod suite;

pub(crate) use args::*;
pub(crate) use bench::*;
pub(crate) use calibrate::*;
pub(crate) use info::*;
pub(crate) use lab::*;
pub(crate) use model::*;
pub(crate) use pin::*;
pub(crate) use setup::*;
pub(crate) use suite::*;
