//! Private anonymous memory straight from the kernel: page-aligned, outside
//! the allocator's heap, so benchmarks and tests control exactly which pages
//! a buffer owns (and when they go away).

/// Maps `len` bytes of private anonymous memory, faulted in when `populate`;
/// exactly at `at` when given (`MAP_FIXED`: whatever was mapped there is
/// replaced). Returns the address. Panics if the kernel refuses.
///
/// # Safety
/// With `at`, the caller must own the range being replaced.
pub unsafe fn map(len: usize, at: Option<usize>, populate: bool) -> usize {
    // SAFETY: a new mapping, or (`at`) one over a range the caller owns.
    match unsafe { try_map(len, at, populate) } {
        Ok(p) => p,
        Err(e) => panic!("mmap of {len} bytes: {e}"),
    }
}

/// [`map`]'s system call, or why it failed.
unsafe fn try_map(len: usize, at: Option<usize>, populate: bool) -> std::io::Result<usize> {
    let (hint, fixed) = at.map_or((std::ptr::null_mut(), 0), |a| {
        (a as *mut libc::c_void, libc::MAP_FIXED)
    });
    let populate = if populate { libc::MAP_POPULATE } else { 0 };
    // SAFETY: the caller owns any range MAP_FIXED replaces.
    let p = unsafe {
        libc::mmap(
            hint,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed | populate,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// An owned anonymous mapping, unmapped on drop.
pub struct AnonMap {
    addr: usize,
    len: usize,
}

impl AnonMap {
    /// `len` bytes, faulted in. Panics if the kernel refuses.
    pub fn new(len: usize) -> AnonMap {
        Self::try_new(len).unwrap_or_else(|e| panic!("mmap of {len} bytes: {e}"))
    }

    /// `len` bytes, faulted in, or why the kernel refused (too large for
    /// the address space or the memory limit, or zero).
    pub fn try_new(len: usize) -> std::io::Result<AnonMap> {
        // SAFETY: a fresh mapping replaces nothing.
        let addr = unsafe { try_map(len, None, true) }?;
        Ok(AnonMap { addr, len })
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `n` bytes at offset `off`; panics if they are not all inside.
    pub fn slice_mut(&mut self, off: usize, n: usize) -> &mut [u8] {
        let inside = off.checked_add(n).is_some_and(|end| end <= self.len);
        assert!(inside, "{off}+{n} beyond {} bytes", self.len);
        // SAFETY: inside the mapping, borrowed mutably from self.
        unsafe { std::slice::from_raw_parts_mut((self.addr + off) as *mut u8, n) }
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `off + n` once wrapped past the end of `usize` and passed the bound
    /// check, making a slice anywhere in memory.
    #[test]
    fn a_slice_past_the_mapping_is_refused_even_when_the_sum_wraps() {
        let mut m = AnonMap::new(4096);
        assert_eq!(m.slice_mut(4000, 96).len(), 96);
        for (off, n) in [(4000, 97), (usize::MAX, 2), (1, usize::MAX)] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                m.slice_mut(off, n).len()
            }));
            assert!(r.is_err(), "{off}+{n} accepted");
        }
        assert!(
            AnonMap::try_new(usize::MAX / 2).is_err(),
            "refused, not a panic"
        );
    }
}
