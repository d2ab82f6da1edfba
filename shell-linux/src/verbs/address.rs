//! A rank's verbs address as the bootstrap swaps it: its GID, path MTU,
//! the datagram queue pair its connections are asked for on, and the
//! secret its handshake messages carry. Fixed size whatever the job's:
//! connections are made on demand. Decoding checks every length and
//! value, so a corrupt or foreign address is a typed error, not a
//! connection to nowhere.

/// What one rank publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub gid: [u8; 16],
    /// The port's active MTU (`IBV_MTU_*`, 1 … 5).
    pub mtu: u8,
    /// The rank's UD queue pair for connection requests.
    pub ud_qpn: u32,
    /// What every handshake message from this rank carries.
    pub nonce: u32,
}

/// Why bytes are no verbs address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// Shorter than an address.
    Short { len: usize, need: usize },
    /// Another format version (another rmx build).
    Version(u8),
    /// Not an `IBV_MTU_*` value.
    Mtu(u8),
    /// A queue pair number wider than 24 bits.
    Wide,
    /// Bytes past the address.
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
            AddressError::Wide => write!(f, "verbs address: queue pair wider than 24 bits"),
            AddressError::Trailing { len, need } => {
                write!(f, "verbs address of {len} bytes, {need} expected")
            }
        }
    }
}

const VERSION: u8 = 2;
const LEN: usize = 1 + 16 + 1 + 4 + 4;
const MASK: u32 = 0x00ff_ffff;

impl Address {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(LEN);
        b.push(VERSION);
        b.extend_from_slice(&self.gid);
        b.push(self.mtu);
        b.extend_from_slice(&self.ud_qpn.to_le_bytes());
        b.extend_from_slice(&self.nonce.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Address, AddressError> {
        if b.len() < LEN {
            return Err(AddressError::Short {
                len: b.len(),
                need: LEN,
            });
        }
        if b[0] != VERSION {
            return Err(AddressError::Version(b[0]));
        }
        if b.len() > LEN {
            return Err(AddressError::Trailing {
                len: b.len(),
                need: LEN,
            });
        }
        let mut gid = [0; 16];
        gid.copy_from_slice(&b[1..17]);
        let mtu = b[17];
        if !(1..=5).contains(&mtu) {
            return Err(AddressError::Mtu(mtu));
        }
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let ud_qpn = word(18);
        if ud_qpn > MASK {
            return Err(AddressError::Wide);
        }
        Ok(Address {
            gid,
            mtu,
            ud_qpn,
            nonce: word(22),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Address {
        Address {
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
            mtu: 3,
            ud_qpn: MASK,
            nonce: 0xdead_beef,
        }
    }

    #[test]
    fn an_address_round_trips() {
        let a = sample();
        assert_eq!(Address::decode(&a.encode()), Ok(a));
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
        v[0] = 1;
        assert_eq!(Address::decode(&v), Err(AddressError::Version(1)));
        let mut m = b.clone();
        m[17] = 6;
        assert_eq!(Address::decode(&m), Err(AddressError::Mtu(6)));
        let mut w = b.clone();
        w[21] = 1;
        assert_eq!(Address::decode(&w), Err(AddressError::Wide));
    }
}
