//! A rank killed part way through a job: every other rank's program must
//! end (finished, or a step failed naming the lost rank) rather than wait
//! for ever: in collectives (a survivor may wait in a later round on a
//! live rank that already left the collective) and in every fence design.

use rmx_core::collective::Collective;
use rmx_core::onesided::Design;
use rmx_sim::fence::Kind;
use rmx_sim::job::{Action, Death, Fence, Job, OpSpec, Outcome, Spec, WinSpec};
use rmx_sim::model::NetFaults;
use rmx_sim::rng::Rng;

/// Runs the job of `spec` (with a death) to its end and checks that every
/// rank but the dead one ended its program at or after the step of the
/// death, with the core's `PeerFailed`. On a lossy wire a survivor may
/// also fail in the step before: the dead rank may have left that step
/// with a message of its own to the survivor still unacknowledged (a send
/// completes once copied), and if the wire lost it, nobody sends it
/// again.
fn every_survivor_fails(spec: Spec, progs: Vec<Vec<Action>>) {
    let n = spec.ranks;
    let death = spec.death.expect("a job with a death");
    let what = format!("{death:?} {:?}", spec.windows.first().map(|w| w.design));
    let spec_lossy = spec.faults.lossy();
    let o: Outcome = Job::new(spec, progs)
        .expect("a valid job")
        .run()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut ranks: Vec<u16> = o.ended.iter().map(|e| e.0).collect();
    ranks.sort();
    let survivors: Vec<u16> = (0..n).filter(|&r| r != death.rank).collect();
    assert_eq!(ranks, survivors, "{what}: {:?}", o.ended);
    let earliest = match spec_lossy {
        true => death.step.saturating_sub(1),
        false => death.step,
    };
    for (r, step, e) in &o.ended {
        assert!(
            *step >= earliest,
            "rank {r}, {what}: failed at step {step}: {e}"
        );
        assert!(e.contains("PeerFailed"), "rank {r}, {what}: {e}");
    }
}

/// Every rank's program: `program` `times` over.
fn collectives(n: u16, program: &[Collective], times: usize) -> Vec<Vec<Action>> {
    let p: Vec<Action> = program
        .repeat(times)
        .into_iter()
        .map(Action::Collective)
        .collect();
    vec![p; n as usize]
}

#[test]
fn a_rank_killed_in_a_collective_ends_every_survivors_program() {
    let program = [
        Collective::Allreduce { len: 32 },
        // Rendezvous-sized: data still moving when the rank dies.
        Collective::Allreduce { len: 64 << 10 },
        Collective::Barrier,
        Collective::Allgather { block: 256 },
        Collective::Allreduce { len: 8 },
    ];
    for (i, n) in [4u16, 5, 8].into_iter().enumerate() {
        for after_ns in [0, 3_000, 10_000, 30_000] {
            let death = Death {
                rank: (i as u16 * 3 + 1) % n,
                step: 1,
                after_ns,
            };
            let spec = Spec {
                death: Some(death),
                ..Spec::new(n, NetFaults::NONE, after_ns)
            };
            every_survivor_fails(spec, collectives(n, &program, 3));
        }
    }
}

/// Six epochs of puts, accumulates and gets on random targets.
fn epochs(n: u16, seed: u64) -> Vec<Vec<Action>> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|r| {
            (0..6)
                .map(|e| Action::Epoch {
                    window: 0,
                    ops: (0..4)
                        .map(|i| OpSpec {
                            target: rng.below(n as u64) as u16,
                            disp: 64 * r as u64 + 16 * i,
                            kind: [Kind::Put, Kind::Add, Kind::Get][(e + i as usize) % 3],
                            len: 16,
                        })
                        .collect(),
                    compute_ns: 0,
                    fence: Fence::Plain,
                })
                .collect()
        })
        .collect()
}

/// A fence waits for operations and finish messages from any origin: a
/// dead origin left the immediate designs' survivors waiting for ever.
#[test]
fn a_rank_killed_in_an_epoch_ends_every_survivors_fence_in_every_design() {
    let n = 6u16;
    for (k, faults) in [(0, NetFaults::NONE), (1, NetFaults::LOSSY)] {
        for design in Design::ALL {
            if faults.lossy() && design.immediate() {
                continue;
            }
            for (i, after_ns) in [0, 2_000, 5_000, 20_000].into_iter().enumerate() {
                let death = Death {
                    rank: [2, 0, 5][i % 3],
                    step: 1 + i % 2,
                    after_ns,
                };
                let seed = k * 10 + i as u64;
                let spec = Spec {
                    death: Some(death),
                    windows: vec![WinSpec::same(64 * n as usize, design, n)],
                    ..Spec::new(n, faults, seed)
                };
                every_survivor_fails(spec, epochs(n, seed));
            }
        }
    }
}

#[test]
fn a_rank_killed_on_a_lossy_wire_ends_every_survivors_program() {
    let n = 5u16;
    for after_ns in [0, 20_000, 60_000] {
        let program = [
            Collective::Allreduce { len: 4096 },
            Collective::Barrier,
            Collective::Allgather { block: 64 },
        ];
        let death = Death {
            rank: 4,
            step: 0,
            after_ns,
        };
        let spec = Spec {
            death: Some(death),
            ..Spec::new(n, NetFaults::LOSSY, after_ns)
        };
        every_survivor_fails(spec, collectives(n, &program, 4));
    }
}
