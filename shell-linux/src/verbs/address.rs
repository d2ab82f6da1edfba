//! A rank's verbs address as the bootstrap swaps it: its GID, path MTU,
//! and the queue pair (number and first packet sequence number) it made
//! for each rank of the job. Decoding checks every length and value, so a
//! corrupt or foreign address is a typed error, not a connection to
//! nowhere.

/// What one rank publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub gid: [u8; 16],
    /// The port's active MTU (`IBV_MTU_*`, 1 … 5).
    pub mtu: u8,
    /// Queue pair `i` (number, PSN) is this rank's end of its connection
    /// to rank `i`.
    pub qps: Vec<(u32, u32)>,
}

/// Why bytes are no verbs address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// Shorter than its fixed part, or than the queue pairs it announces.
    Short { len: usize, need: usize },
    /// Another format version (another rmx build).
    Version(u8),
    /// Not an `IBV_MTU_*` value.
    Mtu(u8),
    /// A queue pair number or PSN wider than 24 bits.
    Wide { rank: usize },
    /// Bytes past the last queue pair.
    Trailing { len: usize, need: usize },
}

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddressError::Short { len, need } => {
                write!(f, "verbs address of {len} bytes, {need} needed")
            }
            AddressError::Version(v) => write!(
                f,
                "verbs address of format {v}, this build speaks {VERSION}: run one rmx build on every host"
            ),
            AddressError::Mtu(m) => write!(f, "verbs address with MTU code {m}"),
            AddressError::Wide { rank } => {
                write!(f, "verbs address: queue pair for rank {rank} wider than 24 bits")
            }
            AddressError::Trailing { len, need } => {
                write!(f, "verbs address of {len} bytes, {need} expected")
            }
        }
    }
}

const VERSION: u8 = 1;
const FIXED: usize = 1 + 16 + 1 + 4;
const PER_QP: usize = 8;
const MASK: u32 = 0x00ff_ffff;

impl Address {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FIXED + PER_QP * self.qps.len());
        b.push(VERSION);
        b.extend_from_slice(&self.gid);
        b.push(self.mtu);
        b.extend_from_slice(&(self.qps.len() as u32).to_le_bytes());
        for (qpn, psn) in &self.qps {
            b.extend_from_slice(&qpn.to_le_bytes());
            b.extend_from_slice(&psn.to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Address, AddressError> {
        if b.len() < FIXED {
            return Err(AddressError::Short {
                len: b.len(),
                need: FIXED,
            });
        }
        if b[0] != VERSION {
            return Err(AddressError::Version(b[0]));
        }
        let mut gid = [0; 16];
        gid.copy_from_slice(&b[1..17]);
        let mtu = b[17];
        if !(1..=5).contains(&mtu) {
            return Err(AddressError::Mtu(mtu));
        }
        let n = u32::from_le_bytes([b[18], b[19], b[20], b[21]]) as usize;
        let need = n
            .checked_mul(PER_QP)
            .and_then(|q| q.checked_add(FIXED))
            .unwrap_or(usize::MAX);
        if b.len() < need {
            return Err(AddressError::Short { len: b.len(), need });
        }
        if b.len() > need {
            return Err(AddressError::Trailing { len: b.len(), need });
        }
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let qps = (0..n)
            .map(|i| {
                let at = FIXED + i * PER_QP;
                let (qpn, psn) = (word(at), word(at + 4));
                match qpn > MASK || psn > MASK {
                    true => Err(AddressError::Wide { rank: i }),
                    false => Ok((qpn, psn)),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Address { gid, mtu, qps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Address {
        Address {
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
            mtu: 3,
            qps: vec![(17, 0x12_3456), (18, 0), (MASK, MASK)],
        }
    }

    #[test]
    fn an_address_round_trips() {
        let a = sample();
        assert_eq!(Address::decode(&a.encode()), Ok(a));
        let empty = Address {
            qps: vec![],
            ..sample()
        };
        assert_eq!(Address::decode(&empty.encode()), Ok(empty));
    }

    #[test]
    fn malformed_addresses_are_typed_errors() {
        let b = sample().encode();
        for cut in 0..b.len() {
            assert!(Address::decode(&b[..cut]).is_err(), "{cut} bytes");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(
            Address::decode(&long),
            Err(AddressError::Trailing {
                len: b.len() + 1,
                need: b.len()
            })
        );
        let mut v = b.clone();
        v[0] = 9;
        assert_eq!(Address::decode(&v), Err(AddressError::Version(9)));
        let mut m = b.clone();
        m[17] = 6;
        assert_eq!(Address::decode(&m), Err(AddressError::Mtu(6)));
        let mut w = b.clone();
        w[FIXED + PER_QP + 3] = 1;
        assert_eq!(Address::decode(&w), Err(AddressError::Wide { rank: 1 }));
        // A count that would overflow the length computation.
        let mut huge = b[..FIXED].to_vec();
        huge[18..22].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Address::decode(&huge),
            Err(AddressError::Short { .. })
        ));
    }
}
