//! What a transport module gives the job runner: its network's settings
//! ([`Network`], one value per job) and, once a job starts, how each
//! rank's port is opened and joined to its peers ([`Wire`]). Addresses
//! are opaque bytes, swapped by one bootstrap for every transport
//! ([`Swap`]: threads of one process, or the launcher's key-value space).

use std::sync::{Barrier, Mutex};

use rmx_core::{Caps, Config};

use super::entry::Entry;
use super::{AnyPort, Faults, SetupError, Transport};
use crate::launch::Launch;

/// A transport's settings for a job, and what follows from them.
pub trait Network: Clone + std::fmt::Debug + Sized {
    /// The port each rank of a job on this network drives.
    type Port: Transport;

    /// The transport's command-line options; the registry flattens them
    /// into every benchmark's.
    type Options: clap::Args + Clone + std::fmt::Debug + Default;

    /// The transport's line in the registry.
    const ENTRY: Entry;

    /// The first of this transport's options given (its flag), so that a
    /// job on another transport refuses it.
    fn given(options: &Self::Options) -> Option<&'static str>;

    /// Whether the network `options` make lets more than two ranks run as
    /// threads of this process (`Err`: what to give instead). Asked before
    /// the network opens.
    fn threads_share(options: &Self::Options) -> Result<(), String> {
        let _ = options;
        Ok(())
    }

    /// The network `options` make, and the lab made for it if any (kept
    /// by the caller until the job is over). `launched`: a launcher
    /// started this process as one rank.
    fn open(
        options: &Self::Options,
        launched: bool,
    ) -> Result<(Self, Option<crate::lab::TempLab>), SetupError>;

    /// The settings, for a report's `config` block.
    fn json(&self) -> serde_json::Value;

    /// What the transport can do, as far as protocol choices go (limits
    /// such as an interface's MTU are known once a port opens).
    fn caps(&self) -> Caps {
        Self::ENTRY.caps
    }

    /// Receive buffers per rank: what a benchmark keeps in flight at most.
    fn rx_buffers(&self) -> usize;

    /// The launch this process is one rank of, if a launcher started it
    /// and the transport runs one rank per process.
    fn launch(&self) -> Option<&Launch> {
        None
    }

    /// The network with `faults` injected on receive. Asked only of a
    /// transport whose caps are `lossy` (over the others the core runs
    /// without its reliability layer: lost packets would be lost
    /// messages).
    fn with_faults(&self, faults: Faults) -> Result<Self, SetupError> {
        let _ = faults;
        Err(SetupError::Reliable {
            transport: Self::ENTRY.name,
            lossy: Vec::new(),
        })
    }

    /// What benchmarks measure beside rmx on this network (the legend is
    /// the entry's `floor`).
    fn floor(&self) -> Floor {
        Floor::None
    }

    /// The device a benchmark's anchor (perftest) runs on, if the
    /// network has one.
    fn device(&self) -> Option<Device> {
        None
    }

    /// A port that registers memory as this network's ports do, for
    /// `rmx calibrate`; `None`: the loop NIC's.
    fn registrar(&self) -> Option<Result<AnyPort, SetupError>> {
        None
    }

    /// What one connection costs on the device at `wqes` send entries,
    /// measured: (bytes its provider maps, bytes the port keeps), for
    /// `rmx model memory`; `None` where the entry is not a `device`.
    fn connection_bytes(&self, wqes: u16) -> Option<Result<(u64, u64), String>> {
        let _ = wqes;
        None
    }

    /// The network as one connection's send queue must be for `cfg`
    /// (a queue pair created with `send_wqes` entries).
    fn for_config(&self, cfg: &Config) -> Self {
        let _ = cfg;
        self.clone()
    }

    /// The network namespace rank `me`'s thread enters first, if any.
    fn netns(&self, me: u16) -> Option<&str> {
        let _ = me;
        None
    }

    /// Sets the network up for a job of `ranks` ranks.
    fn wire(&self, ranks: u16) -> Result<Box<dyn Wire>, SetupError>;
}

/// The floor a benchmark draws beside rmx's figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Floor {
    /// None of rmx's own (an anchor such as perftest may stand in).
    None,
    /// Memory between the threads of this process.
    Memory,
    /// Bare frames on interface `iface`, through the same socket kind.
    Frames { iface: String },
}

/// An RDMA device as perftest names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub port: u8,
    pub gid_index: Option<u8>,
}

/// One network of a running job, handing each rank's thread its port.
pub trait Wire: Send + Sync {
    /// Rank `me`'s port of network `k` of `nets` in the job. Every rank
    /// calls this at once (addresses are swapped here), even one whose
    /// thread could not be `placed` in its namespace, so none waits for
    /// ever.
    fn port(
        &self,
        me: u16,
        k: usize,
        nets: usize,
        placed: &Result<(), SetupError>,
    ) -> Result<AnyPort, SetupError>;
}

