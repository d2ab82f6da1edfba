//! The candidate copy routines. Each copies `len` bytes between two
//! non-overlapping ranges, for any length and alignment; which one a size
//! class uses is measured ([`super::choose`]), never assumed from the CPU's
//! name: `rep movsb` is the fastest copy on some x86 CPUs and twenty times
//! slower than a vector loop on others.

/// A copy routine: `dst` and `src` valid for `len` bytes, not overlapping.
pub type CopyFn = unsafe fn(*mut u8, *const u8, usize);

/// The candidates, by the name `rmx info` and the calibration file use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Routine {
    /// libc's `memcpy` (glibc picks its own strategy per size, `rep movsb`
    /// above `x86_rep_movsb_threshold`).
    Memcpy,
    /// 16-byte unaligned loads and stores, 64 bytes a round.
    Sse2,
    /// 32-byte unaligned loads and stores, 128 bytes a round.
    Avx2,
    /// The string instruction alone.
    RepMovsb,
    /// Vector loads and non-temporal (cache-bypassing) stores to an aligned
    /// destination: for copies larger than a core's share of the last-level
    /// cache, whose destination would only evict what the core works on.
    NonTemporal,
}

impl Routine {
    pub const ALL: [Routine; 5] = [
        Routine::Memcpy,
        Routine::Sse2,
        Routine::Avx2,
        Routine::RepMovsb,
        Routine::NonTemporal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Routine::Memcpy => "memcpy",
            Routine::Sse2 => "sse2",
            Routine::Avx2 => "avx2",
            Routine::RepMovsb => "rep_movsb",
            Routine::NonTemporal => "non_temporal",
        }
    }

    pub fn from_name(name: &str) -> Option<Routine> {
        Routine::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The routine, if this CPU can run it.
    pub fn function(self) -> Option<CopyFn> {
        match self {
            Routine::Memcpy => Some(memcpy as CopyFn),
            #[cfg(target_arch = "x86_64")]
            Routine::Sse2 => Some(x86::sse2 as CopyFn),
            #[cfg(target_arch = "x86_64")]
            Routine::Avx2 => std::is_x86_feature_detected!("avx2").then_some(x86::avx2 as CopyFn),
            #[cfg(target_arch = "x86_64")]
            Routine::RepMovsb => Some(x86::rep_movsb as CopyFn),
            #[cfg(target_arch = "x86_64")]
            Routine::NonTemporal => Some(if std::is_x86_feature_detected!("avx2") {
                x86::non_temporal_avx2 as CopyFn
            } else {
                x86::non_temporal_sse2 as CopyFn
            }),
            #[cfg(not(target_arch = "x86_64"))]
            _ => None,
        }
    }

    /// The candidates this CPU can run.
    pub fn available() -> impl Iterator<Item = (Routine, CopyFn)> {
        Routine::ALL
            .into_iter()
            .filter_map(|r| r.function().map(|f| (r, f)))
    }
}

