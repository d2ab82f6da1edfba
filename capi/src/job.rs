//! Where a rank comes from: `rmx_init` for one rank per process under a
//! launcher (hydra's `mpiexec`, Slurm's `srun`, Open MPI's `mpirun`:
//! PMI-1 or PMIx), and `rmx_run`, which runs a `main` on every rank,
//! as threads of this process or as this process's one rank when a
//! launcher started it. The transport and its settings come from the
//! environment: `RMX_TRANSPORT` (default `loop`), `RMX_IFACE`,
//! `RMX_DEVICE`.

use std::ffi::{c_int, c_void};

use rmx_core::Config;
use rmx_linux::job::{self, Net};
use rmx_linux::lab::TempLab;
use rmx_linux::transport::env;

use crate::errors::{Error, RMX_ERR_ARG, RMX_ERR_BUSY, RMX_ERR_SETUP};
use crate::guard::{guard, out};
use crate::rank::{rmx_rank_t, with};
use crate::version::check;

/// A rank's program, as `rmx_run` calls it: the rank (valid until it
/// returns) and the caller's `arg`; what it returns (0 for success).
pub type rmx_main_t =
    Option<unsafe extern "C" fn(rank: *mut rmx_rank_t, arg: *mut c_void) -> c_int>;

/// The most ranks `rmx_run` starts as threads of one process.
pub const RMX_THREADS_MAX: u16 = 256;

/// The core's configuration for ranks C starts.
fn config() -> Config {
    rmx_linux::rank::loop_config()
}

/// The network the environment names, for `threads` ranks as threads
/// or (`launched`) this process's one.
fn network(launched: bool, threads: u16) -> Result<(Net, Option<TempLab>), Error> {
    env::open(launched, threads, |k| std::env::var(k).ok())
        .map_err(|e| Error::new(RMX_ERR_SETUP, e.to_string()))
}

/// Sets up this process's rank of a job a launcher started (the
/// transport from the environment) into `*rank`: 0, or a negative code
/// (`RMX_ERR_SETUP` without a launcher: `rmx_last_error` says what to
/// do). Called through `rmx_init`, which passes the header's
/// `RMX_API_VERSION`.
///
/// Contract: `rank` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_init_version(api: u32, rank: *mut *mut rmx_rank_t) -> c_int {
    guard(|| {
        check(api)?;
        // SAFETY: the caller's contract.
        let rank = unsafe { out(rank, "rank") }?;
        if !rmx_linux::pmi::launched() {
            return Err(Error::from(job::JobError::NotLaunched));
        }
        let (net, _lab) = network(true, 1)?;
        let attached = job::attach(&net, config())?;
        *rank = Box::into_raw(Box::new(rmx_rank_t::attached(attached)));
        Ok(0)
    })
}

/// Ends a rank `rmx_init` set up, once every rank of the job got here
/// (its sends delivered), and tells the launcher: 0, or a negative code.
/// Refused (`RMX_ERR_BUSY`, the rank still usable) while requests of it
/// are live: end them first. The pointer is invalid afterwards.
///
/// Contract: `rank` is null or a rank from `rmx_init`, not finalized.
#[no_mangle]
pub unsafe extern "C" fn rmx_finalize(rank: *mut rmx_rank_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (live, attached) = unsafe { with(rank, |s| Ok((s.requests.len(), s.attached()))) }?;
        if !attached {
            return Err(Error::arg(
                "rmx_finalize takes ranks from rmx_init (rmx_run ends its own)",
            ));
        }
        if live > 0 {
            return Err(Error::new(
                RMX_ERR_BUSY,
                format!(
                    "{live} requests are still live: wait for or cancel them before rmx_finalize"
                ),
            ));
        }
        // SAFETY: a live rank set up by rmx_init, which made it on the
        // heap; the caller gives it up.
        let r = unsafe { Box::from_raw(rank) };
        let a = r.retire().expect("an attached rank");
        Ok(a.detach().map(|()| 0)?)
    })
}

/// The caller's `arg`, shared by every rank's thread (its thread safety
/// is the caller's, as with `pthread_create`).
struct Arg(*mut c_void);

// SAFETY: rmx only passes the pointer on, never dereferences it.
unsafe impl Sync for Arg {}

impl Arg {
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Runs `main` on every rank of a job: as `threads` threads of this
/// process (1 … `RMX_THREADS_MAX`), or, when a launcher started it, once,
/// on this process's rank
/// (`threads` is then ignored). The transport from the environment. Each
/// rank's live requests are ended when its `main` returns, so no buffer
/// of it is written afterwards. 0 when every `main` returned 0; else the
/// first rank's non-zero return, or a negative code of rmx's.
///
/// Contract: `main` is null or a function as `rmx_main_t` says.
#[no_mangle]
pub unsafe extern "C" fn rmx_run_version(
    api: u32,
    threads: u16,
    main: rmx_main_t,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        check(api)?;
        let main = main.ok_or_else(|| Error::arg("main is null"))?;
        let arg = Arg(arg);
        let launched = rmx_linux::pmi::launched();
        if !launched && !(1..=RMX_THREADS_MAX).contains(&threads) {
            return Err(Error::new(
                RMX_ERR_ARG,
                format!("threads is {threads}: 1 to {RMX_THREADS_MAX} ranks run as threads of one process; start more as processes under a launcher"),
            ));
        }
        let (net, _lab) = network(launched, threads)?;
        let body = |r: &mut rmx_linux::rank::Rank| {
            let mut c = rmx_rank_t::lent(r);
            // SAFETY: the caller's contract; the rank lives until it returns.
            let code = unsafe { main(&mut c, arg.get()) };
            crate::end::end_all(&mut c.lock());
            let _ = c.retire();
            code
        };
        let codes = match launched {
            true => {
                let mut a = job::attach(&net, config())?;
                let code = body(a.rank());
                a.detach()?;
                vec![code]
            }
            false => job::try_run(threads, config(), &net, body)?,
        };
        Ok(codes.into_iter().find(|&c| c != 0).unwrap_or(0))
    })
}
