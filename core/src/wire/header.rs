//! The packet header: explicit little-endian layout, versioned, validated on decode.
//!
//! Every packet starts with this 28-byte header; an eager packet's payload follows
//! it, a packed packet's records ([`crate::wire::packed`]) follow it.
//!
//! ```text
//! offset size field     meaning
//!      0    1 version   `VERSION`; a decoder rejects any other value
//!      1    1 kind      `Kind` (1 eager, 2 ack/credit, 3 nack, 4 packed,
//!                         5 rts, 6 cts, 7 fin, 8 pull, 9 data, 10 probe,
//!                         11 credit, 12 medium, 13 ping)
//!      2    2 src       sender's rank
//!      4    2 context   MPI communicator context
//!      6    2 flags     reserved, must be zero in version 1
//!      8    4 tag       MPI tag (packed: number of messages)
//!     12    4 len       payload bytes that follow the header
//!     16    4 seq       per-peer message sequence (eager, rts; packed: of its
//!                         first message); first missing sequence (nack); frame
//!                         index (data)
//!     20    4 ack       cumulative: next sequence the sender expects from the receiver
//!     24    4 credit    cumulative: messages from the receiver the sender has consumed
//! ```
//!
//! `ack` and `credit` are cumulative counters rather than deltas, so a lost or
//! duplicated control packet can never lose or double a credit.
//!
//! Evolution: kinds 4 (packed), 5–10 (rendezvous, bodies in
//! [`crate::wire::rendezvous`]), 11 (credit), 12 (medium, body in
//! [`crate::wire::medium`]) and 13 (ping) were added without a version change, as the format
//! is append-only; a decoder that predates them rejects them as `DecodeError::Kind`.

/// Wire format version this build speaks. Evolution is append-only.
pub const VERSION: u8 = 1;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 28;

/// What a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A whole message, payload inline.
    Eager = 1,
    /// Acknowledgement and credit return only; carries no sequence number.
    Ack = 2,
    /// Early re-request: `seq` is the first sequence the receiver is missing.
    Nack = 3,
    /// Several eager messages coalesced into one packet; `tag` counts them.
    Packed = 4,
    /// Request to send a large message: sequenced and matched like an eager one.
    Rts = 5,
    /// Clear to send (RPUT): the receiver's buffer.
    Cts = 6,
    /// A rendezvous transfer ended.
    Fin = 7,
    /// The receiver asks for frames of a large message (PULL).
    Pull = 8,
    /// A frame of a large message (PULL): `tag` names the receiver's transfer,
    /// `seq` the frame.
    Data = 9,
    /// A PULL sender that got no FIN asks whether the receive ended.
    Probe = 10,
    /// A sender out of credits asks for more; `tag` is the cumulative limit
    /// that would let every message it has waiting go. The answer is an
    /// acknowledgement carrying a higher limit. Unsequenced.
    Credit = 11,
    /// One fragment of a message too large for one packet and small enough
    /// to go without a rendezvous ([`crate::wire::medium`]): matched by its first
    /// fragment, each fragment sequenced and credited as a message.
    Medium = 12,
    /// Are you there? A rank waiting on a silent peer asks; the answer is an
    /// acknowledgement. Unsequenced.
    Ping = 13,
    /// You were given up: the sender failed the receiver and drops what it
    /// sends, so the receiver fails the sender in turn and nothing waits on
    /// it for ever. The answer to any packet from a failed peer. Unsequenced.
    Gone = 14,
}

impl Kind {
    /// Everything but acknowledgements carries bytes after the header.
    pub fn has_payload(self) -> bool {
        !matches!(
            self,
            Kind::Ack | Kind::Nack | Kind::Credit | Kind::Ping | Kind::Gone
        )
    }

    /// Takes a sequence number (and a credit): delivered once and in order.
    pub fn sequenced(self) -> bool {
        matches!(self, Kind::Eager | Kind::Packed | Kind::Rts | Kind::Medium)
    }

    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Eager),
            2 => Some(Kind::Ack),
            3 => Some(Kind::Nack),
            4 => Some(Kind::Packed),
            5 => Some(Kind::Rts),
            6 => Some(Kind::Cts),
            7 => Some(Kind::Fin),
            8 => Some(Kind::Pull),
            9 => Some(Kind::Data),
            10 => Some(Kind::Probe),
            11 => Some(Kind::Credit),
            12 => Some(Kind::Medium),
            13 => Some(Kind::Ping),
            14 => Some(Kind::Gone),
            _ => None,
        }
    }
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub src: u16,
    pub context: u16,
    pub tag: u32,
    pub len: u32,
    pub seq: u32,
    pub ack: u32,
    pub credit: u32,
}

/// Why bytes could not be decoded as a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a header (or than header + declared payload).
    Truncated { needed: usize, got: usize },
    /// A version this build does not speak.
    Version(u8),
    /// An unknown packet kind.
    Kind(u8),
    /// Reserved flag bits set.
    Flags(u16),
    /// More bytes than the header declares.
    TrailingBytes { declared: usize, got: usize },
    /// A control packet that declares a payload.
    ControlWithPayload,
}

