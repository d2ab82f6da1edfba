//! Operations as two-sided messages (all of the deferred design's, the
//! immediate designs' accumulates), in the messages the core composes
//! ([`OpHeader::compose`]): the header with small data, larger data in a
//! message of its own, so the target receives it straight into a buffer of
//! the size the header announced.

use rmx_core::onesided::{OpHeader, FIRST};

/// An operation ready to send: its first message, and the data's own
/// message when it does not fit in the first.
pub(super) struct Outgoing {
    pub target: u16,
    pub first: Vec<u8>,
    pub rest: Vec<u8>,
    pub window: u16,
    pub epoch: u16,
}

impl Outgoing {
    pub fn new(target: u16, header: &OpHeader, data: Vec<u8>) -> Outgoing {
        let mut buf = [0u8; FIRST];
        let (n, apart) = header.compose(&data, &mut buf);
        let rest = match apart {
            Some(_) => data,
            None => Vec::new(),
        };
        let first = buf[..n].to_vec();
        Outgoing {
            target,
            first,
            rest,
            window: header.window,
            epoch: header.epoch,
        }
    }

    /// The operation's messages, as the fence task sends them.
    pub fn parts(&self) -> rmx_driver::task::Outgoing {
        use rmx_driver::task::Bytes;
        rmx_driver::task::Outgoing {
            target: self.target,
            first: Bytes::of(&self.first),
            rest: Bytes::of(&self.rest),
        }
    }
}
