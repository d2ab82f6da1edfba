//! Ethernet framing of rmx packets, as Open-MX frames its messages: the
//! Ethernet header with rmx's own EtherType, then a small rmx header naming
//! the destination and source endpoints (any number per interface) and a
//! seal, then the core's packet. Shared by every shell that puts rmx on a
//! wire.
//!
//! ```text
//!  0  destination MAC (6)     6  source MAC (6)     12  EtherType (2, BE)
//! 14  version (1)   15  flags (1, 0)   16  destination endpoint (2, BE)
//! 18  source endpoint (2, BE)   20  packet length (2, BE)
//! 22  seal (8)      30  packet
//! ```
//!
//! The length is carried because Ethernet pads short frames to 60 bytes.
//! Frames come from the network, so decoding checks every field and says
//! what was wrong; nothing in a frame is trusted for arithmetic.
//!
//! The seal authenticates a frame to its job. Field checks cannot see a
//! forged copy of a real frame with one field changed: taken before the real
//! frame (whose sequence number it shares), it is acknowledged in the real
//! one's place and a receive waits for ever, or completes with what the
//! forger chose. So every frame carries a SipHash-2-4 MAC under a key that
//! only the job's ranks hold (swapped through the bootstrap, never on the
//! wire) over its headers and every packet byte the protocol acts on
//! ([`sealed_len`]); a frame without the right seal is dropped before the
//! core sees it. The bytes of a message that are only copied into a
//! receiver's buffer, at places the sealed bytes name, are not covered:
//! hashing them would cost the bandwidth of bulk transfers, and a forger
//! who changes them changes data, not how much is placed or whether a
//! transfer ends. Replays are the core's to drop (sequence numbers,
//! idempotent control packets); a new job has a new key.

use core::hash::Hasher;
use siphasher::sip::SipHasher24;

/// IEEE 802 "local experimental" EtherType, rmx's default.
pub const ETHERTYPE: u16 = 0x88B5;
/// The frame format version this build speaks (2: sealed).
pub const FRAME_VERSION: u8 = 2;
/// Bytes before the packet: Ethernet header (14), rmx header (8), seal (8).
pub const FRAME_HEADER_LEN: usize = 30;
/// Where the seal lies; the bytes before it are sealed.
const SEAL_AT: usize = 22;
/// Ethernet header bytes counted by neither the MTU nor the packet.
pub const ETH_HEADER_LEN: usize = 14;

/// A MAC address.
pub type Mac = [u8; 6];

/// An endpoint's address on an Ethernet: its interface's MAC and its index
/// among the endpoints on that interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthAddr {
    pub mac: Mac,
    pub endpoint: u16,
}

impl EthAddr {
    /// Bytes of [`to_bytes`](Self::to_bytes).
    pub const LEN: usize = 8;

    /// The address as the bootstrap exchanges it.
    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..6].copy_from_slice(&self.mac);
        b[6..].copy_from_slice(&self.endpoint.to_be_bytes());
        b
    }

    pub fn from_bytes(b: [u8; Self::LEN]) -> EthAddr {
        EthAddr {
            mac: [b[0], b[1], b[2], b[3], b[4], b[5]],
            endpoint: u16::from_be_bytes([b[6], b[7]]),
        }
    }
}

/// Why a frame with rmx's EtherType was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the two headers.
    Short,
    /// Another EtherType (not rmx's).
    NotOurs,
    /// A frame format this build does not speak.
    Version(u8),
    /// The packet length runs past the frame.
    Length,
    /// The seal is not the job's: forged, or from another job.
    Seal,
}

/// A frame whose seal is checked: addresses and the packet it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub dst: EthAddr,
    pub src: EthAddr,
    pub packet: &'a [u8],
}

/// A well-formed frame whose seal is not checked yet: its addresses may be
/// read (a port drops frames for other endpoints without hashing them), its
/// packet only once [`open`](Self::open) found the seal the job's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sealed<'a> {
    pub dst: EthAddr,
    pub src: EthAddr,
    head: &'a [u8; FRAME_HEADER_LEN],
    packet: &'a [u8],
}

