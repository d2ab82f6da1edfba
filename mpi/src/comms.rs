//! Communicator calls: rank and size, duplication and splitting (each a
//! collective over the parent that agrees on the new communicator's
//! identity), freeing, comparing, and the error handler.

use std::ffi::c_int;

use crate::abi::*;
use crate::args::out;
use crate::comm::{Comm, Group};
use crate::error::{call, Error, Handler, Result};
use crate::sched::{Buf, Bufs, Place, Plan, Schedule};
use crate::state::{handler_of, with, Lib};

/// Every member's `mine`, gathered in rank order on every member of `comm`.
fn allgather(lib: &mut Lib, comm: Handle, mine: &[u8]) -> Result<Vec<u8>> {
    let c = lib.comm_mut(comm)?;
    let (n, len) = (c.size(), mine.len());
    let mut all = vec![0u8; len * n as usize];
    let mut p = Plan::new(n, c.me);
    let whole = Buf::new(Place::Recv, 0, all.len());
    p.gather(0, Buf::new(Place::Send, 0, len), whole);
    p.bcast(0, whole);
    let bufs = Bufs {
        send: mine.as_ptr(),
        send_len: len,
        recv: all.as_mut_ptr(),
        recv_len: all.len(),
    };
    // SAFETY: both buffers outlive the wait below.
    let s = unsafe { Schedule::new(p, c, bufs, None) };
    s.wait(lib.rank())?;
    Ok(all)
}

/// What each member says when a communicator is made from `comm`.
struct Said {
    color: i32,
    key: i32,
    next: u16,
}

fn gather_said(lib: &mut Lib, comm: Handle, color: i32, key: i32) -> Result<Vec<Said>> {
    let mut mine = Vec::with_capacity(12);
    mine.extend_from_slice(&color.to_ne_bytes());
    mine.extend_from_slice(&key.to_ne_bytes());
    mine.extend_from_slice(&u32::from(lib.next_id).to_ne_bytes());
    let all = allgather(lib, comm, &mine)?;
    let word = |c: &[u8], i: usize| i32::from_ne_bytes(c[4 * i..4 * i + 4].try_into().expect("4"));
    Ok(all
        .chunks_exact(12)
        .map(|c| Said {
            color: word(c, 0),
            key: word(c, 1),
            next: word(c, 2) as u16,
        })
        .collect())
}

/// A communicator of the members of `comm` that gave this rank's color,
/// ordered by key then rank (`None` for `MPI_UNDEFINED`).
fn split(lib: &mut Lib, comm: Handle, color: i32, key: i32) -> Result<Option<Comm>> {
    if color < 0 && color != MPI_UNDEFINED {
        return Err(Error::arg(format!("color {color} is negative")));
    }
    let said = gather_said(lib, comm, color, key)?;
    let agreed = said.iter().map(|s| s.next).max().unwrap_or(0);
    let id = lib.take_id(agreed)?;
    if color == MPI_UNDEFINED {
        return Ok(None);
    }
    let parent = lib.comm(comm)?;
    let mut members: Vec<(i32, u16)> = said
        .iter()
        .enumerate()
        .filter(|(_, s)| s.color == color)
        .map(|(i, s)| (s.key, i as u16))
        .collect();
    members.sort();
    let me = members
        .iter()
        .position(|&(_, i)| i == parent.me)
        .expect("this rank gave its own color") as u16;
    let ranks = members
        .iter()
        .map(|&(_, i)| parent.group.job_rank(i))
        .collect();
    let mut c = Comm::new(Group::List(ranks), me, id);
    c.handler = parent.handler;
    Ok(Some(c))
}

/// The new communicator's handle, written to `newcomm`.
fn keep(lib: &mut Lib, c: Option<Comm>, newcomm: &mut Handle) {
    *newcomm = match c {
        Some(c) => lib.comms.insert(c),
        None => MPI_COMM_NULL,
    };
}

/// This rank's place in the communicator.
///
/// # Safety
/// `rank` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: Handle, rank: *mut c_int) -> c_int {
    call(
        "MPI_Comm_rank",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                *unsafe { out(rank, "rank") }? = c_int::from(lib.comm(comm)?.me);
                Ok(())
            })
        },
    )
}

/// How many ranks the communicator holds.
///
/// # Safety
/// `size` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: Handle, size: *mut c_int) -> c_int {
    call(
        "MPI_Comm_size",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                *unsafe { out(size, "size") }? = c_int::from(lib.comm(comm)?.size());
                Ok(())
            })
        },
    )
}

/// A copy of the communicator with its own contexts (collective).
///
/// # Safety
/// `newcomm` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: Handle, newcomm: *mut Handle) -> c_int {
    call(
        "MPI_Comm_dup",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let newcomm = unsafe { out(newcomm, "newcomm") }?;
                let me = lib.comm(comm)?.me as i32;
                let c = split(lib, comm, 0, me)?;
                keep(lib, c, newcomm);
                Ok(())
            })
        },
    )
}

