//! Instructions per 8-byte message, counted by callgrind: ping-pong round
//! trips on warm ranks (see `rmx_cost`), and one idle progress round, on
//! `loop` and (feature `verbs`) on the `verbs` port over the in-process
//! device. `cost/layers` breaks them down by layer and by piece.

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

/// The same on the `verbs` port, over the device of `rmx_cost::fake_verbs`.
#[cfg(feature = "verbs")]
mod verbs {
    use super::*;
    use rmx_linux::verbs::VerbsPort;

    fn warm_verbs() -> Box<Pair<VerbsPort>> {
        Box::new(Pair::warm_verbs())
    }

    #[library_benchmark]
    #[bench::fake_8b_x80(setup = warm_verbs)]
    pub fn verbs_round_trip(mut pair: Box<Pair<VerbsPort>>) -> Box<Pair<VerbsPort>> {
        for _ in 0..ROUNDS {
            pair.round_trip();
        }
        black_box(pair)
    }

    #[library_benchmark]
    #[bench::fake_8b(setup = warm_verbs)]
    pub fn verbs_idle_round(mut pair: Box<Pair<VerbsPort>>) -> (Box<Pair<VerbsPort>>, usize) {
        let n = pair.idle_round();
        black_box((pair, n))
    }

    library_benchmark_group!(
        name = on_verbs,
        benchmarks = [verbs_round_trip, verbs_idle_round]
    );
}

#[cfg(not(feature = "verbs"))]
main!(library_benchmark_groups = small_message);
#[cfg(feature = "verbs")]
use verbs::on_verbs;
#[cfg(feature = "verbs")]
main!(library_benchmark_groups = small_message, on_verbs);