/// A frame's addresses and packet length, read from its headers alone:
/// what a receive path that holds only the first [`FRAME_HEADER_LEN`]
/// bytes (a kernel's, demultiplexing to endpoints) needs to route it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub dst: EthAddr,
    pub src: EthAddr,
    /// Bytes of the packet after the headers.
    pub len: u16,
}

impl Route {
    /// Reads the headers of a frame of `frame_len` bytes in all from
    /// `head` (its first bytes), if it is an rmx frame of EtherType
    /// `ethertype` in this version whose packet fits the frame.
    pub fn decode(head: &[u8], frame_len: usize, ethertype: u16) -> Result<Route, FrameError> {
        let head = head
            .first_chunk::<FRAME_HEADER_LEN>()
            .ok_or(FrameError::Short)?;
        let be16 = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
        if be16(12) != ethertype {
            return Err(FrameError::NotOurs);
        }
        if head[14] != FRAME_VERSION {
            return Err(FrameError::Version(head[14]));
        }
        let len = be16(20);
        if frame_len.saturating_sub(FRAME_HEADER_LEN) < usize::from(len) {
            return Err(FrameError::Length);
        }
        let mac = |at: usize| -> Mac {
            let mut m = [0u8; 6];
            m.copy_from_slice(&head[at..at + 6]);
            m
        };
        Ok(Route {
            dst: EthAddr {
                mac: mac(0),
                endpoint: be16(16),
            },
            src: EthAddr {
                mac: mac(6),
                endpoint: be16(18),
            },
            len,
        })
    }
}

impl<'a> Frame<'a> {
    /// Decodes `bytes`, a whole Ethernet frame, if it is an rmx frame of
    /// EtherType `ethertype` in this version.
    pub fn decode(bytes: &'a [u8], ethertype: u16) -> Result<Sealed<'a>, FrameError> {
        let r = Route::decode(bytes, bytes.len(), ethertype)?;
        let (head, rest) = bytes
            .split_first_chunk::<FRAME_HEADER_LEN>()
            .ok_or(FrameError::Short)?;
        let packet = rest.get(..usize::from(r.len)).ok_or(FrameError::Length)?;
        Ok(Sealed {
            dst: r.dst,
            src: r.src,
            head,
            packet,
        })
    }
}

impl<'a> Sealed<'a> {
    /// The frame, if it is sealed under `key`.
    pub fn open(&self, key: &SealKey) -> Result<Frame<'a>, FrameError> {
        let mut sealer = Sealer::new(key, self.head);
        sealer.packet(self.packet);
        if sealer.finish() != self.head[SEAL_AT..] {
            return Err(FrameError::Seal);
        }
        Ok(Frame {
            dst: self.dst,
            src: self.src,
            packet: self.packet,
        })
    }
}

/// Writes the headers of a frame from `src` to `dst` carrying a packet of
/// `len` bytes into `out`, seal zero; the packet goes at
/// [`FRAME_HEADER_LEN`], then [`seal`] (or a [`Sealer`]) signs it. `None`
/// if `out` is too short or `len` does not fit the length field.
pub fn encode_header(
    out: &mut [u8],
    ethertype: u16,
    dst: EthAddr,
    src: EthAddr,
    len: usize,
) -> Option<()> {
    let len = u16::try_from(len).ok()?;
    let h = out.get_mut(..FRAME_HEADER_LEN)?;
    h[0..6].copy_from_slice(&dst.mac);
    h[6..12].copy_from_slice(&src.mac);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    h[14] = FRAME_VERSION;
    h[15] = 0;
    h[16..18].copy_from_slice(&dst.endpoint.to_be_bytes());
    h[18..20].copy_from_slice(&src.endpoint.to_be_bytes());
    h[20..22].copy_from_slice(&len.to_be_bytes());
    h[SEAL_AT..].fill(0);
    Some(())
}

/// A job's secret, under which its ranks seal their frames. Random per job
/// and never sent on the wire it protects.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SealKey([u8; SealKey::LEN]);

impl SealKey {
    /// Bytes of a key.
    pub const LEN: usize = 16;

    pub const fn from_bytes(b: [u8; Self::LEN]) -> SealKey {
        SealKey(b)
    }

