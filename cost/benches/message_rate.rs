//! Instructions per 8-byte message of the message-rate workload, counted
//! by callgrind: windows of 64 sends on warm `loop` ranks configured as
//! `rmx bench msgrate --wqes 10 --coalesce off` (see `rmx_cost`). A
//! binary of its own, so that its code leaves the compiler's choices for
//! the ping-pong's (`small_message`) as they were.

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use rmx_cost::{Pair, WINDOW};

/// Windows in a measurement: 320 messages, a multiple of every period on
/// the path.
const WINDOWS: usize = 5;

const _: () = assert!(
    WINDOWS * WINDOW == 320,
    "the id loop_8b_x320 names the messages"
);

/// Warm ranks configured for the workload, that ran a window already.
fn warm_rate() -> Box<Pair> {
    let mut pair = Box::new(Pair::warm_rate());
    pair.window();
    pair
}

// Per message, each side's share of the window (and of its answer).
#[library_benchmark]
#[bench::loop_8b_x320(setup = warm_rate)]
fn window(mut pair: Box<Pair>) -> Box<Pair> {
    for _ in 0..WINDOWS {
        pair.window();
    }
    black_box(pair)
}

library_benchmark_group!(name = message_rate, benchmarks = [window]);

main!(library_benchmark_groups = message_rate);
