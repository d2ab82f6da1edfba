//! Memory a NIC may read or write while the application runs: a window's
//! bytes and the staging space of its operations. It is reached only
//! through raw copies (as memory a device writes by DMA is), never through
//! a reference another thread's write could race, except while a window
//! is closed to every access ([`super::Win::memory`]).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Zeroed, page-aligned bytes at a fixed address until dropped.
pub struct Pinned {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the bytes are owned by this value alone; every access goes
// through raw copies whose callers check bounds, as with device memory.
unsafe impl Send for Pinned {}
// SAFETY: as above; `&Pinned` gives no reference to the bytes.
unsafe impl Sync for Pinned {}

const PAGE: usize = 4096;

impl Pinned {
    /// `len` zeroed bytes (at least one page is reserved, so the address is
    /// a real one even for an empty window).
    pub fn new(len: usize) -> Pinned {
        let layout = Self::layout(len);
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Pinned { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(1).next_multiple_of(PAGE), PAGE)
            .expect("a window fits the address space")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Bytes reserved (a whole number of pages), what a registration covers.
    pub fn reserved(&self) -> usize {
        Self::layout(self.len).size()
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

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_and_refuse_what_does_not_fit() {
        let m = Pinned::new(10);
        assert_eq!(m.addr() % PAGE, 0);
        assert!(m.write(6, &[1, 2, 3, 4]));
        assert!(!m.write(7, &[1, 2, 3, 4]));
        assert!(!m.write(usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(m.read(6, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(!m.read(8, &mut out));
        assert_eq!(Pinned::new(0).len(), 0);
    }
}
