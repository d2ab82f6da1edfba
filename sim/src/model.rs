//! What the network and the ranks' CPUs cost, and what goes wrong on the
//! wire. Integer picoseconds per byte, so a run is exact and replays.

/// The LogGP costs of a network, in nanoseconds (picoseconds per byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// Wire latency `L` of a packet or an RDMA operation.
    pub latency_ns: u64,
    /// CPU time `o` to post one packet or RDMA operation, or to take one
    /// received packet.
    pub overhead_ns: u64,
    /// Time per byte `G` on the sender's link.
    pub byte_ps: u64,
    /// CPU time per byte of a reduction.
    pub reduce_byte_ps: u64,
    /// CPU time to take one RDMA-write-with-immediate notification.
    pub immediate_ns: u64,
}

impl Model {
    /// An InfiniBand DDR cluster of the fence paper's era: 1.5 µs latency,
    /// 0.3 µs per message, 1.5 GB/s.
    pub const IB_DDR: Model = Model {
        latency_ns: 1_500,
        overhead_ns: 300,
        byte_ps: 670,
        reduce_byte_ps: 500,
        immediate_ns: 100,
    };

    /// Link time of `bytes` bytes.
    pub fn wire_ns(&self, bytes: usize) -> u64 {
        (bytes as u64).saturating_mul(self.byte_ps) / 1000
    }

    /// CPU time of reducing `bytes` bytes.
    pub fn reduce_ns(&self, bytes: usize) -> u64 {
        (bytes as u64).saturating_mul(self.reduce_byte_ps) / 1000
    }
}

/// Faults of the virtual network (the simulator's; a port's own are
/// [`rmx_driver::faulty::Faults`]), in parts per million per packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetFaults {
    pub loss_ppm: u32,
    pub dup_ppm: u32,
    /// A packet is held back by up to `reorder_ns` extra.
    pub reorder_ppm: u32,
    pub reorder_ns: u64,
    /// Every packet and RDMA operation takes up to this much extra on the
    /// wire. On a reliable wire each channel (origin to target) stays in
    /// order and channels are independent, so one channel overtakes another.
    pub jitter_ns: u64,
    /// An RDMA write completes at its origin when it leaves, and lands up
    /// to this much later (a network that acknowledges early): the hazard
    /// of the fence paper's Fig. 2. Zero: it completes once it landed.
    pub land_late_ns: u64,
}

impl NetFaults {
    /// A perfect network.
    pub const NONE: NetFaults = NetFaults {
        loss_ppm: 0,
        dup_ppm: 0,
        reorder_ppm: 0,
        reorder_ns: 0,
        jitter_ns: 0,
        land_late_ns: 0,
    };

    /// A hostile lossy wire: 5% loss, 2% duplication, 10% reordering.
    pub const LOSSY: NetFaults = NetFaults {
        loss_ppm: 50_000,
        dup_ppm: 20_000,
        reorder_ppm: 100_000,
        reorder_ns: 30_000,
        jitter_ns: 3_000,
        land_late_ns: 0,
    };

    /// Whether packets can be lost, duplicated or reordered: then only a
    /// reliability layer (and no RDMA) can carry the job.
    pub fn lossy(&self) -> bool {
        self.loss_ppm > 0 || self.dup_ppm > 0 || self.reorder_ppm > 0
    }
}
