//! Per-endpoint configuration, chosen by the shell for its transport.

use crate::nic::Caps;
use crate::wire::rendezvous::Protocol;

/// The default largest medium message, as Open-MX's: 32 KiB.
pub const MEDIUM_MAX: u32 = 32 * 1024;

/// When eager messages to a connection are packed into one send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coalesce {
    /// Never: each message is its own send, queued while the send queue is full.
    Off,
    /// Once every send work-queue entry of the connection is in use (the
    /// paper's design): messages that would wait are packed instead.
    WhenFull,
    /// Once this many sends are outstanding on the connection, even if entries
    /// are free (MVAPICH2's coalescing threshold); larger messages may still
    /// use every entry.
    Outstanding(u16),
}

/// Tunables of one endpoint. Times are integer nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Largest payload of one eager packet (a receive buffer holds a
    /// header and this many bytes). Larger messages up to `medium_max` go
    /// eagerly as fragments; larger still, by rendezvous.
    pub eager_threshold: u32,
    /// Largest message sent eagerly as fragments of one packet each
    /// ([`crate::wire::medium`], Open-MX's medium messages): on a transport
    /// without RDMA a rendezvous buys no zero copy, only a round trip.
    /// `None` picks [`MEDIUM_MAX`] where the transport has no RDMA and 0
    /// (off) where it has ([`Config::fit`] decides; an endpoint given no
    /// fitted value assumes RDMA on reliable transports only). Every rank
    /// of a job must use the same value: a receiver refuses larger
    /// fragmented messages.
    pub medium_max: Option<u32>,
    /// The most messages one peer may have unconsumed at another (its
    /// window). Each peer starts with a share of the receive pool no larger
    /// than this; a peer that runs out asks for more, lent from what the
    /// shares left free (see [`crate::endpoint`]'s flow control).
    pub credits: u16,
    /// Return credits explicitly once this many are owed and no traffic carried them.
    pub credit_return: u16,
    /// The transport delivers every packet once and in order (loop, verbs RC):
    /// sequence checks, acknowledgements and retransmission are bypassed.
    pub reliable: bool,
    /// Largest payload sent inline (header and payload copied straight from the
    /// user buffer by the NIC's post, no bounce slot). Reliable transports only;
    /// 0 disables it.
    pub inline_max: u32,
    /// First retransmission timeout; doubles on each expiry up to `rto_max_ns`.
    pub rto_ns: u64,
    /// Ceiling of the back-off, so a long outage is probed at a bounded rate.
    pub rto_max_ns: u64,
    /// How long an acknowledgement may wait for a packet to ride on.
    pub ack_delay_ns: u64,
    /// Lossy transports: a peer that something here waits on (an
    /// unacknowledged packet, a receive naming it or any source, a
    /// transfer, sends queued for its credit) and from which nothing at all
    /// has arrived for this long is given up as failed. Retransmissions and
    /// pings go on, backing off, until then. Failure is a time without any
    /// answer, not a count of timeouts, so a busy host or a lossy link does
    /// not make a live peer look dead: several seconds, as RC's timeout ×
    /// retry count or UCX's keepalive. 0: never. Reliable transports report
    /// a broken connection themselves; there this caps the gap between
    /// pings (see `keepalive_ns`).
    pub peer_timeout_ns: u64,
    /// A peer that something here waits on and that has sent nothing for
    /// this long is pinged. Lossy transports: its answer shows it alive,
    /// and it is pinged again, backing off like retransmissions, until it
    /// answers or `peer_timeout_ns` passes. Reliable transports: the NIC's
    /// acknowledgement is the answer and a dead peer's connection fails the
    /// ping; the gap doubles up to `peer_timeout_ns`. 0: never ping.
    pub keepalive_ns: u64,
    /// Sends that may be outstanding on one connection (its send work-queue
    /// entries; a send is outstanding from its post until its completion).
    /// The transport's send queue must have at least this many entries.
    pub send_wqes: u16,
    /// An inline send asks the NIC for its own completion once in this
    /// many to a peer (perftest's and UCX's completion moderation); those
    /// between complete with it. Whatever the value, at least one in half
    /// the entries a send may wait for is signalled. 1: every send.
    pub cq_moderation: u16,
    /// When to pack queued eager messages into one send. Default
    /// [`Coalesce::WhenFull`] with 10 send entries: on `loop` it streams small
    /// messages at least as fast as a threshold trigger with 64 entries
    /// (`rmx bench msgrate --wqes 64 --coalesce-after 8` against `--wqes 8`),
    /// with a sixth of the entries.
    pub coalesce: Coalesce,
    /// Inside a packed send, a message whose context, tag and size equal the
    /// previous one's carries a one-byte marker instead of its header.
    pub header_cache: bool,
    /// The rendezvous for messages above `eager_threshold`; `None` picks by
    /// what the transport can do: RGET (the sender is free once its RTS left),
    /// else RPUT, else PULL. A receiver that cannot register its buffer
    /// answers any of them by pulling. Lossy transports use PULL only.
    pub rendezvous: Option<Protocol>,
    /// PULL: frames (of `eager_threshold` bytes) one request asks for.
    pub pull_frames: u16,
    /// PULL: requests outstanding per transfer; `pull_frames × pull_requests`
    /// frames may be in flight, at most 64.
    pub pull_requests: u16,
    /// Buffers in the shared receive pool (the shell posts this many to its
    /// shared receive queue, each `HEADER_LEN + eager_threshold` bytes). Every
    /// rank of a job must use the same value: it sets the initial credits.
    pub rx_buffers: u32,
    /// Buffers of the pool never lent as credits: room for packets that are
    /// matched or handled at once (control packets, rendezvous frames) while
    /// unexpected messages hold the rest.
    pub rx_reserve: u32,
    /// When unexpected messages leave this few free buffers, the endpoint
    /// tells the shell ([`crate::nic::Nic::rx_pool_low`]), once per crossing.
    pub rx_low_water: u32,
}

