//! Instructions per 8-byte message on `loop`, counted by callgrind: ping-pong
//! round trips on warm ranks (see `rmx_cost`), and one idle progress round.
//! `cost/layers` breaks them down by layer and by piece.

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use rmx_cost::{Pair, ROUNDS};

// Every measured function takes and returns the pair boxed: moving it by
// value would count a copy of both ranks.

/// Warm ranks.
fn warm() -> Box<Pair> {
    Box::new(Pair::warm())
}

const _: () = assert!(ROUNDS == 80, "the id loop_8b_x80 names the rounds");

// `ROUNDS` whole round trips: both posts, both sends, both receives
// each time (`cost/layers --per` divides by the rounds the id names).
#[library_benchmark]
#[bench::loop_8b_x80(setup = warm)]
fn round_trip(mut pair: Box<Pair>) -> Box<Pair> {
    for _ in 0..ROUNDS {
        pair.round_trip();
    }
    black_box(pair)
}

// One progress round that finds nothing (a waiter's poll).
#[library_benchmark]
#[bench::loop_8b(setup = warm)]
fn idle_round(mut pair: Box<Pair>) -> (Box<Pair>, usize) {
    let n = pair.idle_round();
    black_box((pair, n))
}

library_benchmark_group!(name = small_message, benchmarks = [round_trip, idle_round]);

main!(library_benchmark_groups = small_message);
