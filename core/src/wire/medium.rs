//! Medium messages: larger than one packet, sent eagerly as fragments (as
//! Open-MX sends its "medium" messages below 32 kB) instead of paying a
//! rendezvous round trip on a transport whose receiver copies every byte
//! anyway.
//!
//! Each fragment is a [`Kind::Medium`](crate::wire::Kind::Medium) packet:
//! the header carries the message's context and tag and a sequence number of
//! its own, and the body starts with
//!
//! ```text
//! offset size field
//!      0    4 total   bytes of the whole message
//!      4    4 offset  where this fragment's bytes go in it
//!      8    …         the fragment's bytes (at least one)
//! ```
//!
//! A sender sends the fragments of one message back to back in its sequence
//! to that peer, so a receiver reassembles at most one message per peer, in
//! order: the fragment at offset 0 is matched like an eager message, the
//! others continue it.

/// Bytes of a fragment's body before its data.
pub const FRAG_HEAD: usize = 8;

/// Where a fragment belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    pub total: u32,
    pub offset: u32,
}

/// Why a fragment's body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragmentError {
    /// Shorter than its head plus one byte of data.
    Truncated,
    /// The message is larger than the receiver's `Config::medium_max`.
    TooLarge { total: u32, max: u32 },
    /// The fragment's bytes reach past the end of the message.
    OutOfBounds { offset: u32, len: u32, total: u32 },
}

impl Fragment {
    /// Writes the head into the first [`FRAG_HEAD`] bytes of `out` (which
    /// must hold them).
    pub fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.total.to_le_bytes());
        out[4..8].copy_from_slice(&self.offset.to_le_bytes());
    }

    /// Reads the head of a fragment `body` and checks it against the
    /// largest medium message `max`; returns it and its data's length.
    pub fn decode(body: &[u8], max: u32) -> Result<(Fragment, u32), FragmentError> {
        if body.len() <= FRAG_HEAD {
            return Err(FragmentError::Truncated);
        }
        let word =
            |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        let f = Fragment {
            total: word(0),
            offset: word(4),
        };
        // A packet is at most 64 KiB, so its data length fits a u32.
        let len = (body.len() - FRAG_HEAD) as u32;
        if f.total > max {
            return Err(FragmentError::TooLarge {
                total: f.total,
                max,
            });
        }
        match f.offset.checked_add(len) {
            Some(end) if end <= f.total => Ok((f, len)),
            _ => Err(FragmentError::OutOfBounds {
                offset: f.offset,
                len,
                total: f.total,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(total: u32, offset: u32, data: usize) -> [u8; 64] {
        let mut b = [0u8; 64];
        Fragment { total, offset }.encode(&mut b);
        b[FRAG_HEAD..FRAG_HEAD + data].fill(7);
        b
    }

    #[test]
    fn a_fragment_round_trips() {
        let b = body(100, 40, 20);
        let (f, len) = Fragment::decode(&b[..FRAG_HEAD + 20], 1000).unwrap();
        assert_eq!(
            f,
            Fragment {
                total: 100,
                offset: 40
            }
        );
        assert_eq!(len, 20);
        assert_eq!(&b[..4], &100u32.to_le_bytes(), "little-endian at offset 0");
    }

    #[test]
    fn bad_fragments_are_refused() {
        let b = body(100, 90, 20);
        assert_eq!(
            Fragment::decode(&b[..FRAG_HEAD], 1000),
            Err(FragmentError::Truncated),
            "no data"
        );
        assert_eq!(
            Fragment::decode(&b[..FRAG_HEAD + 20], 1000),
            Err(FragmentError::OutOfBounds {
                offset: 90,
                len: 20,
                total: 100
            })
        );
        assert_eq!(
            Fragment::decode(&b[..FRAG_HEAD + 5], 99),
            Err(FragmentError::TooLarge {
                total: 100,
                max: 99
            })
        );
        let wrap = body(u32::MAX, u32::MAX - 2, 20);
        assert!(matches!(
            Fragment::decode(&wrap[..FRAG_HEAD + 20], u32::MAX),
            Err(FragmentError::OutOfBounds { .. })
        ));
    }
}
