//! Wire format properties: every header round-trips; every truncation and every
//! trailing byte is rejected with a typed error.

use proptest::prelude::*;
use rmx_core::wire::{decode_packet, DecodeError, Header, Kind, HEADER_LEN};

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Eager), Just(Kind::Ack), Just(Kind::Nack)]
}

prop_compose! {
    fn packet()(kind in kind(), src: u16, context: u16, tag: u32, seq: u32, ack: u32, credit: u32,
                payload in proptest::collection::vec(any::<u8>(), 0..300)) -> (Header, Vec<u8>) {
        let payload = if kind == Kind::Eager { payload } else { Vec::new() };
        let h = Header { kind, src, context, tag, len: payload.len() as u32, seq, ack, credit };
        let mut b = vec![0u8; HEADER_LEN];
        h.encode(&mut b).unwrap();
        b.extend_from_slice(&payload);
        (h, b)
    }
}

proptest! {
    #[test]
    fn round_trip((h, bytes) in packet()) {
        let (d, p) = decode_packet(&bytes).unwrap();
        prop_assert_eq!(d, h);
        prop_assert_eq!(p, &bytes[HEADER_LEN..]);
    }

    #[test]
    fn every_truncation_is_rejected((_h, bytes) in packet()) {
        for cut in 0..bytes.len() {
            let r = decode_packet(&bytes[..cut]);
            let is_truncated = matches!(r, Err(DecodeError::Truncated { .. }));
            prop_assert!(is_truncated, "cut at {}: {:?}", cut, r);
        }
    }

    #[test]
    fn trailing_bytes_are_rejected((_h, mut bytes) in packet(), extra in 1usize..8) {
        bytes.extend(std::iter::repeat_n(0u8, extra));
        prop_assert!(decode_packet(&bytes).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
        let _ = decode_packet(&bytes);
    }
}
