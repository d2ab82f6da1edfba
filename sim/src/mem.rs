//! Memory a simulated rank lends its NIC by address: a buffer reached only
//! through the pointer it was allocated at, so the port's reads and writes
//! (a peer's RDMA landing, a packet gathered) and the rank's own go through
//! one root and never alias a unique borrow.

use std::ptr::NonNull;

/// `len` bytes on the heap that never move until dropped.
pub struct Buf {
    ptr: NonNull<u8>,
    len: usize,
}

impl Buf {
    /// `len` zero bytes (at least one, so that every buffer has an address
    /// of its own).
    pub fn zeroed(len: usize) -> Buf {
        let b: Box<[u8]> = vec![0; len.max(1)].into_boxed_slice();
        let len = b.len();
        let ptr = NonNull::new(Box::into_raw(b).cast::<u8>()).expect("a box is never null");
        Buf { ptr, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address the NIC names it by.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    pub fn as_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes owned by `self`; the
        // port writes there only inside `&mut` calls of the rank.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, borrowed uniquely through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        // SAFETY: allocated by `zeroed` as a boxed slice of this length.
        drop(unsafe { Box::from_raw(slice) });
    }
}
