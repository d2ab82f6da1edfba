//! Copies of at most 32 bytes, inline: most eager payloads are a few bytes,
//! where a call into any routine costs more than the copy itself.

/// Copies `len` bytes from `src` to `dst` (non-overlapping). Up to 32 bytes are
/// moved inline with two possibly overlapping loads and stores; longer copies
/// (which the engine never sends here) go to `memcpy`.
///
/// # Safety
/// Both ranges must be valid for `len` bytes and must not overlap.
#[inline(always)]
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    use std::ptr::{read_unaligned as rd, write_unaligned as wr};
    // SAFETY: the caller's contract: both ranges hold `len` bytes and do
    // not overlap; every access below lies within them.
    unsafe {
        match len {
            0 => {}
            1..=3 => {
                let (a, b, c) = (*src, *src.add(len / 2), *src.add(len - 1));
                *dst = a;
                *dst.add(len / 2) = b;
                *dst.add(len - 1) = c;
            }
            4..=7 => {
                let (a, b) = (rd(src as *const u32), rd(src.add(len - 4) as *const u32));
                wr(dst as *mut u32, a);
                wr(dst.add(len - 4) as *mut u32, b);
            }
            8..=16 => {
                let (a, b) = (rd(src as *const u64), rd(src.add(len - 8) as *const u64));
                wr(dst as *mut u64, a);
                wr(dst.add(len - 8) as *mut u64, b);
            }
            17..=32 => {
                let (a, b) = (rd(src as *const u128), rd(src.add(len - 16) as *const u128));
                wr(dst as *mut u128, a);
                wr(dst.add(len - 16) as *mut u128, b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_and_offset_copies_exactly() {
        let src: Vec<u8> = (0..100u8).collect();
        for len in 0..70 {
            for off in 0..3 {
                let mut dst = vec![0xAAu8; 80];
                // SAFETY: both vectors hold off + len bytes; distinct.
                unsafe { copy(dst.as_mut_ptr().add(off), src.as_ptr().add(off), len) };
                assert_eq!(
                    &dst[off..off + len],
                    &src[off..off + len],
                    "len {len} off {off}"
                );
                assert!(
                    dst[..off].iter().all(|&b| b == 0xAA),
                    "wrote before the range"
                );
                assert!(
                    dst[off + len..].iter().all(|&b| b == 0xAA),
                    "wrote past the range"
                );
            }
        }
    }
}
