//! Choosing a routine per size class by measuring every candidate here.
//!
//! Classes are powers of two from 64 bytes to 4 MiB: a copy of `len` bytes
//! belongs to the smallest class at least as large (the last class takes
//! everything above 2 MiB). Each candidate copies a class's size between
//! two warm buffers, the candidates take turns round by round, and the
//! fastest round of each is kept: on a shared machine the minimum is what
//! the routine can do, the rest is other tenants. Each is timed at several
//! distances between source and destination (modulo a page), summed: some
//! CPUs run `rep movsb` three times slower at some distances than at
//! others, and a message's buffers fall at any distance.

use std::hint::black_box;

use super::routines::{CopyFn, Routine};
use crate::anon::AnonMap;
use crate::clock::now_ns;

/// Size classes: 64 B, 128 B, … 4 MiB.
pub const CLASSES: usize = 17;
const FIRST_SHIFT: u32 = 6;

/// The class of a copy of `len` bytes.
#[inline(always)]
pub fn class_of(len: usize) -> usize {
    let bits = usize::BITS - len.saturating_sub(1).leading_zeros();
    (bits.saturating_sub(FIRST_SHIFT) as usize).min(CLASSES - 1)
}

/// The largest copy of class `c` (its measured size).
pub const fn class_size(c: usize) -> usize {
    1 << (FIRST_SHIFT as usize + c)
}

/// How long to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// At start-up: a few milliseconds in all. Classes up to 256 KiB are
    /// measured; larger ones take the 256 KiB class's routine.
    Quick,
    /// `rmx calibrate`: every class, long enough to ride out a noisy neighbour.
    Thorough,
}

impl Effort {
    /// Bytes each candidate copies per sample, rounds, and the last class measured.
    fn budget(self) -> (usize, usize, usize) {
        match self {
            Effort::Quick => (32 << 10, 2, class_of(256 << 10)),
            Effort::Thorough => (4 << 20, 7, CLASSES - 1),
        }
    }
}

/// Copies per sample at the smallest class (a quarter of it per class above).
const MIN_REPS: usize = 4096;

/// (source, destination) offsets from page-aligned buffers: distances 0,
/// 64, 2 KiB + 16 and 4 KiB − 32 (modulo a page) between them.
const OFFSETS: [(usize, usize); 4] = [(0, 0), (0, 64), (16, 2080), (32, 4096)];

/// Every candidate's speed at every class, in GB/s (`None`: not on this CPU).
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub routines: Vec<Routine>,
    /// `gbps[class][k]`: routine `routines[k]` at `class_size(class)`.
    pub gbps: Vec<Vec<f64>>,
}

impl Table {
    /// The fastest routine of each class.
    pub fn best(&self) -> [Routine; CLASSES] {
        std::array::from_fn(|c| {
            let row = &self.gbps[c];
            let k = (0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0);
            self.routines[k]
        })
    }
}

/// Nanoseconds of the fastest of `rounds` rounds of `reps` copies by `f`.
fn time(f: CopyFn, dst: &mut [u8], src: &[u8], reps: usize) -> u64 {
    let len = src.len();
    let t0 = now_ns();
    for _ in 0..reps {
        // SAFETY: both buffers hold `len` bytes and are distinct.
        unsafe { f(black_box(dst.as_mut_ptr()), black_box(src.as_ptr()), len) };
        black_box(&mut *dst);
    }
    (now_ns() - t0).max(1)
}

/// Measures every available candidate at every class.
pub fn measure(effort: Effort) -> Table {
    let cands: Vec<(Routine, CopyFn)> = Routine::available().collect();
    let (budget, rounds, last) = effort.budget();
    let most = class_size(last) + 8192;
    // Page-aligned, so that the offsets set the distances.
    let (src_map, dst_map) = (AnonMap::new(most), AnonMap::new(most));
    // SAFETY: fresh private mappings of `most` bytes each, which outlive
    // the slices (both maps are dropped at the end of this function).
    let (src, dst) = unsafe {
        (
            std::slice::from_raw_parts_mut(src_map.addr() as *mut u8, most),
            std::slice::from_raw_parts_mut(dst_map.addr() as *mut u8, most),
        )
    };
    src.fill(0x5A);
    dst.fill(1);
    let mut gbps: Vec<Vec<f64>> = Vec::with_capacity(CLASSES);
    for c in 0..=last {
        let size = class_size(c);
        // Small copies take a few nanoseconds: enough of them that the
        // clock's own cost and a stray interrupt do not decide.
        let mut reps = (budget / size).max(MIN_REPS >> (2 * c).min(12)).max(1) as u64;
        // As many for every candidate (their totals are compared), as the
        // slowest of them fits in a sample.
        let (s, d) = (&src[..size], &mut dst[..size]);
        for (_, f) in &cands {
            time(*f, d, s, 1); // warm the code
            reps = crate::clock::reps_within(reps, || {
                time(*f, d, s, 1);
            });
        }
        let reps = reps as usize;
        let mut total = vec![0u64; cands.len()];
        for &(so, doff) in &OFFSETS {
            let (s, d) = (&src[so..so + size], &mut dst[doff..doff + size]);
            let mut best = vec![u64::MAX; cands.len()];
            for (_, f) in &cands {
                time(*f, d, s, 1); // warm the code and both buffers
            }
            for _ in 0..rounds {
                for (k, (_, f)) in cands.iter().enumerate() {
                    best[k] = best[k].min(time(*f, d, s, reps));
                }
            }
            for (t, b) in total.iter_mut().zip(best) {
                *t += b;
            }
        }
        let bytes = (size * reps * OFFSETS.len()) as f64;
        gbps.push(total.iter().map(|&ns| bytes / ns as f64).collect());
    }
    while gbps.len() < CLASSES {
        let carried = gbps[last].clone();
        gbps.push(carried);
    }
    Table {
        routines: cands.iter().map(|c| c.0).collect(),
        gbps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_length_once() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(64), 0);
        assert_eq!(class_of(65), 1);
        assert_eq!(class_of(4096), 6);
        assert_eq!(class_of(4097), 7);
        assert_eq!(class_of(4 << 20), CLASSES - 1);
        assert_eq!(class_of(usize::MAX), CLASSES - 1);
        for c in 0..CLASSES {
            assert_eq!(class_of(class_size(c)), c);
        }
    }

    #[test]
    fn a_quick_measurement_names_an_available_routine_for_every_class() {
        let t0 = std::time::Instant::now();
        let t = measure(Effort::Quick);
        eprintln!("quick measurement: {:?}", t0.elapsed());
        assert_eq!(t.gbps.len(), CLASSES);
        assert!(t.gbps.iter().flatten().all(|g| g.is_finite() && *g > 0.0));
        assert!(t.best().iter().all(|r| r.function().is_some()));
    }

    #[test]
    fn the_fastest_candidate_of_each_class_is_chosen() {
        let t = Table {
            routines: vec![Routine::Memcpy, Routine::RepMovsb],
            gbps: (0..CLASSES)
                .map(|c| {
                    if c < 5 {
                        vec![9.0, 1.0]
                    } else {
                        vec![1.0, 9.0]
                    }
                })
                .collect(),
        };
        let best = t.best();
        assert_eq!(best[4], Routine::Memcpy);
        assert_eq!(best[5], Routine::RepMovsb);
    }
}
