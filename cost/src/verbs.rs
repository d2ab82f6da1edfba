//! The workload's two ranks on the `verbs` port, over the in-process
//! device of [`fake_verbs`](crate::fake_verbs).

use rmx_linux::rank::{loop_config, Rank};
use rmx_linux::transport::network::Network;
use rmx_linux::verbs::{device, Select, Sizes, VerbsNet, VerbsPort};

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
        let listed = device::names();
        assert_eq!(
            listed,
            [fake_verbs::DEVICE],
            "the verbs port's calls reach another libibverbs"
        );
        let cfg = loop_config();
        let net = VerbsNet {
            select: Select {
                device: Some(fake_verbs::DEVICE.into()),
                ..Select::default()
            },
            sizes: Sizes::default(),
            launch: None,
        }
        .for_config(&cfg);
        let (a, b) = VerbsPort::pair(&net.select, net.sizes).expect("two ports on the fake device");
        let rank = |p| Rank::new(p, 2, cfg).expect("verbs rank");
        Pair::warmed(rank(a), rank(b))
    }
}
