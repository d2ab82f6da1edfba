//! One-sided operations as they travel between ranks, and the windows they
//! reach. A window is a rank's memory exposed to a group;
//! its [`Window`] descriptor (length, displacement unit, key) is exchanged
//! at creation. Every access is checked at the origin against the target's
//! descriptor ([`Window::range`]): one outside the window is a typed error
//! there and never leaves. The target checks again what comes off the wire
//! ([`OpHeader::decode`], then the range against its own window and key),
//! so a forged or stale key or a range out of bounds is refused and
//! counted, never written.
//!
//! An operation's header, little-endian, 32 bytes:
//!
//! ```text
//! offset size field
//!      0    1 kind     1 put, 2 get, 3 accumulate, 4 get reply, 5 float accumulate
//!      1    1 op       accumulate's operation (0 sum … 6 replace), else 0
//!      2    1 type     accumulate's element type (0 u8 … 7 i64; float: 0 single, 1 double), else 0
//!      3    1 flags    bit 0: the origin's last operation to this target this epoch
//!      4    2 window   the window's number in its group
//!      6    2 epoch    the origin's epoch, wrapping
//!      8    4 key      the target window's key
//!     12    4 len      bytes of data (put, accumulate, get reply: they follow)
//!     16    8 offset   byte offset in the target's window
//!     24    4 id       the origin's number for a get, echoed by its reply
//!     28    4 reserved zero
//! ```

use crate::collective::{Int, Op};
use crate::remote::{MemKey, Remote};

/// Bytes of an operation's header.
pub const HEADER: usize = 32;

/// What a rank exposes: the length of its window memory, the unit its
/// displacements count in, and the key an access must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub len: u64,
    pub disp_unit: u32,
    pub key: u32,
}

/// The communication context of one-sided operations' messages.
pub const CONTEXT: u16 = super::context::ONESIDED;

/// Gets one rank may have outstanding in one epoch: a get's number tags its
/// reply, below the channels.
pub const MAX_GETS: u32 = 0xFF00;

// Gets' numbers stay below the channels.
const _: () = assert!(MAX_GETS < channel::FLAG);

/// The channels of a window's messages in an epoch, beside gets' replies.
pub mod channel {
    /// Operations' headers (with their data when it is [`INLINE`](super::INLINE) bytes or less).
    pub const HEADERS: u32 = 0xFFFE;
    /// An operation's data, after its header, when it did not fit there.
    pub const DATA: u32 = 0xFFFD;
    /// A finish message: every operation before it on its channel landed.
    pub const FINISH: u32 = 0xFFFC;
    /// The all-pairs flag that opens the next epoch.
    pub const FLAG: u32 = 0xFFFB;
}

/// The most data that travels in an operation's header message; larger
/// data follows in a message of its own, so the target receives it
/// straight into a buffer of the size the header announced.
pub const INLINE: usize = 256;

/// The tag of a message of window `window` in `epoch`: `what` is a
/// [`channel`] or a get's number. Eight bits of each number travel: a
/// window's messages of epochs 256 apart never coexist, as every epoch ends
/// with a fence.
pub const fn tag(window: u16, epoch: u16, what: u32) -> u32 {
    (window as u32 & 0xFF) << 24 | (epoch as u32 & 0xFF) << 16 | (what & 0xFFFF)
}

/// The immediate a put of `window` in `epoch` carries (Fence-Imm-RI): the
/// target counts them per window and epoch.
pub const fn imm(window: u16, epoch: u16) -> u32 {
    (window as u32) << 16 | epoch as u32
}

/// The window an immediate names, so a shell hands it to that window's
/// [`Epoch`](crate::onesided::Epoch).
pub const fn imm_window(imm: u32) -> u16 {
    (imm >> 16) as u16
}

/// A rank's window as creation swaps it: what peers check their accesses
/// against, and where RDMA reaches it (immediate designs; zero otherwise).
///
/// ```text
/// offset size field
///      0    8 len        bytes of window memory
///      8    4 disp_unit  bytes one displacement counts
///     12    4 key        the key accesses must show
///     16    8 addr       the memory's address for RDMA
///     24    4 mem_key    its registration's remote key
///     28    4 reserved   zero
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub window: Window,
    pub remote: Remote,
}

