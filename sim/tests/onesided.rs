//! The shipped fence designs in virtual time, against the reference model:
//! random epochs of puts, accumulates and gets on random groups, over a perfect
//! wire, a jittery one whose channels overtake each other, a lossy one
//! (the deferred design, the only one without RDMA), at a thousand ranks,
//! and the hazard of the fence paper's Fig. 2.

use rmx_core::collective::Collective;
use rmx_core::onesided::Design;
use rmx_sim::fence::Kind;
use rmx_sim::job::{Action, Fence, Job, OpSpec, Outcome, Spec, WinSpec};
use rmx_sim::model::NetFaults;
use rmx_sim::rng::Rng;

/// Bytes of the window each origin may put to, in every target.
const REGION: u64 = 96;

/// A jittery reliable wire: channels in order, independent of each other.
const JITTER: NetFaults = NetFaults {
    jitter_ns: 20_000,
    ..NetFaults::NONE
};

fn spec(n: u16, design: Design, faults: NetFaults, seed: u64) -> Spec {
    Spec {
        windows: vec![WinSpec::same(REGION as usize * n as usize + 64, design, n)],
        ..Spec::new(n, faults, seed)
    }
}

/// The reliable wire's settings with a 32-buffer receive pool: far fewer
/// buffers than the operations or flags a fence brings.
fn small_pool() -> rmx_core::Config {
    rmx_core::Config {
        rx_buffers: 32,
        rx_reserve: 4,
        rx_low_water: 8,
        ..rmx_sim::node::config(false)
    }
}

/// Random epochs: each rank puts into its own region of random targets
/// (puts never overlap, so the result is the same in any order) and adds
/// u32s in a part of the window no put touches (or, in some epochs,
/// nothing but adds anywhere), sometimes computes, sometimes runs a collective between.
fn random_programs(n: u16, epochs: usize, rng: &mut Rng) -> Vec<Vec<Action>> {
    // Per epoch: a collective before it; only adds, anywhere (so the
    // next epoch's puts land on bytes this one adds to: a fence that let
    // them in early would be seen).
    let mut shape = Vec::new();
    for _ in 0..epochs {
        shape.push((rng.below(4) == 0, rng.below(3) == 0));
    }
    (0..n)
        .map(|r| {
            let mut p = Vec::new();
            for &(coll, adds_only) in &shape {
                if coll {
                    p.push(Action::Collective(Collective::Allreduce { len: 32 }));
                }
                let mut ops = Vec::new();
                let mut used = 0;
                for _ in 0..rng.below(5) {
                    let target = rng.below(n as u64) as u16;
                    if adds_only {
                        let disp = 4 * rng.below(REGION * n as u64 / 4 - 4);
                        ops.push(OpSpec {
                            target,
                            disp,
                            kind: Kind::Add,
                            len: 16,
                        });
                    } else if rng.below(3) == 0 {
                        // The last 64 bytes are for adds alone.
                        let at = 4 * rng.below(12);
                        let disp = REGION * n as u64 + at;
                        let len = 4 * (1 + rng.below(4) as u32);
                        ops.push(OpSpec {
                            target,
                            disp,
                            kind: Kind::Add,
                            len,
                        });
                    } else if used < REGION {
                        let len = 1 + rng.below(REGION - used);
                        let disp = REGION * r as u64 + used;
                        used += len;
                        ops.push(OpSpec {
                            target,
                            disp,
                            kind: Kind::Put,
                            len: len as u32,
                        });
                    }
                }
                p.push(Action::Epoch {
                    window: 0,
                    ops,
                    compute_ns: rng.below(3) * 5_000,
                    fence: Fence::Plain,
                });
            }
            p
        })
        .collect()
}

fn run(n: u16, design: Design, faults: NetFaults, seed: u64, epochs: usize) -> Outcome {
    let mut rng = Rng::new(seed);
    let progs = random_programs(n, epochs, &mut rng);
    Job::new(spec(n, design, faults, seed), progs)
        .expect("a valid job")
        .run()
        .unwrap_or_else(|e| panic!("{design:?} on {n} ranks, seed {seed}: {e}"))
}

