//! One-sided operation headers on arbitrary bytes, and a window's checks
//! on what they decode to: never panics; a header that decodes re-encodes
//! to the same bytes; whatever a window admits lies inside it, shows its
//! key, and (accumulates) is whole elements.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::onesided::{OpHeader, Window, HEADER};

fuzz_target!(|input: (u32, u16, &[u8])| {
    let (len, unit, bytes) = input;
    let w = Window {
        len: len as u64,
        disp_unit: unit as u32 + 1,
        key: 0x5EED,
    };
    let Ok(h) = OpHeader::decode(bytes) else {
        return;
    };
    assert_eq!(&h.encode()[..], &bytes[..HEADER], "re-encodes");
    if let Ok(range) = w.admit(&h) {
        assert_eq!(h.key, w.key);
        assert!(range.start <= range.end && range.end <= w.len);
        assert_eq!(range.end - range.start, h.len as u64);
        if let Some(size) = h.kind.element_size() {
            assert_eq!(range.start % size as u64, 0);
            assert_eq!(h.len as u64 % size as u64, 0);
        }
    }
    // The origin's check agrees with the target's on a plain put.
    let disp = h.offset;
    if let Ok(r) = w.range(disp, h.len as u64) {
        assert!(r.end <= w.len);
        assert_eq!(r.start, disp * w.disp_unit as u64);
    }
});
