//! The hazard of the fence paper's Fig. 2, shown rather than assumed.
//!
//! Four ranks over `loop` behind [`Delayed`](crate::transport::delayed::Delayed): an RDMA write completes at
//! its origin at once and lands up to 2 ms later, each channel in order,
//! channels independent. Every rank puts to the rank before it (a channel
//! the dissemination barrier never uses), closes the epoch, and the target
//! then looks at its window. The strawman ("wait for local completion,
//! then barrier") lets a target leave its fence before the put has landed,
//! and the test sees it; each shipped immediate design, under the same
//! delays, never does. The random-sequence tests cover loss and
//! reordering for every design (the deferred one over a lossy wire).

use rmx_core::onesided::Design;

use super::immediate::strawman_fence;
use super::Win;
use crate::loopnic::{Fabric, LoopConfig};
use crate::rank::{loop_config, Rank};
use crate::transport::delayed::delayed;
use crate::transport::Transport;

const RANKS: u16 = 4;
const EPOCHS: u8 = 12;
const MAX_DELAY_NS: u64 = 2_000_000;

/// Epochs, summed over the ranks, in which a target found a put of the
/// epoch missing when its fence returned.
fn late_puts(design: Design, strawman: bool, seed: u64) -> u32 {
    let fabric = Fabric::new(RANKS as usize, LoopConfig::default()).expect("the default sizes fit");
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..RANKS)
            .map(|me| {
                let port = delayed(fabric.port(me), MAX_DELAY_NS, seed + me as u64);
                s.spawn(move || {
                    let mut r = Rank::new(port, RANKS, loop_config()).expect("rank");
                    let mut w = r
                        .win_create_with(8 * RANKS as usize, 1, design)
                        .expect("window");
                    w.fence(&mut r).expect("opening fence");
                    (1..=EPOCHS)
                        .filter(|&e| epoch_was_late(&mut w, &mut r, strawman, e))
                        .count() as u32
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank")).sum()
    })
}

fn epoch_was_late<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    strawman: bool,
    e: u8,
) -> bool {
    let me = r.rank();
    let target = (me + RANKS - 1) % RANKS;
    w.put(r, target, 8 * me as u64, &[e; 8]).expect("put");
    if strawman {
        strawman_fence(w, r).expect("fence");
    } else {
        w.fence(r).expect("fence");
    }
    // The put aimed here, from the rank after this one.
    let from = (me + 1) % RANKS;
    let mut got = [0u8; 8];
    w.read(8 * from as usize, &mut got).expect("read");
    // Checked everywhere before the next epoch's puts leave.
    r.barrier().expect("barrier");
    got != [e; 8]
}

#[test]
fn the_strawman_lets_a_target_leave_its_fence_before_a_put_lands() {
    let late = late_puts(Design::ImmOpt, true, 1);
    assert!(late > 0, "no put was late: the delays did not bite");
}

#[test]
fn the_immediate_designs_never_leave_a_fence_before_their_puts_land() {
    for design in [Design::ImmNaive, Design::ImmOpt, Design::ImmRi] {
        assert_eq!(late_puts(design, false, 7), 0, "{design:?}");
    }
}

/// `free` without a closing fence: every rank puts to the rank before it
/// and frees at once. The window's memory (kept alive here by a second
/// holder, so a late write is seen rather than corrupting the heap) holds
/// every put when `free` returns: free closed the epoch first. Before, it
/// only took a barrier and ended the registration under the writes in
/// flight.
#[test]
fn free_completes_the_operations_of_an_open_epoch() {
    for design in [Design::ImmNaive, Design::ImmOpt, Design::ImmRi] {
        let fabric = Fabric::new(RANKS as usize, LoopConfig::default()).expect("sizes fit");
        let late: u32 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..RANKS)
                .map(|me| {
                    let port = delayed(fabric.port(me), MAX_DELAY_NS, 3 + me as u64);
                    s.spawn(move || {
                        let mut r = Rank::new(port, RANKS, loop_config()).expect("rank");
                        let mut w = r.win_create_with(64, 1, design).expect("window");
                        w.fence(&mut r).expect("opening fence");
                        let target = (me + RANKS - 1) % RANKS;
                        w.put(&mut r, target, 0, &[0xC5; 64]).expect("put");
                        let mem = std::sync::Arc::clone(&w.mem);
                        w.free(&mut r).expect("free");
                        let mut got = [0u8; 64];
                        mem.read(0, &mut got);
                        (got != [0xC5; 64]) as u32
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("rank")).sum()
        });
        assert_eq!(late, 0, "{design:?}: a put landed after free returned");
    }
}