impl Descriptor {
    /// Bytes of a descriptor.
    pub const LEN: usize = 32;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&self.window.len.to_le_bytes());
        b[8..12].copy_from_slice(&self.window.disp_unit.to_le_bytes());
        b[12..16].copy_from_slice(&self.window.key.to_le_bytes());
        b[16..24].copy_from_slice(&self.remote.addr.to_le_bytes());
        b[24..28].copy_from_slice(&self.remote.key.0.to_le_bytes());
        b
    }

    /// A peer's descriptor: `Malformed` unless `b` is exactly one, reserved
    /// bytes zero, with a displacement unit.
    pub fn decode(b: &[u8]) -> Result<Descriptor, RmaError> {
        let b: &[u8; Self::LEN] = b.try_into().map_err(|_| RmaError::Malformed)?;
        let le32 = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let le64 = |at: usize| u64::from(le32(at)) | u64::from(le32(at + 4)) << 32;
        if le32(28) != 0 || le32(8) == 0 {
            return Err(RmaError::Malformed);
        }
        Ok(Descriptor {
            window: Window {
                len: le64(0),
                disp_unit: le32(8),
                key: le32(12),
            },
            remote: Remote {
                addr: le64(16),
                key: MemKey(le32(24)),
            },
        })
    }
}

/// Why a one-sided operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaError {
    /// The bytes asked for reach outside the target's window.
    OutOfBounds { offset: u64, len: u64, window: u64 },
    /// The key does not open the window (forged, or of an older window).
    Key,
    /// An accumulate's offset or length is not a whole number of elements.
    Misaligned,
    /// A header that cannot be read: too short, an unknown kind, operation
    /// or element type, or reserved bits set.
    Malformed,
    /// No such target rank or window.
    Target,
}

impl Window {
    /// The byte range of `len` bytes at displacement `disp`, if it lies in
    /// the window: checked arithmetic, so no displacement wraps.
    pub fn range(&self, disp: u64, len: u64) -> Result<core::ops::Range<u64>, RmaError> {
        let out = || RmaError::OutOfBounds {
            offset: disp.saturating_mul(self.disp_unit as u64),
            len,
            window: self.len,
        };
        let offset = disp.checked_mul(self.disp_unit as u64).ok_or_else(out)?;
        let end = offset.checked_add(len).ok_or_else(out)?;
        if end > self.len {
            return Err(out());
        }
        Ok(offset..end)
    }

    /// Checks an incoming operation against this window: its key, its
    /// range, and an accumulate's alignment.
    pub fn admit(&self, h: &OpHeader) -> Result<core::ops::Range<u64>, RmaError> {
        if h.key != self.key {
            return Err(RmaError::Key);
        }
        let len = match h.kind {
            RmaKind::Get
            | RmaKind::Put
            | RmaKind::Accumulate(..)
            | RmaKind::AccumulateFloat(..) => h.len as u64,
            RmaKind::GetReply => return Err(RmaError::Malformed),
        };
        let end = h.offset.checked_add(len);
        match end {
            Some(e) if e <= self.len => {}
            _ => {
                return Err(RmaError::OutOfBounds {
                    offset: h.offset,
                    len,
                    window: self.len,
                })
            }
        }
        if let Some(s) = h.kind.element_size() {
            let s = s as u64;
            if !h.offset.is_multiple_of(s) || !len.is_multiple_of(s) {
                return Err(RmaError::Misaligned);
            }
        }
        Ok(h.offset..h.offset + len)
    }
}

/// A one-sided operation's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaKind {
    Put,
    Get,
    Accumulate(Op, Int),
    /// An accumulate of floating-point elements: carried and checked here,
    /// applied by the shell (the core has no floating point).
    AccumulateFloat(Op, Float),
    GetReply,
}

