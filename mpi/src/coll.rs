//! The collectives, blocking and started as requests (`MPI_I…`): each
//! checks its arguments, plans its rounds ([`Plan`]) and runs them as a
//! [`Schedule`] on its communicator, waited on here or by the caller.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::args::{buffer, elements};
use crate::datatype::Type;
use crate::error::{call, Error, Result};
use crate::reduce::{self, Refused};
use crate::request::{started, Request};
use crate::sched::{Buf, Bufs, Place, Plan, Schedule};
use crate::state::{handler_of, with, Lib};

/// A collective's buffers and how long each is.
struct Io {
    send: *const c_void,
    send_len: usize,
    recv: *mut c_void,
    recv_len: usize,
}

impl Io {
    fn in_place(&self) -> bool {
        self.send as usize == MPI_IN_PLACE
    }
}

/// Plans and starts a collective on `comm`.
///
/// # Safety
/// `io`'s buffers name their lengths (a send buffer of `MPI_IN_PLACE` is
/// none), left to the collective until it ended.
unsafe fn start(
    lib: &mut Lib,
    comm: Handle,
    io: Io,
    op: Option<(Handle, Type)>,
    plan: impl FnOnce(&mut Plan),
) -> Result<Schedule> {
    let (send, send_len) = match io.in_place() {
        true => (std::ptr::null(), 0),
        false => (buffer(io.send, io.send_len)?, io.send_len),
    };
    let recv = buffer(io.recv, io.recv_len)?.cast_mut();
    let c = lib.comm_mut(comm)?;
    let mut p = Plan::new(c.size(), c.me);
    plan(&mut p);
    let bufs = Bufs {
        send,
        send_len,
        recv,
        recv_len: io.recv_len,
    };
    // SAFETY: the caller's contract.
    Ok(unsafe { Schedule::new(p, c, bufs, op) })
}

/// A reduction's operation and datatype, checked.
fn reduction(op: Handle, datatype: Handle, count: c_int) -> Result<((Handle, Type), usize)> {
    let (ty, len) = elements(count, datatype)?;
    match reduce::check(op, ty) {
        Ok(()) => Ok(((op, ty), len)),
        Err(Refused::NoOp) => Err(Error::new(
            MPI_ERR_OP,
            format!("{op:#x} is no predefined reduction rmx offers (user-defined reductions are not supported)"),
        )),
        Err(Refused::NotFor) => Err(Error::new(
            MPI_ERR_OP,
            format!("reduction {op:#x} does not apply to {}", ty.name),
        )),
    }
}

/// The size of `comm` and this rank's place in it.
fn shape(lib: &Lib, comm: Handle) -> Result<(u16, u16)> {
    let c = lib.comm(comm)?;
    Ok((c.size(), c.me))
}

/// Runs one collective entry point: blocking (`request` is `None`), or
/// started into `*request`.
fn entry(
    name: &str,
    comm: Handle,
    request: Option<*mut Handle>,
    f: impl FnOnce(&mut Lib) -> Result<Schedule>,
) -> c_int {
    match request {
        Some(r) => started(name, comm, r, |lib| Ok(Request::Coll(Box::new(f(lib)?)))),
        None => call(
            name,
            || handler_of(comm),
            || {
                with(|lib| {
                    let s = f(lib)?;
                    s.wait(lib.rank())
                })
            },
        ),
    }
}

unsafe fn barrier(lib: &mut Lib, comm: Handle) -> Result<Schedule> {
    let io = Io {
        send: std::ptr::null(),
        send_len: 0,
        recv: std::ptr::null_mut(),
        recv_len: 0,
    };
    // SAFETY: no buffers.
    unsafe { start(lib, comm, io, None, |p| p.barrier()) }
}