    /// The key as the bootstrap hands it to the job's other ranks.
    pub const fn to_bytes(self) -> [u8; Self::LEN] {
        self.0
    }

    fn halves(&self) -> (u64, u64) {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&self.0[..8]);
        k1.copy_from_slice(&self.0[8..]);
        (u64::from_le_bytes(k0), u64::from_le_bytes(k1))
    }
}

impl core::fmt::Debug for SealKey {
    /// A secret stays out of logs.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// How many of a packet's `len` bytes its seal covers, given the packet's
/// kind byte: all of them, but for the message bytes that follow the
/// headers of eager, medium and data packets (copied, never acted on).
pub fn sealed_len(kind: u8, len: usize) -> usize {
    use crate::wire::{Kind, HEADER_LEN};
    let head = match kind {
        k if k == Kind::Eager as u8 || k == Kind::Data as u8 => HEADER_LEN,
        k if k == Kind::Medium as u8 => HEADER_LEN + crate::wire::medium::FRAG_HEAD,
        _ => len,
    };
    head.min(len)
}

/// Computes a frame's seal from its headers and its packet, the packet
/// given in pieces as a gather list holds it.
pub struct Sealer {
    mac: SipHasher24,
    /// Packet bytes the frame's length field declares; pieces past them
    /// are not the packet.
    len: usize,
    /// Packet bytes seen so far.
    seen: usize,
    /// Packet bytes sealed: `len` until the kind byte is seen.
    limit: usize,
}

impl Sealer {
    /// Starts the seal of the frame whose headers are `head` (its seal
    /// field is not read).
    pub fn new(key: &SealKey, head: &[u8; FRAME_HEADER_LEN]) -> Sealer {
        let (k0, k1) = key.halves();
        let mut mac = SipHasher24::new_with_keys(k0, k1);
        mac.write(&head[..SEAL_AT]);
        let len = u16::from_be_bytes([head[20], head[21]]) as usize;
        Sealer {
            mac,
            len,
            seen: 0,
            limit: len,
        }
    }

    /// The packet's next bytes.
    pub fn packet(&mut self, piece: &[u8]) {
        const KIND_AT: usize = 1;
        if let Some(&kind) = KIND_AT.checked_sub(self.seen).and_then(|i| piece.get(i)) {
            // Every packet's seal covers at least its first two bytes, so
            // what was sealed before the kind was known stays sealed.
            self.limit = sealed_len(kind, self.len);
        }
        let take = self.limit.saturating_sub(self.seen).min(piece.len());
        self.mac.write(&piece[..take]);
        self.seen = self.seen.saturating_add(piece.len());
    }

    /// Whether the seal covers no further bytes: the rest of the packet
    /// is data the seal leaves out, which need not be read for it.
    pub fn complete(&self) -> bool {
        self.seen >= self.limit
    }

    /// The seal.
    pub fn finish(&self) -> [u8; 8] {
        self.mac.finish().to_le_bytes()
    }

