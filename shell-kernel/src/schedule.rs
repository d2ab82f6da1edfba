//! The progressive pinning schedule (Open-MX's `pinprogressive`): chunks
//! that double from [`FIRST`] page to [`LARGEST`], so the first pages of
//! a region are usable almost at once while the rest are pinned in few
//! calls, overlapped with the handshake that precedes the data.

/// Pages in the first chunk.
pub const FIRST: u32 = 1;
/// The largest chunk, in pages.
pub const LARGEST: u32 = 1024;

/// The chunk after one of `pages`.
pub fn next(pages: u32) -> u32 {
    pages.saturating_mul(2).clamp(FIRST, LARGEST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_double_from_one_page_to_the_largest() {
        let mut c = FIRST;
        let mut seen = [0u32; 12];
        for s in &mut seen {
            *s = c;
            c = next(c);
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024]);
        assert_eq!(next(0), FIRST);
        assert_eq!(next(u32::MAX), LARGEST);
    }
}
