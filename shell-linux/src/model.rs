//! `rmx model memory`: what a fully connected job costs each process, from
//! rmx's own per-connection bytes, beside the MVAPICH figures of the
//! coalescing paper (Table 2 and Figure 1).

use serde_json::{json, Value};

use crate::loopnic::{LoopConfig, Port};
use rmx_core::{Config, Sizes};

use crate::rank::CoreEndpoint;

/// Bytes of one send work-queue entry: a 64-byte WQE basic block, the
/// smallest entry a verbs send queue has (mlx5); inline data or more gather
/// entries make it larger. `loop` keeps 24 bytes per outstanding send.
pub const WQE_BYTES: u64 = 64;

/// Table 2 of the paper: MVAPICH memory per additional connection (KB) by
/// send WQEs.
pub const PAPER_TABLE2: [(u16, f64); 6] = [
    (5, 8.82),
    (10, 12.82),
    (20, 20.81),
    (40, 36.86),
    (100, 68.73),
    (200, 132.76),
];

/// The paper's per-connection bytes at `wqes`, where Table 2 has them.
pub fn paper_per_connection(wqes: u16) -> Option<u64> {
    PAPER_TABLE2
        .iter()
        .find(|t| t.0 == wqes)
        .map(|t| (t.1 * 1024.0).round() as u64)
}

/// What one connection and one process cost, term by term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Costs {
    /// The core's state for one peer (`size_of` its per-peer struct and its
    /// entry in the queue of peers waiting for credit).
    pub peer_state: u64,
    /// `wqes` send-queue entries.
    pub send_entries: u64,
    /// The NIC's state for one connection (the `loop` port's per-peer part).
    pub nic_connection: u64,
    /// Per process, whatever the job size: the shared receive pool, where
    /// unexpected messages also stay (credits are lent from it, never
    /// reserved per peer).
    pub receive_pool: u64,
    /// Per process: the send bounce slots.
    pub send_slots: u64,
    /// Per process: the endpoint without its peer table (matching queues,
    /// requests, rendezvous transfers, held buffers).
    pub core_fixed: u64,
    /// Measured on a verbs device (`rmx model memory --transport verbs`):
    /// what its provider maps per connected queue pair at these send
    /// entries (the work queues with the entries, and the completion
    /// queue's share). Counted instead of `send_entries`.
    pub provider_qp: Option<u64>,
}

impl Costs {
    /// The costs of `wqes` entries per connection with the shell's
    /// endpoint and `nic`, eager messages of `eager` bytes.
    pub fn of(wqes: u16, eager: u32, nic: &LoopConfig) -> Costs {
        let slot = (rmx_core::wire::HEADER_LEN as u64 + eager as u64).div_ceil(64) * 64;
        let cfg = Config {
            rx_buffers: nic.srq_depth.min(u32::MAX as usize) as u32,
            ..crate::rank::loop_config()
        };
        // The peer table aside, the tables do not depend on the job's size.
        let sizes = Sizes::for_job(0, &cfg);
        Costs {
            peer_state: CoreEndpoint::PEER_BYTES as u64,
            send_entries: wqes as u64 * WQE_BYTES,
            nic_connection: Port::CONNECTION_BYTES as u64,
            receive_pool: (nic.srq_depth as u64).saturating_mul(slot),
            send_slots: sizes.slots as u64 * slot,
            core_fixed: CoreEndpoint::fixed_bytes(&sizes) as u64,
            provider_qp: None,
        }
    }

    /// These costs with a verbs provider's measured bytes per queue pair
    /// and the verbs port's own state per connection.
    pub fn on_device(self, provider_qp: u64, nic_connection: u64) -> Costs {
        Costs {
            provider_qp: Some(provider_qp),
            nic_connection,
            ..self
        }
    }

    pub fn per_connection(&self) -> u64 {
        self.peer_state
            .saturating_add(self.provider_qp.unwrap_or(self.send_entries))
            .saturating_add(self.nic_connection)
    }

    /// What a process pays whatever the job size.
    pub fn shared(&self) -> u64 {
        self.receive_pool
            .saturating_add(self.send_slots)
            .saturating_add(self.core_fixed)
    }

    /// A process of a fully connected job of `procs` processes.
    pub fn per_process(&self, procs: u64) -> u64 {
        self.shared().saturating_add(
            procs
                .saturating_sub(1)
                .saturating_mul(self.per_connection()),
        )
    }

