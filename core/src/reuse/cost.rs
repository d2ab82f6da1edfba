//! The cost model: when does registering a send buffer beat copying it?
//!
//! Sending a buffer `n` times costs `n·(2C + T)` by copy and `n·(C + T + V) + R`
//! from registered memory (C: one copy, T: the wire, V: the lookups, R: one
//! registration and deregistration). Registration pays off once
//! `n > R / (C − V)` — and never where `V ≥ C`. All figures are integer
//! nanoseconds from the shell's calibration, interpolated between sizes.

use heapless::Vec;

/// Calibrated costs of one message size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CostPoint {
    pub size: u32,
    /// One memcpy of `size` bytes (C).
    pub copy_ns: u32,
    /// Registering and deregistering the pages `size` bytes span (R).
    pub reg_ns: u32,
}

/// Figures the model cannot use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostError {
    /// No points at all.
    Empty,
    /// More points than the model's capacity `max`.
    TooMany { max: usize },
    /// Sizes must be strictly increasing and non-zero.
    Unsorted,
}

/// Minimum profitable reuse per message size, with speculative registration.
#[derive(Clone, Debug)]
pub struct CostModel<const N: usize> {
    points: Vec<CostPoint, N>,
    lookup_ns: u32,
    speculate_permille: u32,
    /// Smallest size whose copy costs more than the lookup (`u32::MAX`: none).
    min_size: u32,
}