/// Communicators of the members that give the same color, ordered by key
/// (collective; `MPI_UNDEFINED` gives `MPI_COMM_NULL`).
///
/// # Safety
/// `newcomm` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: Handle,
    color: c_int,
    key: c_int,
    newcomm: *mut Handle,
) -> c_int {
    call(
        "MPI_Comm_split",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let newcomm = unsafe { out(newcomm, "newcomm") }?;
                let c = split(lib, comm, color, key)?;
                keep(lib, c, newcomm);
                Ok(())
            })
        },
    )
}

/// Frees a communicator made by dup or split; `*comm` becomes `MPI_COMM_NULL`.
///
/// # Safety
/// `comm` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut Handle) -> c_int {
    // SAFETY: the caller's contract (read for the handler only).
    let h = unsafe { comm.as_ref() }.copied().unwrap_or(MPI_COMM_NULL);
    call(
        "MPI_Comm_free",
        || handler_of(h),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let comm = unsafe { out(comm, "comm") }?;
                if matches!(*comm, MPI_COMM_WORLD | MPI_COMM_SELF) {
                    return Err(Error::new(
                        MPI_ERR_COMM,
                        "a predefined communicator is not freed",
                    ));
                }
                lib.comms.remove(*comm).ok_or_else(|| {
                    Error::new(MPI_ERR_COMM, format!("{:#x} is no communicator", *comm))
                })?;
                *comm = MPI_COMM_NULL;
                Ok(())
            })
        },
    )
}

/// `MPI_IDENT`, `MPI_CONGRUENT`, `MPI_SIMILAR` or `MPI_UNEQUAL`.
///
/// # Safety
/// `result` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_compare(a: Handle, b: Handle, result: *mut c_int) -> c_int {
    call(
        "MPI_Comm_compare",
        || handler_of(a),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let result = unsafe { out(result, "result") }?;
                let (ga, gb) = (&lib.comm(a)?.group, &lib.comm(b)?.group);
                let sorted = |g: &Group| {
                    let mut v: Vec<u16> = (0..g.size()).map(|i| g.job_rank(i)).collect();
                    v.sort();
                    v
                };
                *result = if a == b {
                    MPI_IDENT
                } else if ga.same(gb) {
                    MPI_CONGRUENT
                } else if sorted(ga) == sorted(gb) {
                    MPI_SIMILAR
                } else {
                    MPI_UNEQUAL
                };
                Ok(())
            })
        },
    )
}

/// Sets what the communicator's errors do: `MPI_ERRORS_ARE_FATAL`
/// (the default), `MPI_ERRORS_ABORT` or `MPI_ERRORS_RETURN`.
#[no_mangle]
pub extern "C" fn MPI_Comm_set_errhandler(comm: Handle, errhandler: Handle) -> c_int {
    call(
        "MPI_Comm_set_errhandler",
        || handler_of(comm),
        || {
            with(|lib| {
                let h = Handler::of(errhandler).ok_or_else(|| {
                Error::new(
                    MPI_ERR_ARG,
                    format!("{errhandler:#x} is no predefined error handler (user handlers are not supported)"),
                )
            })?;
                lib.comm_mut(comm)?.handler = h;
                Ok(())
            })
        },
    )
}

/// The communicator's error handler.
///
/// # Safety
/// `errhandler` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(comm: Handle, errhandler: *mut Handle) -> c_int {
    call(
        "MPI_Comm_get_errhandler",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                *unsafe { out(errhandler, "errhandler") }? = lib.comm(comm)?.handler.handle();
                Ok(())
            })
        },
    )
}

/// What `MPI_Comm_get_attr` points to for the predefined keys.
static TAG_UB: c_int = crate::args::TAG_UB;
static NOT_GLOBAL: c_int = 0;
static NO_HOST: c_int = MPI_PROC_NULL;
static ANY_IO: c_int = MPI_ANY_SOURCE;

/// The predefined attributes of a communicator: `MPI_TAG_UB`,
/// `MPI_WTIME_IS_GLOBAL` (false), `MPI_HOST` (none), `MPI_IO` (every rank);
/// `flag` is 0 for any other key (user keys are not supported).
///
/// # Safety
/// `attribute_val` names a writable `void *`; `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: Handle,
    keyval: c_int,
    attribute_val: *mut *const c_int,
    flag: *mut c_int,
) -> c_int {
    call(
        "MPI_Comm_get_attr",
        || handler_of(comm),
        || {
            with(|lib| {
                lib.comm(comm)?;
                // SAFETY: the caller's contract.
                let (val, flag) =
                    unsafe { (out(attribute_val, "attribute_val")?, out(flag, "flag")?) };
                let found: Option<&'static c_int> = match keyval {
                    MPI_TAG_UB => Some(&TAG_UB),
                    MPI_WTIME_IS_GLOBAL => Some(&NOT_GLOBAL),
                    MPI_HOST => Some(&NO_HOST),
                    MPI_IO => Some(&ANY_IO),
                    _ => None,
                };
                *flag = found.is_some() as c_int;
                if let Some(v) = found {
                    *val = v;
                }
                Ok(())
            })
        },
    )
}
