//! rmx frames in the kernel: the receive path reads a frame's headers to
//! find the endpoint it is for, and a send is checked to come from the
//! endpoint that sends it. Both read the headers with rmx-core's decoder,
//! the one every shell's port uses, so the kernel routes exactly what a
//! port would accept.

use rmx_core::wire::frame::{FrameError, Mac, Route, FRAME_HEADER_LEN};

/// Why a frame is not routed or not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a well-formed rmx frame of the bound EtherType.
    Malformed(FrameError),
    /// A send whose source is not the sending endpoint (its interface's
    /// MAC and its bound endpoint).
    Spoofed,
}

impl Refused {
    /// As the glue returns it: every refusal is `EINVAL`.
    pub fn errno(self) -> i32 {
        22
    }
}

/// The endpoint a received frame of `frame_len` bytes whose first bytes
/// are `head` is for.
pub fn destination(head: &[u8], frame_len: usize, ethertype: u16) -> Result<u16, Refused> {
    Route::decode(head, frame_len, ethertype)
        .map(|r| r.dst.endpoint)
        .map_err(Refused::Malformed)
}

/// Whether `frame`, which a context bound as `endpoint` on an interface
/// of address `mac` asks to send, is an rmx frame from it.
pub fn check_send(frame: &[u8], ethertype: u16, mac: Mac, endpoint: u16) -> Result<(), Refused> {
    let r = Route::decode(frame, frame.len(), ethertype).map_err(Refused::Malformed)?;
    if r.src.mac != mac || r.src.endpoint != endpoint {
        return Err(Refused::Spoofed);
    }
    Ok(())
}

/// Bytes of the headers the receive path reads before routing.
pub const HEAD: usize = FRAME_HEADER_LEN;

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_core::wire::frame::{encode_header, EthAddr, ETHERTYPE};

    const ME: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 1],
        endpoint: 4,
    };
    const PEER: EthAddr = EthAddr {
        mac: [2, 0, 0, 0, 0, 2],
        endpoint: 9,
    };

    fn frame(dst: EthAddr, src: EthAddr, len: usize) -> [u8; 64] {
        let mut f = [0u8; 64];
        encode_header(&mut f, ETHERTYPE, dst, src, len).unwrap();
        f
    }

    #[test]
    fn a_received_frame_is_routed_by_its_destination_endpoint() {
        let f = frame(PEER, ME, 10);
        assert_eq!(destination(&f[..HEAD], f.len(), ETHERTYPE), Ok(9));
        assert_eq!(
            destination(&f[..HEAD], HEAD + 9, ETHERTYPE),
            Err(Refused::Malformed(FrameError::Length)),
            "a packet longer than the frame"
        );
        assert_eq!(
            destination(&f[..HEAD], f.len(), 0x0800),
            Err(Refused::Malformed(FrameError::NotOurs))
        );
        assert_eq!(
            destination(&f[..7], f.len(), ETHERTYPE),
            Err(Refused::Malformed(FrameError::Short))
        );
    }

    #[test]
    fn a_send_must_come_from_the_bound_endpoint() {
        assert_eq!(
            check_send(&frame(PEER, ME, 10), ETHERTYPE, ME.mac, 4),
            Ok(())
        );
        assert_eq!(
            check_send(&frame(PEER, ME, 10), ETHERTYPE, ME.mac, 5),
            Err(Refused::Spoofed),
            "another endpoint"
        );
        assert_eq!(
            check_send(&frame(ME, PEER, 10), ETHERTYPE, ME.mac, 9),
            Err(Refused::Spoofed),
            "another interface's address"
        );
        assert_eq!(
            check_send(&frame(PEER, ME, 40), ETHERTYPE, ME.mac, 4),
            Err(Refused::Malformed(FrameError::Length))
        );
        assert_eq!(Refused::Spoofed.errno(), 22);
    }
}
