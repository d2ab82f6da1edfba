//! What a waiting thread sleeps on: a software NIC's event counter, or a
//! descriptor that `poll(2)` watches (a socket, a verbs completion
//! channel) beside an eventfd that wakes the sleeper on demand.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::eventfd::{bump, drain, eventfd};
use crate::loopnic;

/// A handle on one port's events; clones share them.
#[derive(Clone)]
pub enum Events {
    /// `loop`'s completion channel.
    Loop(loopnic::Channel),
    /// A descriptor that turns readable when the port has work.
    Fd(FdEvents),
}

impl Events {
    /// Events so far; pass to [`wait`](Self::wait).
    pub fn count(&self) -> u64 {
        match self {
            Events::Loop(e) => e.count(),
            Events::Fd(e) => e.count(),
        }
    }

    /// Sleeps until an event after `seen`, or `timeout`.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        match self {
            Events::Loop(e) => {
                e.wait(seen, timeout);
            }
            Events::Fd(e) => e.wait(seen, timeout),
        }
    }

    /// Makes the next packet raise an event even if unsolicited. A readable
    /// socket always does; a completion channel is asked to.
    pub fn arm(&self) {
        match self {
            Events::Loop(e) => e.arm(),
            Events::Fd(e) => e.arm(),
        }
    }

    /// Wakes the sleeper (to stop it).
    pub fn kick(&self) {
        match self {
            Events::Loop(e) => e.kick(),
            Events::Fd(e) => e.kick(),
        }
    }

    /// A descriptor that turns readable when the port has work, for a
    /// sleeper outside rmx (`poll(2)`, `epoll`: what `ucp_worker_get_efd`
    /// gives); it stays so until [`clear`](Self::clear). Owned by the
    /// port's events.
    pub fn fd(&self) -> std::io::Result<RawFd> {
        match self {
            Events::Loop(e) => e.fd(),
            Events::Fd(e) => e.sleep_fd(),
        }
    }

    /// Takes what made [`fd`](Self::fd) readable, before arming again.
    pub fn clear(&self) {
        match self {
            Events::Loop(e) => e.clear(),
            Events::Fd(e) => e.take_ready(),
        }
    }
}

/// A descriptor that must be asked for its next event and whose events
/// must be taken once it turns readable (a verbs completion channel).
pub trait Notifier: Send + Sync {
    /// Asks for an event on the next packet, solicited or not.
    fn arm(&self);
    /// The descriptor turned readable: take what it holds, so that it does
    /// not stay readable, and ask for the next event the port wants.
    fn take(&self);
}

struct FdShared {
    /// The port's descriptor; the port keeps it open as long as it lives,
    /// and holds a clone of this handle, so this never outlives it.
    watched: Arc<OwnedFd>,
    /// What `poll(2)` waits for on `watched`.
    ready: i16,
    wake: OwnedFd,
    kicks: AtomicU64,
    notifier: Option<Arc<dyn Notifier>>,
    /// An epoll descriptor watching `watched` for `ready`, made for a
    /// sleeper outside rmx.
    sleep: std::sync::OnceLock<OwnedFd>,
}

/// Sleeping in `poll(2)` on a port's descriptor; level-triggered, so a
/// packet that arrived before the sleep ends it at once.
#[derive(Clone)]
pub struct FdEvents(Arc<FdShared>);

impl FdEvents {
    /// Events on `watched` (readable means work).
    pub fn new(watched: Arc<OwnedFd>) -> std::io::Result<FdEvents> {
        FdEvents::notified(watched, None)
    }

    /// Events on `watched` where work is `ready` (`POLLIN`, or the
    /// module's `POLLRDBAND` for frames) rather than readable.
    pub fn when(watched: Arc<OwnedFd>, ready: i16) -> std::io::Result<FdEvents> {
        let mut e = FdEvents::notified(watched, None)?;
        Arc::get_mut(&mut e.0).expect("not shared yet").ready = ready;
        Ok(e)
    }

    /// Events on `watched`, armed and taken through `notifier`.
    pub fn notified(
        watched: Arc<OwnedFd>,
        notifier: Option<Arc<dyn Notifier>>,
    ) -> std::io::Result<FdEvents> {
        Ok(FdEvents(Arc::new(FdShared {
            watched,
            ready: libc::POLLIN,
            wake: eventfd()?,
            kicks: AtomicU64::new(0),
            notifier,
            sleep: std::sync::OnceLock::new(),
        })))
    }

    /// An epoll descriptor readable while the port's is ready (see
    /// [`Events::fd`]).
    fn sleep_fd(&self) -> std::io::Result<RawFd> {
        if self.0.sleep.get().is_none() {
            // SAFETY: epoll_create1 with a flag only; owned at once.
            let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if ep < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: a fresh descriptor nothing else owns.
            let ep = unsafe { OwnedFd::from_raw_fd(ep) };
            let mut ev = libc::epoll_event {
                events: self.0.ready as u16 as u32,
                u64: 0,
            };
            // SAFETY: a valid epoll descriptor, the port's, and an event.
            let r = unsafe {
                libc::epoll_ctl(
                    ep.as_raw_fd(),
                    libc::EPOLL_CTL_ADD,
                    self.0.watched.as_raw_fd(),
                    &mut ev,
                )
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let _ = self.0.sleep.set(ep);
        }
        Ok(self.0.sleep.get().expect("set above").as_raw_fd())
    }

    /// Takes an event the port's descriptor holds (a completion channel's),
    /// if it is ready now.
    fn take_ready(&self) {
        let mut p = [pollfd(self.0.watched.as_raw_fd(), self.0.ready)];
        // SAFETY: one initialised pollfd, no wait.
        if unsafe { libc::poll(p.as_mut_ptr(), 1, 0) } > 0 && p[0].revents != 0 {
            if let Some(t) = &self.0.notifier {
                t.take();
            }
        }
    }

    fn arm(&self) {
        if let Some(n) = &self.0.notifier {
            n.arm();
        }
    }

    fn count(&self) -> u64 {
        self.0.kicks.load(Ordering::Acquire)
    }

    fn wait(&self, seen: u64, timeout: Duration) {
        if self.count() != seen {
            return;
        }
        let mut fds = [
            pollfd(self.0.watched.as_raw_fd(), self.0.ready),
            pollfd(self.0.wake.as_raw_fd(), libc::POLLIN),
        ];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: two initialised pollfd entries and a valid timeout.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if n > 0 && fds[0].revents != 0 {
            if let Some(t) = &self.0.notifier {
                t.take();
            }
        }
        if n > 0 && fds[1].revents != 0 {
            drain(&self.0.wake);
        }
    }

    fn kick(&self) {
        self.0.kicks.fetch_add(1, Ordering::AcqRel);
        bump(&self.0.wake);
    }
}

fn pollfd(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}
