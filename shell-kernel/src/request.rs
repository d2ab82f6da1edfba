//! The device's requests as userspace lays them out (native-endian, x86-64),
//! decoded from the bytes the glue copied in: nothing in them is trusted
//! for arithmetic, and a request that does not decode is `EINVAL` with
//! nothing done.
//!
//! A declaration's argument is `{u32 count; u32 zero; u64 segments}`: the
//! glue copies `count` (at most [`MAX_SEGMENTS`]) segments of
//! `{u64 addr; u64 len}` from the user pointer `segments`, then
//! [`segments`] decodes them. Every other request names a region by its
//! descriptor, a `u32`.

use heapless::Vec;

use crate::error::Error;
use crate::region::{Segment, MAX_SEGMENTS};
use crate::regions::Desc;

/// The device's ioctl numbers (`rmx_uapi.h` has the same: a test
/// compiles it and compares).
pub mod ioctl {
    const MAGIC: u32 = 0xCE;

    /// `_IOC(dir, MAGIC, nr, size)` as Linux lays it out on x86-64.
    const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
        dir << 30 | size << 16 | MAGIC << 8 | nr
    }
    const WRITE: u32 = 1;
    const READ_WRITE: u32 = 3;

    pub const DECLARE: u32 = ioc(READ_WRITE, 1, 16);
    pub const UNDECLARE: u32 = ioc(WRITE, 2, 4);
    pub const PIN: u32 = ioc(WRITE, 3, 8);
    pub const READ: u32 = ioc(WRITE, 4, 32);
    pub const WRITE_TO: u32 = ioc(WRITE, 5, 32);
    pub const UNPIN: u32 = ioc(WRITE, 6, 4);
    pub const BIND: u32 = ioc(READ_WRITE, 7, 32);
    pub const SEND: u32 = ioc(WRITE, 8, 16);
    pub const RECV: u32 = ioc(WRITE, 9, 16);
    pub const SEND_REGION: u32 = ioc(WRITE, 10, 40);
    /// `RMX_PIN`'s flag: every page now, not the next chunk.
    pub const PIN_ALL: u32 = 1;
}

/// Bytes of a declaration's argument.
pub const DECLARE_LEN: usize = 16;
/// Bytes of one segment.
pub const SEGMENT_LEN: usize = 16;

/// A declaration: how many segments, and where userspace keeps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declare {
    pub count: u32,
    pub segments: u64,
}

impl Declare {
    /// Decodes a declaration's argument: exactly [`DECLARE_LEN`] bytes, a
    /// count from 1 to [`MAX_SEGMENTS`], the reserved word zero.
    pub fn decode(b: &[u8]) -> Result<Declare, Error> {
        let b: &[u8; DECLARE_LEN] = b.try_into().map_err(|_| Error::Invalid)?;
        let count = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let zero = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
        let segments = u64::from_ne_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
        if count == 0 || count as usize > MAX_SEGMENTS || zero != 0 {
            return Err(Error::Invalid);
        }
        Ok(Declare { count, segments })
    }

    /// The bytes the glue copies from `segments`.
    pub fn bytes(self) -> usize {
        self.count as usize * SEGMENT_LEN
    }

    pub fn encode(self) -> [u8; DECLARE_LEN] {
        let mut b = [0u8; DECLARE_LEN];
        b[..4].copy_from_slice(&self.count.to_ne_bytes());
        b[8..].copy_from_slice(&self.segments.to_ne_bytes());
        b
    }
}

/// Decodes the segments of `d` from the bytes copied in: exactly
/// [`Declare::bytes`] of them. Their ranges are checked when declared
/// ([`crate::Region::new`]).
pub fn segments(d: Declare, b: &[u8]) -> Result<Vec<Segment, MAX_SEGMENTS>, Error> {
    if b.len() != d.bytes() {
        return Err(Error::Invalid);
    }
    let mut out = Vec::new();
    for s in b.chunks_exact(SEGMENT_LEN) {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&s[i..i + 8]);
            u64::from_ne_bytes(w)
        };
        let seg = Segment {
            addr: word(0),
            len: word(8),
        };
        out.push(seg).map_err(|_| Error::Invalid)?;
    }
    Ok(out)
}

/// Encodes `segs` as userspace lays them out.
pub fn encode_segments(segs: &[Segment], out: &mut [u8]) -> Result<usize, Error> {
    let n = segs.len() * SEGMENT_LEN;
    let out = out.get_mut(..n).ok_or(Error::Invalid)?;
    for (s, b) in segs.iter().zip(out.chunks_exact_mut(SEGMENT_LEN)) {
        b[..8].copy_from_slice(&s.addr.to_ne_bytes());
        b[8..].copy_from_slice(&s.len.to_ne_bytes());
    }
    Ok(n)
}

/// Decodes a request naming a region: exactly four bytes.
pub fn desc(b: &[u8]) -> Result<Desc, Error> {
    let b: [u8; 4] = b.try_into().map_err(|_| Error::Invalid)?;
    Ok(Desc(u32::from_ne_bytes(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_round_trip_and_bad_ones_are_refused() {
        let d = Declare {
            count: 2,
            segments: 0x7fff_0000,
        };
        assert_eq!(Declare::decode(&d.encode()), Ok(d));
        assert_eq!(Declare::decode(&d.encode()[..15]), Err(Error::Invalid));
        let mut b = d.encode();
        b[4] = 1;
        assert_eq!(Declare::decode(&b), Err(Error::Invalid), "reserved word");
        for count in [0, MAX_SEGMENTS as u32 + 1, u32::MAX] {
            let b = Declare { count, ..d }.encode();
            assert_eq!(Declare::decode(&b), Err(Error::Invalid), "{count}");
        }
        let segs = [
            Segment {
                addr: 0x1000,
                len: 5,
            },
            Segment {
                addr: u64::MAX,
                len: u64::MAX,
            },
        ];
        let mut buf = [0u8; 64];
        let n = encode_segments(&segs, &mut buf).unwrap();
        assert_eq!(&segments(d, &buf[..n]).unwrap()[..], &segs[..]);
        assert_eq!(segments(d, &buf[..n - 1]), Err(Error::Invalid));
        assert_eq!(segments(d, &buf[..n + 16]), Err(Error::Invalid));
        assert_eq!(desc(&7u32.to_ne_bytes()), Ok(Desc(7)));
        assert_eq!(desc(&[1, 2, 3]), Err(Error::Invalid));
    }
}
