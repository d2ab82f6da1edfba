//! The invalidation monitor: tells every rank's registration cache when
//! registered memory is unmapped, released or moved.
//!
//! A userfaultfd with the non-cooperative events UNMAP (munmap), REMOVE
//! (madvise DONTNEED/REMOVE) and REMAP (mremap). Each registered range is also
//! registered with the userfaultfd in write-protect mode with nothing ever
//! write-protected, so it never faults: only the events arrive. A handler
//! thread reads them and queues the ranges on every subscriber's
//! [`Pending`] queue.
//!
//! Ordering: the kernel holds `munmap` until its event is *read*, not until it
//! is queued. The handler therefore raises `busy` before it reads and lowers it
//! after queueing; a sender calls [`Monitor::settle`] (wait while busy) before
//! draining its queue, so an unmap that returned is always seen.
//!
//! Fallback when userfaultfd is unavailable (kernel without it, or
//! `vm.unprivileged_userfaultfd = 0` for a process without CAP_SYS_PTRACE on
//! kernels before 5.11): [`Monitor::global`] returns why, and ranks run with
//! registration caching off — every eager send copies. Correctness first.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rmx_core::reuse::Pending;

/// Ranges a subscriber's queue holds before it overflows into a full flush.
pub const QUEUE: usize = 64;

/// Events the handler holds while the subscriber list is busy; beyond this
/// every subscriber is told to flush.
const BACKLOG: usize = 256;

/// One rank's queue of ranges to invalidate.
pub type Queue = Pending<QUEUE>;

// From <linux/userfaultfd.h> (checked against the 6.x header).
const UFFD_API: u64 = 0xAA;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_EVENT_REMAP: u64 = 1 << 2;
const UFFD_FEATURE_EVENT_REMOVE: u64 = 1 << 3;
const UFFD_FEATURE_EVENT_UNMAP: u64 = 1 << 6;
const UFFDIO_REGISTER_MODE_WP: u64 = 2;
const UFFD_EVENT_REMAP: u8 = 0x14;
const UFFD_EVENT_REMOVE: u8 = 0x15;
const UFFD_EVENT_UNMAP: u8 = 0x16;
const MSG_LEN: usize = 32;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

/// The process's userfaultfd and its subscribers.
pub struct Monitor {
    fd: OwnedFd,
    subscribers: Mutex<Vec<Arc<Queue>>>,
    busy: AtomicBool,
    events: AtomicU64,
}

impl Monitor {
    /// The process-wide monitor, started on first use; `Err` says why
    /// userfaultfd cannot be used here (then run without caching).
    pub fn global() -> Result<Arc<Monitor>, String> {
        static M: OnceLock<Result<Arc<Monitor>, String>> = OnceLock::new();
        M.get_or_init(Monitor::start).clone()
    }

