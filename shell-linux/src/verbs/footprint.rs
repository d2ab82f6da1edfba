//! What a connection costs the process on a real device: the provider maps
//! each queue pair's work queues into the process (rxe: about 1.1 KiB per
//! send entry, room for its inline data and gather list, the depth rounded
//! up to a power of two), and the completion queue grows with it. No model
//! knows a provider's sizes, so they are measured: two ports on the device,
//! one with a single queue pair and one with `qps` more, all connected.

use super::{Select, Sizes, VerbsPort};

/// Bytes per connected queue pair at one send depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QpBytes {
    /// Send work-queue entries per queue pair.
    pub depth: u32,
    /// Address space the provider mapped (the work queues, allocated
    /// whole whether used or not).
    pub mapped: u64,
    /// Of it, resident after connecting: pages touched so far. Noisy
    /// (allocator reuse): two runs differ by a few KiB.
    pub resident: u64,
}

/// A `/proc/self/status` field in bytes.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Measures [`QpBytes`] at send depth `depth` with `qps` queue pairs on
/// the device `sel` names, each connected (ready to send) to one peer
/// queue pair.
pub fn measure(sel: &Select, depth: u32, qps: u16) -> Result<QpBytes, String> {
    if qps == 0 || qps == u16::MAX {
        return Err(format!("{qps} queue pairs: measure 1 to {}", u16::MAX - 1));
    }
    let sizes = Sizes {
        sq_depth: depth.max(1),
        ..Sizes::default()
    };
    let mut peer = VerbsPort::open(sel, sizes, 0, 1)?;
    peer.connect(&[peer.address().encode()])?;
    let (qpn, psn) = peer.queue_pair(0)?;
    let to = peer.address().encode();
    let sample = |ranks: u16| -> Result<[u64; 2], String> {
        let mut p = VerbsPort::open(sel, sizes, 0, ranks)?;
        p.connect(&vec![to.clone(); ranks as usize])?;
        for r in 1..ranks {
            p.join(r, qpn, psn)?;
        }
        Ok([status_bytes("VmSize"), status_bytes("VmRSS")])
    };
    let one = sample(1)?;
    let many = sample(qps + 1)?;
    let per = |i: usize| many[i].saturating_sub(one[i]) / qps as u64;
    Ok(QpBytes {
        depth: sizes.sq_depth,
        mapped: per(0),
        resident: per(1),
    })
}
