//! Rendezvous for messages above the eager threshold: the protocols, the
//! bodies of their packets, and the receiver's block bitmap for PULL.
//!
//! ```text
//! RPUT  sender --RTS--> receiver --CTS(addr,key)--> sender --RDMA write--> --FIN--> receiver
//! RGET  sender --RTS(addr,key)--> receiver --RDMA read--> --FIN--> sender
//! PULL  sender --RTS--> receiver --PULL(frames)--> sender --DATA frames--> receiver --FIN--> sender
//! ```
//!
//! The RTS is a sequenced message: it takes a credit and is matched like an
//! eager message, so MPI's ordering holds across both protocols. CTS, FIN,
//! PULL and DATA are control packets outside the sequence; on a lossy
//! transport PULL recovers from loss by asking again (the receiver) and by
//! a PROBE when no FIN came (the sender). A receiver keeps nothing of a
//! receive that ended: a PROBE naming a receive that is not live is
//! answered with a FIN, because a receiver id reaches a sender only in a
//! PULL, so the receive existed, and a matched receive ends only by
//! finishing. The state for FIN recovery is therefore zero bytes, however
//! many receives finished since.
//!
//! Bodies (little-endian, fixed length, validated):
//!
//! ```text
//! RTS  24 B  proto u8, 3 reserved zero, sender id u32, length u32, key u32, addr u64
//! CTS  24 B  sender id u32, receiver id u32, length u32, key u32, addr u64
//! FIN   8 B  id u32 (the side being finished), fault u32 (0 none, 1 access, 2 down)
//! PULL 16 B  sender id u32, receiver id u32, first frame u32, frames u32
//! DATA       header tag = receiver id, header seq = frame index; the frame's bytes
//! PROBE 8 B  sender id u32, receiver id u32
//! ```

use crate::remote::{MemKey, RdmaError, Remote};

/// Which rendezvous moves a large message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RTS, CTS with the receiver's buffer, RDMA write by the sender, FIN
    /// (a two-way handshake: the data waits for the sender to see the CTS).
    Rput = 1,
    /// RTS with the sender's buffer, RDMA read by the receiver, FIN (a
    /// one-way handshake: the sender is free once the RTS left).
    Rget = 2,
    /// The receiver asks for frames, the sender answers with data packets;
    /// for message-only transports.
    Pull = 3,
}

impl Protocol {
    fn from_u8(v: u8) -> Option<Protocol> {
        match v {
            1 => Some(Protocol::Rput),
            2 => Some(Protocol::Rget),
            3 => Some(Protocol::Pull),
            _ => None,
        }
    }

    /// The name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Rput => "rput",
            Protocol::Rget => "rget",
            Protocol::Pull => "pull",
        }
    }
}

/// Why a rendezvous body could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// The body is not the fixed length of its kind.
    Len { expected: usize, got: usize },
    /// An unknown protocol number in an RTS.
    Protocol(u8),
    /// Reserved bytes not zero.
    Reserved,
    /// An unknown fault code in a FIN.
    Fault(u32),
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at + 4)) << 32
}

fn exact<const N: usize>(b: &[u8]) -> Result<&[u8; N], BodyError> {
    b.try_into().map_err(|_| BodyError::Len {
        expected: N,
        got: b.len(),
    })
}

/// Request to send: the envelope rides in the header, this in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rts {
    pub proto: Protocol,
    /// The sender's transfer, named in the CTS, PULL and FIN that answer.
    pub id: u32,
    /// The message's length.
    pub len: u32,
    /// The sender's buffer (RGET); zero otherwise.
    pub remote: Remote,
}

impl Rts {
    pub const LEN: usize = 24;

    pub fn encode(&self, out: &mut [u8; Self::LEN]) {
        out[0] = self.proto as u8;
        out[1..4].fill(0);
        out[4..8].copy_from_slice(&self.id.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12..16].copy_from_slice(&self.remote.key.0.to_le_bytes());
        out[16..24].copy_from_slice(&self.remote.addr.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Rts, BodyError> {
        let b = exact::<{ Self::LEN }>(b)?;
        let proto = Protocol::from_u8(b[0]).ok_or(BodyError::Protocol(b[0]))?;
        if b[1..4] != [0, 0, 0] {
            return Err(BodyError::Reserved);
        }
        Ok(Rts {
            proto,
            id: le32(b, 4),
            len: le32(b, 8),
            remote: Remote {
                key: MemKey(le32(b, 12)),
                addr: le64(b, 16),
            },
        })
    }
}

/// Clear to send (RPUT): where the sender writes, and how much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cts {
    pub sender: u32,
    pub receiver: u32,
    /// Bytes the receive can take (less than the message when it truncates).
    pub len: u32,
    pub remote: Remote,
}

impl Cts {
    pub const LEN: usize = 24;