unsafe fn bcast(
    lib: &mut Lib,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    root: c_int,
    comm: Handle,
) -> Result<Schedule> {
    let (_, len) = elements(count, datatype)?;
    let root = lib.comm(comm)?.root(root)?;
    let io = Io {
        send: std::ptr::null(),
        send_len: 0,
        recv: buf,
        recv_len: len,
    };
    // SAFETY: the caller's contract.
    unsafe {
        start(lib, comm, io, None, |p| {
            p.bcast(root, Buf::new(Place::Recv, 0, len))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce_to(
    lib: &mut Lib,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    root: Option<c_int>,
    comm: Handle,
) -> Result<Schedule> {
    let (red, len) = reduction(op, datatype, count)?;
    let (_, me) = shape(lib, comm)?;
    let root = match root {
        Some(r) => Some(lib.comm(comm)?.root(r)?),
        None => None,
    };
    let gets = root.is_none_or(|r| r == me);
    let io = Io {
        send,
        send_len: len,
        recv: if gets { recv } else { std::ptr::null_mut() },
        recv_len: if gets { len } else { 0 },
    };
    let src = match io.in_place() {
        true if gets => Buf::new(Place::Recv, 0, len),
        true => {
            return Err(Error::new(
                MPI_ERR_BUFFER,
                "MPI_IN_PLACE is the root's only",
            ))
        }
        false => Buf::new(Place::Send, 0, len),
    };
    let dst = Buf::new(Place::Recv, 0, len);
    // SAFETY: the caller's contract.
    unsafe {
        start(lib, comm, io, Some(red), |p| match root {
            Some(r) => p.reduce(r, src, dst),
            None => {
                p.reduce(0, src, dst);
                p.bcast(0, dst);
            }
        })
    }
}

/// Which gather-like collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spread {
    Gather(u16),
    Allgather,
    Scatter(u16),
    Alltoall,
}

/// Bytes of one block: `ours` (the side this rank's block is counted
/// by), checked against `other` where this rank gives that side too.
fn block(ours: (c_int, Handle), other: Option<(c_int, Handle)>) -> Result<usize> {
    let len = elements(ours.0, ours.1)?.1;
    if let Some((c, t)) = other {
        let o = elements(c, t)?.1;
        if o != len {
            return Err(Error::new(
                MPI_ERR_TRUNCATE,
                format!("a block is {o} bytes on one side but {len} on the other"),
            ));
        }
    }
    Ok(len)
}

#[allow(clippy::too_many_arguments)]
unsafe fn spread(
    lib: &mut Lib,
    kind: Spread,
    send: *const c_void,
    scount: c_int,
    stype: Handle,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Handle,
    comm: Handle,
) -> Result<Schedule> {
    let (n, me) = shape(lib, comm)?;
    let send_in_place = send as usize == MPI_IN_PLACE;
    let recv_in_place = recv as usize == MPI_IN_PLACE;
    let (s, r) = ((scount, stype), (rcount, rtype));
    let sent = (!send_in_place).then_some(s);
    // Each case: block bytes, send and receive buffer bytes, whether
    // this rank's own block stays where it is.
    let (len, send_blocks, recv_blocks) = match kind {
        Spread::Gather(root) if root == me => {
            (block(r, sent)?, !send_in_place as usize, n as usize)
        }
        Spread::Gather(_) => (block(s, None)?, 1, 0),
        Spread::Scatter(root) if root == me => {
            let got = (!recv_in_place).then_some(r);
            (block(s, got)?, n as usize, !recv_in_place as usize)
        }
        Spread::Scatter(_) => (block(r, None)?, 0, 1),
        Spread::Allgather => (block(r, sent)?, !send_in_place as usize, n as usize),
        Spread::Alltoall => (
            block(r, sent)?,
            if send_in_place { 0 } else { n as usize },
            n as usize,
        ),
    };
    let checked = |k: usize| {
        len.checked_mul(k)
            .ok_or_else(|| Error::new(MPI_ERR_COUNT, "the blocks overflow"))
    };
    let all = checked(n as usize)?;
    let io = Io {
        send: if send_blocks == 0 && !send_in_place {
            std::ptr::null()
        } else {
            send
        },
        send_len: checked(send_blocks)?,
        recv: if recv_blocks == 0 {
            std::ptr::null_mut()
        } else {
            recv
        },
        recv_len: checked(recv_blocks)?,
    };
    let whole = Buf::new(Place::Recv, 0, all);
    let own = Buf::new(Place::Recv, me as usize * len, len);
    let mine = Buf::new(Place::Send, 0, len);
    // SAFETY: the caller's contract.
    unsafe {
        start(lib, comm, io, None, |p| match kind {
            Spread::Gather(root) => p.gather(root, if send_in_place { own } else { mine }, whole),
            Spread::Allgather => {
                p.gather(0, if send_in_place { own } else { mine }, whole);
                p.bcast(0, whole);
            }
            Spread::Scatter(root) => {
                let dst = match recv_in_place && root == me {
                    true => Buf::new(Place::Send, root as usize * len, len),
                    false => Buf::new(Place::Recv, 0, len),
                };
                p.scatter(root, Buf::new(Place::Send, 0, all), dst);
            }
            Spread::Alltoall => {
                let src = match send_in_place {
                    true => {
                        let t = p.tmp(all);
                        p.copy(whole, t);
                        t
                    }
                    false => Buf::new(Place::Send, 0, all),
                };
                p.alltoall(src, whole, len);
            }
        })
    }
}

unsafe fn reduce_scatter_block(
    lib: &mut Lib,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
) -> Result<Schedule> {
    let (red, len) = reduction(op, datatype, count)?;
    let (n, _) = shape(lib, comm)?;
    let all = len
        .checked_mul(n as usize)
        .ok_or_else(|| Error::new(MPI_ERR_COUNT, "the blocks overflow"))?;
    let in_place = send as usize == MPI_IN_PLACE;
    let io = Io {
        send,
        send_len: all,
        recv,
        recv_len: if in_place { all } else { len },
    };
    let src = Buf::new(if in_place { Place::Recv } else { Place::Send }, 0, all);
    // SAFETY: the caller's contract.
    unsafe {
        start(lib, comm, io, Some(red), |p| {
            let t = p.tmp(all);
            p.reduce(0, src, t);
            p.scatter(0, t, Buf::new(Place::Recv, 0, len));
        })
    }
}

/// A collective's two entry points: blocking, and started as a request
/// (`MPI_I…`, the same arguments and a request written last).
macro_rules! collective {
    ($doc:literal, $name:ident, $iname:ident, ($($arg:ident: $ty:ty),*), |$lib:ident, $comm:ident| $body:expr) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// The buffers name the bytes their counts and datatypes say (or
        /// are `MPI_IN_PLACE` where MPI allows it), left to the collective
        /// until it ended.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty,)* $comm: Handle) -> c_int {
            // SAFETY: the caller's contract.
            entry(stringify!($name), $comm, None, |$lib| unsafe { $body })
        }

        #[doc = $doc]
        /// Started: `request` ends it.
        ///
        /// # Safety
        /// As the blocking call, the buffers left alone until the request
        /// ended; `request` writable.
        #[no_mangle]
        pub unsafe extern "C" fn $iname($($arg: $ty,)* $comm: Handle, request: *mut Handle) -> c_int {
            // SAFETY: the caller's contract.
            entry(stringify!($iname), $comm, Some(request), |$lib| unsafe { $body })
        }
    };
}

collective!(
    "Returns once every member entered it.",
    MPI_Barrier,
    MPI_Ibarrier,
    (),
    |lib, comm| barrier(lib, comm)
);

collective!(
    "The root's buffer copied to every member's.",
    MPI_Bcast,
    MPI_Ibcast,
    (buf: *mut c_void, count: c_int, datatype: Handle, root: c_int),
    |lib, comm| bcast(lib, buf, count, datatype, root, comm)
);

collective!(
    "Every member's elements combined by `op` into the root's buffer.",
    MPI_Reduce,
    MPI_Ireduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int),
    |lib, comm| reduce_to(lib, sendbuf, recvbuf, count, datatype, op, Some(root), comm)
);

