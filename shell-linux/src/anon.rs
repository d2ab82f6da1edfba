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
    let (hint, fixed) = at.map_or((std::ptr::null_mut(), 0), |a| {
        (a as *mut libc::c_void, libc::MAP_FIXED)
    });
    let populate = if populate { libc::MAP_POPULATE } else { 0 };
    let p = libc::mmap(
        hint,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed | populate,
        -1,
        0,
    );
    assert_ne!(p, libc::MAP_FAILED, "mmap of {len} bytes");
    p as usize
}

/// An owned anonymous mapping, unmapped on drop.
pub struct AnonMap {
    addr: usize,
    len: usize,
}

impl AnonMap {
    /// `len` bytes, faulted in.
    pub fn new(len: usize) -> AnonMap {
        // SAFETY: a fresh mapping replaces nothing.
        let addr = unsafe { map(len, None, true) };
        AnonMap { addr, len }
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

    /// `n` bytes at offset `off`.
    pub fn slice_mut(&mut self, off: usize, n: usize) -> &mut [u8] {
        assert!(off + n <= self.len, "{off}+{n} beyond {} bytes", self.len);
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