#[test]
fn every_design_leaves_windows_as_the_reference_says() {
    for seed in 0..24 {
        let n = 2 + (seed % 7) as u16;
        for d in Design::ALL {
            let o = run(n, d, NetFaults::NONE, seed, 6);
            assert_eq!(o.late, 0);
        }
    }
}

#[test]
fn channels_that_overtake_each_other_change_nothing() {
    for seed in 100..116 {
        let n = 3 + (seed % 6) as u16;
        for d in Design::ALL {
            run(n, d, JITTER, seed, 6);
        }
    }
}

#[test]
fn the_deferred_design_survives_a_lossy_wire() {
    for seed in 200..212 {
        let n = 2 + (seed % 6) as u16;
        run(n, Design::Def, NetFaults::LOSSY, seed, 5);
    }
    let o = run(64, Design::Def, NetFaults::LOSSY, 300, 3);
    assert!(o.retransmits > 0, "nothing was lost: {o:?}");
}

#[test]
fn a_lossy_wire_refuses_the_designs_that_need_rdma() {
    let progs = vec![Vec::new(), Vec::new()];
    let e = Job::new(spec(2, Design::ImmRi, NetFaults::LOSSY, 0), progs).err();
    assert!(e.is_some_and(|e| e.contains("RDMA")));
}

/// Fig. 2: RDMA writes complete at their origin when they leave and land
/// up to 50 µs later; every rank puts to the rank before it (a channel
/// the dissemination barrier never uses) and the target looks at its
/// window when its fence returns.
fn late_puts(design: Design, strawman: bool, seed: u64) -> u64 {
    let n = 8u16;
    let faults = NetFaults {
        land_late_ns: 50_000,
        ..NetFaults::NONE
    };
    let progs = (0..n)
        .map(|r| {
            (0..12)
                .map(|_| Action::Epoch {
                    window: 0,
                    ops: vec![OpSpec {
                        target: (r + n - 1) % n,
                        disp: REGION * r as u64,
                        kind: Kind::Put,
                        len: 8,
                    }],
                    compute_ns: 0,
                    fence: if strawman {
                        Fence::Strawman
                    } else {
                        Fence::Plain
                    },
                })
                .collect()
        })
        .collect();
    let spec = Spec {
        count_late: true,
        ..spec(n, design, faults, seed)
    };
    Job::new(spec, progs)
        .expect("a valid job")
        .run()
        .expect("the run ends")
        .late
}

#[test]
fn the_strawman_lets_a_target_leave_its_fence_before_a_put_lands() {
    assert!(
        late_puts(Design::ImmOpt, true, 1) > 0,
        "no put was late: the delays did not bite"
    );
}

#[test]
fn the_immediate_designs_never_leave_a_fence_before_their_puts_land() {
    for design in [Design::ImmNaive, Design::ImmOpt, Design::ImmRi] {
        for seed in 0..4 {
            assert_eq!(late_puts(design, false, seed), 0, "{design:?}");
        }
    }
}

/// A thousand ranks, each putting to the next: every design (but the
/// all-pairs one, whose million flags per fence take minutes unoptimised)
/// ends every epoch with every window as the reference says.
#[test]
#[cfg_attr(
    unoptimised,
    ignore = "a thousand ranks take minutes unoptimised: run with --release"
)]
fn a_thousand_ranks_fence_in_every_design() {
    let n = 1024u16;
    for design in [Design::Def, Design::ImmOpt, Design::ImmRi] {
        let progs = (0..n)
            .map(|r| {
                (0..2)
                    .map(|_| Action::Epoch {
                        window: 0,
                        ops: vec![
                            OpSpec {
                                target: (r + 1) % n,
                                disp: 0,
                                kind: Kind::Put,
                                len: 16,
                            },
                            OpSpec {
                                target: (r + 7) % n,
                                disp: 16,
                                kind: Kind::Add,
                                len: 8,
                            },
                        ],
                        compute_ns: 0,
                        fence: Fence::Plain,
                    })
                    .collect()
            })
            .collect();
        let spec = Spec {
            windows: vec![WinSpec::same(64, design, n)],
            ..spec(n, design, JITTER, 3)
        };
        let o = Job::new(spec, progs)
            .expect("a valid job")
            .run()
            .expect("the run ends");
        assert_eq!((o.late, o.ends.len()), (0, 2));
    }
}

