//! The Ethernet frame decoder on arbitrary bytes: never panics, the packet
//! it returns lies within the frame, and an accepted frame's header
//! re-encodes to the same bytes (flags aside, which this version ignores).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::frame::{encode_header, Frame, ETHERTYPE, FRAME_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    for ethertype in [ETHERTYPE, 0x0800] {
        if let Ok(f) = Frame::decode(data, ethertype) {
            assert!(FRAME_HEADER_LEN + f.packet.len() <= data.len());
            let mut again = [0u8; FRAME_HEADER_LEN];
            encode_header(&mut again, ethertype, f.dst, f.src, f.packet.len()).unwrap();
            assert_eq!(again[..15], data[..15]);
            assert_eq!(again[16..], data[16..FRAME_HEADER_LEN]);
        }
    }
});
