//! The offload engine: the software NIC's own thread, which moves large
//! transfers while the ranks' threads compute. It sleeps on a condition
//! variable when idle, so it never spins against the rank threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::region::KeyError;

/// Work handed to the engine: a copy, then what completes it (with the
/// copy's outcome).
pub struct Job {
    pub dst: usize,
    pub src: usize,
    pub len: usize,
    /// Runs the copy it is given if the memory is still there (a remote
    /// key checked as the bytes move, see [`super::region::Pd::access`]);
    /// `None`: the poster's own memory, always copied.
    pub guard: Option<Guard>,
    pub then: Box<dyn FnOnce(Result<(), KeyError>) + Send>,
}

/// See [`Job::guard`].
pub type Guard = Box<dyn FnOnce(&mut dyn FnMut()) -> Result<(), KeyError> + Send>;

#[derive(Default)]
struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    wake: Condvar,
    stop: AtomicBool,
}

pub struct Engine {
    q: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    pub fn start() -> Engine {
        let q = Arc::new(Queue::default());
        let worker = Arc::clone(&q);
        let thread = std::thread::Builder::new()
            .name("rmx-loop-nic".into())
            .spawn(move || run(&worker))
            .expect("spawn the loop NIC thread");
        Engine {
            q,
            thread: Some(thread),
        }
    }

    pub fn submit(&self, job: Job) {
        self.q
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
        self.q.wake.notify_one();
    }
}

fn run(q: &Queue) {
    loop {
        let job = {
            let mut jobs = q.jobs.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(j) = jobs.pop_front() {
                    break j;
                }
                if q.stop.load(Ordering::Acquire) {
                    return;
                }
                jobs = q.wake.wait(jobs).unwrap_or_else(|e| e.into_inner());
            }
        };
        let (dst, src, len) = (job.dst, job.src, job.len);
        // SAFETY: the poster checked both ranges against registered regions;
        // the verbs contract keeps the poster's own valid and untouched
        // until completion, and the guard re-checks the peer's while the
        // bytes move (its owner may have deregistered it since).
        let mut copy = || unsafe { crate::copy::move_bytes(dst as *mut u8, src as *const u8, len) };
        let r = match job.guard {
            Some(g) => g(&mut copy),
            None => {
                copy();
                Ok(())
            }
        };
        (job.then)(r);
    }
}

impl Drop for Engine {
    /// Stops the thread once its queue is empty. The last handle on the
    /// fabric may be a finished job's, dropped on the engine's own thread:
    /// that thread then returns by itself and is not joined (a thread
    /// cannot join itself).
    fn drop(&mut self) {
        self.q.stop.store(true, Ordering::Release);
        self.q.wake.notify_all();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;

    /// The last handle on the fabric can be a job's, dropped on the
    /// engine's own thread; dropping the engine there joined the thread
    /// from itself, which panics.
    #[test]
    fn an_engine_dropped_on_its_own_thread_does_not_join_itself() {
        let engine = Arc::new(Mutex::new(Some(Engine::start())));
        // 0 pending, 1 dropped cleanly, 2 the drop panicked.
        let outcome = Arc::new(AtomicU8::new(0));
        let (e, o) = (Arc::clone(&engine), Arc::clone(&outcome));
        let nowhere = std::ptr::NonNull::<u8>::dangling().as_ptr() as usize;
        let job = Job {
            dst: nowhere,
            src: nowhere,
            len: 0,
            guard: None,
            then: Box::new(move |_| {
                let mine = e.lock().unwrap().take();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(mine)));
                o.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
            }),
        };
        engine.lock().unwrap().as_ref().unwrap().submit(job);
        let t0 = std::time::Instant::now();
        while outcome.load(Ordering::Acquire) == 0 {
            assert!(t0.elapsed().as_secs() < 30, "the job never ran");
            std::thread::yield_now();
        }
        assert_eq!(outcome.load(Ordering::Acquire), 1, "the drop panicked");
    }
}
