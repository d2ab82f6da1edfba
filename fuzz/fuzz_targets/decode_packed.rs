//! The packed-body reader on arbitrary bytes and counts: never panics; every
//! record it accepts lies inside the body, right after the previous one, and
//! re-encodes to the same bytes; without an error the records are the whole
//! body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::wire::packed::{record_len, write_head, Unpacker, CACHED_LEN};

fuzz_target!(|input: (u8, &[u8])| {
    let (count, body) = input;
    let mut u = Unpacker::new(count as u32 % 64);
    let (mut end, mut prev, mut failed) = (0, None, false);
    while let Some(r) = u.next(body) {
        let Ok((rec, at)) = r else {
            failed = true;
            continue;
        };
        let cached = body[end] != rmx_core::wire::packed::FULL;
        let n = record_len(prev, rec, cached);
        let head = n - rec.len as usize;
        assert_eq!(head == CACHED_LEN, cached);
        assert_eq!(at, end + head, "records follow each other");
        assert!(
            at + rec.len as usize <= body.len(),
            "payload inside the body"
        );
        let mut again = vec![0u8; n];
        let h = write_head(&mut again, prev, rec, cached);
        assert_eq!(&again[..h], &body[end..end + h], "re-encodes");
        end = at + rec.len as usize;
        prev = Some(rec);
    }
    if !failed {
        assert_eq!(end, body.len(), "the records are the whole body");
    }
});