/// The naive design's flags on a pool far smaller than the group: each
/// rank's whole credit budget lent to early flags once left a finish
/// message waiting for credit that never came, and every rank stalled
/// (at 512 ranks on the default 256 buffers). Flags' receives are now
/// posted before anything else of the fence, so flags are never held.
#[test]
fn naive_flags_never_starve_a_finish_message_of_credit() {
    let n = 128u16;
    let progs = (0..n)
        .map(|r| {
            (0..3)
                .map(|_| Action::Epoch {
                    window: 0,
                    ops: (1..=4u16)
                        .map(|k| OpSpec {
                            target: (r + k) % n,
                            disp: 16 * k as u64,
                            kind: Kind::Put,
                            len: 16,
                        })
                        .collect(),
                    compute_ns: 0,
                    fence: Fence::Plain,
                })
                .collect()
        })
        .collect();
    let config = small_pool();
    let spec = Spec {
        config,
        windows: vec![WinSpec::same(128, Design::ImmNaive, n)],
        ..spec(n, Design::ImmNaive, NetFaults::NONE, 5)
    };
    let o = Job::new(spec, progs).expect("a valid job").run();
    assert_eq!(o.map(|o| o.late), Ok(0));
}

/// An epoch with far more operations to one target than the target's
/// receive pool: each rank adds 300 times into the next one's window.
/// Unreceived, they held the pool and their origins' credit, and the
/// fence's collective queued behind them for good; the rank now receives
/// them whenever a wait of its fence stalls.
#[test]
fn epochs_larger_than_the_receive_pool_end_in_every_design() {
    let n = 3u16;
    for design in Design::ALL {
        let progs = (0..n)
            .map(|r| {
                (0..2)
                    .map(|_| Action::Epoch {
                        window: 0,
                        ops: (0..300u64)
                            .map(|k| OpSpec {
                                target: (r + 1) % n,
                                disp: 4 * (k % 16),
                                kind: Kind::Add,
                                len: 4,
                            })
                            .collect(),
                        compute_ns: 0,
                        fence: Fence::Plain,
                    })
                    .collect()
            })
            .collect();
        let config = small_pool();
        let spec = Spec {
            config,
            ..spec(n, design, NetFaults::NONE, 9)
        };
        let o = Job::new(spec, progs).expect("a valid job").run();
        assert!(o.is_ok(), "{design:?}: {:?}", o.err());
    }
}

/// A pool of `buffers` with an eighth (at least two) kept in reserve.
fn pool(buffers: u32) -> rmx_core::Config {
    let reserve = (buffers / 8).max(2);
    rmx_core::Config {
        rx_buffers: buffers,
        rx_reserve: reserve,
        rx_low_water: reserve,
        ..rmx_sim::node::config(false)
    }
}

/// Epochs of accumulates into rank 0 between allreduces: ranks that leave
/// an allreduce early send their accumulates while rank 0 is still in it,
/// and take its whole budget. The allreduce's messages to rank 0 once
/// waited behind them for good.
fn accumulates_between_collectives(n: u16, buffers: u32, designs: &[Design]) {
    for &design in designs {
        let progs = (0..n)
            .map(|r| {
                let mut p = Vec::new();
                for _ in 0..3 {
                    p.push(Action::Collective(Collective::Allreduce { len: 32 }));
                    p.push(Action::Epoch {
                        window: 0,
                        ops: (0..4u64)
                            .map(|k| OpSpec {
                                target: 0,
                                disp: 4 * ((r as u64 + k) % 16),
                                kind: Kind::Add,
                                len: 4,
                            })
                            .collect(),
                        compute_ns: 0,
                        fence: Fence::Plain,
                    });
                }
                p
            })
            .collect();
        let spec = Spec {
            config: pool(buffers),
            windows: vec![WinSpec::same(64, design, n)],
            ..spec(n, design, JITTER, 11)
        };
        let o = Job::new(spec, progs).expect("a valid job").run();
        assert!(
            o.is_ok(),
            "{design:?}, {n} ranks, {buffers} buffers: {:?}",
            o.err()
        );
    }
}

