//! Instructions per 8-byte message on `loop`, counted by callgrind: the
//! send, the receive and the whole ping-pong round trip, each once on warm
//! ranks (see `rmx_cost`). `cost/layers` breaks the round trip down by layer.

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use rmx_cost::Pair;
use rmx_linux::rank::Req;

// Every measured function takes and returns the pair boxed: moving it by
// value would count a copy of both ranks.

/// Warm ranks.
fn warm() -> Box<Pair> {
    Box::new(Pair::warm())
}

/// Warm ranks with a receive posted at rank 1.
fn posted() -> (Box<Pair>, Req) {
    let mut pair = warm();
    let req = pair.post_at_b();
    (pair, req)
}

/// Warm ranks with a message sent into rank 1's posted receive.
fn arrived() -> (Box<Pair>, Req) {
    let (mut pair, req) = posted();
    pair.send_from_a();
    (pair, req)
}

// Rank 0's `isend` of 8 bytes to a posted receive, and its wait.
#[library_benchmark]
#[bench::loop_8b(setup = posted)]
fn send((mut pair, req): (Box<Pair>, Req)) -> (Box<Pair>, Req) {
    pair.send_from_a();
    black_box((pair, req))
}

// Rank 1's progress that takes an arrived 8-byte message into its posted
// receive, and the test that completes it.
#[library_benchmark]
#[bench::loop_8b(setup = arrived)]
fn receive((mut pair, req): (Box<Pair>, Req)) -> Box<Pair> {
    pair.finish_at_b(req);
    black_box(pair)
}

// A whole round trip: both posts, both sends, both receives.
#[library_benchmark]
#[bench::loop_8b(setup = warm)]
fn round_trip(mut pair: Box<Pair>) -> Box<Pair> {
    pair.round_trip();
    black_box(pair)
}

// One progress round that finds nothing (a waiter's poll).
#[library_benchmark]
#[bench::loop_8b(setup = warm)]
fn idle_round(mut pair: Box<Pair>) -> (Box<Pair>, usize) {
    let n = pair.idle_round();
    black_box((pair, n))
}

library_benchmark_group!(
    name = small_message,
    benchmarks = [send, receive, round_trip, idle_round]
);

main!(library_benchmark_groups = small_message);
