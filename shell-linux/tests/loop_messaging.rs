//! Two-sided messaging end to end over the `loop` transport, between real threads.

use rmx_core::{RecvFault, Source, TagSel};
use rmx_linux::job;
use rmx_linux::loopnic::LoopConfig;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7) as u8).collect()
}

#[test]
fn thousands_of_messages_arrive_intact_and_in_order() {
    let sizes = [0usize, 1, 7, 28, 63, 64, 65, 1000, 4096, 8192];
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        LoopConfig::default(),
        |r| {
            let n = 3000;
            if r.rank() == 0 {
                for i in 0..n {
                    let d = pattern(i, sizes[i % sizes.len()]);
                    r.send(1, (i % 5) as u32, &d).unwrap();
                }
                0
            } else {
                let mut bad = 0;
                let mut buf = vec![0u8; 8192];
                for i in 0..n {
                    let st = r.recv(Source::Rank(0), TagSel::Any, &mut buf).unwrap();
                    let want = pattern(i, sizes[i % sizes.len()]);
                    if st.tag != (i % 5) as u32 || buf[..st.len as usize] != want[..] {
                        bad += 1;
                    }
                }
                bad
            }
        },
    );
    assert_eq!(out[1], 0);
}

#[test]
fn windows_beyond_the_credits_flow_without_loss() {
    // 64 credits, 200 outstanding sends: the rest queue and flow as credits return.
    let out = job::run(
        2,
        rmx_linux::rank::loop_config(),
        LoopConfig::default(),
        |r| {
            let n = 200usize;
            let data: Vec<Vec<u8>> = (0..n).map(|i| pattern(i, 100)).collect();
            if r.rank() == 0 {
                let reqs: Vec<_> = data
                    .iter()
                    .map(|d| unsafe { r.isend_raw(1, 9, d.as_ptr(), d.len()).unwrap() })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
                r.stats().send_stalls
            } else {
                let mut bufs = vec![vec![0u8; 100]; n];
                // Receive in reverse posting order of tags? No: post all, in order.
                let reqs: Vec<_> = bufs
                    .iter_mut()
                    .map(|b| unsafe {
                        r.irecv_raw(Source::Any, TagSel::Tag(9), b.as_mut_ptr(), 100)
                            .unwrap()
                    })
                    .collect();
                for q in reqs {
                    r.wait(q);
                }
                bufs.iter().zip(&data).filter(|(a, b)| a != b).count() as u64
            }
        },
    );
    assert!(out[0] > 0, "the window must have exceeded the credits");
    assert_eq!(out[1], 0);
}

#[test]
fn truncation_and_wildcards_across_threads() {
    let out = job::run(
        3,
        rmx_linux::rank::loop_config(),
        LoopConfig::default(),
        |r| match r.rank() {
            0 => {
                let mut small = [0u8; 4];
                let st = r.recv(Source::Rank(1), TagSel::Tag(1), &mut small).unwrap();
                let mut any = [0u8; 16];
                let st2 = r.recv(Source::Any, TagSel::Any, &mut any).unwrap();
                (st.fault
                    == Some(RecvFault::Truncated {
                        len: 10,
                        capacity: 4,
                    })
                    && &small == b"0123"
                    && st2.source == 2
                    && &any[..3] == b"two") as u8
            }
            1 => {
                r.send(0, 1, b"0123456789").unwrap();
                1
            }
            _ => {
                r.send(0, 77, b"two").unwrap();
                1
            }
        },
    );
    assert_eq!(out, vec![1, 1, 1]);
}
