//! The offload engine: the software NIC's own thread, which moves large
//! transfers while the ranks' threads compute. It sleeps on a condition
//! variable when idle, so it never spins against the rank threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Work handed to the engine: a copy, then what completes it.
pub struct Job {
    pub dst: usize,
    pub src: usize,
    pub len: usize,
    pub then: Box<dyn FnOnce() + Send>,
}

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
        // SAFETY: the poster checked both ranges against registered regions, and
        // the verbs contract keeps them valid and untouched until completion.
        unsafe { std::ptr::copy(job.src as *const u8, job.dst as *mut u8, job.len) };
        (job.then)();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.q.stop.store(true, Ordering::Release);
        self.q.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