collective!(
    "Every member's elements combined by `op` into every member's buffer.",
    MPI_Allreduce,
    MPI_Iallreduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle),
    |lib, comm| reduce_to(lib, sendbuf, recvbuf, count, datatype, op, None, comm)
);

collective!(
    "Each member's block into the root's buffer, in rank order.",
    MPI_Gather,
    MPI_Igather,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int),
    |lib, comm| {
        let r = lib.comm(comm)?.root(root)?;
        spread(lib, Spread::Gather(r), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
    }
);

collective!(
    "The root's blocks, one to each member in rank order.",
    MPI_Scatter,
    MPI_Iscatter,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int),
    |lib, comm| {
        let r = lib.comm(comm)?.root(root)?;
        spread(lib, Spread::Scatter(r), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
    }
);

collective!(
    "Each member's block into every member's buffer, in rank order.",
    MPI_Allgather,
    MPI_Iallgather,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    |lib, comm| spread(lib, Spread::Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
);

collective!(
    "Block `j` of each member's send buffer to member `j`.",
    MPI_Alltoall,
    MPI_Ialltoall,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    |lib, comm| spread(lib, Spread::Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
);

collective!(
    "Every member's elements combined by `op`, block `i` of the result to member `i`.",
    MPI_Reduce_scatter_block,
    MPI_Ireduce_scatter_block,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle),
    |lib, comm| reduce_scatter_block(lib, sendbuf, recvbuf, recvcount, datatype, op, comm)
);
