//! The rmx module's device (`/dev/rmx`, built from `shell-kernel/module`)
//! from userspace: one [`Device`] is one context. Regions are declared
//! once by their segments and named by a descriptor; the module pins
//! their pages when a communication needs them and unpins them when the
//! memory changes, so a region stays declared across `free`, `munmap` or
//! `fork` and is never stale. Whether the module changed a region is one
//! load from a page it maps read-only ([`Device::generation`]): no system
//! call.

pub mod cache;
mod frames;

pub use frames::Bound;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use rmx_kernel::request::{self, ioctl, Declare, SEGMENT_LEN};
use rmx_kernel::{Segment, MAX_SEGMENTS};

/// Where the module's device is.
pub const PATH: &str = "/dev/rmx";

/// A region's descriptor in its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Desc(pub u32);

/// One open of the device, and its page of generations mapped.
pub struct Device {
    file: File,
    shared: *const AtomicU32,
}

/// Bytes of the page the module maps, and its words.
const SHARED_BYTES: usize = 4096;
const SHARED_WORDS: usize = SHARED_BYTES / 4;

// SAFETY: the mapped page is read only through atomics; the descriptor
// is a file, usable from any thread (the module serialises requests).
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// `RMX_PIN`'s and `RMX_READ`/`RMX_WRITE`'s arguments, as the module
/// lays them out.
#[repr(C)]
struct Pin {
    desc: u32,
    flags: u32,
}

#[repr(C)]
struct Copy {
    desc: u32,
    flags: u32,
    offset: u64,
    len: u64,
    buf: u64,
}

impl Device {
    /// Opens a context: fails with the reason when the module is not
    /// loaded (`insmod rmx.ko`).
    pub fn open() -> io::Result<Device> {
        Self::open_at(PATH)
    }

    /// [`open`](Self::open) at another path.
    pub fn open_at(path: &str) -> io::Result<Device> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e} (is rmx.ko loaded?)")))?;
        // SAFETY: a new shared read-only mapping of the device's one page.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SHARED_BYTES,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Device {
            file,
            shared: p.cast(),
        })
    }

    fn ioctl<T>(&self, nr: u32, arg: *mut T) -> io::Result<i32> {
        // SAFETY: `arg` points to the layout `nr` names, valid for the call.
        let r = unsafe { libc::ioctl(self.file.as_raw_fd(), nr as _, arg) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r)
    }

    /// Declares a region over `segments` (at most 64); nothing is pinned
    /// yet, and the memory need not be mapped (a communication on it
    /// fails until it is).
    ///
    /// # Safety
    /// While declared, [`write`](Self::write) on the region stores into
    /// this memory as a receive would: the caller must not hold Rust
    /// references to it across such calls.
    pub unsafe fn declare(&self, segments: &[Segment]) -> io::Result<Desc> {
        if segments.is_empty() || segments.len() > MAX_SEGMENTS {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut segs = vec![0u8; segments.len() * SEGMENT_LEN];
        request::encode_segments(segments, &mut segs).map_err(errno)?;
        let mut arg = Declare {
            count: segments.len() as u32,
            segments: segs.as_ptr() as u64,
        }
        .encode();
        self.ioctl(ioctl::DECLARE, arg.as_mut_ptr())?;
        Ok(Desc(u32::from_ne_bytes([arg[4], arg[5], arg[6], arg[7]])))
    }

    /// Undeclares `d`: its pages unpinned.
    pub fn undeclare(&self, d: Desc) -> io::Result<()> {
        let mut desc = d.0;
        self.ioctl(ioctl::UNDECLARE, &mut desc).map(drop)
    }

    /// Pins the next chunk of `d` (all of it with `all`); whether every
    /// page is pinned now.
    pub fn pin(&self, d: Desc, all: bool) -> io::Result<bool> {
        let mut p = Pin {
            desc: d.0,
            flags: if all { ioctl::PIN_ALL } else { 0 },
        };
        self.ioctl(ioctl::PIN, &mut p).map(|r| r == 1)
    }

    /// Unpins every page of `d` now; it stays declared and is pinned again
    /// on next use.
    pub fn unpin(&self, d: Desc) -> io::Result<()> {
        let mut desc = d.0;
        self.ioctl(ioctl::UNPIN, &mut desc).map(drop)
    }

    /// Copies bytes `offset..` of region `d` into `buf` through its pinned
    /// pages (what a send on the region puts on the wire).
    pub fn read(&self, d: Desc, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.copy(ioctl::READ, d, offset, buf.as_mut_ptr() as u64, buf.len())
    }

    /// Copies `buf` into bytes `offset..` of region `d` through its pinned
    /// pages (what a receive into the region does).
    pub fn write(&self, d: Desc, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.copy(ioctl::WRITE_TO, d, offset, buf.as_ptr() as u64, buf.len())
    }

    /// `RMX_READ` or `RMX_WRITE` of `len` bytes at user address `buf`.
    fn copy(&self, nr: u32, d: Desc, offset: u64, buf: u64, len: usize) -> io::Result<()> {
        let mut c = Copy {
            desc: d.0,
            flags: 0,
            offset,
            len: len as u64,
            buf,
        };
        self.ioctl(nr, &mut c).map(drop)
    }

    /// Whether a region changed since [`changes`](Self::changes) last
    /// read, waiting up to `timeout` (forever: `None`) for one to.
    pub fn ready(&self, timeout: Option<std::time::Duration>) -> io::Result<bool> {
        self.wait_for(libc::POLLIN, timeout)
    }

    /// Whether `poll(2)` reports `events` within `timeout` (`None`:
    /// waiting as long as it takes).
    fn wait_for(&self, events: i16, timeout: Option<std::time::Duration>) -> io::Result<bool> {
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        let mut p = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if p.revents & libc::POLLERR != 0 {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(n > 0)
    }

    /// The regions whose generation moved since the last call, each with
    /// its generation now (waits until there is one): what an evictor
    /// thread reads to drop stale entries without scanning every region.
    pub fn changes(&self) -> io::Result<Vec<(Desc, u32)>> {
        let mut raw = [0u32; 64];
        // SAFETY: reads into `raw`, which holds as many bytes as asked.
        let n = unsafe {
            libc::read(
                self.file.as_raw_fd(),
                raw.as_mut_ptr().cast(),
                4 * raw.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(raw[..n as usize / 4]
            .chunks_exact(2)
            .map(|c| (Desc(c[0]), c[1]))
            .collect())
    }

    fn word(&self, i: usize) -> Option<u32> {
        // SAFETY: within the mapped page, which lives as long as `self`;
        // the module stores these words atomically.
        (i < SHARED_WORDS).then(|| unsafe { (*self.shared.add(i)).load(Ordering::Acquire) })
    }

    /// Region `d`'s generation: it changes whenever the module unpins the
    /// region (its memory changed, or it was evicted) or the slot is
    /// declared anew. One load; `None` for a descriptor no context gives.
    pub fn generation(&self, d: Desc) -> Option<u32> {
        self.word(1 + (d.0 & 0xffff) as usize)
    }

    /// Pages this context holds pinned.
    pub fn pinned(&self) -> u32 {
        self.word(0).unwrap_or(0)
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the page mapped in `open_at`, unmapped once.
        unsafe { libc::munmap(self.shared as *mut libc::c_void, SHARED_BYTES) };
    }
}

fn errno(e: rmx_kernel::Error) -> io::Error {
    io::Error::from_raw_os_error(e.errno())
}

#[cfg(test)]
mod tests;
