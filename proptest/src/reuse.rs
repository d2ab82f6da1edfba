//! Zero-copy reuse policies with small, test-friendly figures.

use rmx_core::reuse::{
    Adaptation, CostModel, CostPoint, FrequentBuffers, RegCache, Tracked, Tracker,
};

/// The reuse policy tests run: heap storage, 4 calibrated sizes, `R` registrations.
pub type Frequent<const R: usize> = FrequentBuffers<Vec<u32>, Vec<Tracked>, 4, R>;

/// Page size the tests register in.
pub const PAGE: u64 = 4096;

/// Figures under which every size from 16 B profits and a buffer is registered
/// on its `uses`-th send (speculation 100%: n_min itself).
pub fn model(uses: u32) -> CostModel<4> {
    // n_min = R / (C - V) + 1 with C - V = 6 at every point; below 16 B, V >= C.
    let r = (uses - 1) * 6;
    CostModel::new(
        &[
            CostPoint {
                size: 16,
                copy_ns: 12,
                reg_ns: r,
            },
            CostPoint {
                size: 256,
                copy_ns: 12,
                reg_ns: r,
            },
            CostPoint {
                size: 4096,
                copy_ns: 12,
                reg_ns: r,
            },
            CostPoint {
                size: 65536,
                copy_ns: 12,
                reg_ns: r,
            },
        ],
        6,
        1000,
    )
    .expect("valid figures")
}

/// A policy registering each buffer on its `uses`-th send, tracking up to
/// `entries` buffers in `buckets` buckets.
pub fn frequent<const R: usize>(
    uses: u32,
    buckets: usize,
    entries: usize,
    adapt: Adaptation,
) -> Frequent<R> {
    FrequentBuffers::new(
        Tracker::new(vec![0; buckets], vec![Tracked::default(); entries], adapt).expect("storage"),
        model(uses),
        RegCache::new(PAGE).expect("page size"),
    )
}

/// Adaptation that never stops the tracker (for tests about other things).
pub const NEVER_STOP: Adaptation = Adaptation {
    min_frequent_permille: 0,
    resume_after: 0,
};