#[test]
fn accumulates_of_ranks_ahead_never_starve_a_collective() {
    accumulates_between_collectives(65, 16, &Design::ALL);
}

#[test]
#[cfg_attr(
    unoptimised,
    ignore = "hundreds of ranks take minutes unoptimised: run with --release"
)]
fn accumulates_of_hundreds_of_ranks_never_starve_a_collective() {
    accumulates_between_collectives(513, 256, &[Design::Def, Design::ImmRi]);
    // Not the naive design: its all-pairs flags take minutes at this size.
    accumulates_between_collectives(1023, 64, &[Design::Def, Design::ImmOpt, Design::ImmRi]);
}

/// Inside one fence: 8 origins add 120 times each into rank 0, whose pool
/// holds 8 buffers (the naive design once stalled on a jittery wire: the
/// fence's reduce_scatter waited for credit its accumulates held).
#[test]
fn many_accumulates_into_a_small_pool_end_in_one_fence() {
    let n = 9u16;
    for design in Design::ALL {
        let progs: Vec<Vec<Action>> = (0..n)
            .map(|r| {
                let ops = match r {
                    0 => Vec::new(),
                    _ => (0..120u64)
                        .map(|k| OpSpec {
                            target: 0,
                            disp: 4 * (k % 16),
                            kind: Kind::Add,
                            len: 4,
                        })
                        .collect(),
                };
                vec![Action::Epoch {
                    window: 0,
                    ops,
                    compute_ns: 0,
                    fence: Fence::Plain,
                }]
            })
            .collect();
        for reserve in [1, 2] {
            for faults in [NetFaults::NONE, JITTER] {
                let config = rmx_core::Config {
                    rx_buffers: 8,
                    rx_reserve: reserve,
                    rx_low_water: reserve,
                    ..rmx_sim::node::config(false)
                };
                let spec = Spec {
                    config,
                    windows: vec![WinSpec::same(64, design, n)],
                    ..spec(n, design, faults, 13)
                };
                let o = Job::new(spec, progs.clone()).expect("a valid job").run();
                assert!(o.is_ok(), "{design:?}, reserve {reserve}: {:?}", o.err());
            }
        }
    }
}

/// Four epochs, each rank putting into its own region of the next rank's
/// window in epochs 1 and 3; rank `r` ends epoch `k` with `assert(r, k)`.
fn asserted(
    n: u16,
    design: Design,
    assert: impl Fn(u16, usize) -> Fence,
) -> Result<Outcome, String> {
    // Epochs 0 and 2 have no operations: NO_PRECEDE may close them, and
    // NO_SUCCEED may close epoch 1.
    let progs = (0..n)
        .map(|r| {
            (0..4)
                .map(|k| Action::Epoch {
                    window: 0,
                    ops: match k {
                        1 | 3 => vec![OpSpec {
                            target: (r + 1) % n,
                            disp: REGION * r as u64,
                            kind: Kind::Put,
                            len: 8,
                        }],
                        _ => Vec::new(),
                    },
                    compute_ns: 0,
                    fence: assert(r, k),
                })
                .collect()
        })
        .collect();
    Job::new(spec(n, design, JITTER, 17), progs)
        .expect("a valid job")
        .run()
}

/// Fence assertions every rank gives alike: `NO_PRECEDE` on epochs
/// without operations, `NO_SUCCEED` before one without: every window as
/// the reference says.
#[test]
fn fence_assertions_every_rank_gives_leave_windows_as_the_reference_says() {
    for design in Design::ALL {
        let o = asserted(5, design, |_, k| match k {
            0 | 2 => Fence::Assert {
                no_precede: true,
                no_succeed: false,
            },
            1 => Fence::Assert {
                no_precede: false,
                no_succeed: true,
            },
            _ => Fence::Plain,
        });
        assert!(o.is_ok(), "{design:?}: {:?}", o.err());
    }
}

