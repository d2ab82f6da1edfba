//! A histogram of durations with 16 buckets per power of two (about 6%
//! resolution), for latency percentiles without keeping every sample.

/// Counts of nanosecond durations by log-linear bucket.
pub struct Hist {
    buckets: Vec<u64>,
    n: u64,
}

const SUB: u32 = 16;

fn bucket(ns: u64) -> usize {
    let ns = ns.max(1);
    let log = 63 - ns.leading_zeros();
    if log < 4 {
        return ns as usize;
    }
    (log * SUB + ((ns >> (log - 4)) & (SUB as u64 - 1)) as u32) as usize
}

/// The smallest duration bucket `b` holds.
fn low(b: usize) -> u64 {
    let b = b as u32;
    if b < 4 * SUB {
        return b as u64;
    }
    let (log, sub) = (b / SUB, b % SUB);
    (1u64 << log) | ((sub as u64) << (log - 4))
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: vec![0; 64 * SUB as usize],
            n: 0,
        }
    }
}

impl Hist {
    pub fn record(&mut self, ns: u64) {
        self.buckets[bucket(ns)] += 1;
        self.n += 1;
    }

    /// The duration below which a fraction `p` (0–1) of the samples fall
    /// (the bucket's lower edge); `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let want = ((self.n as f64 * p).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(low(b));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_fall_within_a_bucket_of_the_truth() {
        let mut h = Hist::default();
        assert_eq!(h.percentile(0.5), None);
        for ns in 1..=10_000u64 {
            h.record(ns * 100);
        }
        let p50 = h.percentile(0.5).unwrap() as f64;
        let p99 = h.percentile(0.99).unwrap() as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.07, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.07, "{p99}");
        for ns in [0, 1, 15, 16, 17, 1 << 40, u64::MAX] {
            let b = bucket(ns);
            assert!(low(b) <= ns.max(1), "{ns}");
        }
    }
}