    /// Writes the seal into the frame's headers.
    pub fn sign(&self, head: &mut [u8; FRAME_HEADER_LEN]) {
        head[SEAL_AT..].copy_from_slice(&self.finish());
    }
}

/// Seals `frame`, whose headers [`encode_header`] wrote, with its packet
/// in place after them. `None` if `frame` is shorter than its headers.
pub fn seal(key: &SealKey, frame: &mut [u8]) -> Option<()> {
    let mut head = [0u8; FRAME_HEADER_LEN];
    head.copy_from_slice(frame.get(..FRAME_HEADER_LEN)?);
    let mut sealer = Sealer::new(key, &head);
    sealer.packet(&frame[FRAME_HEADER_LEN..]);
    frame[SEAL_AT..FRAME_HEADER_LEN].copy_from_slice(&sealer.finish());
    Some(())
}

/// The largest packet a frame carries on an interface of `mtu` bytes (the
/// MTU counts everything after the Ethernet header).
pub const fn max_packet(mtu: u32) -> u32 {
    mtu.saturating_sub((FRAME_HEADER_LEN - ETH_HEADER_LEN) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Kind, HEADER_LEN};

    const A: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 1],
        endpoint: 3,
    };
    const B: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 2],
        endpoint: 0x1234,
    };
    const KEY: SealKey = SealKey::from_bytes(*b"a job's secret!!");

    /// A sealed frame of 80 bytes carrying `packet`.
    fn frame(packet: &[u8]) -> [u8; 80] {
        let mut f = [0u8; 80];
        encode_header(&mut f, ETHERTYPE, B, A, packet.len()).unwrap();
        f[FRAME_HEADER_LEN..FRAME_HEADER_LEN + packet.len()].copy_from_slice(packet);
        seal(&KEY, &mut f).unwrap();
        f
    }

    /// The frame in `b`, decoded and opened under [`KEY`].
    fn open(b: &[u8]) -> Result<Frame<'_>, FrameError> {
        Frame::decode(b, ETHERTYPE)?.open(&KEY)
    }

    /// A packet of `len` bytes of kind `kind`, its other bytes counting up.
    fn packet(kind: Kind, len: usize) -> [u8; 50] {
        let mut p = [0u8; 50];
        for (i, b) in p.iter_mut().enumerate() {
            *b = i as u8;
        }
        p[1] = kind as u8;
        p[len..].fill(0);
        p
    }

    #[test]
    fn a_frame_round_trips_and_padding_is_not_packet() {
        let f = frame(b"hello");
        let d = open(&f).unwrap();
        assert_eq!((d.dst, d.src, d.packet), (B, A, &b"hello"[..]));
        // Addresses are read before the seal is checked.
        let mut forged = f;
        forged[FRAME_HEADER_LEN] ^= 1;
        let sealed = Frame::decode(&forged, ETHERTYPE).unwrap();
        assert_eq!((sealed.dst, sealed.src), (B, A));
        assert_eq!(sealed.open(&KEY), Err(FrameError::Seal));
        assert_eq!(EthAddr::from_bytes(B.to_bytes()), B);
        assert_eq!(max_packet(9000), 8984);
        assert_eq!(max_packet(4), 0);
        assert_eq!(SealKey::from_bytes(KEY.to_bytes()), KEY);
        let mut shown = heapless::String::<32>::new();
        core::fmt::Write::write_fmt(&mut shown, format_args!("{KEY:?}")).unwrap();
        assert_eq!(shown, "SealKey(..)");
    }

    #[test]
    fn a_route_is_read_from_the_headers_alone() {
        let f = frame(b"hello");
        let r = Route::decode(&f[..FRAME_HEADER_LEN], f.len(), ETHERTYPE).unwrap();
        assert_eq!((r.dst, r.src, r.len), (B, A, 5));
        // The packet must fit the frame the headers came from.
        assert_eq!(
            Route::decode(&f, FRAME_HEADER_LEN + 4, ETHERTYPE),
            Err(FrameError::Length)
        );
        assert_eq!(Route::decode(&f, 3, ETHERTYPE), Err(FrameError::Length));
        assert_eq!(
            Route::decode(&f[..FRAME_HEADER_LEN - 1], 80, ETHERTYPE),
            Err(FrameError::Short)
        );
        assert_eq!(Route::decode(&f, 80, 0x0800), Err(FrameError::NotOurs));
        let mut v = f;
        v[14] = 9;
        assert_eq!(
            Route::decode(&v, 80, ETHERTYPE),
            Err(FrameError::Version(9))
        );
    }

    #[test]
    fn bad_frames_say_what_is_wrong() {
        let f = frame(b"hello");
        let decode = open;
        assert_eq!(decode(&f[..FRAME_HEADER_LEN - 1]), Err(FrameError::Short));
        assert_eq!(
            Frame::decode(&f, 0x0800).map(|_| ()),
            Err(FrameError::NotOurs)
        );
        let mut v = f;
        v[14] = 9;
        assert_eq!(decode(&v), Err(FrameError::Version(9)));
        let mut l = f;
        l[20..22].copy_from_slice(&51u16.to_be_bytes());
        assert_eq!(decode(&l), Err(FrameError::Length));
        l[20..22].copy_from_slice(&50u16.to_be_bytes());
        assert_eq!(decode(&l), Err(FrameError::Seal), "the length is sealed");
        seal(&KEY, &mut l).unwrap();
        assert_eq!(decode(&l).unwrap().packet.len(), 50);
        assert_eq!(encode_header(&mut [0u8; 29], ETHERTYPE, A, B, 0), None);
        assert_eq!(encode_header(&mut [0u8; 30], ETHERTYPE, A, B, 70_000), None);
        assert_eq!(seal(&KEY, &mut [0u8; 29]), None);
    }

    #[test]
    fn a_frame_with_any_sealed_bit_changed_or_another_key_is_refused() {
        let p = packet(Kind::Rts, 50);
        let f = frame(&p);
        let other = SealKey::from_bytes(*b"another job's!!!");
        assert_eq!(
            Frame::decode(&f, ETHERTYPE).unwrap().open(&other),
            Err(FrameError::Seal)
        );
        // Every bit of the headers and of a control packet, bar the
        // EtherType, version and length (refused by their own checks).
        for byte in (0..FRAME_HEADER_LEN + 50).filter(|b| !(12..15).contains(b) && *b != 20) {
            for bit in 0..8 {
                let mut g = f;
                g[byte] ^= 1 << bit;
                assert!(open(&g).is_err(), "byte {byte} bit {bit} changed unseen");
            }
        }
        // Padding after the packet is no part of it.
        let mut g = frame(&p[..10]);
        g[79] ^= 1;
        assert!(open(&g).is_ok());
    }

    #[test]
    fn message_bytes_are_not_sealed_but_everything_that_places_them_is() {
        for (kind, sealed) in [
            (Kind::Eager, HEADER_LEN),
            (Kind::Data, HEADER_LEN),
            (Kind::Medium, HEADER_LEN + crate::wire::medium::FRAG_HEAD),
            (Kind::Packed, 50),
            (Kind::Cts, 50),
        ] {
            assert_eq!(sealed_len(kind as u8, 50), sealed);
            assert_eq!(sealed_len(kind as u8, 3), 3);
            let f = frame(&packet(kind, 50));
            for at in 0..50 {
                let mut g = f;
                g[FRAME_HEADER_LEN + at] ^= 0x80;
                let ok = open(&g).is_ok();
                assert_eq!(ok, at >= sealed, "{kind:?} byte {at}");
            }
        }
    }

    #[test]
    fn a_seal_is_complete_once_every_sealed_byte_is_seen() {
        for (kind, sealed) in [
            (Kind::Data, HEADER_LEN),
            (Kind::Medium, HEADER_LEN + crate::wire::medium::FRAG_HEAD),
            (Kind::Cts, 50),
        ] {
            let p = packet(kind, 50);
            let f = frame(&p);
            let head: [u8; FRAME_HEADER_LEN] = f[..FRAME_HEADER_LEN].try_into().unwrap();
            for at in 0..=50 {
                let mut s = Sealer::new(&KEY, &head);
                s.packet(&p[..at]);
                assert_eq!(s.complete(), at >= sealed, "{kind:?} after {at}");
                if s.complete() {
                    // The rest is never read: the seal is already the frame's.
                    assert_eq!(s.finish(), f[SEAL_AT..FRAME_HEADER_LEN], "{kind:?}");
                }
            }
        }
    }

    #[test]
    fn a_packet_sealed_in_pieces_seals_as_one() {
        for kind in [Kind::Eager, Kind::Medium, Kind::Packed] {
            let p = packet(kind, 50);
            let f = frame(&p);
            let head: [u8; FRAME_HEADER_LEN] = f[..FRAME_HEADER_LEN].try_into().unwrap();
            for a in 0..=50 {
                for b in a..=50 {
                    let mut s = Sealer::new(&KEY, &head);
                    s.packet(&p[..a]);
                    s.packet(&p[a..b]);
                    s.packet(&p[b..]);
                    // Bytes past the declared length are not the packet.
                    s.packet(&[7; 3]);
                    assert_eq!(s.finish(), f[SEAL_AT..FRAME_HEADER_LEN], "{kind:?} {a} {b}");
                }
            }
        }
    }
}