    /// The largest term of a connection's cost.
    pub fn dominant(&self) -> &'static str {
        [
            (self.peer_state, "peer_state"),
            match self.provider_qp {
                Some(b) => (b, "provider_qp"),
                None => (self.send_entries, "send_entries"),
            },
            (self.nic_connection, "nic_connection"),
        ]
        .iter()
        .max_by_key(|t| t.0)
        .map_or("", |t| t.1)
    }
}

/// Job sizes 1, 2, 4, ... up to `max` (and `max` itself).
pub fn job_sizes(max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut n = 1u64;
    while n < max {
        v.push(n);
        match n.checked_mul(2) {
            Some(m) => n = m,
            None => break,
        }
    }
    v.push(max.max(1));
    v
}

/// One row per (job size, send entries); `device(w)`: the measured costs
/// of a verbs device's connection at `w` entries, (provider bytes per queue
/// pair, the port's own), where measured.
pub fn rows(
    procs: &[u64],
    wqes: &[u16],
    eager: u32,
    nic: &LoopConfig,
    device: &dyn Fn(u16) -> Option<(u64, u64)>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for &w in wqes {
        let mut c = Costs::of(w, eager, nic);
        if let Some((qp, port)) = device(w) {
            c = c.on_device(qp, port);
        }
        for &n in procs {
            let paper = paper_per_connection(w);
            out.push(json!({
                "procs": n,
                "wqes": w,
                "per_connection_bytes": c.per_connection(),
                "per_process_bytes": c.per_process(n),
                "peer_state_bytes": c.peer_state,
                "send_entry_bytes": c.send_entries,
                "provider_qp_bytes": c.provider_qp,
                "nic_connection_bytes": c.nic_connection,
                "shared_bytes": c.shared(),
                "receive_pool_bytes": c.receive_pool,
                "send_slot_bytes": c.send_slots,
                "core_fixed_bytes": c.core_fixed,
                "dominant": c.dominant(),
                "paper_per_connection_bytes": paper,
                "paper_per_process_bytes": paper.map(|p| p.saturating_mul(n.saturating_sub(1))),
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_up_and_scale_with_the_job() {
        let nic = LoopConfig::default();
        let c = Costs::of(5, 8192, &nic);
        assert_eq!(c.send_entries, 5 * WQE_BYTES);
        assert_eq!(
            c.per_connection(),
            c.peer_state + c.send_entries + c.nic_connection
        );
        assert_eq!(c.receive_pool, nic.srq_depth as u64 * 8256);
        assert_eq!(c.per_process(1), c.shared());
        assert_eq!(
            c.per_process(8192) - c.per_process(4096),
            4096 * c.per_connection()
        );
        assert_eq!(c.dominant(), "send_entries");
        let one = Costs::of(1, 64, &nic);
        assert_eq!(one.dominant(), "peer_state");
        // On a device, the provider's measured bytes stand in for the
        // entries' estimate, and the port's own state for loop's.
        let d = c.on_device(13_312, 40);
        assert_eq!(d.per_connection(), c.peer_state + 13_312 + 40);
        assert_eq!(d.dominant(), "provider_qp");
        assert_eq!(d.shared(), c.shared());
    }

    /// The scale target: at most 900 bytes per connection and 12 MB per
    /// process at 8192 processes, shared pools at their default size.
    #[test]
    fn the_default_configuration_meets_the_scale_target() {
        let cfg = crate::rank::loop_config();
        let c = Costs::of(cfg.send_wqes, cfg.eager_threshold, &LoopConfig::default());
        assert!(
            c.per_connection() <= 900,
            "{} per connection",
            c.per_connection()
        );
        assert!(
            c.per_process(8192) <= 12_000_000,
            "{} per process",
            c.per_process(8192)
        );
    }

    #[test]
    fn paper_figures_match_its_text() {
        // ~1 GB per process at 8K processes with 200 WQEs; < 90 MB with 5.
        let at = |w| paper_per_connection(w).unwrap() * 8191;
        assert!((1_000_000_000..1_200_000_000).contains(&at(200)));
        assert!(at(5) < 90_000_000);
        assert_eq!(paper_per_connection(7), None);
        assert_eq!(job_sizes(8192).len(), 14);
        assert_eq!(job_sizes(6), vec![1, 2, 4, 6]);
        // Doubling stops before it wraps (it looped until memory ran out).
        let all = job_sizes(u64::MAX);
        assert_eq!((all.len(), all[63], all[64]), (65, 1 << 63, u64::MAX));
        let c = Costs::of(200, u32::MAX, &LoopConfig::default());
        assert_eq!(c.per_process(u64::MAX), u64::MAX, "saturates, never wraps");
    }
}
