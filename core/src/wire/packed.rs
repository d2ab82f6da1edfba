//! The body of a packed packet: several eager messages coalesced into one send.
//!
//! A packed packet is a [`Kind::Packed`](crate::wire::Kind::Packed) header whose
//! `tag` field holds the number of messages, followed by one record per message:
//!
//! ```text
//! full record                          cached record
//! offset size field                    offset size field
//!      0    1 FULL (0xC1)                   0    1 CACHED (0xC2)
//!      1    2 context                       1  len payload: context, tag and
//!      3    4 tag                                  length repeat the previous record's
//!      7    4 len
//!     11  len payload
//! ```
//!
//! The source of every message is the packet's `src`. A cached record is the
//! paper's one-byte `COALESCED_CACHED` marker: it may only follow another record.
//! Every record is validated before its message is delivered, so a malformed
//! record loses nothing that came before it.

/// Marker of a record that carries its own matching information.
pub const FULL: u8 = 0xC1;
/// Marker of a record that repeats the previous record's matching information.
pub const CACHED: u8 = 0xC2;
/// Bytes of a full record before its payload.
pub const FULL_LEN: usize = 11;
/// Bytes of a cached record before its payload.
pub const CACHED_LEN: usize = 1;

/// The matching information a record carries (or repeats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub context: u16,
    pub tag: u32,
    pub len: u32,
}

/// Why a packed body could not be read further. Records before the error are good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackedError {
    /// A byte at `at` that is neither [`FULL`] nor [`CACHED`].
    Marker { at: usize, got: u8 },
    /// The record at `at` needs `needed` bytes; only `got` remain.
    Truncated {
        at: usize,
        needed: usize,
        got: usize,
    },
    /// A cached record at `at` with no record before it to repeat.
    CachedFirst { at: usize },
    /// The header declares `declared` messages; the body holds `found`
    /// (more bytes after the last declared record, or too few records).
    Count { declared: u32, found: u32 },
}

/// Bytes a record for `r` takes in a body whose previous record is `prev`.
pub fn record_len(prev: Option<Record>, r: Record, cache: bool) -> usize {
    let head = if cache && prev == Some(r) {
        CACHED_LEN
    } else {
        FULL_LEN
    };
    head + r.len as usize
}

/// Writes the head of a record for `r` at the start of `out` (the payload
/// follows it); returns the head's length. `out` must hold the whole record.
pub fn write_head(out: &mut [u8], prev: Option<Record>, r: Record, cache: bool) -> usize {
    if cache && prev == Some(r) {
        out[0] = CACHED;
        return CACHED_LEN;
    }
    out[0] = FULL;
    out[1..3].copy_from_slice(&r.context.to_le_bytes());
    out[3..7].copy_from_slice(&r.tag.to_le_bytes());
    out[7..11].copy_from_slice(&r.len.to_le_bytes());
    FULL_LEN
}

/// Reads a packed body record by record. It holds no borrow, so the caller
/// can deliver each message (touching the buffer mutably) between records.
#[derive(Clone, Copy, Debug)]
pub struct Unpacker {
    at: usize,
    prev: Option<Record>,
    found: u32,
    declared: u32,
    failed: bool,
}

impl Unpacker {
    /// A reader of a body that declares `declared` messages.
    pub fn new(declared: u32) -> Unpacker {
        Unpacker {
            at: 0,
            prev: None,
            found: 0,
            declared,
            failed: false,
        }
    }

    /// The next message of `body`: its matching information and the offset of
    /// its payload in `body`. `None` once every declared record was read (or
    /// after an error, which is returned once).
    pub fn next(&mut self, body: &[u8]) -> Option<Result<(Record, usize), PackedError>> {
        if self.failed {
            return None;
        }
        let r = self.read(body);
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }

    fn read(&mut self, body: &[u8]) -> Option<Result<(Record, usize), PackedError>> {
        let at = self.at;
        let left = body.len() - at.min(body.len());
        if self.found == self.declared {
            if left == 0 {
                return None;
            }
            return Some(Err(PackedError::Count {
                declared: self.declared,
                found: self.found + 1,
            }));
        }
        if left == 0 {
            return Some(Err(PackedError::Count {
                declared: self.declared,
                found: self.found,
            }));
        }
        let (r, head) = match body[at] {
            FULL => {
                if left < FULL_LEN {
                    return Some(Err(PackedError::Truncated {
                        at,
                        needed: FULL_LEN,
                        got: left,
                    }));
                }
                let b = &body[at..];
                let r = Record {
                    context: u16::from_le_bytes([b[1], b[2]]),
                    tag: u32::from_le_bytes([b[3], b[4], b[5], b[6]]),
                    len: u32::from_le_bytes([b[7], b[8], b[9], b[10]]),
                };
                (r, FULL_LEN)
            }
            CACHED => match self.prev {
                Some(r) => (r, CACHED_LEN),
                None => return Some(Err(PackedError::CachedFirst { at })),
            },
            got => return Some(Err(PackedError::Marker { at, got })),
        };
        let needed = head as u64 + r.len as u64;
        if needed > left as u64 {
            return Some(Err(PackedError::Truncated {
                at,
                needed: needed.min(usize::MAX as u64) as usize,
                got: left,
            }));
        }
        self.at = at + needed as usize;
        self.prev = Some(r);
        self.found += 1;
        Some(Ok((r, at + head)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Record = Record {
        context: 3,
        tag: 9,
        len: 2,
    };
    const B: Record = Record {
        context: 3,
        tag: 10,
        len: 1,
    };

    fn pack(records: &[(Record, &[u8])], cache: bool) -> [u8; 64] {
        let mut out = [0u8; 64];
        let mut at = 0;
        let mut prev = None;
        for &(r, p) in records {
            assert_eq!(r.len as usize, p.len());
            let n = record_len(prev, r, cache);
            let h = write_head(&mut out[at..at + n], prev, r, cache);
            out[at + h..at + n].copy_from_slice(p);
            at += n;
            prev = Some(r);
        }
        out
    }

    fn all(body: &[u8], declared: u32) -> ([Option<(Record, usize)>; 4], Option<PackedError>) {
        let mut got = [None; 4];
        let mut u = Unpacker::new(declared);
        let mut i = 0;
        while let Some(r) = u.next(body) {
            match r {
                Ok(x) => got[i] = Some(x),
                Err(e) => return (got, Some(e)),
            }
            i += 1;
        }
        (got, None)
    }

    #[test]
    fn cached_records_repeat_the_previous_matching_information() {
        let body = pack(&[(A, b"ab"), (A, b"cd"), (B, b"e")], true);
        let len = 13 + 3 + 12;
        let (got, err) = all(&body[..len], 3);
        assert_eq!(err, None);
        assert_eq!(got[0], Some((A, FULL_LEN)));
        assert_eq!(got[1], Some((A, 13 + CACHED_LEN)), "one-byte marker");
        assert_eq!(got[2], Some((B, 16 + FULL_LEN)));
        assert_eq!(&body[14..16], b"cd");
    }

    #[test]
    fn without_the_cache_every_record_is_full() {
        let body = pack(&[(A, b"ab"), (A, b"cd")], false);
        assert_eq!(body[13], FULL);
        assert_eq!(all(&body[..26], 2).1, None);
    }

    #[test]
    fn malformed_bodies_fail_after_the_good_records() {
        let body = pack(&[(A, b"ab"), (A, b"cd")], true);
        // Truncated second record.
        let (got, err) = all(&body[..15], 2);
        assert!(got[0].is_some());
        assert_eq!(
            err,
            Some(PackedError::Truncated {
                at: 13,
                needed: 3,
                got: 2
            })
        );
        // Unknown marker.
        let mut bad = body;
        bad[13] = 0x55;
        assert_eq!(
            all(&bad[..16], 2).1,
            Some(PackedError::Marker { at: 13, got: 0x55 })
        );
        // A cached record first.
        assert_eq!(
            all(&body[13..16], 1).1,
            Some(PackedError::CachedFirst { at: 0 })
        );
        // Declared count disagrees with the body.
        assert_eq!(
            all(&body[..16], 3).1,
            Some(PackedError::Count {
                declared: 3,
                found: 2
            })
        );
        assert_eq!(
            all(&body[..16], 1).1,
            Some(PackedError::Count {
                declared: 1,
                found: 2
            })
        );
        // An inner length beyond the body.
        let mut long = body;
        long[7..11].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            all(&long[..16], 2).1,
            Some(PackedError::Truncated { at: 0, .. })
        ));
    }

    #[test]
    fn an_error_is_reported_once() {
        let mut u = Unpacker::new(1);
        assert!(matches!(u.next(&[0u8]), Some(Err(_))));
        assert_eq!(u.next(&[0u8]), None);
    }
}