    fn start() -> Result<Arc<Monitor>, String> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: plain system calls; the result is checked.
        let mut raw = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
        if raw < 0 {
            // Kernels before 5.11 do not know the user-mode-only flag.
            // SAFETY: as above.
            raw = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        }
        if raw < 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!(
                "userfaultfd is unavailable ({e}); run as root or set vm.unprivileged_userfaultfd=1"
            ));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as libc::c_int) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_EVENT_UNMAP
                | UFFD_FEATURE_EVENT_REMOVE
                | UFFD_FEATURE_EVENT_REMAP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes a uffdio_api.
        if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("userfaultfd lacks unmap/remove/remap events ({e})"));
        }
        let m = Arc::new(Monitor {
            fd,
            subscribers: Mutex::new(Vec::new()),
            busy: AtomicBool::new(false),
            events: AtomicU64::new(0),
        });
        let h = Arc::clone(&m);
        std::thread::Builder::new()
            .name("rmx-uffd".into())
            .spawn(move || h.handle())
            .map_err(|e| format!("cannot start the monitor thread: {e}"))?;
        Ok(m)
    }

    /// A new queue that receives every invalidation from now on, until
    /// [`unsubscribe`](Self::unsubscribe). The monitor holds it strongly, so
    /// its handler never frees memory (see the module notes on deadlock).
    pub fn subscribe(&self) -> Arc<Queue> {
        let q = Arc::new(Queue::new());
        let mut s = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        s.push(Arc::clone(&q));
        q
    }

    /// Stops delivering to `q` (its owner is going away).
    pub fn unsubscribe(&self, q: &Arc<Queue>) {
        let gone = {
            let mut s = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
            s.iter()
                .position(|x| Arc::ptr_eq(x, q))
                .map(|i| s.swap_remove(i))
        };
        drop(gone);
    }

    /// Watches the page-aligned range for unmap/remove/remap. Fails for
    /// memory userfaultfd cannot watch (e.g. some file mappings).
    pub fn watch(&self, addr: u64, len: u64) -> std::io::Result<()> {
        let mut reg = UffdioRegister {
            start: addr,
            len,
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes a uffdio_register.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits while the handler has read an event it has not queued yet.
    /// Yields while it waits: on a machine whose cores all run spinning ranks
    /// the handler may be waiting for this very core.
    #[inline]
    pub fn settle(&self) {
        let mut spins = 0u32;
        while self.busy.load(Ordering::SeqCst) {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// The handler loop. It must never wait for anything an application
    /// thread can hold while it is itself blocked on an event — a malloc
    /// arena lock held across a heap trim that unmaps a watched page, say —
    /// or the two wait for each other forever. So it reads events into fixed
    /// storage, delivers them only when the subscriber list is free
    /// (`try_lock`), keeps reading meanwhile, and never allocates or frees.
    fn handle(&self) {
        let mut msg = [0u8; MSG_LEN * 16];
        let mut backlog = [(0u64, 0u64); BACKLOG];
        let mut held = 0usize;
        let mut lost = false;
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Waiting to deliver: come back soon even without new events.
            let timeout = if held > 0 || lost { 1 } else { -1 };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, timeout) } > 0;
            if ready {
                self.busy.store(true, Ordering::SeqCst);
                loop {
                    // SAFETY: reads whole uffd_msg records into our buffer.
                    let n = unsafe {
                        libc::read(self.fd.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len())
                    };
                    if n <= 0 {
                        break;
                    }
                    for m in msg[..n as usize].chunks_exact(MSG_LEN) {
                        if let Some(r) = range_of(m) {
                            self.events.fetch_add(1, Ordering::Relaxed);
                            if held < BACKLOG {
                                backlog[held] = r;
                                held += 1;
                            } else {
                                lost = true;
                            }
                        }
                    }
                }
            }
            if held == 0 && !lost {
                self.busy.store(false, Ordering::SeqCst);
                continue;
            }
            let subs = match self.subscribers.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => continue,
            };
            for q in subs.iter() {
                if lost {
                    q.push_lost();
                }
                for &(start, len) in &backlog[..held] {
                    q.push(start, len);
                }
            }
            drop(subs);
            held = 0;
            lost = false;
            self.busy.store(false, Ordering::SeqCst);
        }
    }

    /// Changed ranges seen so far (unmap, remove, remap events).
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }
}

/// The range an event invalidates: `uffd_msg` is `event: u8`, 7 reserved
/// bytes, then the event's arguments as u64s.
fn range_of(m: &[u8]) -> Option<(u64, u64)> {
    let arg = |i: usize| u64::from_le_bytes(m[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"));
    match m[0] {
        // remove { start, end }
        UFFD_EVENT_UNMAP | UFFD_EVENT_REMOVE => Some((arg(0), arg(1).saturating_sub(arg(0)))),
        // remap { from, to, len }: the old range is gone.
        UFFD_EVENT_REMAP => Some((arg(0), arg(2))),
        _ => None,
    }
}