/// `NO_PRECEDE` given by one rank only (erroneous): a fence that ran
/// another reduction on that rank once left every rank waiting for ever;
/// now the fence ends on every rank and reports the disagreement.
#[test]
fn no_precede_given_by_one_rank_ends_the_fence_as_a_disagreement() {
    for design in Design::ALL {
        let o = asserted(5, design, |r, k| match (r, k) {
            (2, 2) => Fence::Assert {
                no_precede: true,
                no_succeed: false,
            },
            _ => Fence::Plain,
        });
        let e = o.expect_err("a disagreement");
        assert!(e.contains("disagree: true"), "{design:?}: {e}");
        assert!(!e.contains("stalled"), "{design:?}: {e}");
    }
}

/// Random epochs in every design with a request table of two handles per
/// rank instead of the std shell's 2048 (eight for the naive design, whose
/// fence posts a receive for every other rank's flag at once: with fewer
/// it ends with `RequestTableFull`, never a wait).
#[test]
fn every_design_fences_with_a_small_request_table() {
    for design in Design::ALL {
        // Naive posts a receive for every other rank's flag at once.
        let handles = match design {
            Design::ImmNaive => 8,
            _ => 2,
        };
        for seed in 0..3 {
            let mut rng = Rng::new(seed);
            let progs = random_programs(6, 4, &mut rng);
            let spec = Spec {
                requests: Some(handles),
                ..spec(6, design, NetFaults::NONE, seed)
            };
            let o = Job::new(spec, progs).expect("a valid job").run();
            assert!(o.is_ok(), "{design:?} seed {seed}: {:?}", o.err());
        }
    }
    // Fewer handles than its flags: an error that names the table.
    let spec = Spec {
        requests: Some(4),
        ..spec(6, Design::ImmNaive, NetFaults::NONE, 0)
    };
    let progs = random_programs(6, 4, &mut Rng::new(0));
    let e = Job::new(spec, progs).expect("a valid job").run().err();
    let e = e.expect("a fence that cannot post its flags' receives fails");
    assert!(
        e.contains("fence: a receive was refused: RequestTableFull"),
        "{e}"
    );
}

/// Random epochs of puts, accumulates and gets on a window whose size
/// differs from rank to rank (some expose none), in blocks of `block`
/// u32s: in each epoch a block of a target is for one origin's puts, for
/// anyone's adds, or for anyone's gets, the roles turning from epoch to
/// epoch so that gets read what earlier epochs wrote. Nothing a get reads
/// changes in its epoch, and no two puts overlap, so the result is one in
/// any order. Each rank's window bytes, then the programs.
fn programs_with_gets(
    n: u16,
    epochs: usize,
    block: u64,
    rng: &mut Rng,
) -> (Vec<usize>, Vec<Vec<Action>>) {
    let bytes = 4 * block;
    let lens: Vec<usize> = (0..n)
        .map(|_| (bytes * rng.below(3 * n as u64 + 1)) as usize)
        .collect();
    // Block `b` of a target in epoch `e`: 0 gets, 1 adds, 2 one origin's puts.
    let role = |b: u64, e: usize| (b + e as u64) % 3;
    let owner = |b: u64, e: usize| ((b + e as u64) % n as u64) as u16;
    let colls: Vec<bool> = (0..epochs).map(|_| rng.below(4) == 0).collect();
    let progs: Vec<Vec<Action>> = (0..n)
        .map(|r| {
            let mut p = Vec::new();
            for (e, &coll) in colls.iter().enumerate() {
                if coll {
                    p.push(Action::Collective(Collective::Allreduce { len: 32 }));
                }
                let mut ops = Vec::new();
                let mut put_to = Vec::new();
                for _ in 0..rng.below(6) {
                    let target = rng.below(n as u64) as u16;
                    let blocks = lens[target as usize] as u64 / bytes;
                    if blocks == 0 {
                        continue;
                    }
                    let want = rng.below(3);
                    let fits: Vec<u64> = (0..blocks)
                        .filter(|&b| role(b, e) == want)
                        .filter(|&b| want < 2 || owner(b, e) == r && !put_to.contains(&(target, b)))
                        .collect();
                    let Some(&b) = fits.get(rng.below(fits.len().max(1) as u64) as usize) else {
                        continue;
                    };
                    // Whole u32s within the block.
                    let first = rng.below(block);
                    let words = 1 + rng.below(block - first);
                    let (disp, len) = (b * bytes + 4 * first, 4 * words as u32);
                    let kind = [Kind::Get, Kind::Add, Kind::Put][want as usize];
                    if kind == Kind::Put {
                        put_to.push((target, b));
                    }
                    ops.push(OpSpec {
                        target,
                        disp,
                        kind,
                        len,
                    });
                }
                p.push(Action::Epoch {
                    window: 0,
                    ops,
                    compute_ns: rng.below(3) * 5_000,
                    fence: Fence::Plain,
                });
            }
            p
        })
        .collect();
    (lens, progs)
}

