//! An endpoint fed arbitrary packet sequences, with receives posted and sends
//! started between them, on both a reliable and a lossy configuration: it must
//! never panic, always repost every receive buffer, and keep its queues bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::{Config, Endpoint, Source, TagSel};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<4, 16, 64, 16, 64, 16>;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let cfg = if mode & 1 == 0 {
        Config::reliable(256, 16)
    } else {
        Config::unreliable(256, 16)
    };
    let mut ep = Ep::new(cfg, 0, 4).unwrap();
    let mut nic = MemNic::new(16, 512, 64, 256);
    let mut now = 0u64;
    // Chunks: a length byte, then that many bytes of packet; control bytes
    // interleave receives, sends and timer polls.
    let mut i = 0;
    while i < rest.len() {
        let n = rest[i] as usize;
        i += 1;
        match n {
            0 => {
                let b = nic.user_buf(vec![0; 64]);
                let _ = ep.irecv(now, &mut nic, Source::Any, TagSel::Any, 0, b, 64);
            }
            1 => {
                let b = nic.user_buf(vec![7; 32]);
                let _ = ep.isend(now, &mut nic, 1, 0, 0, b, 32);
            }
            2 => {
                now += 1_000_000;
                ep.poll(now, &mut nic);
            }
            _ => {
                let end = (i + n).min(rest.len());
                let buf = nic.deliver(rest[i..end].to_vec());
                ep.on_receive(now, &mut nic, buf);
                assert!(
                    nic.rx[buf.0 as usize].is_none(),
                    "receive buffer not reposted"
                );
                i = end;
            }
        }
        nic.outbox.clear();
        let (p, u) = ep.queue_lens();
        assert!(p <= 16 && u <= 64);
    }
});
