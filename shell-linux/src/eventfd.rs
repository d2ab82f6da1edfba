//! An eventfd as a flag a sleeper outside rmx can `poll(2)`: raised by an
//! event, lowered before arming again.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A fresh non-blocking eventfd.
pub(crate) fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with flags only; the descriptor is owned at once.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes the eventfd `fd` readable.
pub(crate) fn bump(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: an eventfd takes exactly 8 bytes.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Makes the eventfd `fd` unreadable again.
pub(crate) fn drain(fd: &OwnedFd) {
    let mut v = 0u64;
    // SAFETY: an eventfd reads exactly 8 bytes into `v`.
    unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}
