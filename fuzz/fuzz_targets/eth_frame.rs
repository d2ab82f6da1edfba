//! The Ethernet frame decoder on arbitrary bytes: never panics, the packet
//! it returns lies within the frame, and an accepted frame's header
//! re-encodes to the same bytes (flags aside, which this version ignores).
//! Inputs whose first byte is odd are sealed first, so that the checks
//! behind the seal are reached; the others must meet it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::wire::frame::{encode_header, seal, Frame, SealKey, ETHERTYPE, FRAME_HEADER_LEN};

const KEY: SealKey = SealKey::from_bytes([0x5E; SealKey::LEN]);

fuzz_target!(|input: &[u8]| {
    let mut data = input.to_vec();
    if input.first().is_some_and(|b| b & 1 == 1) {
        let _ = seal(&KEY, &mut data);
    }
    for ethertype in [ETHERTYPE, 0x0800] {
        if let Ok(f) = Frame::decode(&data, ethertype).and_then(|f| f.open(&KEY)) {
            assert!(FRAME_HEADER_LEN + f.packet.len() <= data.len());
            let mut again = [0u8; FRAME_HEADER_LEN];
            encode_header(&mut again, ethertype, f.dst, f.src, f.packet.len()).unwrap();
            assert_eq!(again[..15], data[..15]);
            assert_eq!(again[16..22], data[16..22]);
        }
    }
});