impl<const N: usize> CostModel<N> {
    /// A model from calibrated `points`, the lookup overhead V (`lookup_ns`),
    /// and the fraction of `n_min` at which a buffer is registered speculatively
    /// (per mille; the paper registers at 25% = 250).
    pub fn new(
        points: &[CostPoint],
        lookup_ns: u32,
        speculate_permille: u32,
    ) -> Result<Self, CostError> {
        if points.is_empty() {
            return Err(CostError::Empty);
        }
        let points = Vec::from_slice(points).map_err(|_| CostError::TooMany { max: N })?;
        if points[0].size == 0 || points.windows(2).any(|w| w[0].size >= w[1].size) {
            return Err(CostError::Unsorted);
        }
        let mut m = CostModel {
            points,
            lookup_ns,
            speculate_permille,
            min_size: u32::MAX,
        };
        // Copy cost grows with size, so the profitable sizes are those from
        // the first one where C > V: find it by bisection.
        let (mut lo, mut hi) = (1u32, u32::MAX);
        if m.min_reuse(hi).is_some() {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if m.min_reuse(mid).is_some() {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            m.min_size = lo;
        }
        Ok(m)
    }

    /// The lookup overhead V.
    pub fn lookup_ns(&self) -> u32 {
        self.lookup_ns
    }

    /// The calibrated points, smallest size first.
    pub fn points(&self) -> &[CostPoint] {
        &self.points
    }

    /// (C, R) at `size`: linear between calibrated sizes; below the first
    /// point the copy scales with the size and registration stays at its
    /// one-page cost; above the last the copy scales and R stays.
    pub fn costs(&self, size: u32) -> (u32, u32) {
        let p = &self.points;
        let i = p.partition_point(|c| c.size < size);
        if i < p.len() && p[i].size == size {
            return (p[i].copy_ns, p[i].reg_ns);
        }
        // Calibration figures are trusted no further than their types: every
        // step saturates rather than wrapping.
        let scale = |c: &CostPoint| {
            (c.copy_ns as u64 * size as u64 / c.size as u64).min(u32::MAX as u64) as u32
        };
        if i == 0 {
            return (scale(&p[0]), p[0].reg_ns);
        }
        if i == p.len() {
            let last = &p[p.len() - 1];
            return (scale(last).max(last.copy_ns), last.reg_ns);
        }
        let (a, b) = (&p[i - 1], &p[i]);
        let lerp = |x: u32, y: u32| {
            let span = (b.size - a.size) as i128;
            let t = (size - a.size) as i128;
            // Between x and y, so it fits a u32.
            (x as i128 + (y as i128 - x as i128) * t / span) as u32
        };
        (lerp(a.copy_ns, b.copy_ns), lerp(a.reg_ns, b.reg_ns))
    }

    /// The paper's inequality 3: the least `n` with `n > R / (C − V)`;
    /// `None` where `V ≥ C` (no reuse count can pay for registration).
    pub fn min_reuse(&self, size: u32) -> Option<u32> {
        let (c, r) = self.costs(size);
        if c <= self.lookup_ns {
            return None;
        }
        Some((r / (c - self.lookup_ns)).saturating_add(1))
    }

    /// Uses after which a buffer of `size` bytes is registered: the
    /// speculative fraction of `min_reuse`, at least 1.
    pub fn threshold(&self, size: u32) -> Option<u32> {
        let n = self.min_reuse(size)? as u64;
        Some((n * self.speculate_permille as u64 / 1000).clamp(1, u32::MAX as u64) as u32)
    }

    /// The smallest message that can profit (copy costs more than the
    /// lookups); `u32::MAX` if none can. Copy cost is taken as non-decreasing
    /// in size, as a memcpy's is.
    pub fn min_size(&self) -> u32 {
        self.min_size
    }

    /// A quick filter before any lookup: can a message of `len` bytes profit at all?
    #[inline]
    pub fn may_profit(&self, len: u32) -> bool {
        len >= self.min_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of the paper's platform: Table 2's n for 4 KiB is 59.
    fn paper() -> CostModel<4> {
        CostModel::new(
            &[
                CostPoint {
                    size: 64,
                    copy_ns: 20,
                    reg_ns: 20_000,
                },
                CostPoint {
                    size: 1024,
                    copy_ns: 130,
                    reg_ns: 21_000,
                },
                CostPoint {
                    size: 4096,
                    copy_ns: 400,
                    reg_ns: 23_000,
                },
                CostPoint {
                    size: 8192,
                    copy_ns: 800,
                    reg_ns: 26_000,
                },
            ],
            30,
            250,
        )
        .unwrap()
    }

    #[test]
    fn min_reuse_follows_inequality_3() {
        let m = paper();
        // 23000 / (400 - 30) = 62.16 -> 63 (strictly greater).
        assert_eq!(m.min_reuse(4096), Some(63));
        // Exact division: n must exceed it. 26000/(800-30)=33.8 -> 34.
        assert_eq!(m.min_reuse(8192), Some(34));
        // V >= C: disabled.
        assert_eq!(m.min_reuse(64), None);
        assert_eq!(m.min_reuse(32), None);
        // Speculative 25%: floor(63/4) = 15.
        assert_eq!(m.threshold(4096), Some(15));
        assert_eq!(m.threshold(64), None);
    }

    #[test]
    fn costs_interpolate_between_points() {
        let m = paper();
        assert_eq!(m.costs(2560), (265, 22_000));
        assert_eq!(
            m.costs(32),
            (10, 20_000),
            "copy scales below the first point"
        );
        assert_eq!(m.costs(16384), (1600, 26_000), "copy scales above the last");
    }

    #[test]
    fn the_size_filter_admits_only_profitable_sizes() {
        let m = paper();
        assert!(!m.may_profit(64));
        assert!(!m.may_profit(8));
        assert!(!m.may_profit(128), "C(128) = 27 <= V");
        assert!(m.may_profit(256), "C(256) = 42 > V");
        // C(m) = 20 + floor(110 (m - 64) / 960) first exceeds 30 at m = 160.
        assert_eq!(m.min_size(), 160);
        assert!(m.may_profit(160) && !m.may_profit(159));
        assert!(m.may_profit(8192));
    }

    #[test]
    fn bad_figures_are_refused() {
        assert_eq!(
            CostModel::<2>::new(&[], 1, 250).err(),
            Some(CostError::Empty)
        );
        let p = CostPoint {
            size: 8,
            copy_ns: 1,
            reg_ns: 1,
        };
        assert_eq!(
            CostModel::<2>::new(&[p, p], 1, 250).err(),
            Some(CostError::Unsorted)
        );
        assert_eq!(
            CostModel::<1>::new(&[p, CostPoint { size: 16, ..p }], 1, 250).err(),
            Some(CostError::TooMany { max: 1 })
        );
    }

    #[test]
    fn speculation_never_goes_below_one_use() {
        let m = CostModel::<1>::new(
            &[CostPoint {
                size: 4096,
                copy_ns: 1000,
                reg_ns: 10,
            }],
            0,
            250,
        )
        .unwrap();
        assert_eq!(m.min_reuse(4096), Some(1));
        assert_eq!(m.threshold(4096), Some(1));
    }

    /// A calibration file with extreme figures (`reg_ns` 4294967295 made
    /// `min_reuse` overflow; interpolation multiplied past i64) saturates.
    #[test]
    fn extreme_figures_saturate_instead_of_overflowing() {
        let max = u32::MAX;
        let pts = [
            CostPoint {
                size: 1,
                copy_ns: 1,
                reg_ns: max,
            },
            CostPoint {
                size: max - 1,
                copy_ns: 0,
                reg_ns: 0,
            },
            CostPoint {
                size: max,
                copy_ns: max,
                reg_ns: max,
            },
        ];
        let m = CostModel::<3>::new(&pts, 0, max).unwrap();
        assert_eq!(m.min_reuse(1), Some(max), "R / (C - V) + 1 saturates");
        for size in [0, 1, 2, 1 << 20, max / 2, max - 2, max - 1, max] {
            let (c, r) = m.costs(size);
            assert!(c <= max && r <= max);
            let _ = m.threshold(size);
        }
        let one = CostModel::<1>::new(
            &[CostPoint {
                size: 1,
                copy_ns: max,
                reg_ns: 0,
            }],
            0,
            250,
        )
        .unwrap();
        assert_eq!(one.costs(max).0, max, "scaled past the last point, capped");
    }
}