impl Config {
    /// Settings for a reliable, in-order transport such as `loop` or verbs RC.
    pub const fn reliable(eager_threshold: u32, credits: u16) -> Config {
        Config {
            eager_threshold,
            medium_max: None,
            credits,
            credit_return: if credits / 2 > 0 { credits / 2 } else { 1 },
            reliable: true,
            inline_max: 0,
            rto_ns: 200_000,
            rto_max_ns: 50_000_000,
            ack_delay_ns: 20_000,
            peer_timeout_ns: 5_000_000_000,
            keepalive_ns: 100_000_000,
            send_wqes: 10,
            cq_moderation: 64,
            coalesce: Coalesce::WhenFull,
            header_cache: true,
            rendezvous: None,
            pull_frames: 8,
            pull_requests: 4,
            rx_buffers: 256,
            rx_reserve: 32,
            rx_low_water: 64,
        }
    }

    /// Settings for a lossy transport (raw Ethernet, the simulator).
    pub const fn unreliable(eager_threshold: u32, credits: u16) -> Config {
        let mut c = Config::reliable(eager_threshold, credits);
        c.reliable = false;
        c.inline_max = 0;
        c
    }
}

impl Config {
    /// Checks the settings that do not depend on the job's tables: every
    /// endpoint checks its configuration here before it takes any.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.credits == 0 {
            return Err(ConfigError::Credits);
        }
        if self.rx_buffers <= self.rx_reserve
            || self.rx_low_water < self.rx_reserve
            || self.rx_low_water >= self.rx_buffers
        {
            return Err(ConfigError::RxPool);
        }
        let max = (u16::MAX as usize - crate::wire::HEADER_LEN) as u32;
        let min = crate::wire::rendezvous::MAX_BODY as u32;
        if self.eager_threshold > max || self.eager_threshold < min {
            return Err(ConfigError::EagerThreshold { min, max });
        }
        if !self.reliable && matches!(self.rendezvous, Some(Protocol::Rput | Protocol::Rget)) {
            return Err(ConfigError::RendezvousNeedsReliable);
        }
        let threshold_ok = match self.coalesce {
            Coalesce::Outstanding(n) => n >= 1 && n <= self.send_wqes,
            _ => true,
        };
        if self.send_wqes == 0 || !threshold_ok {
            return Err(ConfigError::SendWqes);
        }
        if self.cq_moderation == 0 {
            return Err(ConfigError::CqModeration);
        }
        let window = self.pull_frames as u32 * self.pull_requests as u32;
        if self.pull_frames == 0 || self.pull_requests == 0 || window > 64 {
            return Err(ConfigError::PullWindow);
        }
        Ok(())
    }
}