/// # Safety
/// `dst` and `src` valid for `len` bytes and not overlapping.
unsafe fn memcpy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { libc::memcpy(dst.cast(), src.cast(), len) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::copy::small;
    use std::arch::x86_64::*;

    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping.
    pub unsafe fn sse2(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: every access below lies within the caller's ranges: whole
        // rounds while 64 bytes remain, then 16-byte steps, then the last 16
        // bytes (overlapping what was copied) or the small path.
        unsafe {
            if len <= 32 {
                return small::copy(dst, src, len);
            }
            let mut i = 0;
            while i + 64 <= len {
                let a = _mm_loadu_si128(src.add(i).cast());
                let b = _mm_loadu_si128(src.add(i + 16).cast());
                let c = _mm_loadu_si128(src.add(i + 32).cast());
                let d = _mm_loadu_si128(src.add(i + 48).cast());
                _mm_storeu_si128(dst.add(i).cast(), a);
                _mm_storeu_si128(dst.add(i + 16).cast(), b);
                _mm_storeu_si128(dst.add(i + 32).cast(), c);
                _mm_storeu_si128(dst.add(i + 48).cast(), d);
                i += 64;
            }
            while i + 16 <= len {
                _mm_storeu_si128(dst.add(i).cast(), _mm_loadu_si128(src.add(i).cast()));
                i += 16;
            }
            if i < len {
                let t = _mm_loadu_si128(src.add(len - 16).cast());
                _mm_storeu_si128(dst.add(len - 16).cast(), t);
            }
        }
    }

    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping; the CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: as in `sse2`, with 32-byte steps.
        unsafe {
            if len <= 64 {
                return sse2(dst, src, len);
            }
            let mut i = 0;
            while i + 128 <= len {
                let a = _mm256_loadu_si256(src.add(i).cast());
                let b = _mm256_loadu_si256(src.add(i + 32).cast());
                let c = _mm256_loadu_si256(src.add(i + 64).cast());
                let d = _mm256_loadu_si256(src.add(i + 96).cast());
                _mm256_storeu_si256(dst.add(i).cast(), a);
                _mm256_storeu_si256(dst.add(i + 32).cast(), b);
                _mm256_storeu_si256(dst.add(i + 64).cast(), c);
                _mm256_storeu_si256(dst.add(i + 96).cast(), d);
                i += 128;
            }
            while i + 32 <= len {
                let t = _mm256_loadu_si256(src.add(i).cast());
                _mm256_storeu_si256(dst.add(i).cast(), t);
                i += 32;
            }
            if i < len {
                let t = _mm256_loadu_si256(src.add(len - 32).cast());
                _mm256_storeu_si256(dst.add(len - 32).cast(), t);
            }
        }
    }

    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping.
    pub unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: `rep movsb` moves exactly `rcx` bytes forward (the
        // direction flag is clear, as the ABI requires) within the ranges.
        unsafe {
            std::arch::asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rdi") dst => _,
                inout("rsi") src => _,
                options(nostack, preserves_flags)
            );
        }
    }

    /// Copies the head up to `dst`'s next `align`-byte boundary with
    /// `head`, then whole `align`-byte blocks with `block`, then the tail
    /// with `head`, and fences the streamed stores.
    ///
    /// # Safety
    /// As the copy routines; `block` copies `align` bytes to an aligned
    /// destination.
    #[inline(always)]
    unsafe fn streamed(
        dst: *mut u8,
        src: *const u8,
        len: usize,
        align: usize,
        head: unsafe fn(*mut u8, *const u8, usize),
        block: impl Fn(*mut u8, *const u8),
    ) {
        // SAFETY: the head, the blocks and the tail partition `0..len`.
        unsafe {
            let lead = (dst as usize).wrapping_neg() & (align - 1);
            if len < lead + 2 * align {
                return head(dst, src, len);
            }
            head(dst, src, lead);
            let mut i = lead;
            while i + align <= len {
                block(dst.add(i), src.add(i));
                i += align;
            }
            head(dst.add(i), src.add(i), len - i);
            _mm_sfence();
        }
    }

    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping; AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn non_temporal_avx2(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: `streamed` hands `block` 128 bytes at a 128-aligned `d`.
        unsafe {
            streamed(dst, src, len, 128, avx2, |d, s| {
                for k in (0..128).step_by(32) {
                    let v = _mm256_loadu_si256(s.add(k).cast());
                    _mm256_stream_si256(d.add(k).cast(), v);
                }
            })
        }
    }

    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping.
    pub unsafe fn non_temporal_sse2(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: `streamed` hands `block` 64 bytes at a 64-aligned `d`.
        unsafe {
            streamed(dst, src, len, 64, sse2, |d, s| {
                for k in (0..64).step_by(16) {
                    let v = _mm_loadu_si128(s.add(k).cast());
                    _mm_stream_si128(d.add(k).cast(), v);
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that never repeat with a short period, so a copy from the
    /// wrong offset shows.
    fn pattern(n: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    const CANARY: u8 = 0xA5;

    /// Copies `len` bytes from `src[so..]` into a canary-filled `dst` at
    /// `dof` with `f`, and checks the copy and that nothing else changed.
    fn check(f: CopyFn, name: &str, src: &[u8], dst: &mut [u8], so: usize, dof: usize, len: usize) {
        dst.fill(CANARY);
        // SAFETY: both ranges lie inside their (distinct) buffers.
        unsafe { f(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), len) };
        // Slice comparisons (memcmp), so a debug build checks quickly too.
        let canary = [CANARY; 128];
        let tail = &dst[dof + len..];
        let ok = dst[dof..dof + len] == src[so..so + len]
            && dst[..dof] == canary[..dof]
            && tail.chunks(128).all(|c| c == &canary[..c.len()]);
        assert!(
            ok,
            "{name}: len {len}, source offset {so}, destination offset {dof}"
        );
    }

    #[test]
    fn every_routine_copies_every_length_at_every_alignment_and_nothing_else() {
        const MAX: usize = 4096 + 64;
        let src = pattern(MAX + 64);
        let mut dst = vec![0u8; MAX + 64 + 64];
        let edges = [
            0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 4160,
        ];
        for (r, f) in Routine::available() {
            for len in 0..=MAX {
                // Every source and every destination alignment, paired so
                // that their difference varies too.
                for a in 0..64 {
                    check(f, r.name(), &src, &mut dst, a, (a * 37 + len) % 64, len);
                }
            }
            for &len in &edges {
                for so in 0..64 {
                    for dof in 0..64 {
                        check(f, r.name(), &src, &mut dst, so, dof, len);
                    }
                }
            }
        }
    }

    #[test]
    fn every_routine_copies_large_lengths_exactly() {
        let big = (4 << 20) + 17;
        let src = pattern(big + 64);
        let mut dst = vec![0u8; big + 128];
        for (r, f) in Routine::available() {
            for (len, so, dof) in [(big, 1, 33), ((1 << 20) + 3, 63, 0), (3 << 20, 0, 64)] {
                check(f, r.name(), &src, &mut dst, so, dof, len);
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for r in Routine::ALL {
            assert_eq!(Routine::from_name(r.name()), Some(r));
        }
        assert_eq!(Routine::from_name("memmove"), None);
        assert!(Routine::available().any(|(r, _)| r == Routine::Memcpy));
    }
}
