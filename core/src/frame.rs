//! Ethernet framing of rmx packets, as Open-MX frames its messages: the
//! Ethernet header with rmx's own EtherType, then a small rmx header naming
//! the destination and source endpoints (any number per interface), then
//! the core's packet. Shared by every shell that puts rmx on a wire.
//!
//! ```text
//!  0  destination MAC (6)     6  source MAC (6)     12  EtherType (2, BE)
//! 14  version (1)   15  flags (1, 0)   16  destination endpoint (2, BE)
//! 18  source endpoint (2, BE)   20  packet length (2, BE)   22  packet
//! ```
//!
//! The length is carried because Ethernet pads short frames to 60 bytes.
//! Frames come from the network, so decoding checks every field and says
//! what was wrong; nothing in a frame is trusted for arithmetic.

/// IEEE 802 "local experimental" EtherType, rmx's default.
pub const ETHERTYPE: u16 = 0x88B5;
/// The frame format version this build speaks.
pub const FRAME_VERSION: u8 = 1;
/// Bytes before the packet: Ethernet header (14) and rmx header (8).
pub const FRAME_HEADER_LEN: usize = 22;
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
}

/// A decoded frame: addresses and the packet it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub dst: EthAddr,
    pub src: EthAddr,
    pub packet: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Decodes `bytes`, a whole Ethernet frame, if it is an rmx frame of
    /// EtherType `ethertype` in this version.
    pub fn decode(bytes: &'a [u8], ethertype: u16) -> Result<Frame<'a>, FrameError> {
        if bytes.len() < FRAME_HEADER_LEN {
            return Err(FrameError::Short);
        }
        let be16 = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        if be16(12) != ethertype {
            return Err(FrameError::NotOurs);
        }
        if bytes[14] != FRAME_VERSION {
            return Err(FrameError::Version(bytes[14]));
        }
        let len = be16(20) as usize;
        let packet = bytes[FRAME_HEADER_LEN..]
            .get(..len)
            .ok_or(FrameError::Length)?;
        let mac = |at: usize| -> Mac {
            let mut m = [0u8; 6];
            m.copy_from_slice(&bytes[at..at + 6]);
            m
        };
        Ok(Frame {
            dst: EthAddr {
                mac: mac(0),
                endpoint: be16(16),
            },
            src: EthAddr {
                mac: mac(6),
                endpoint: be16(18),
            },
            packet,
        })
    }
}

/// Writes the headers of a frame from `src` to `dst` carrying a packet of
/// `len` bytes into `out`; the packet goes at [`FRAME_HEADER_LEN`]. `None`
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

    const A: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 1],
        endpoint: 3,
    };
    const B: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 2],
        endpoint: 0x1234,
    };

    fn frame(packet: &[u8]) -> [u8; 64] {
        let mut f = [0u8; 64];
        encode_header(&mut f, ETHERTYPE, B, A, packet.len()).unwrap();
        f[FRAME_HEADER_LEN..FRAME_HEADER_LEN + packet.len()].copy_from_slice(packet);
        f
    }

    #[test]
    fn a_frame_round_trips_and_padding_is_not_packet() {
        let f = frame(b"hello");
        let d = Frame::decode(&f, ETHERTYPE).unwrap();
        assert_eq!((d.dst, d.src, d.packet), (B, A, &b"hello"[..]));
        assert_eq!(EthAddr::from_bytes(B.to_bytes()), B);
        assert_eq!(max_packet(9000), 8992);
        assert_eq!(max_packet(4), 0);
    }

    #[test]
    fn bad_frames_say_what_is_wrong() {
        let f = frame(b"hello");
        assert_eq!(Frame::decode(&f[..21], ETHERTYPE), Err(FrameError::Short));
        assert_eq!(Frame::decode(&f, 0x0800), Err(FrameError::NotOurs));
        let mut v = f;
        v[14] = 9;
        assert_eq!(Frame::decode(&v, ETHERTYPE), Err(FrameError::Version(9)));
        let mut l = f;
        l[20..22].copy_from_slice(&43u16.to_be_bytes());
        assert_eq!(Frame::decode(&l, ETHERTYPE), Err(FrameError::Length));
        l[20..22].copy_from_slice(&42u16.to_be_bytes());
        assert_eq!(Frame::decode(&l, ETHERTYPE).unwrap().packet.len(), 42);
        assert_eq!(encode_header(&mut [0u8; 21], ETHERTYPE, A, B, 0), None);
        assert_eq!(encode_header(&mut [0u8; 22], ETHERTYPE, A, B, 70_000), None);
    }
}
