//! The workload's two ranks on the `verbs` port, over the in-process
//! device of [`fake_verbs`](crate::fake_verbs).

use rmx_linux::rank::{loop_config, Rank};
use rmx_linux::verbs::{Select, Sizes, VerbsPort};

use crate::fake_verbs;
use crate::Pair;

impl Pair<VerbsPort> {
    /// Two warm ranks on the `verbs` port, each with the port a job opens
    /// (the device's resources, the receive pool posted), joined to each
    /// other directly: the device carries no connection handshake.
    ///
    /// Panics if the port's calls reach another libibverbs than this
    /// crate's (the count would then be of a real device, or of nothing).
    pub fn warm_verbs() -> Pair<VerbsPort> {
        let listed = fake_verbs::name();
        assert_eq!(
            listed,
            fake_verbs::DEVICE,
            "the verbs port's calls reach another libibverbs (it lists {listed:?})"
        );
        let cfg = loop_config();
        let sizes = Sizes {
            sq_depth: u32::from(cfg.send_wqes.max(1)),
            rx_low: cfg.rx_low_water,
            ..Sizes::default()
        };
        let select = Select {
            device: Some(fake_verbs::DEVICE.into()),
            ..Select::default()
        };
        let open = |me| VerbsPort::open(&select, sizes, me, 2).expect("a port on the fake device");
        let (mut a, mut b) = (open(0), open(1));
        let all = [a.address().encode(), b.address().encode()];
        a.connect(&all).expect("rank 0 takes the addresses");
        b.connect(&all).expect("rank 1 takes the addresses");
        let (qa, pa) = a.queue_pair(1).expect("rank 0's queue pair");
        let (qb, pb) = b.queue_pair(0).expect("rank 1's queue pair");
        a.join(1, qb, pb).expect("rank 0 joins rank 1");
        b.join(0, qa, pa).expect("rank 1 joins rank 0");
        let rank = |p| Rank::new(p, 2, cfg).expect("verbs rank");
        Pair::warmed(rank(a), rank(b))
    }
}
