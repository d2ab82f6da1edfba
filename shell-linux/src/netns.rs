//! Entering a network namespace, for the calling thread only (`setns` is
//! per thread), so in-process jobs put each rank's thread in its own.

use std::os::fd::AsRawFd;

/// Moves the calling thread into the network namespace `name` (as
/// `ip netns add` made it, under /run/netns).
pub fn enter(name: &str) -> std::io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} is not a namespace name"),
        ));
    }
    let f = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns on a namespace file we hold open; it changes only this
    // thread's network namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
