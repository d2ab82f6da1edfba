//! The library's one state per process, as MPI has it: before
//! `MPI_Init`, running (this process's rank of the job, its
//! communicators, requests and windows), and after `MPI_Finalize`. Every
//! call takes it under one lock, so calls from several threads are
//! serialised (`MPI_THREAD_SERIALIZED` is what rmx provides).

use std::sync::{Mutex, MutexGuard};

use rmx_linux::job::Attached;
use rmx_linux::rank::Rank;

use crate::abi::*;
use crate::comm::{Comm, Group, MAX_IDS};
use crate::error::{Error, Handler, Result};
use crate::request::Request;
use crate::table::Table;
use crate::window::Window;

/// Where the process is in MPI's life.
pub enum Phase {
    Before,
    Running(Box<Lib>),
    After,
}

/// A running library.
pub struct Lib {
    pub(crate) job: Attached,
    pub world: Comm,
    pub own: Comm,
    pub comms: Table<Comm>,
    pub reqs: Table<Request>,
    pub wins: Table<Window>,
    /// Requests freed by the caller while still running: ended here.
    pub orphans: Vec<Request>,
    /// The lowest communicator identity this rank has not used.
    pub next_id: u16,
    pub thread: std::ffi::c_int,
}

static STATE: Mutex<Phase> = Mutex::new(Phase::Before);

/// The state, locked.
pub fn lock() -> MutexGuard<'static, Phase> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the running library, or says MPI is not running.
pub fn with<R>(f: impl FnOnce(&mut Lib) -> Result<R>) -> Result<R> {
    match &mut *lock() {
        Phase::Running(lib) => f(lib),
        Phase::Before => Err(Error::new(
            MPI_ERR_OTHER,
            "MPI is not initialised: call MPI_Init first",
        )),
        Phase::After => Err(Error::new(MPI_ERR_OTHER, "MPI was finalised")),
    }
}

/// The handler of communicator `h`'s errors: `MPI_COMM_WORLD`'s when `h`
/// names none (an invalid handle has no handler of its own), fatal
/// outside MPI's life.
pub fn handler_of(h: Handle) -> Handler {
    match &*lock() {
        Phase::Running(lib) => lib.comm(h).unwrap_or(&lib.world).handler,
        _ => Handler::Fatal,
    }
}

/// The handler of a call not about a communicator: `MPI_COMM_WORLD`'s.
pub fn world_handler() -> Handler {
    handler_of(MPI_COMM_WORLD)
}

impl Lib {
    pub fn new(job: Attached, thread: std::ffi::c_int) -> Lib {
        let mut job = job;
        let (me, n) = (job.rank().rank(), job.rank().size());
        Lib {
            job,
            world: Comm::new(Group::World(n), me, 0),
            own: Comm::new(Group::List(vec![me]), 0, 1),
            comms: Table::new(1),
            reqs: Table::new(2),
            wins: Table::new(3),
            orphans: Vec::new(),
            next_id: 2,
            thread,
        }
    }

    pub fn rank(&mut self) -> &mut Rank {
        self.job.rank()
    }

    /// Gives the job back (after the caller's last collective).
    pub fn detach(self) -> Result<()> {
        self.job
            .detach()
            .map_err(|e| Error::new(MPI_ERR_OTHER, format!("leaving the job failed: {e}")))
    }

    pub fn comm(&self, h: Handle) -> Result<&Comm> {
        match h {
            MPI_COMM_WORLD => Ok(&self.world),
            MPI_COMM_SELF => Ok(&self.own),
            _ => self.comms.get(h).ok_or_else(|| bad_comm(h)),
        }
    }

    pub fn comm_mut(&mut self, h: Handle) -> Result<&mut Comm> {
        match h {
            MPI_COMM_WORLD => Ok(&mut self.world),
            MPI_COMM_SELF => Ok(&mut self.own),
            _ => self.comms.get_mut(h).ok_or_else(|| bad_comm(h)),
        }
    }

    /// A fresh identity, given the highest any member proposed.
    pub fn take_id(&mut self, agreed: u16) -> Result<u16> {
        if agreed >= MAX_IDS {
            return Err(Error::new(
                MPI_ERR_OTHER,
                format!("no communicator identity is left ({MAX_IDS} made): free some"),
            ));
        }
        self.next_id = agreed + 1;
        Ok(agreed)
    }
}

fn bad_comm(h: Handle) -> Error {
    let what = match h {
        MPI_COMM_NULL => "MPI_COMM_NULL is no communicator".to_string(),
        _ => format!("{h:#x} is no communicator"),
    };
    Error::new(MPI_ERR_COMM, what)
}
