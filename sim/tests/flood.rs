//! Correct programs that flood a rank with more messages than its receive
//! pool holds, then meet in a collective before the rank receives them:
//! the collective's messages must not queue behind the flood.

use rmx_core::collective::Collective;
use rmx_sim::job::{Action, Job, Spec};
use rmx_sim::model::NetFaults;

/// Every rank but `to` sends it `count` messages; all call `between`;
/// `to` receives them.
fn flood(ranks: u16, to: u16, count: u32, between: Collective, any: bool, faults: NetFaults) {
    let program = vec![
        Action::Flood { to, count },
        Action::Collective(between),
        Action::Drain { any_source: any },
        Action::Collective(Collective::Barrier),
    ];
    let job = Job::new(Spec::new(ranks, faults, 7), vec![program; ranks as usize]).expect("a job");
    if let Err(e) = job.run() {
        panic!("{ranks} ranks, {count} each into rank {to}, {between:?}, any source {any}: {e}");
    }
}

#[test]
fn a_barrier_after_a_flood_ends_before_the_flood_is_received() {
    for faults in [NetFaults::NONE, NetFaults::LOSSY] {
        for any in [false, true] {
            for count in [300, 1000] {
                flood(2, 1, count, Collective::Barrier, any, faults);
            }
        }
    }
}

#[test]
fn a_collective_after_many_senders_flood_one_rank_ends() {
    let allgather = Collective::Allgather { block: 8 };
    for (ranks, count) in [(4, 100), (8, 50), (16, 20), (64, 5)] {
        for any in [false, true] {
            flood(ranks, 0, count, Collective::Barrier, any, NetFaults::NONE);
            flood(ranks, 0, count, allgather, any, NetFaults::NONE);
        }
        flood(
            ranks,
            0,
            count,
            Collective::Barrier,
            false,
            NetFaults::LOSSY,
        );
    }
}
