//! The packet decoder on arbitrary bytes: never panics, and whatever it accepts
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::wire::{decode_packet, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, payload)) = decode_packet(data) {
        assert_eq!(payload.len(), h.len as usize);
        let mut again = vec![0u8; HEADER_LEN];
        h.encode(&mut again).unwrap();
        assert_eq!(&again[..], &data[..HEADER_LEN]);
    }
});