/// How a job's ranks swap their ports' addresses, whatever the transport:
/// opaque bytes, through shared memory for threads of one process or the
/// launcher's key-value space (as hex) for processes.
pub enum Swap {
    Threads {
        addrs: Mutex<Vec<Option<Vec<u8>>>>,
        met: Barrier,
    },
    Launched(Launch),
}

impl Swap {
    pub fn new(n: u16, launch: Option<&Launch>) -> Swap {
        match launch {
            Some(l) => Swap::Launched(l.clone()),
            None => Swap::Threads {
                addrs: Mutex::new(vec![None; n as usize]),
                met: Barrier::new(n as usize),
            },
        }
    }

    /// Every rank's address of network `k`, rank `me`'s being `mine`
    /// (`None`: its port did not open). Every rank of the job calls this
    /// at once, even one whose port failed, so that none waits for ever.
    pub fn swap(
        &self,
        me: u16,
        k: usize,
        mine: Option<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, SetupError> {
        let all: Vec<Option<Vec<u8>>> = match self {
            Swap::Threads { addrs, met } => {
                lock(addrs)[me as usize] = mine;
                met.wait();
                let all = lock(addrs).clone();
                // Everyone has read before anyone writes the next swap's.
                met.wait();
                all
            }
            Swap::Launched(l) => {
                let hexed = mine.as_deref().map_or_else(|| "none".into(), hex);
                let key = format!("rmx-net{k}");
                let told = l.exchange(&key, &hexed)?;
                let mut all = Vec::with_capacity(told.len());
                for (r, v) in told.iter().enumerate() {
                    all.push(match (v.as_str(), unhex(v)) {
                        ("none", _) => None,
                        (_, Some(a)) => Some(a),
                        (_, None) => {
                            return Err(SetupError::BadAddress {
                                rank: me,
                                peer: r as u16,
                                key,
                                value: v.clone(),
                            })
                        }
                    });
                }
                all
            }
        };
        all.into_iter()
            .enumerate()
            .map(|(r, a)| {
                a.ok_or(SetupError::PeerPort {
                    rank: me,
                    peer: r as u16,
                })
            })
            .collect()
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes from their hex form, if it is one.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads swap opaque addresses; a rank whose port did not open is
    /// named to every rank, and none waits for it.
    #[test]
    fn ranks_swap_addresses_and_a_missing_one_is_named_to_all() {
        let swap = Swap::new(3, None);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3u16)
                .map(|me| {
                    let swap = &swap;
                    s.spawn(move || swap.swap(me, 0, Some(vec![me as u8; me as usize + 1])))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for o in out {
            assert_eq!(o.unwrap(), [vec![0], vec![1, 1], vec![2, 2, 2]]);
        }
        let swap = Swap::new(2, None);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u16)
                .map(|me| {
                    let swap = &swap;
                    s.spawn(move || swap.swap(me, 0, (me == 0).then(|| vec![7])))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, o) in out.into_iter().enumerate() {
            let e = o.unwrap_err();
            assert_eq!(
                e,
                SetupError::PeerPort {
                    rank: me as u16,
                    peer: 1
                }
            );
            assert_eq!(
                e.to_string(),
                format!("rank {me}: rank 1 could not open its port")
            );
        }
    }

    /// Successive swaps (a transport's second round, a job's next network)
    /// each give every rank that round's addresses: none reads a faster
    /// rank's next one.
    #[test]
    fn successive_swaps_never_mix_their_rounds() {
        let swap = Swap::new(4, None);
        // Counted, not asserted, inside: a panicking rank would leave the
        // others at the barrier for ever.
        let mixed: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u16)
                .map(|me| {
                    let swap = &swap;
                    s.spawn(move || {
                        (0..200u8)
                            .filter(|&round| {
                                let all = swap.swap(me, 0, Some(vec![round, me as u8])).unwrap();
                                all != (0..4u8).map(|r| vec![round, r]).collect::<Vec<_>>()
                            })
                            .count()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(mixed, 0, "swaps that read another round's address");
    }

    #[test]
    fn bytes_travel_as_hex_and_anything_else_is_no_address() {
        assert_eq!(hex(&[0, 0xAB, 0x7F]), "00ab7f");
        assert_eq!(unhex("00ab7f"), Some(vec![0, 0xAB, 0x7F]));
        assert_eq!(unhex(""), Some(vec![]));
        for bad in ["none", "abc", "zz", "é1"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
