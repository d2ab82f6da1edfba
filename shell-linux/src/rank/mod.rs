//! A rank: one core [`Endpoint`] bound to one port of any [`Transport`], with the memory the
//! core names by handle (bounce slots, receive buffers, user buffers), and
//! optionally a progress thread that drives it while the application computes.
//!
//! Locking: the endpoint is a plain state machine and is never entered by two
//! threads at once. Without a progress thread the application's thread owns
//! it outright (no lock on any call). With one, the endpoint, the NIC port and
//! the memory handles live behind one mutex that each thread holds for the
//! length of a call or a progress round, never across a computation. A std
//! mutex rather than a spin lock: with more threads than cores (two ranks and
//! a progress thread on two cores) a waiter must sleep, not spin against the
//! holder it is waiting for.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use rmx_core::{
    Config, ConfigError, Endpoint, RecvError, Request, SendError, Sizes, Source, Stats, Status,
    Tables, TagSel, UserBuf,
};
use rmx_driver::task::Messages;

use crate::clock::now_ns;
use crate::monitor::Monitor;
use crate::reuse::{Calibration, ShellReuse};
use crate::transport::{AnyPort, Events, Transport};
use rmx_driver::heap::Heap;

mod drive;
mod driver;
mod epochs;
mod messages;
mod nic;
mod running;
mod sleep;
pub(crate) use running::Started;
mod spin;
mod tending;
mod thread;

pub(crate) use driver::Driver;
pub(crate) use epochs::Epochs;
pub use nic::ShellNic;
use thread::*;

pub use sleep::Armed;

/// The endpoint this shell builds: tables on the heap, sized from the job
/// ([`rmx_core::Sizes::for_job`]); zero-copy eager sends of frequently used
/// buffers when a policy is given.
pub type CoreEndpoint = Endpoint<Heap, Option<ShellReuse>>;

// The per-peer budget (1 KiB before buffers) is checked at compile time.
/// The communication context of the application's messages.
const USER_CONTEXT: u16 = rmx_core::wire::context::USER;

const _: () = assert!(CoreEndpoint::PEER_BYTES <= 1024);

/// The core configuration the `loop` transport runs with: reliable (no
/// sequence checks or acks), 8 KiB eager threshold, 64 credits per peer, and
/// inline sends up to what the port can inline.
pub fn loop_config() -> Config {
    Config {
        inline_max: u32::MAX,
        ..Config::reliable(8192, 64)
    }
}

/// Where a rank's driver lives.
enum Home<T: Transport> {
    /// Only the application's thread drives the endpoint: no lock.
    Own(Box<Driver<T>>),
    /// A progress thread drives it too.
    Shared(Arc<Mutex<Driver<T>>>, ProgressThread),
    /// Only inside `set_progress_thread`, between the two.
    Moving,
}

fn lock<T: Transport>(d: &Mutex<Driver<T>>) -> MutexGuard<'_, Driver<T>> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// One rank of a job, on any transport (by default whichever this shell's
/// job runner picked, [`AnyPort`]).
pub struct Rank<T: Transport + 'static = AnyPort> {
    home: Home<T>,
    me: u16,
    /// Ranks of the job.
    size: u16,
    /// Collectives started so far (their messages' tags carry it).
    pub(crate) collectives: u16,
    /// Windows created so far (their numbers).
    pub(crate) windows: u16,
    /// What [`wait`](Rank::wait) sleeps on once polling finds nothing.
    events: Events,
    /// Unique in the process ([`id`](Rank::id)).
    id: u64,
}

/// The next rank's [`Rank::id`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A pending operation and the user-buffer handle it holds.
#[must_use = "a request must be completed with wait or test"]
#[derive(Debug)]
pub struct Req {
    req: Request,
    buf: UserBuf,
}

/// The handle of a request that completed when started: it holds none.
const NO_USER: UserBuf = UserBuf(u32::MAX);