impl RmaKind {
    /// The size of an accumulate's elements; `None` for other kinds.
    pub const fn element_size(self) -> Option<usize> {
        match self {
            RmaKind::Accumulate(_, ty) => Some(ty.size()),
            RmaKind::AccumulateFloat(_, ty) => Some(ty.size()),
            _ => None,
        }
    }

    /// Carries data to the target (put, accumulates).
    pub const fn carries(self) -> bool {
        matches!(
            self,
            RmaKind::Put | RmaKind::Accumulate(..) | RmaKind::AccumulateFloat(..)
        )
    }
}

/// A floating-point element type (IEEE 754, native byte order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Float {
    F32,
    F64,
}

impl Float {
    /// Every type, in the order the wire numbers them.
    pub const ALL: [Float; 2] = [Float::F32, Float::F64];

    pub const fn size(self) -> usize {
        match self {
            Float::F32 => 4,
            Float::F64 => 8,
        }
    }

    /// The operations defined on floating-point elements (no bitwise ones).
    pub const fn allows(op: Op) -> bool {
        matches!(op, Op::Sum | Op::Min | Op::Max | Op::Replace)
    }
}

/// An operation's header, as it travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpHeader {
    pub kind: RmaKind,
    /// The origin's last operation to this target in this epoch.
    pub last: bool,
    pub window: u16,
    pub epoch: u16,
    pub key: u32,
    pub len: u32,
    pub offset: u64,
    pub id: u32,
}

/// The most bytes of an operation's first message: its header, and its
/// data when that is at most [`INLINE`] bytes.
pub const FIRST: usize = HEADER + INLINE;

