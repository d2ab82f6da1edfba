//! The core's collective runs carried out by simulated ranks through
//! their endpoints: every rank's result against the reference, on every
//! group size up to 17, over a lossy wire, and at a thousand ranks.

use rmx_core::collective::Collective;
use rmx_sim::job::{Action, Job, Spec};
use rmx_sim::model::{Model, NetFaults};

fn every(n: u16) -> Vec<Collective> {
    vec![
        Collective::Barrier,
        Collective::Allreduce { len: 4 * 37 },
        // Past the eager threshold: the core's rendezvous carries it.
        Collective::Allreduce { len: 64 * 1024 },
        Collective::ReduceScatter { block: 12 },
        Collective::Allgather { block: 8 },
        Collective::Allgather {
            block: 16 * 1024 / n as usize / 4 * 4 + 4,
        },
    ]
}

fn run(n: u16, faults: NetFaults, seed: u64) -> rmx_sim::job::Outcome {
    let progs = (0..n)
        .map(|_| every(n).into_iter().map(Action::Collective).collect())
        .collect();
    let o = Job::new(Spec::new(n, faults, seed), progs)
        .expect("a valid job")
        .run();
    o.unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"))
}

#[test]
fn every_collective_gives_every_rank_the_reference_result() {
    for n in 1..=17 {
        let ends = run(n, NetFaults::NONE, 0).ends;
        assert!(ends.windows(2).all(|w| w[0] <= w[1]), "{ends:?}");
    }
}

#[test]
fn collectives_survive_a_lossy_wire() {
    let mut again = 0;
    for n in [2, 3, 5, 8, 13] {
        for seed in 0..3 {
            again += run(n, NetFaults::LOSSY, seed).retransmits;
        }
    }
    assert!(again > 0, "nothing was lost");
}

#[test]
fn a_barrier_of_two_costs_one_message_each_way() {
    let m = Model::IB_DDR;
    let ends = run(2, NetFaults::NONE, 0).ends;
    let header = rmx_core::wire::HEADER_LEN;
    assert_eq!(
        ends[0],
        2 * m.overhead_ns + m.wire_ns(header) + m.latency_ns
    );
}

#[test]
#[cfg_attr(
    unoptimised,
    ignore = "a thousand ranks take minutes unoptimised: run with --release"
)]
fn a_thousand_ranks_run_every_collective() {
    let ends = run(1024, NetFaults::NONE, 0).ends;
    // A barrier of 1024 is ten rounds: at least ten latencies.
    assert!(ends[0] >= 10 * Model::IB_DDR.latency_ns, "{ends:?}");
}

/// Every collective with a request table of two handles per rank instead
/// of the std shell's 2048: a rank that posted every receive of an
/// exchange before its sends filled the table, as every other rank did,
/// and the rendezvous allgather of eight ranks waited for ever.
#[test]
fn collectives_run_with_a_small_request_table() {
    for (n, faults) in [
        (2, NetFaults::NONE),
        (5, NetFaults::NONE),
        (8, NetFaults::NONE),
        (13, NetFaults::NONE),
        (8, NetFaults::LOSSY),
    ] {
        let progs = (0..n)
            .map(|_| every(n).into_iter().map(Action::Collective).collect())
            .collect();
        let spec = Spec {
            requests: Some(2),
            ..Spec::new(n, faults, 3)
        };
        let o = Job::new(spec, progs).expect("a valid job").run();
        assert!(o.is_ok(), "{n} ranks: {:?}", o.err());
    }
}
