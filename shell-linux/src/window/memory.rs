//! Memory a NIC may read or write while the application runs: a window's
//! bytes and the staging space of its operations. It is reached only
//! through raw copies (as memory a device writes by DMA is), never through
//! a reference another thread's write could race, except while a window
//! is closed to every access ([`super::Win::memory`]).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Zeroed, page-aligned bytes at a fixed address until dropped.
pub struct WinMemory {
    ptr: NonNull<u8>,
    len: usize,
    /// What was allocated: `len` rounded up to whole pages (one at least).
    layout: Layout,
}

// SAFETY: the bytes are owned by this value alone; every access goes
// through raw copies whose callers check bounds, as with device memory.
unsafe impl Send for WinMemory {}
// SAFETY: as above; `&WinMemory` gives no reference to the bytes.
unsafe impl Sync for WinMemory {}

const PAGE: usize = 4096;

impl WinMemory {
    /// `len` zeroed bytes (at least one page is reserved, so the address is
    /// a real one even for an empty window); `None` if whole pages for
    /// `len` bytes pass the address space or the allocator has none.
    pub fn new(len: usize) -> Option<WinMemory> {
        let size = len.max(1).checked_next_multiple_of(PAGE)?;
        let layout = Layout::from_size_align(size, PAGE).ok()?;
        // SAFETY: the layout's size is not zero.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(WinMemory { ptr, len, layout })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Bytes reserved (a whole number of pages), what a registration covers.
    pub fn reserved(&self) -> usize {
        self.layout.size()
    }

    /// Copies `out.len()` bytes from offset `at`; `false` (nothing copied)
    /// if they are not all inside.
    pub fn read(&self, at: usize, out: &mut [u8]) -> bool {
        if at.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: bounds checked; `out` is a distinct borrow.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(at), out.as_mut_ptr(), out.len())
        };
        true
    }

    /// Copies `data` to offset `at`; `false` (nothing copied) if it does
    /// not fit.
    pub fn write(&self, at: usize, data: &[u8]) -> bool {
        if at.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: bounds checked; `data` cannot alias these bytes, which no
        // reference reaches.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(at), data.len())
        };
        true
    }

    /// The bytes as a slice, for the one holder that knows nothing else
    /// touches them now.
    ///
    /// # Safety
    /// No NIC operation or other thread reads or writes the bytes while the
    /// slice lives.
    // Shared ownership (the NIC's registration holds the memory too) is
    // why this takes `&self`; the contract above gives the exclusivity.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self) -> &mut [u8] {
        // SAFETY: the caller's contract; the bytes are allocated and zeroed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for WinMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_and_refuse_what_does_not_fit() {
        let m = WinMemory::new(10).unwrap();
        assert_eq!(m.addr() % PAGE, 0);
        assert!(m.write(6, &[1, 2, 3, 4]));
        assert!(!m.write(7, &[1, 2, 3, 4]));
        assert!(!m.write(usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(m.read(6, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(!m.read(8, &mut out));
        assert_eq!(WinMemory::new(0).unwrap().len(), 0);
    }

    /// Sizes within a page of the end of the address space (before, the
    /// rounding wrapped to a 0-byte allocation that believed it held
    /// `usize::MAX` bytes) and sizes past what a layout may hold are refused.
    #[test]
    fn sizes_that_cannot_be_reserved_are_refused() {
        for len in [usize::MAX, usize::MAX - PAGE + 2, isize::MAX as usize] {
            assert!(WinMemory::new(len).is_none(), "{len:#x}");
        }
        let m = WinMemory::new(PAGE + 1).unwrap();
        assert_eq!(m.reserved(), 2 * PAGE);
    }
}