impl Config {
    /// This configuration within what the transport allows: inline sends no
    /// larger than its inline limit less the header, no more outstanding
    /// sends than its send queue has entries (a coalescing threshold with
    /// them), the receive pool its shared receive queue, eager messages that
    /// fit its largest packet, and on a lossy transport the reliability
    /// layer on and PULL as the rendezvous, and medium messages only where
    /// there is no RDMA. Each rank of a job fits the same settings to
    /// the same transport, so they agree on the pool (the initial credits).
    pub fn fit(mut self, caps: &Caps) -> Config {
        let header = crate::wire::HEADER_LEN as u32;
        if caps.lossy {
            // Nothing the transport loses comes back unless the core resends
            // it: sequences and acks on, no inline sends, and the one
            // rendezvous that recovers from loss.
            self.reliable = false;
            self.inline_max = 0;
            if !matches!(self.rendezvous, None | Some(Protocol::Pull)) {
                self.rendezvous = None;
            }
        }
        self.inline_max = self.inline_max.min(caps.inline_max.saturating_sub(header));
        if caps.send_queue > 0 {
            self.send_wqes = self
                .send_wqes
                .min(caps.send_queue.min(u16::MAX as u32) as u16);
        }
        if let Coalesce::Outstanding(n) = self.coalesce {
            self.coalesce = Coalesce::Outstanding(n.min(self.send_wqes));
        }
        if caps.rx_buffers > 0 {
            self.rx_buffers = caps.rx_buffers;
            // A pool smaller than the defaults assume keeps a quarter in
            // reserve and tells the shell at half of the rest.
            let pool = self.rx_buffers;
            if self.rx_reserve >= pool {
                self.rx_reserve = pool / 4;
            }
            if self.rx_low_water < self.rx_reserve || self.rx_low_water >= pool {
                self.rx_low_water = self.rx_reserve + (pool - self.rx_reserve) / 2;
            }
        }
        if caps.mtu > header {
            self.eager_threshold = self.eager_threshold.min(caps.mtu - header);
        }
        if self.medium_max.is_none() {
            let rdma = caps.rdma_read || caps.rdma_write;
            self.medium_max = Some(if rdma { 0 } else { MEDIUM_MAX });
        }
        self
    }

    /// The largest medium message: `medium_max`, or what `None` picks
    /// without knowing the transport.
    pub fn medium(&self) -> u32 {
        match self.medium_max {
            Some(m) => m,
            None if self.reliable => 0,
            None => MEDIUM_MAX,
        }
    }

    /// The largest message sent without a rendezvous: in one packet, or
    /// as fragments.
    pub fn eager_max(&self) -> u32 {
        self.eager_threshold.max(self.medium())
    }

    /// Bytes of a message each fragment of a medium message carries.
    pub(crate) fn fragment(&self) -> u32 {
        self.eager_threshold - crate::wire::medium::FRAG_HEAD as u32
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::reliable(8192, 64)
    }
}

/// A configuration the endpoint's capacities cannot honour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// More ranks than the peer table has entries.
    TooManyPeers { max: usize },
    /// This rank is not one of the peers.
    RankOutOfRange,
    /// `credits` is zero: a peer must be able to ask for at least one.
    Credits,
    /// The receive pool must hold more than `rx_reserve` buffers, and the
    /// low watermark must lie at or above the reserve and below the pool.
    RxPool,
    /// The eager threshold must lie in `min..=max`: a packet (header +
    /// eager payload) fits in 65535 bytes, and a send slot (header +
    /// threshold) holds the largest rendezvous control body.
    EagerThreshold { min: u32, max: u32 },
    /// RPUT and RGET were configured on a lossy transport (`reliable:
    /// false`), where a lost CTS or FIN is never sent again: leave
    /// `rendezvous` at `None` (PULL) or `Some(Protocol::Pull)`.
    RendezvousNeedsReliable,
    /// A table's length lies outside `min..=max`: tables are indexed by
    /// `u16`; at least two send bounce slots (one for data and one always
    /// kept for acknowledgements, so that they can never deadlock); at
    /// least one unexpected message and one held buffer, or no credit could
    /// ever be lent.
    TableSize {
        table: TableName,
        min: usize,
        max: usize,
    },
    /// `send_wqes` must be at least 1, and a coalescing threshold at least 1
    /// and at most `send_wqes`.
    SendWqes,
    /// `cq_moderation` must be at least 1 (every send signalled).
    CqModeration,
    /// `pull_frames` and `pull_requests` must be at least 1, and their
    /// product at most 64 (the receiver's frame bitmap).
    PullWindow,
}

