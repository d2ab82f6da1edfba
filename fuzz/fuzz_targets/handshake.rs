//! The connection handshake on arbitrary datagrams and times: the decoder
//! never panics and what it accepts re-encodes to the same bytes; a
//! peer's state fed any sequence of messages and wants never panics and
//! never leaves its states.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::handshake::{Msg, State, LEN};

fuzz_target!(|data: &[u8]| {
    let me = u16::from_le_bytes([data.first().copied().unwrap_or(0), 0]);
    let mut s = State::Idle;
    let mut now = 0u64;
    for chunk in data.chunks(LEN + 2) {
        let (op, rest) = chunk.split_first().unwrap_or((&0, &[]));
        now = now.saturating_add((*op as u64) << 20);
        if let Ok(m) = Msg::decode(rest) {
            assert_eq!(&m.encode()[..], &rest[..LEN]);
            let _ = s.on_msg(me, &m, now);
        } else if op % 2 == 0 {
            let _ = s.want(now);
        } else {
            s.heard();
        }
    }
});
