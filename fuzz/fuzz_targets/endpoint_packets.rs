//! An endpoint fed arbitrary packet sequences, with receives posted and sends
//! started between them, on both a reliable and a lossy configuration: it must
//! never panic, repost every receive buffer it does not keep for unexpected
//! messages (and those once their messages are received), and keep its
//! queues bounded.
//! With sends completing only when told (mode bit 2), sends wait in the
//! backlog and are packed into shared sends. Both configurations take
//! medium messages (fragments), which may hold several buffers each. With
//! mode bit 4 the NIC sends inline and small sends hand their bytes over
//! first (`isend_now`), as a shell does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmx_core::{Config, Endpoint, Source, TagSel};
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 16, 64, 16, 64);

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let cfg = if mode & 1 == 0 {
        Config::reliable(256, 16)
    } else {
        Config::unreliable(256, 16)
    };
    let mut nic = MemNic::new(16, 512);
    nic.later = mode & 2 != 0;
    nic.inline = mode & 4 != 0;
    let mut cfg = cfg;
    cfg.send_wqes = 2;
    if nic.inline {
        cfg.inline_max = 64;
    }
    cfg.medium_max = Some(2048);
    let mut ep = Ep::new(cfg, 0, 4, Tables::new(&SIZES)).unwrap();
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
                // A small message, or (every other byte) a medium one.
                let len = if i % 2 == 0 { 32 } else { 700 };
                let taken = nic.inline
                    && len == 32
                    && ep.isend_now(now, &mut nic, 1, 0, 0, &[7; 32]).is_some();
                if !taken {
                    let b = nic.user_buf(vec![7; len]);
                    let _ = ep.isend(now, &mut nic, 1, 0, 0, b, len as u32);
                }
            }
            2 => {
                now += 1_000_000;
                ep.poll(now, &mut nic);
            }
            3 => {
                if !nic.owed.is_empty() {
                    let w = nic.owed.remove(0);
                    ep.on_completion(&mut nic, w.wr_id(), Ok(()));
                }
            }
            _ => {
                let end = (i + n).min(rest.len());
                let held = ep.held_buffers();
                let buf = nic.deliver(rest[i..end].to_vec());
                ep.on_receive(now, &mut nic, buf);
                let kept = nic.rx[buf.0 as usize].is_some();
                assert_eq!(
                    ep.held_buffers(),
                    held + kept as usize,
                    "a receive buffer neither reposted nor held"
                );
                i = end;
            }
        }
        nic.outbox.clear();
        let (p, u) = ep.queue_lens();
        assert!(p <= 16 && u <= 64 && ep.held_buffers() <= 64);
    }
    // Receiving every unexpected message gives every held buffer back.
    while ep.queue_lens().1 > 0 {
        let b = nic.user_buf(vec![0; 64]);
        if ep
            .irecv(now, &mut nic, Source::Any, TagSel::Any, 0, b, 64)
            .is_err()
        {
            return;
        }
    }
    assert_eq!(ep.held_buffers(), 0);
    assert!(
        nic.rx.iter().all(Option::is_none),
        "a held buffer was never reposted"
    );
});