/// The output buffer is too small; `required` says how large it must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsufficientSize {
    pub required: usize,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Header {
    /// Writes the header into the first `HEADER_LEN` bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, InsufficientSize> {
        let Some(out) = out.get_mut(..HEADER_LEN) else {
            return Err(InsufficientSize {
                required: HEADER_LEN,
            });
        };
        out[0] = VERSION;
        out[1] = self.kind as u8;
        out[2..4].copy_from_slice(&self.src.to_le_bytes());
        out[4..6].copy_from_slice(&self.context.to_le_bytes());
        out[6..8].copy_from_slice(&0u16.to_le_bytes());
        out[8..12].copy_from_slice(&self.tag.to_le_bytes());
        out[12..16].copy_from_slice(&self.len.to_le_bytes());
        out[16..20].copy_from_slice(&self.seq.to_le_bytes());
        out[20..24].copy_from_slice(&self.ack.to_le_bytes());
        out[24..28].copy_from_slice(&self.credit.to_le_bytes());
        Ok(HEADER_LEN)
    }

    /// Decodes the header at the start of `b`, validating version, kind and flags.
    /// Payload length is checked by [`decode_packet`].
    pub fn decode(b: &[u8]) -> Result<Header, DecodeError> {
        if b.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                needed: HEADER_LEN,
                got: b.len(),
            });
        }
        if b[0] != VERSION {
            return Err(DecodeError::Version(b[0]));
        }
        let kind = Kind::from_u8(b[1]).ok_or(DecodeError::Kind(b[1]))?;
        let flags = le16(b, 6);
        if flags != 0 {
            return Err(DecodeError::Flags(flags));
        }
        Ok(Header {
            kind,
            src: le16(b, 2),
            context: le16(b, 4),
            tag: le32(b, 8),
            len: le32(b, 12),
            seq: le32(b, 16),
            ack: le32(b, 20),
            credit: le32(b, 24),
        })
    }

    /// Rewrites the message count (`tag`) and body length of an encoded packed
    /// header in place, as records are added.
    pub fn set_packed(out: &mut [u8], count: u32, len: u32) {
        out[8..12].copy_from_slice(&count.to_le_bytes());
        out[12..16].copy_from_slice(&len.to_le_bytes());
    }

    /// Rewrites the cumulative ack and credit fields of an encoded header in place
    /// (a retransmission carries fresh values).
    pub fn refresh(out: &mut [u8], ack: u32, credit: u32) {
        out[20..24].copy_from_slice(&ack.to_le_bytes());
        out[24..28].copy_from_slice(&credit.to_le_bytes());
    }
}

/// Decodes a whole packet: the header, and a payload whose length must equal
/// the declared one exactly.
#[inline]
pub fn decode_packet(b: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
    let h = Header::decode(b)?;
    if !h.kind.has_payload() && h.len != 0 {
        return Err(DecodeError::ControlWithPayload);
    }
    // Checked: a 32-bit target's usize cannot hold every declared length.
    let Some(declared) = (h.len as usize).checked_add(HEADER_LEN) else {
        return Err(DecodeError::Truncated {
            needed: usize::MAX,
            got: b.len(),
        });
    };
    if b.len() < declared {
        return Err(DecodeError::Truncated {
            needed: declared,
            got: b.len(),
        });
    }
    if b.len() > declared {
        return Err(DecodeError::TrailingBytes {
            declared,
            got: b.len(),
        });
    }
    Ok((h, &b[HEADER_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::Eager,
            src: 7,
            context: 3,
            tag: 0xdead_beef,
            len: 4,
            seq: 41,
            ack: 9,
            credit: 12,
        }
    }

    #[test]
    fn round_trip_with_payload() {
        let mut b = [0u8; HEADER_LEN + 4];
        sample().encode(&mut b).unwrap();
        b[HEADER_LEN..].copy_from_slice(b"abcd");
        let (h, p) = decode_packet(&b).unwrap();
        assert_eq!(h, sample());
        assert_eq!(p, b"abcd");
    }

    #[test]
    fn layout_is_little_endian_at_documented_offsets() {
        let mut b = [0u8; HEADER_LEN];
        sample().encode(&mut b).unwrap();
        assert_eq!(b[0], VERSION);
        assert_eq!(b[1], 1);
        assert_eq!(&b[2..4], &[7, 0]);
        assert_eq!(&b[8..12], &[0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(&b[16..20], &[41, 0, 0, 0]);
    }

    #[test]
    fn rejects_bad_version_kind_flags_and_lengths() {
        let mut b = [0u8; HEADER_LEN + 4];
        sample().encode(&mut b).unwrap();
        let mut v = b;
        v[0] = 2;
        assert_eq!(decode_packet(&v), Err(DecodeError::Version(2)));
        let mut k = b;
        k[1] = 15;
        assert_eq!(decode_packet(&k), Err(DecodeError::Kind(15)));
        let mut f = b;
        f[7] = 1;
        assert_eq!(decode_packet(&f), Err(DecodeError::Flags(0x100)));
        assert_eq!(
            decode_packet(&b[..HEADER_LEN + 3]),
            Err(DecodeError::Truncated {
                needed: HEADER_LEN + 4,
                got: HEADER_LEN + 3
            })
        );
        let mut long = [0u8; HEADER_LEN + 5];
        long[..HEADER_LEN + 4].copy_from_slice(&b);
        assert!(matches!(
            decode_packet(&long),
            Err(DecodeError::TrailingBytes { .. })
        ));
        let mut ack = sample();
        ack.kind = Kind::Ack;
        let mut a = [0u8; HEADER_LEN + 4];
        ack.encode(&mut a).unwrap();
        assert_eq!(decode_packet(&a), Err(DecodeError::ControlWithPayload));
    }

    #[test]
    fn encode_reports_required_size() {
        let mut small = [0u8; 10];
        assert_eq!(
            sample().encode(&mut small),
            Err(InsufficientSize {
                required: HEADER_LEN
            })
        );
    }
}
