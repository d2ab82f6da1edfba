//! Tables laid out one after another in memory the caller provides, each
//! at its type's alignment: the same walk measures a block (from address
//! 0) and fills one, so the size a size query reports is the size
//! creating uses.

use core::mem::{align_of, size_of};

/// The alignment every block must have: the largest any table needs, and
/// a cache line, so that no two endpoints share one.
pub const ALIGN: usize = 64;

/// A walk through `[at, end)`.
pub(crate) struct Carve {
    at: usize,
    end: usize,
}

impl Carve {
    /// A walk that measures: it starts at 0 and has no end.
    pub(crate) fn measure() -> Carve {
        Carve {
            at: 0,
            end: usize::MAX,
        }
    }

    /// A walk through `len` bytes at `base` (aligned to [`ALIGN`]).
    pub(crate) fn block(base: usize, len: usize) -> Option<Carve> {
        Some(Carve {
            at: base,
            end: base.checked_add(len)?,
        })
    }

    /// Bytes walked so far, from `base`.
    pub(crate) fn used(&self, base: usize) -> usize {
        self.at - base
    }

    /// The address of `n` `T`s, next at `T`'s alignment; `None` past the
    /// end or the address space.
    pub(crate) fn take<T>(&mut self, n: usize) -> Option<usize> {
        const { assert!(align_of::<T>() <= ALIGN) };
        let at = self.at.checked_next_multiple_of(align_of::<T>())?;
        let end = at.checked_add(size_of::<T>().checked_mul(n)?)?;
        if end > self.end {
            return None;
        }
        self.at = end;
        Some(at)
    }
}

/// `n` copies of `fill` written at `at`, as a slice.
///
/// # Safety
/// `at` came from [`Carve::take::<T>(n)`](Carve::take) over a block the
/// caller owns for `'a`, used by nothing else meanwhile.
pub(crate) unsafe fn fill<'a, T: Copy>(at: usize, n: usize, fill: T) -> &'a mut [T] {
    // SAFETY: the caller's contract.
    unsafe { fill_with(at, n, || fill) }
}

/// `n` values of `make` written at `at`, as a slice.
///
/// # Safety
/// As for [`fill`].
pub(crate) unsafe fn fill_with<'a, T>(at: usize, n: usize, make: impl Fn() -> T) -> &'a mut [T] {
    let p = at as *mut T;
    for i in 0..n {
        // SAFETY: inside the range `take` gave, aligned for `T`.
        unsafe { p.add(i).write(make()) };
    }
    // SAFETY: every element was just written; the caller's contract
    // gives the range to this slice alone for `'a`. A zero-length slice
    // needs only an aligned, non-null pointer, which `take` gave (its
    // block's base is never null).
    unsafe { core::slice::from_raw_parts_mut(p, n) }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    #[test]
    fn measuring_and_filling_agree_and_a_short_block_is_refused() {
        let walk = |c: &mut Carve| -> Option<[usize; 3]> {
            Some([c.take::<u8>(3)?, c.take::<u64>(2)?, c.take::<u16>(5)?])
        };
        let mut m = Carve::measure();
        let offs = walk(&mut m).unwrap();
        assert_eq!(offs, [0, 8, 24]);
        assert_eq!(m.used(0), 34);
        let mut mem = vec![0u64; 8];
        let base = mem.as_mut_ptr() as usize;
        let mut b = Carve::block(base, 34).unwrap();
        assert_eq!(walk(&mut b).unwrap(), offs.map(|o| base + o));
        assert!(walk(&mut Carve::block(base, 33).unwrap()).is_none());
        assert!(Carve::measure().take::<u64>(usize::MAX).is_none());
        assert!(Carve::block(usize::MAX, 2).is_none());
    }
}