impl<T: Transport + 'static> Rank<T> {
    /// Rank `port.rank()` of `nranks`, using `cfg` for the core, fitted to
    /// what the port can do ([`Config::fit`]).
    pub fn new(port: T, nranks: u16, cfg: Config) -> Result<Rank<T>, ConfigError> {
        Self::build(port, nranks, cfg, None, None)
    }

    /// [`new`](Self::new) with tables of the given sizes instead of
    /// [`Sizes::for_job`]'s (tests that fill a table).
    #[cfg(test)]
    pub(crate) fn with_sizes(
        port: T,
        nranks: u16,
        cfg: Config,
        sizes: Sizes,
    ) -> Result<Rank<T>, ConfigError> {
        Self::build(port, nranks, cfg, None, Some(sizes))
    }

    /// A rank whose eager sends from frequently used buffers go zero-copy,
    /// with the cost model from `cal`. Needs the invalidation monitor: `Err`
    /// says why it is unavailable (use [`Rank::new`] then: every send copies).
    pub fn with_reuse(
        port: T,
        nranks: u16,
        cfg: Config,
        cal: &Calibration,
    ) -> Result<Rank<T>, String> {
        let monitor = Monitor::global()?;
        let policy = cal.policy()?;
        let mut r =
            Self::build(port, nranks, cfg, Some(policy), None).map_err(|e| format!("{e:?}"))?;
        r.with(|d| {
            d.nic.host().monitor = Some(Arc::clone(&monitor));
            d.watch = Some((Arc::clone(&monitor), monitor.subscribe()));
        });
        Ok(r)
    }

    fn build(
        port: T,
        nranks: u16,
        cfg: Config,
        reuse: Option<ShellReuse>,
        sizes: Option<Sizes>,
    ) -> Result<Rank<T>, ConfigError> {
        let me = port.rank();
        let cfg = cfg.fit(&port.caps());
        let sizes = sizes.unwrap_or_else(|| Sizes::for_job(nranks, &cfg));
        let ep = Box::new(CoreEndpoint::with_reuse(
            cfg,
            me,
            nranks,
            Tables::new(&sizes),
            reuse,
        )?);
        let events = port.events();
        let d = Driver {
            ep,
            nic: nic::shell_nic(
                port,
                cfg.eager_threshold as usize,
                sizes.slots,
                sizes.requests,
                2 * sizes.requests,
            ),
            watch: None,
            now: now_ns(),
            idle: 0,
            idle_from: 0,
            spin: Default::default(),
            wcs: [crate::transport::Completion {
                wr_id: 0,
                result: Ok(()),
            }; driver::WCS],
            lossy: !cfg.reliable,
            windows: Default::default(),
            pinned: Vec::new(),
            running: Vec::new(),
            started: 0,
        };
        Ok(Rank {
            home: Home::Own(Box::new(d)),
            me,
            size: nranks,
            collectives: 0,
            windows: 0,
            events,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// This rank's number among the process's ranks: requests carry it
    /// so one is never completed on another rank's endpoint.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Runs `f` on the driver: directly, or under the lock when a progress
    /// thread shares it.
    /// `f` is called in one place, so it is inlined once.
    #[inline(always)]
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut Driver<T>) -> R) -> R {
        let mut guard;
        let d = match &mut self.home {
            Home::Own(d) => &mut **d,
            Home::Shared(d, _) => {
                guard = lock(d);
                &mut *guard
            }
            Home::Moving => unreachable!("no call runs while the driver moves"),
        };
        f(d)
    }

    #[inline]
    fn with_ref<R>(&self, f: impl FnOnce(&Driver<T>) -> R) -> R {
        let guard;
        let d = match &self.home {
            Home::Own(d) => &**d,
            Home::Shared(d, _) => {
                guard = lock(d);
                &*guard
            }
            Home::Moving => unreachable!("no call runs while the driver moves"),
        };
        f(d)
    }

    /// Starts or stops this rank's progress thread (off by default).
    pub fn set_progress_thread(&mut self, on: bool) {
        let home = std::mem::replace(&mut self.home, Home::Moving);
        self.home = match (home, on) {
            (Home::Own(d), true) => {
                let events = d.nic.port_ref().events();
                let d = Arc::new(Mutex::new(*d));
                let t = ProgressThread::start(Arc::clone(&d), events, self.me);
                Home::Shared(d, t)
            }
            (Home::Shared(d, t), false) => {
                drop(t);
                match Arc::try_unwrap(d) {
                    Ok(m) => Home::Own(Box::new(m.into_inner().unwrap_or_else(|e| e.into_inner()))),
                    Err(_) => unreachable!("the progress thread ended and dropped its handle"),
                }
            }
            (h, _) => h,
        };
    }

    /// A progress thread drives this rank.
    pub fn progress_thread(&self) -> bool {
        matches!(self.home, Home::Shared(..))
    }

    /// The zero-copy policy's state, if this rank has one, seen by `f`.
    pub fn reuse<R>(&self, f: impl FnOnce(Option<&ShellReuse>) -> R) -> R {
        self.with_ref(|d| f(d.ep.reuse().as_ref()))
    }

    pub fn rank(&self) -> u16 {
        self.me
    }

    /// Ranks of the job.
    pub fn size(&self) -> u16 {
        self.size
    }

    pub fn stats(&self) -> Stats {
        self.with_ref(|d| *d.ep.stats())
    }

    /// The configuration the core runs with (fitted to the transport).
    pub fn config(&self) -> Config {
        self.with_ref(|d| *d.ep.config())
    }

    /// `peer` was given up (its retransmissions went unanswered, or the
    /// transport said it is gone): every call naming it is refused.
    pub fn failed(&self, peer: u16) -> bool {
        self.with_ref(|d| d.ep.failed(peer))
    }

    /// What the transport dropped or refused below the core (bad frames on
    /// `eth`, injected faults).
    pub fn transport_counters(&self) -> crate::transport::Counters {
        self.with_ref(|d| d.nic.port_ref().counters())
    }

    /// Starts a send of `len` bytes at `ptr`. Above the eager threshold the
    /// request completes once the receiver has the data (synchronous).
    ///
    /// # Safety
    /// The bytes must stay valid and unmodified until the request completes.
    pub unsafe fn isend_raw(
        &mut self,
        dest: u16,
        tag: u32,
        ptr: *const u8,
        len: usize,
    ) -> Result<Req, SendError> {
        // SAFETY: the caller's contract.
        unsafe { self.isend_in(dest, tag, USER_CONTEXT, ptr, len) }
    }

    /// [`isend_raw`](Self::isend_raw) in communication context `context`
    /// (collectives use their own, so they never match user messages; an
    /// MPI library gives each communicator its own).
    ///
    /// # Safety
    /// As [`isend_raw`](Self::isend_raw).
    pub unsafe fn isend_in(
        &mut self,
        dest: u16,
        tag: u32,
        context: u16,
        ptr: *const u8,
        len: usize,
    ) -> Result<Req, SendError> {
        // SAFETY: the caller's contract.
        self.with(|d| unsafe { d.isend(dest, tag, context, ptr, len) })
    }

    /// Starts a receive into `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid, and not be accessed, until the request completes.
    pub unsafe fn irecv_raw(
        &mut self,
        src: Source,
        tag: TagSel,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Req, RecvError> {
        // SAFETY: the caller's contract.
        unsafe { self.irecv_in(src, tag, USER_CONTEXT, ptr, len) }
    }

    /// [`irecv_raw`](Self::irecv_raw) in communication context `context`.
    ///
    /// # Safety
    /// As [`irecv_raw`](Self::irecv_raw).
    pub unsafe fn irecv_in(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Req, RecvError> {
        // SAFETY: the caller's contract.
        self.with(|d| unsafe { d.irecv(src, tag, context, ptr, len) })
    }

    /// Completes `req` if it is done; otherwise hands it back. Does not
    /// drive the endpoint (call [`progress`](Self::progress) for that),
    /// but sends still batched in the transport leave.
    pub fn test(&mut self, req: Req) -> Result<Status, Req> {
        if req.req == Request::COMPLETE {
            return Ok(self.sent_when_started(&req));
        }
        self.with(|d| {
            d.nic.port().doorbell();
            d.test(req)
        })
    }

    /// Drives progress until `req` completes.
    // Small, and on every message's path: inlined into the caller, the
    // common endings (a send complete when started, a first round that
    // completes) cost no call of their own.
    #[inline(always)]
    pub fn wait(&mut self, req: Req) -> Status {
        // Most waits end in their first round (a reply already in, a send
        // already copied out): that round runs without the resting below.
        if req.req == Request::COMPLETE {
            return self.sent_when_started(&req);
        }
        match self.poll_once(req) {
            Ok(st) => st,
            Err((req, idle)) => self.wait_on(req, idle),
        }
    }

    /// The status of a send that completed when started (it holds no
    /// buffer handle): nothing to progress or test, but it may still sit
    /// in the batch the doorbell sends.
    #[inline]
    fn sent_when_started(&mut self, req: &Req) -> Status {
        debug_assert_eq!(
            req.buf, NO_USER,
            "a request complete when started holds no buffer"
        );
        self.with(|d| d.nic.port().doorbell());
        Status::SENT
    }

    /// One round of [`wait`](Self::wait): progress, then the test; if
    /// pending, the idle rounds so far.
    #[inline]
    fn poll_once(&mut self, req: Req) -> Result<Status, (Req, u32)> {
        self.with(|d| {
            // Progress first: a request waited on is rarely complete
            // already, and an empty poll costs less than a table lookup.
            d.progress();
            d.test(req).map_err(|req| (req, d.idle))
        })
    }

    /// The rest of a [`wait`](Self::wait) whose first round found `req`
    /// pending after `idle` empty rounds.
    #[inline(never)]
    fn wait_on(&mut self, mut req: Req, idle: u32) -> Status {
        let mut armed = None;
        self.rest(idle, &mut armed);
        loop {
            match self.poll_once(req) {
                Ok(st) => return st,
                Err((r, idle)) => {
                    req = r;
                    self.rest(idle, &mut armed);
                }
            }
        }
    }

    /// Drives progress until every buffered send has left for the NIC
    /// ([`flushed`](Self::flushed)). A thread must do this before it turns
    /// to another rank it drives: a send completes for the application once
    /// copied, and one still queued here moves only while this rank is driven.
    pub fn flush(&mut self) {
        let mut armed = None;
        loop {
            let (done, idle) = self.with(|d| {
                d.progress();
                (d.ep.flushed(), d.idle)
            });
            if done {
                return;
            }
            self.rest(idle, &mut armed);
        }
    }

    /// After a waiter's poll: `idle` empty polls in a row. Cheap while the
    /// clock has not been read yet; then [`idle`](Self::idle).
    #[inline]
    fn rest(&mut self, idle: u32, armed: &mut Option<u64>) {
        if idle < CLOCK_POLLS - 1 {
            *armed = None;
        } else {
            self.idle(armed);
        }
    }

    /// A waiter's polls found nothing for a while: it leaves the core to the NIC's thread if
    /// that works for this rank, and after its [`spin`](spin::Spin) sleeps on the
    /// NIC's events, so that on an oversubscribed machine (ranks, progress
    /// threads and the `loop` NIC's own thread sharing few cores) the thread
    /// with the work gets the core instead of a spinner. `armed` carries the
    /// event count across the one poll between arming and sleeping.
    #[inline(never)]
    fn idle(&mut self, armed: &mut Option<u64>) {
        let sleeping = armed.is_some();
        let (idle_ns, spin_ns, nic_working, next) = self.with(|d| {
            let next = if sleeping { d.timers() } else { None };
            (d.idle_ns(), d.spin.budget(), d.nic.port_ref().busy(), next)
        });
        if nic_working {
            std::thread::yield_now();
        }
        if idle_ns < spin_ns {
            *armed = None;
            return;
        }
        match armed.take() {
            // Arm, then poll once more before sleeping: a packet that came in
            // between is seen by that poll or raises the event.
            None => {
                self.events.arm();
                *armed = Some(self.events.count());
            }
            Some(seen) => {
                let nap = next.map_or(WAIT_NAP, |ns| Duration::from_nanos(ns).min(WAIT_NAP));
                self.events.wait(seen, nap);
            }
        }
    }

    /// Blocking send (returns once the data left `data`).
    pub fn send(&mut self, dest: u16, tag: u32, data: &[u8]) -> Result<(), SendError> {
        // SAFETY: waited for before `data`'s borrow ends.
        let r = unsafe { self.isend_raw(dest, tag, data.as_ptr(), data.len())? };
        self.wait(r);
        Ok(())
    }

    /// Blocking receive into `data`.
    pub fn recv(&mut self, src: Source, tag: TagSel, data: &mut [u8]) -> Result<Status, RecvError> {
        // SAFETY: waited for before `data`'s borrow ends.
        let r = unsafe { self.irecv_raw(src, tag, data.as_mut_ptr(), data.len())? };
        Ok(self.wait(r))
    }

    /// Request handles free (see [`rmx_core::Endpoint::free_requests`]).
    pub(crate) fn free_requests(&self) -> usize {
        self.with_ref(|d| d.ep.free_requests())
    }

    /// Sends buffered in the core (waiting for a free send entry or a
    /// credit) still need this rank to progress; `true` once none is left.
    pub fn flushed(&self) -> bool {
        self.with_ref(|d| d.ep.flushed())
    }

    /// The oldest message here that a receive of `src` and `tag` would
    /// take now, left for that receive (MPI's `Iprobe`), after one round
    /// of progress: its sender, tag and whole length; `None` if none came.
    pub fn iprobe(&mut self, src: Source, tag: TagSel) -> Result<Option<Status>, RecvError> {
        self.iprobe_in(src, tag, USER_CONTEXT)
    }

    /// [`iprobe`](Self::iprobe) in communication context `context`.
    pub fn iprobe_in(
        &mut self,
        src: Source,
        tag: TagSel,
        context: u16,
    ) -> Result<Option<Status>, RecvError> {
        self.with(|d| {
            d.progress();
            d.ep.iprobe(d.now, src, tag, context)
        })
    }

    /// Drives progress until `done` (asked after each round) has an
    /// answer, resting as [`wait`](Self::wait) does while nothing moves:
    /// the wait of a runtime whose requests are more than one of this
    /// rank's (several at once, or steps of its own).
    pub fn wait_until<R>(&mut self, mut done: impl FnMut(&mut Self) -> Option<R>) -> R {
        let mut armed = None;
        loop {
            self.with(|d| d.progress());
            if let Some(r) = done(self) {
                return r;
            }
            let idle = self.with_ref(|d| d.idle);
            self.rest(idle, &mut armed);
        }
    }

    /// Waits for a message [`iprobe`](Self::iprobe) finds (MPI's `Probe`).
    pub fn probe(&mut self, src: Source, tag: TagSel) -> Result<Status, RecvError> {
        if let Some(st) = self.iprobe(src, tag)? {
            return Ok(st);
        }
        self.drive(|d| match d.ep.iprobe(d.now, src, tag, USER_CONTEXT) {
            Ok(None) => Poll::Pending,
            Ok(Some(st)) => Poll::Ready(Ok(st)),
            Err(e) => Poll::Ready(Err(e)),
        })
    }

    /// Cancels a posted receive; `true` if it had not matched yet.
    pub fn cancel(&mut self, req: &Req) -> bool {
        self.with(|d| d.ep.cancel(req.req).unwrap_or(false))
    }

    /// Waits for every request of `reqs`: the first fault among them.
    #[cfg(test)]
    pub(crate) fn wait_all(
        &mut self,
        reqs: impl IntoIterator<Item = Req>,
    ) -> Option<rmx_core::RecvFault> {
        let mut fault = None;
        for q in reqs {
            fault = fault.or(self.wait(q).fault);
        }
        fault
    }

    /// Polls the NIC once: receives, send completions, and (every few idle
    /// rounds) the clock and the core's timers. Returns packets handled.
    #[inline]
    pub fn progress(&mut self) -> usize {
        self.with(|d| d.progress())
    }

    /// Polls the NIC once and runs the core's timers that are due. For a
    /// rank driven beside another's stalled wait: its own idle count would
    /// run them only every few dozen calls, and a peer may wait on its
    /// retransmission or its answer to a probe.
    pub fn tend(&mut self) {
        self.with(|d| {
            d.progress();
            d.timers();
        });
    }
}

impl Rank<AnyPort> {
    /// `f` of this rank's port where it is a `P` (beneath any decorator),
    /// else `None`: what a transport's own tests and floors read of it.
    pub fn with_port<P: 'static, R>(&self, f: impl FnOnce(&P) -> R) -> Option<R> {
        self.with_ref(|d| d.nic.port_ref().inner::<P>().map(f))
    }
}

#[cfg(test)]
mod tests {
    use super::{loop_config, Rank};
    use crate::loopnic::{Fabric, LoopConfig};
    use rmx_core::{Sizes, Source, TagSel};

    /// Sends done when started hold no buffer handle while their requests
    /// wait to be collected: a rank with 8 handles keeps 40 such requests
    /// and still posts receives. Before, each kept its handle until tested,
    /// and the ninth send was refused (`RequestTableFull`).
    #[test]
    fn requests_done_when_started_hold_no_handle() {
        let fabric = Fabric::new(1, LoopConfig::default()).expect("the default sizes fit");
        let cfg = loop_config();
        let mut sizes = Sizes::for_job(1, &cfg);
        sizes.requests = 8;
        let mut r = Rank::with_sizes(fabric.port(0), 1, cfg, sizes).expect("rank");
        let b = [7u8; 8];
        // SAFETY: `b` outlives the requests, waited for below.
        let sent: Vec<_> = (0..40)
            .map(|k| unsafe { r.isend_in(0, k, 0, b.as_ptr(), 8) })
            .collect();
        assert!(
            sent.iter().all(|q| q.is_ok()),
            "{:?}",
            sent.iter().find(|q| q.is_err())
        );
        let mut got = [0u8; 8];
        for k in 0..40 {
            r.recv(Source::Rank(0), TagSel::Tag(k), &mut got)
                .expect("a handle is free");
            assert_eq!(got, b);
        }
        assert_eq!(r.wait_all(sent.into_iter().flatten()), None);
    }
}