impl OpHeader {
    /// The operation's messages as its origin sends them, `data` being
    /// what it carries (nothing for a get): the first, written into
    /// `first` (its length returned), on the
    /// [`HEADERS`](channel::HEADERS) channel; and the data to send in a
    /// message of its own on the [`DATA`](channel::DATA) channel, where
    /// it is longer than [`INLINE`]. The target's
    /// [`Epoch::admit`](crate::onesided::Epoch::admit) reads them back.
    pub fn compose<'a>(
        &self,
        data: &'a [u8],
        first: &mut [u8; FIRST],
    ) -> (usize, Option<&'a [u8]>) {
        first[..HEADER].copy_from_slice(&self.encode());
        if data.len() > INLINE {
            return (HEADER, Some(data));
        }
        first[HEADER..HEADER + data.len()].copy_from_slice(data);
        (HEADER + data.len(), None)
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        let (kind, op, int) = match self.kind {
            RmaKind::Put => (1, 0, 0),
            RmaKind::Get => (2, 0, 0),
            RmaKind::Accumulate(op, ty) => (
                3,
                Op::ALL.iter().position(|&o| o == op).unwrap_or(0) as u8,
                Int::ALL.iter().position(|&t| t == ty).unwrap_or(0) as u8,
            ),
            RmaKind::GetReply => (4, 0, 0),
            RmaKind::AccumulateFloat(op, ty) => (
                5,
                Op::ALL.iter().position(|&o| o == op).unwrap_or(0) as u8,
                Float::ALL.iter().position(|&t| t == ty).unwrap_or(0) as u8,
            ),
        };
        b[0] = kind;
        b[1] = op;
        b[2] = int;
        b[3] = self.last as u8;
        b[4..6].copy_from_slice(&self.window.to_le_bytes());
        b[6..8].copy_from_slice(&self.epoch.to_le_bytes());
        b[8..12].copy_from_slice(&self.key.to_le_bytes());
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.id.to_le_bytes());
        b
    }

    /// Reads a header from the start of `b`, refusing anything this
    /// version does not define.
    pub fn decode(b: &[u8]) -> Result<OpHeader, RmaError> {
        let b = b.get(..HEADER).ok_or(RmaError::Malformed)?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        if b[3] > 1 || u32_at(28) != 0 {
            return Err(RmaError::Malformed);
        }
        let plain = b[1] == 0 && b[2] == 0;
        let kind = match b[0] {
            1 if plain => RmaKind::Put,
            2 if plain => RmaKind::Get,
            3 => RmaKind::Accumulate(
                *Op::ALL.get(b[1] as usize).ok_or(RmaError::Malformed)?,
                *Int::ALL.get(b[2] as usize).ok_or(RmaError::Malformed)?,
            ),
            4 if plain => RmaKind::GetReply,
            5 => {
                let op = *Op::ALL.get(b[1] as usize).ok_or(RmaError::Malformed)?;
                let ty = *Float::ALL.get(b[2] as usize).ok_or(RmaError::Malformed)?;
                if !Float::allows(op) {
                    return Err(RmaError::Malformed);
                }
                RmaKind::AccumulateFloat(op, ty)
            }
            _ => return Err(RmaError::Malformed),
        };
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[16..24]);
        Ok(OpHeader {
            kind,
            last: b[3] == 1,
            window: u16_at(4),
            epoch: u16_at(6),
            key: u32_at(8),
            len: u32_at(12),
            offset: u64::from_le_bytes(off),
            id: u32_at(24),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIN: Window = Window {
        len: 100,
        disp_unit: 4,
        key: 0xBEEF,
    };

    fn header(kind: RmaKind, offset: u64, len: u32) -> OpHeader {
        OpHeader {
            kind,
            last: true,
            window: 3,
            epoch: 9,
            key: 0xBEEF,
            len,
            offset,
            id: 77,
        }
    }

    /// Data up to INLINE bytes rides in the first message; more goes
    /// apart, whole; either way the header leads.
    #[test]
    fn an_operation_is_one_message_up_to_inline_bytes_and_two_above() {
        let data = [7u8; INLINE + 1];
        let mut first = [0u8; FIRST];
        for (len, apart) in [(0, false), (1, false), (INLINE, false), (INLINE + 1, true)] {
            let h = header(RmaKind::Put, 0, len as u32);
            first.fill(0xAA);
            let (n, rest) = h.compose(&data[..len], &mut first);
            assert_eq!(OpHeader::decode(&first[..HEADER]), Ok(h));
            match apart {
                false => {
                    assert_eq!((n, rest), (HEADER + len, None));
                    assert_eq!(&first[HEADER..n], &data[..len]);
                }
                true => {
                    assert_eq!((n, rest), (HEADER, Some(&data[..len])));
                    assert!(first[HEADER..].iter().all(|&b| b == 0xAA), "nothing inline");
                }
            }
        }
    }

    #[test]
    fn tags_and_immediates_keep_windows_epochs_and_channels_apart() {
        assert_eq!(tag(1, 2, channel::HEADERS), 0x0102_FFFE);
        assert_ne!(tag(1, 2, channel::DATA), tag(1, 2, channel::FINISH));
        assert_ne!(tag(1, 2, 5), tag(1, 3, 5));
        assert_ne!(tag(1, 2, 5), tag(2, 2, 5));
        assert_eq!(imm(3, 7), 0x0003_0007);
        assert_ne!(imm(3, 7), imm(7, 3));
    }

    #[test]
    fn descriptors_round_trip_and_bad_ones_are_refused() {
        let d = Descriptor {
            window: Window {
                len: 1 << 40,
                disp_unit: 8,
                key: 0xDEAD_BEEF,
            },
            remote: Remote {
                addr: 0x7F00_1234_5000,
                key: MemKey(77),
            },
        };
        let b = d.encode();
        assert_eq!(
            &b[..8],
            &(1u64 << 40).to_le_bytes(),
            "little-endian length first"
        );
        assert_eq!(Descriptor::decode(&b), Ok(d));
        assert_eq!(Descriptor::decode(&b[..31]), Err(RmaError::Malformed));
        let mut r = b;
        r[30] = 1;
        assert_eq!(Descriptor::decode(&r), Err(RmaError::Malformed), "reserved");
        let mut u = b;
        u[8..12].fill(0);
        assert_eq!(Descriptor::decode(&u), Err(RmaError::Malformed), "no unit");
    }

    #[test]
    fn headers_round_trip() {
        for kind in [
            RmaKind::Put,
            RmaKind::Get,
            RmaKind::GetReply,
            RmaKind::Accumulate(Op::Replace, Int::I64),
            RmaKind::Accumulate(Op::Sum, Int::U8),
            RmaKind::AccumulateFloat(Op::Max, Float::F64),
        ] {
            let h = header(kind, 1 << 40, 12);
            assert_eq!(OpHeader::decode(&h.encode()), Ok(h));
        }
    }

    #[test]
    fn malformed_headers_are_refused() {
        let good = header(RmaKind::Put, 0, 1).encode();
        assert_eq!(OpHeader::decode(&good[..31]), Err(RmaError::Malformed));
        for (at, v) in [(0, 0), (0, 6), (1, 1), (3, 2), (28, 1)] {
            let mut b = good;
            b[at] = v;
            assert_eq!(
                OpHeader::decode(&b),
                Err(RmaError::Malformed),
                "byte {at} = {v}"
            );
        }
        let mut acc = header(RmaKind::Accumulate(Op::Sum, Int::U32), 0, 4).encode();
        acc[1] = 7;
        assert_eq!(OpHeader::decode(&acc), Err(RmaError::Malformed), "no op 7");
        acc[1] = 0;
        acc[2] = 8;
        assert_eq!(
            OpHeader::decode(&acc),
            Err(RmaError::Malformed),
            "no type 8"
        );
        let mut f = header(RmaKind::AccumulateFloat(Op::Sum, Float::F32), 0, 4).encode();
        f[1] = 4;
        assert_eq!(
            OpHeader::decode(&f),
            Err(RmaError::Malformed),
            "no bitwise or on floats"
        );
        f[1] = 0;
        f[2] = 2;
        assert_eq!(
            OpHeader::decode(&f),
            Err(RmaError::Malformed),
            "no float type 2"
        );
        let f64_at = |off, len| header(RmaKind::AccumulateFloat(Op::Sum, Float::F64), off, len);
        assert_eq!(WIN.admit(&f64_at(8, 16)), Ok(8..24));
        assert_eq!(WIN.admit(&f64_at(4, 8)), Err(RmaError::Misaligned));
        assert_eq!(WIN.admit(&f64_at(8, 12)), Err(RmaError::Misaligned));
    }

    #[test]
    fn the_origin_checks_bounds_with_checked_arithmetic() {
        assert_eq!(WIN.range(0, 100), Ok(0..100));
        assert_eq!(WIN.range(24, 4), Ok(96..100));
        assert!(matches!(
            WIN.range(24, 5),
            Err(RmaError::OutOfBounds { .. })
        ));
        assert!(matches!(
            WIN.range(u64::MAX, 1),
            Err(RmaError::OutOfBounds { .. })
        ));
        assert!(matches!(
            WIN.range(1, u64::MAX),
            Err(RmaError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn the_target_checks_key_range_and_alignment() {
        assert_eq!(WIN.admit(&header(RmaKind::Put, 90, 10)), Ok(90..100));
        let stale = OpHeader {
            key: 1,
            ..header(RmaKind::Put, 0, 1)
        };
        assert_eq!(WIN.admit(&stale), Err(RmaError::Key));
        assert!(matches!(
            WIN.admit(&header(RmaKind::Get, 91, 10)),
            Err(RmaError::OutOfBounds { .. })
        ));
        assert!(matches!(
            WIN.admit(&header(RmaKind::Put, u64::MAX, 2)),
            Err(RmaError::OutOfBounds { .. })
        ));
        let acc = |off, len| header(RmaKind::Accumulate(Op::Sum, Int::U32), off, len);
        assert_eq!(WIN.admit(&acc(4, 8)), Ok(4..12));
        assert_eq!(WIN.admit(&acc(2, 8)), Err(RmaError::Misaligned));
        assert_eq!(WIN.admit(&acc(4, 6)), Err(RmaError::Misaligned));
        assert_eq!(
            WIN.admit(&header(RmaKind::GetReply, 0, 1)),
            Err(RmaError::Malformed)
        );
    }
}