/// One of the endpoint's tables (in errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableName {
    Peers,
    Posted,
    Unexpected,
    Holds,
    Slots,
    Requests,
    /// The work table: at least as long as the request table.
    Work,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_out_of_range_is_named() {
        let ok = Config::default();
        assert_eq!(ok.validate(), Ok(()));
        let bad = [
            (Config { credits: 0, ..ok }, ConfigError::Credits),
            (
                Config {
                    rx_reserve: ok.rx_buffers,
                    ..ok
                },
                ConfigError::RxPool,
            ),
            (Config { send_wqes: 0, ..ok }, ConfigError::SendWqes),
            (
                Config {
                    cq_moderation: 0,
                    ..ok
                },
                ConfigError::CqModeration,
            ),
            (
                Config {
                    coalesce: Coalesce::Outstanding(ok.send_wqes + 1),
                    ..ok
                },
                ConfigError::SendWqes,
            ),
            (
                Config {
                    pull_frames: 0,
                    ..ok
                },
                ConfigError::PullWindow,
            ),
            (
                Config {
                    pull_frames: 16,
                    pull_requests: 5,
                    ..ok
                },
                ConfigError::PullWindow,
            ),
            (
                Config {
                    rendezvous: Some(Protocol::Rget),
                    ..Config::unreliable(8192, 64)
                },
                ConfigError::RendezvousNeedsReliable,
            ),
        ];
        for (cfg, e) in bad {
            assert_eq!(cfg.validate(), Err(e));
        }
        for t in [0, 23, 65_535] {
            let cfg = Config {
                eager_threshold: t,
                ..ok
            };
            assert!(
                matches!(cfg.validate(), Err(ConfigError::EagerThreshold { .. })),
                "{t}"
            );
        }
    }

    #[test]
    fn a_configuration_fits_the_transport_limits() {
        let caps = Caps {
            inline_max: 64,
            send_queue: 4,
            rx_buffers: 512,
            mtu: 4096 + 28,
            ..Caps::default()
        };
        let cfg = Config {
            inline_max: u32::MAX,
            coalesce: Coalesce::Outstanding(8),
            ..Config::reliable(8192, 64)
        }
        .fit(&caps);
        assert_eq!(cfg.inline_max, 64 - 28);
        assert_eq!(cfg.send_wqes, 4);
        assert_eq!(cfg.coalesce, Coalesce::Outstanding(4));
        assert_eq!(cfg.rx_buffers, 512);
        assert_eq!(cfg.eager_threshold, 4096);
        // No limits stated: nothing changes but inline sends, which need one.
        let open = Config::reliable(8192, 64).fit(&Caps::default());
        assert_eq!(
            open,
            Config {
                medium_max: Some(MEDIUM_MAX),
                ..Config::reliable(8192, 64)
            }
        );
        assert_eq!(open.eager_max(), 32 * 1024, "medium messages without RDMA");
        let rdma = Caps {
            rdma_read: true,
            ..Caps::default()
        };
        let cfg = Config::reliable(8192, 64).fit(&rdma);
        assert_eq!(
            cfg.medium_max,
            Some(0),
            "RDMA: a rendezvous above one packet"
        );
        assert_eq!(cfg.eager_max(), 8192);
        let own = Config {
            medium_max: Some(4096),
            ..Config::reliable(8192, 64)
        };
        assert_eq!(own.fit(&rdma).medium_max, Some(4096), "a choice is kept");
        assert_eq!(Config::reliable(8192, 64).medium(), 0);
        assert_eq!(Config::unreliable(8192, 64).medium(), MEDIUM_MAX);
    }

    #[test]
    fn a_small_receive_pool_gets_a_reserve_and_low_water_it_can_hold() {
        for pool in [1, 2, 5, 32, 64, 65] {
            let caps = Caps {
                rx_buffers: pool,
                ..Caps::default()
            };
            let cfg = Config::reliable(8192, 64).fit(&caps);
            assert_eq!(cfg.validate(), Ok(()), "a pool of {pool}");
            assert!(cfg.rx_reserve < pool && cfg.rx_low_water < pool);
        }
        // A pool the defaults fit keeps them.
        let caps = Caps {
            rx_buffers: 256,
            ..Caps::default()
        };
        let cfg = Config::reliable(8192, 64).fit(&caps);
        assert_eq!((cfg.rx_reserve, cfg.rx_low_water), (32, 64));
    }

    #[test]
    fn a_lossy_transport_turns_reliability_on_and_rendezvous_to_pull() {
        let caps = Caps {
            lossy: true,
            inline_max: 256,
            ..Caps::default()
        };
        for r in [
            None,
            Some(Protocol::Rget),
            Some(Protocol::Rput),
            Some(Protocol::Pull),
        ] {
            let cfg = Config {
                inline_max: u32::MAX,
                rendezvous: r,
                ..Config::reliable(8192, 64)
            }
            .fit(&caps);
            assert!(!cfg.reliable);
            assert_eq!(cfg.inline_max, 0);
            let want = if r == Some(Protocol::Pull) { r } else { None };
            assert_eq!(cfg.rendezvous, want);
        }
    }
}
