//! The transports rmx knows, in one table: what `--transport` accepts,
//! what `rmx info` lists, what a command refuses with a reason, and the
//! types a job holds whatever its transport ([`Net`], its settings;
//! [`AnyPort`], a rank's port). Each transport's module implements
//! [`Network`] and defines its entry; a new transport is its module and
//! one line in the `transports!` list below.

use rmx_core::{Caps, Config, PostError, RegError};

pub use super::entry::Entry;
use super::network::{Device, Floor, Network, Wire};
use super::{Completion, Counters, Events, Faults, Faulty, Mr, Recv, SetupError, Transport, Work};
use crate::launch::Launch;

/// A boxed port as the reference it was matched by, shared or not.
trait Unbox {
    type Port;
    fn unbox(self) -> Self::Port;
}

impl<'a, T> Unbox for &'a Box<T> {
    type Port = &'a T;
    fn unbox(self) -> &'a T {
        self
    }
}

impl<'a, T> Unbox for &'a mut Box<T> {
    type Port = &'a mut T;
    fn unbox(self) -> &'a mut T {
        self
    }
}

/// Calls `$call` on whichever port `$self` is, of the transports `$v`.
macro_rules! each {
    ($self:expr, [$($(#[$m:meta])* $v:ident),+], $p:ident => $call:expr) => {
        match $self {
            $($(#[$m])* AnyPort::$v($p) => $call,)+
            AnyPort::Faulty(b) => {
                let $p = Unbox::unbox(b);
                $call
            }
        }
    };
}

/// Defines the table and the two types every job holds from the list of
/// transports: [`TRANSPORTS`], [`Net`] (one transport's settings) and
/// [`AnyPort`] (one port of any transport, matched per call: the ports
/// stay inline, since a box would put an indirection on every post and
/// poll).
macro_rules! transports {
    (
        $($(#[$m:meta])* $v:ident($net:ty, $opt:ident)),+ $(,)?;
        not built: [$($(#[$nm:meta])* $missing:path),* $(,)?]
    ) => {
        /// Every transport, the default first.
        pub const TRANSPORTS: &[Entry] = &[
            $($(#[$m])* <$net as Network>::ENTRY,)+
            $($(#[$nm])* $missing,)*
        ];

        /// Every transport's command-line options, flattened into every
        /// benchmark's.
        #[derive(clap::Args, Clone, Debug, Default)]
        pub struct Options {
            $(
                $(#[$m])*
                #[command(flatten)]
                pub $opt: <$net as Network>::Options,
            )+
        }

        impl Options {
            /// The network transport `name` opens from its options, and the
            /// lab made for it if any; another transport's option given is
            /// refused by its flag. `launched`: a launcher started this
            /// process as one rank.
            pub fn open(
                &self,
                name: &str,
                launched: bool,
            ) -> Result<(Net, Option<crate::lab::TempLab>), SetupError> {
                $(
                    $(#[$m])*
                    {
                        let n = <$net as Network>::ENTRY.name;
                        if n != name {
                            if let Some(flag) = <$net as Network>::given(&self.$opt) {
                                return Err(SetupError::ForeignOption { flag, transport: n });
                            }
                        }
                    }
                )+
                let entry = find(name)?;
                if launched && entry.launched.is_none() {
                    return Err(SetupError::Launched {
                        transport: entry.name,
                        give: TRANSPORTS.iter().filter_map(Entry::launch_flags).collect(),
                    });
                }
                $(
                    $(#[$m])*
                    {
                        if <$net as Network>::ENTRY.name == name {
                            let (net, lab) = <$net as Network>::open(&self.$opt, launched)?;
                            return Ok((Net::$v(net), lab));
                        }
                    }
                )+
                unreachable!("a built transport has its line")
            }

            /// Whether the network transport `name` opens from these
            /// options lets more than two ranks run as threads of this
            /// process (`Err`: what to give instead).
            pub fn threads_share(&self, name: &str) -> Result<(), String> {
                $(
                    $(#[$m])*
                    {
                        if <$net as Network>::ENTRY.name == name {
                            return <$net as Network>::threads_share(&self.$opt);
                        }
                    }
                )+
                Ok(())
            }
        }

        /// The network a job's ranks talk over: one transport's settings.
        #[derive(Clone, Debug)]
        pub enum Net {
            $($(#[$m])* $v($net),)+
        }

        impl Net {
            /// The transport's line in the registry.
            pub fn entry(&self) -> &'static Entry {
                match self {
                    $($(#[$m])* Net::$v(_) => &<$net as Network>::ENTRY,)+
                }
            }

            /// What benchmarks measure beside rmx on this network.
            pub fn floor(&self) -> Floor {
                match self {
                    $($(#[$m])* Net::$v(n) => n.floor(),)+
                }
            }

            /// The device a benchmark's anchor runs on, if any.
            pub fn device(&self) -> Option<Device> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.device(),)+
                }
            }

            /// A port registering memory as this network's do, if not the
            /// loop NIC's.
            pub fn registrar(&self) -> Option<Result<AnyPort, SetupError>> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.registrar(),)+
                }
            }

            /// A connection's measured cost at `wqes` send entries, where
            /// the transport is a `device`.
            pub fn connection_bytes(&self, wqes: u16) -> Option<Result<(u64, u64), String>> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.connection_bytes(wqes),)+
                }
            }

            /// The network's settings, for a report's `config` block.
            pub fn json(&self) -> serde_json::Value {
                match self {
                    $($(#[$m])* Net::$v(n) => n.json(),)+
                }
            }

            /// The launch this process is one rank of, if a launcher started it.
            pub fn launch(&self) -> Option<&Launch> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.launch(),)+
                }
            }

            /// What this network's transport can do, as far as protocol
            /// choices go (limits such as the MTU are known once a port opens).
            pub fn caps(&self) -> Caps {
                match self {
                    $($(#[$m])* Net::$v(n) => n.caps(),)+
                }
            }

            /// The network with `faults` injected on receive; `Err` where
            /// the transport's core runs without its reliability layer.
            pub fn with_faults(&self, faults: Faults) -> Result<Net, SetupError> {
                let entry = self.entry();
                if !entry.caps.lossy {
                    return Err(SetupError::Reliable {
                        transport: entry.name,
                        lossy: TRANSPORTS
                            .iter()
                            .filter(|t| t.built && t.caps.lossy)
                            .map(|t| t.name)
                            .collect(),
                    });
                }
                match self {
                    $($(#[$m])* Net::$v(n) => n.with_faults(faults).map(Net::$v),)+
                }
            }

            /// Receive buffers per rank: what a benchmark keeps in flight at most.
            pub fn rx_buffers(&self) -> usize {
                match self {
                    $($(#[$m])* Net::$v(n) => n.rx_buffers(),)+
                }
            }

            /// The network as one connection's send queue must be for `cfg`.
            pub(crate) fn for_config(&self, cfg: Config) -> Net {
                match self {
                    $($(#[$m])* Net::$v(n) => Net::$v(n.for_config(&cfg)),)+
                }
            }

            /// The namespace rank `me`'s thread enters first, if any.
            pub(crate) fn netns(&self, me: u16) -> Option<&str> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.netns(me),)+
                }
            }

            /// Sets the network up for a job of `ranks` ranks.
            pub(crate) fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError> {
                match self {
                    $($(#[$m])* Net::$v(n) => n.wire(ranks),)+
                }
            }
        }

        /// A port of any transport of this shell. One per rank, made once.
        #[allow(clippy::large_enum_variant)]
        pub enum AnyPort {
            $($(#[$m])* $v(<$net as Network>::Port),)+
            /// Any of them with faults injected (tests and lossy
            /// benchmarks only: the box costs an indirection).
            Faulty(Box<Faulty<AnyPort>>),
        }

        $($(#[$m])* impl From<<$net as Network>::Port> for AnyPort {
            fn from(p: <$net as Network>::Port) -> AnyPort {
                AnyPort::$v(p)
            }
        })+

        impl AnyPort {
            /// The port of type `P` beneath any decorator, if this is one.
            pub fn inner<P: 'static>(&self) -> Option<&P> {
                match self {
                    $($(#[$m])* AnyPort::$v(p) => (p as &dyn std::any::Any).downcast_ref::<P>(),)+
                    AnyPort::Faulty(f) => f.inner().inner::<P>(),
                }
            }
        }

        impl rmx_driver::Port for AnyPort {
            fn caps(&self) -> Caps {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::caps(p))
            }

            unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
                // SAFETY: the caller's contract is the port's.
                each!(self, [$($(#[$m])* $v),+], p => unsafe { rmx_driver::Port::register(p, addr, len) })
            }

            unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
                // SAFETY: the caller's contract is the port's.
                each!(self, [$($(#[$m])* $v),+], p => unsafe { rmx_driver::Port::register_user(p, addr, len) })
            }

            fn deregister(&mut self, mr: Mr) {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::deregister(p, mr))
            }

            #[inline]
            fn post(
                &mut self,
                peer: u16,
                wr_id: u64,
                work: Work<'_>,
            ) -> Result<Option<Completion>, PostError> {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::post(p, peer, wr_id, work))
            }

            #[inline]
            fn doorbell(&mut self) {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::doorbell(p))
            }

            fn poll_recv(&mut self) -> Option<Recv> {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::poll_recv(p))
            }

            #[inline]
            fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::rx_bytes(p, buf))
            }

            #[inline]
            fn repost(&mut self, buf: u32) -> bool {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::repost(p, buf))
            }

            fn rx_pool_low(&mut self, free: u32) -> u32 {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::rx_pool_low(p, free))
            }

            #[inline]
            fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::poll_cq(p, out))
            }

            fn drain(&mut self) {
                each!(self, [$($(#[$m])* $v),+], p => rmx_driver::Port::drain(p))
            }
        }

        impl Transport for AnyPort {
            #[inline]
            fn rank(&self) -> u16 {
                each!(self, [$($(#[$m])* $v),+], p => p.rank())
            }

            fn events(&self) -> Events {
                each!(self, [$($(#[$m])* $v),+], p => Transport::events(p))
            }

            #[inline]
            fn busy(&self) -> bool {
                each!(self, [$($(#[$m])* $v),+], p => Transport::busy(p))
            }

            fn counters(&self) -> Counters {
                each!(self, [$($(#[$m])* $v),+], p => Transport::counters(p))
            }
        }
    };
}

// Every transport, one line each, the default first: the variant that
// names it in `Net` and `AnyPort`, its settings type (a `Network`, which
// names its port and its registry entry) and its options' field; then
// those this build does not carry, still named so that users asking for
// one learn why it fails.
transports! {
    Loop(crate::loopnic::LoopConfig, looped),
    Eth(crate::eth::EthNet, eth),
    #[cfg(feature = "verbs")]
    Verbs(crate::verbs::VerbsNet, verbs),
    #[cfg(feature = "test-transport")]
    Late(crate::late::LateNet, late);
    not built: [
        #[cfg(not(feature = "verbs"))]
        crate::verbs::ENTRY,
    ]
}

/// The transport `name` names, if this build carries it; else what to do.
pub fn find(name: &str) -> Result<&'static Entry, SetupError> {
    match TRANSPORTS.iter().find(|t| t.name == name) {
        Some(t) if t.built => Ok(t),
        Some(t) => Err(SetupError::NotBuilt {
            transport: t.name,
            about: t.about,
        }),
        None => Err(SetupError::UnknownTransport {
            name: name.into(),
            known: TRANSPORTS.iter().map(|t| t.name).collect(),
        }),
    }
}

impl Net {
    /// The transport's name, as `--transport` takes it.
    pub fn name(&self) -> &'static str {
        self.entry().name
    }

    /// The largest message ranks on this network send without a
    /// rendezvous ([`Config::eager_max`] of `cfg` fitted to what the
    /// transport can do). An interface's MTU is known only once a port
    /// opens, so the one-packet threshold is the configured one.
    pub fn eager_max(&self, cfg: &Config) -> u32 {
        cfg.fit(&self.caps()).eager_max()
    }

    /// The fence designs this network's transport carries.
    pub fn designs(&self) -> Vec<rmx_core::onesided::Design> {
        super::entry::designs(&self.caps())
    }
}

impl AnyPort {
    /// This port with `faults` injected on receive, if there are any.
    pub fn with_faults(self, faults: Faults) -> AnyPort {
        if faults.any() {
            AnyPort::Faulty(Box::new(Faulty::new(self, faults)))
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_is_found_refused_with_its_reason_or_unknown() {
        assert_eq!(find("loop").map(|t| t.name), Ok("loop"));
        assert_eq!(TRANSPORTS[0].name, "loop", "the default first");
        #[cfg(not(feature = "verbs"))]
        {
            let verbs = find("verbs").unwrap_err();
            assert!(matches!(
                verbs,
                SetupError::NotBuilt {
                    transport: "verbs",
                    ..
                }
            ));
            let said = verbs.to_string();
            assert!(
                said.contains("not in this build") && said.contains("--transport loop"),
                "{said}"
            );
        }
        #[cfg(feature = "verbs")]
        assert_eq!(find("verbs").map(|t| t.name), Ok("verbs"));
        let what = find("ib").unwrap_err();
        // Those built first, then those this build lacks.
        let mut known = vec!["loop", "eth"];
        match (cfg!(feature = "verbs"), cfg!(feature = "test-transport")) {
            (true, true) => known.extend(["verbs", "late"]),
            (false, true) => known.extend(["late", "verbs"]),
            (_, false) => known.push("verbs"),
        }
        let choose = format!("choose one of: {}", known.join(", "));
        let name = "ib".to_string();
        assert_eq!(what, SetupError::UnknownTransport { name, known });
        assert!(what.to_string().contains(&choose), "{what}");
    }

    /// One transport's option given to another's job, and faults asked of
    /// a reliable transport, are refused by kind, naming the flag or the
    /// transport.
    #[test]
    fn wrong_options_and_faults_are_refused_by_kind() {
        let mut o = Options::default();
        o.eth.iface = Some("lo".into());
        let e = o.open("loop", false).map(|_| ()).expect_err("refused");
        assert_eq!(
            e,
            SetupError::ForeignOption {
                flag: "--iface",
                transport: "eth"
            }
        );
        assert_eq!(e.to_string(), "--iface applies to --transport eth only");
        let (net, _) = Options::default().open("loop", false).expect("loop opens");
        let faults = Faults {
            loss_ppm: 1000,
            ..Faults::default()
        };
        let reliable = net.with_faults(faults).expect_err("refused");
        assert!(
            matches!(&reliable, SetupError::Reliable { transport: "loop", lossy } if lossy.contains(&"eth")),
            "{reliable:?}"
        );
        assert!(
            reliable.to_string().ends_with("use --transport eth"),
            "{reliable}"
        );
        // loop's ranks are threads of one process: a launched rank is told
        // every transport that runs one rank per process, and how.
        let e = Options::default()
            .open("loop", true)
            .map(|_| ())
            .expect_err("refused");
        let SetupError::Launched { transport, give } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(*transport, "loop");
        let eth_flags = crate::eth::ENTRY.launch_flags().expect("eth runs launched");
        assert!(
            eth_flags.starts_with("--transport eth --iface IF"),
            "{eth_flags}"
        );
        assert!(give.contains(&eth_flags), "{give:?}");
        assert_eq!(
            give.iter().any(|g| g == "--transport verbs"),
            cfg!(feature = "verbs"),
            "a transport this build lacks is not offered: {give:?}"
        );
        // eth under a launcher needs the interface each process opens.
        let eth = Options::default().open("eth", true).map(|_| ());
        assert_eq!(
            eth.err(),
            Some(SetupError::Launched {
                transport: "eth",
                give: vec![eth_flags]
            })
        );
        let e = Options::default().open("ib", false).err();
        assert!(
            matches!(e, Some(SetupError::UnknownTransport { .. })),
            "{e:?}"
        );
    }
}