fn run_with_gets(n: u16, design: Design, faults: NetFaults, seed: u64, block: u64) -> Outcome {
    let mut rng = Rng::new(seed);
    let (lens, progs) = programs_with_gets(n, 8, block, &mut rng);
    let spec = Spec {
        windows: vec![WinSpec { design, lens }],
        ..Spec::new(n, faults, seed)
    };
    Job::new(spec, progs)
        .expect("a valid job")
        .run()
        .unwrap_or_else(|e| panic!("{design:?} on {n} ranks, seed {seed}, blocks of {block}: {e}"))
}

#[test]
fn gets_read_windows_of_every_size_as_their_epoch_began() {
    for seed in 0..12 {
        let n = 2 + (seed % 6) as u16;
        // Blocks within a header's inline bytes, and past them.
        let block = [4, 96][seed as usize % 2];
        for d in Design::ALL {
            let o = run_with_gets(n, d, JITTER, seed, block);
            assert_eq!(o.late, 0);
        }
        run_with_gets(n, Design::Def, NetFaults::LOSSY, seed, block);
    }
}

#[test]
fn a_get_of_bytes_its_epoch_changes_is_refused_as_erroneous() {
    let epoch = |ops| Action::Epoch {
        window: 0,
        ops,
        compute_ns: 0,
        fence: Fence::Plain,
    };
    let op = |kind, disp| OpSpec {
        target: 1,
        disp,
        kind,
        len: 8,
    };
    let spec = || Spec {
        windows: vec![WinSpec::same(64, Design::Def, 2)],
        ..Spec::new(2, NetFaults::NONE, 0)
    };
    // Rank 0 reads bytes 4..12 of rank 1 while rank 1 adds to 8..16.
    let progs = vec![
        vec![epoch(vec![op(Kind::Get, 4)])],
        vec![epoch(vec![op(Kind::Add, 8)])],
    ];
    let e = Job::new(spec(), progs).err();
    assert!(e.is_some_and(|e| e.contains("reads bytes another operation")));
    // Beside it, it is not.
    let progs = vec![
        vec![epoch(vec![op(Kind::Get, 0)])],
        vec![epoch(vec![op(Kind::Add, 8)])],
    ];
    assert!(Job::new(spec(), progs).is_ok());
}

#[test]
fn windows_of_the_wrong_ranks_or_an_operation_past_a_smaller_window_are_refused() {
    let spec = |lens: Vec<usize>| Spec {
        windows: vec![WinSpec {
            design: Design::ImmOpt,
            lens,
        }],
        ..Spec::new(2, NetFaults::NONE, 0)
    };
    let put = |disp| {
        vec![Action::Epoch {
            window: 0,
            ops: vec![OpSpec {
                target: 1,
                disp,
                kind: Kind::Put,
                len: 8,
            }],
            compute_ns: 0,
            fence: Fence::Plain,
        }]
    };
    let e = Job::new(spec(vec![64]), vec![put(0), put(0)]).err();
    assert!(e.is_some_and(|e| e.contains("1 window sizes for 2 ranks")));
    // Rank 1's window is 16 bytes: 8 at 8 fit, 8 at 12 do not.
    assert!(Job::new(spec(vec![64, 16]), vec![put(8), put(8)]).is_ok());
    let e = Job::new(spec(vec![64, 16]), vec![put(12), put(12)]).err();
    assert!(e.is_some_and(|e| e.contains("outside the window")));
}
