//! Protocol steps every shell carries out alike, as non-blocking state
//! machines: started over buffers the caller owns, then polled until they
//! report done or an error, so that a blocking wait, a C caller's progress
//! call, a kernel thread and a simulator all move the same code on. A task
//! reaches the rank only through [`Messages`]; on any error it ends every
//! request it posted before it reports, so nothing stays posted into a
//! caller's buffer.

mod collective;
mod fence;
mod inbox;
mod messages;
#[cfg(test)]
mod mock;

pub use collective::{CollectiveError, CollectiveTask};
pub use fence::{Bytes, FenceHost, FenceLayout, FenceTask, Fenced, Outgoing, Reply, SENDS};
pub use inbox::{Drained, Inbox};
pub use messages::Messages;