    pub fn encode(&self, out: &mut [u8; Self::LEN]) {
        out[0..4].copy_from_slice(&self.sender.to_le_bytes());
        out[4..8].copy_from_slice(&self.receiver.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12..16].copy_from_slice(&self.remote.key.0.to_le_bytes());
        out[16..24].copy_from_slice(&self.remote.addr.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Cts, BodyError> {
        let b = exact::<{ Self::LEN }>(b)?;
        Ok(Cts {
            sender: le32(b, 0),
            receiver: le32(b, 4),
            len: le32(b, 8),
            remote: Remote {
                key: MemKey(le32(b, 12)),
                addr: le64(b, 16),
            },
        })
    }
}

/// The data has moved (or failed to): the peer's side ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fin {
    /// The transfer being finished, as its owner named it.
    pub id: u32,
    pub fault: Option<RdmaError>,
}

impl Fin {
    pub const LEN: usize = 8;

    pub fn encode(&self, out: &mut [u8; Self::LEN]) {
        let code: u32 = match self.fault {
            None => 0,
            Some(RdmaError::Access) => 1,
            Some(RdmaError::Down) => 2,
        };
        out[0..4].copy_from_slice(&self.id.to_le_bytes());
        out[4..8].copy_from_slice(&code.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Fin, BodyError> {
        let b = exact::<{ Self::LEN }>(b)?;
        let fault = match le32(b, 4) {
            0 => None,
            1 => Some(RdmaError::Access),
            2 => Some(RdmaError::Down),
            c => return Err(BodyError::Fault(c)),
        };
        Ok(Fin {
            id: le32(b, 0),
            fault,
        })
    }
}

/// The receiver asks for `count` frames from `first` (PULL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pull {
    pub sender: u32,
    pub receiver: u32,
    pub first: u32,
    pub count: u32,
}

impl Pull {
    pub const LEN: usize = 16;

    pub fn encode(&self, out: &mut [u8; Self::LEN]) {
        out[0..4].copy_from_slice(&self.sender.to_le_bytes());
        out[4..8].copy_from_slice(&self.receiver.to_le_bytes());
        out[8..12].copy_from_slice(&self.first.to_le_bytes());
        out[12..16].copy_from_slice(&self.count.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Pull, BodyError> {
        let b = exact::<{ Self::LEN }>(b)?;
        Ok(Pull {
            sender: le32(b, 0),
            receiver: le32(b, 4),
            first: le32(b, 8),
            count: le32(b, 12),
        })
    }
}

/// A PULL sender that sent every frame asked for and got no FIN asks the
/// receiver whether its receive ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub sender: u32,
    pub receiver: u32,
}

impl Probe {
    pub const LEN: usize = 8;

    pub fn encode(&self, out: &mut [u8; Self::LEN]) {
        out[0..4].copy_from_slice(&self.sender.to_le_bytes());
        out[4..8].copy_from_slice(&self.receiver.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Probe, BodyError> {
        let b = exact::<{ Self::LEN }>(b)?;
        Ok(Probe {
            sender: le32(b, 0),
            receiver: le32(b, 4),
        })
    }
}

/// The largest rendezvous body: a send slot (header + eager threshold) must
/// hold it, so the eager threshold may not be smaller.
pub const MAX_BODY: usize = Rts::LEN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_reject_bad_lengths_and_codes() {
        let rts = Rts {
            proto: Protocol::Rget,
            id: 0x0001_0002,
            len: 1 << 20,
            remote: Remote {
                addr: 0x7fff_0000_1234,
                key: MemKey(77),
            },
        };
        let mut b = [0u8; Rts::LEN];
        rts.encode(&mut b);
        assert_eq!(Rts::decode(&b), Ok(rts));
        assert_eq!(
            Rts::decode(&b[..23]),
            Err(BodyError::Len {
                expected: 24,
                got: 23
            })
        );
        let mut bad = b;
        bad[0] = 9;
        assert_eq!(Rts::decode(&bad), Err(BodyError::Protocol(9)));
        let mut res = b;
        res[2] = 1;
        assert_eq!(Rts::decode(&res), Err(BodyError::Reserved));

        let fin = Fin {
            id: 5,
            fault: Some(RdmaError::Access),
        };
        let mut f = [0u8; Fin::LEN];
        fin.encode(&mut f);
        assert_eq!(Fin::decode(&f), Ok(fin));
        f[4] = 7;
        assert_eq!(Fin::decode(&f), Err(BodyError::Fault(7)));

        let cts = Cts {
            sender: 1,
            receiver: 2,
            len: 3,
            remote: Remote {
                addr: 4,
                key: MemKey(5),
            },
        };
        let mut c = [0u8; Cts::LEN];
        cts.encode(&mut c);
        assert_eq!(Cts::decode(&c), Ok(cts));
        let pull = Pull {
            sender: 1,
            receiver: 2,
            first: 3,
            count: 4,
        };
        let mut p = [0u8; Pull::LEN];
        pull.encode(&mut p);
        assert_eq!(Pull::decode(&p), Ok(pull));
        assert!(Pull::decode(&c).is_err());
        let probe = Probe {
            sender: 0x0003_0004,
            receiver: 0x0005_0006,
        };
        let mut q = [0u8; Probe::LEN];
        probe.encode(&mut q);
        assert_eq!(q, [4, 0, 3, 0, 6, 0, 5, 0]);
        assert_eq!(Probe::decode(&q), Ok(probe));
        assert_eq!(
            Probe::decode(&p),
            Err(BodyError::Len {
                expected: 8,
                got: 16
            })
        );
    }
}
