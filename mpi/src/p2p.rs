//! Point-to-point messages: `MPI_Send` … `MPI_Sendrecv`, probes and
//! counts. A message travels in its communicator's own context, so it
//! matches only receives of that communicator.

use std::ffi::{c_int, c_void};

use rmx_core::{RecvError, SendError, Source, TagSel};

use crate::abi::*;
use crate::args::{buffer, elements, out, recv_tag, send_tag};
use crate::comm::Comm;
use crate::error::{call, Error, Result};
use crate::request::{count, empty_status, started, status, status_error, Request};
use crate::state::{handler_of, with, world_handler, Lib};

pub fn send_error(e: SendError) -> Error {
    match e {
        SendError::BadRank => Error::new(MPI_ERR_RANK, "no such rank in the job"),
        SendError::PeerFailed => Error::new(MPI_ERR_PROC_ABORTED, "the destination failed"),
        SendError::TooLong => Error::new(MPI_ERR_COUNT, "longer than one message carries"),
        e => Error::new(MPI_ERR_OTHER, format!("the send was refused: {e:?}")),
    }
}

pub fn recv_error(e: RecvError) -> Error {
    match e {
        RecvError::BadRank => Error::new(MPI_ERR_RANK, "no such rank in the job"),
        RecvError::PeerFailed => Error::new(MPI_ERR_PROC_ABORTED, "the source failed"),
        e => Error::new(MPI_ERR_OTHER, format!("the receive was refused: {e:?}")),
    }
}

/// Where a receive or probe of `comm` takes from: `None` for
/// `MPI_PROC_NULL`, which nothing comes from.
fn source(comm: &Comm, src: c_int) -> Result<Option<Source>> {
    Ok(match src {
        MPI_PROC_NULL => None,
        MPI_ANY_SOURCE => Some(Source::Any),
        s => Some(Source::Rank(comm.peer(s)?)),
    })
}

/// How often a post refused for a full table is retried, each after the
/// ended requests were collected and a round of progress.
const FULL_RETRIES: u32 = 10_000;

impl Lib {
    /// Starts a send of `count` `datatype` at `buf` to `dest` of `comm`.
    ///
    /// # Safety
    /// `buf` names the bytes, left unchanged until the request ended.
    pub unsafe fn isend(
        &mut self,
        comm: Handle,
        buf: *const c_void,
        count: c_int,
        datatype: Handle,
        dest: c_int,
        tag: c_int,
    ) -> Result<Request> {
        let (_, len) = elements(count, datatype)?;
        let ptr = buffer(buf, len)?;
        let tag = send_tag(tag)?;
        let c = self.comm(comm)?;
        if dest == MPI_PROC_NULL {
            return Ok(Request::Done(empty_status()));
        }
        let (dest, ctx) = (c.peer(dest)?, c.p2p_context());
        self.retry_full(|lib| {
            // SAFETY: the caller's contract.
            match unsafe { lib.rank().isend_in(dest, tag, ctx, ptr, len) } {
                Ok(q) => Ok(Some(Request::Send(q))),
                Err(SendError::RequestTableFull) => Ok(None),
                Err(e) => Err(send_error(e)),
            }
        })
    }

    /// Starts a receive into `count` `datatype` at `buf` from `src` of `comm`.
    ///
    /// # Safety
    /// `buf` names the bytes, untouched by the caller until the request ended.
    pub unsafe fn irecv(
        &mut self,
        comm: Handle,
        buf: *mut c_void,
        count: c_int,
        datatype: Handle,
        src: c_int,
        tag: c_int,
    ) -> Result<Request> {
        let (_, len) = elements(count, datatype)?;
        let ptr = buffer(buf, len)?.cast_mut();
        let tag = recv_tag(tag)?;
        let c = self.comm(comm)?;
        let Some(src) = source(c, src)? else {
            return Ok(Request::Done(empty_status()));
        };
        let (ctx, group) = (c.p2p_context(), std::sync::Arc::clone(&c.group));
        let tag = tag.map_or(TagSel::Any, TagSel::Tag);
        self.retry_full(|lib| {
            // SAFETY: the caller's contract.
            match unsafe { lib.rank().irecv_in(src, tag, ctx, ptr, len) } {
                Ok(q) => Ok(Some(Request::Recv(q, std::sync::Arc::clone(&group)))),
                Err(RecvError::RequestTableFull | RecvError::PostedQueueFull) => Ok(None),
                Err(e) => Err(recv_error(e)),
            }
        })
    }

    /// `post` until the core has room: each refusal collects the
    /// requests that ended into the caller's table and moves progress on.
    fn retry_full<R>(&mut self, mut post: impl FnMut(&mut Lib) -> Result<Option<R>>) -> Result<R> {
        for _ in 0..FULL_RETRIES {
            if let Some(r) = post(self)? {
                return Ok(r);
            }
            self.collect_ended();
            self.rank().progress();
        }
        Err(Error::new(
            MPI_ERR_OTHER,
            format!(
                "rmx's request table stayed full with {} requests live: wait for some",
                self.reqs.len()
            ),
        ))
    }

    /// Every request that ended is kept as its status, freeing the core's
    /// entry (and the orphans that ended are dropped).
    pub fn collect_ended(&mut self) {
        let Lib {
            job, reqs, orphans, ..
        } = self;
        let rank = job.rank();
        for r in reqs.values_mut() {
            let q = std::mem::replace(r, Request::Done(empty_status()));
            *r = match q.test(rank) {
                Ok(Ok(s)) => Request::Done(s),
                Ok(Err(e)) => Request::Done(MPI_Status {
                    MPI_ERROR: e.class,
                    ..empty_status()
                }),
                Err(q) => q,
            };
        }
        let mut left = Vec::new();
        for q in orphans.drain(..) {
            if let Err(q) = q.test(rank) {
                left.push(q);
            }
        }
        *orphans = left;
    }
}

/// Writes `s` where `status` points, unless it is `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `status` is null or writable.
pub unsafe fn put_status(status: *mut MPI_Status, s: MPI_Status) {
    // SAFETY: the caller's contract.
    if let Some(p) = unsafe { status.as_mut() } {
        *p = s;
    }
}

/// Blocking send: returns once `buf` may be reused.
///
/// # Safety
/// `buf` names `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    call(
        "MPI_Send",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract; waited on before returning.
                let q = unsafe { lib.isend(comm, buf, count, datatype, dest, tag) }?;
                status_error(&q.wait(lib.rank())?)
            })
        },
    )
}

/// A synchronous send. rmx completes it as `MPI_Send` does (once the
/// buffer may be reused), which a correct program cannot tell apart.
///
/// # Safety
/// As `MPI_Send`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Send(buf, count, datatype, dest, tag, comm) }
}

/// Blocking receive.
///
/// # Safety
/// `buf` names `count` writable elements; `status` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    call(
        "MPI_Recv",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract; waited on before returning.
                let q = unsafe { lib.irecv(comm, buf, count, datatype, source, tag) }?;
                let s = q.wait(lib.rank())?;
                // SAFETY: the caller's contract.
                unsafe { put_status(status, s) };
                status_error(&s)
            })
        },
    )
}

/// Starts a send.
///
/// # Safety
/// As `MPI_Send`, the buffer unchanged until the request ended; `request`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: the caller's contract.
    started("MPI_Isend", comm, request, |lib| unsafe {
        lib.isend(comm, buf, count, datatype, dest, tag)
    })
}

/// A synchronous send started (completed as `MPI_Isend`'s, see `MPI_Ssend`).
///
/// # Safety
/// As `MPI_Isend`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Issend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Isend(buf, count, datatype, dest, tag, comm, request) }
}

/// Starts a receive.
///
/// # Safety
/// As `MPI_Recv`, the buffer left alone until the request ended; `request`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: the caller's contract.
    started("MPI_Irecv", comm, request, |lib| unsafe {
        lib.irecv(comm, buf, count, datatype, source, tag)
    })
}

/// A send and a receive at once (each may be with a different rank).
///
/// # Safety
/// As `MPI_Send` and `MPI_Recv`; the two buffers do not overlap.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    call(
        "MPI_Sendrecv",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract; both waited on below.
                let r = unsafe { lib.irecv(comm, recvbuf, recvcount, recvtype, source, recvtag) }?;
                // SAFETY: as above.
                let s =
                    match unsafe { lib.isend(comm, sendbuf, sendcount, sendtype, dest, sendtag) } {
                        Ok(s) => s,
                        Err(e) => {
                            r.cancel(lib.rank());
                            let _ = r.wait(lib.rank());
                            return Err(e);
                        }
                    };
                let got = r.wait(lib.rank())?;
                let sent = s.wait(lib.rank())?;
                // SAFETY: the caller's contract.
                unsafe { put_status(status, got) };
                status_error(&got).and(status_error(&sent))
            })
        },
    )
}

/// Whether a message `MPI_Recv` would take is here, without taking it.
///
/// # Safety
/// `flag` writable; `status` null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call(
        "MPI_Iprobe",
        || handler_of(comm),
        || {
            with(|lib| {
                // SAFETY: the caller's contract.
                let flag = unsafe { out(flag, "flag") }?;
                let found = probe(lib, comm, source, tag)?;
                *flag = found.is_some() as c_int;
                if let Some(s) = found {
                    // SAFETY: the caller's contract.
                    unsafe { put_status(status, s) };
                }
                Ok(())
            })
        },
    )
}

/// Waits for a message `MPI_Recv` would take, without taking it.
///
/// # Safety
/// `status` null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    call(
        "MPI_Probe",
        || handler_of(comm),
        || {
            with(|lib| {
                // Each probe runs a round of progress.
                let found = loop {
                    if let Some(s) = probe(lib, comm, source, tag)? {
                        break s;
                    }
                };
                // SAFETY: the caller's contract.
                unsafe { put_status(status, found) };
                Ok(())
            })
        },
    )
}

/// The status of the oldest message of `comm` matching `source` and `tag`.
fn probe(lib: &mut Lib, comm: Handle, source: c_int, tag: c_int) -> Result<Option<MPI_Status>> {
    let tag = recv_tag(tag)?.map_or(TagSel::Any, TagSel::Tag);
    let c = lib.comm(comm)?;
    let Some(src) = self::source(c, source)? else {
        return Ok(Some(empty_status()));
    };
    let (ctx, group) = (c.p2p_context(), std::sync::Arc::clone(&c.group));
    let st = lib.rank().iprobe_in(src, tag, ctx).map_err(recv_error)?;
    Ok(st.map(|st| status(st, Some(&group))))
}

/// Elements of `datatype` a receive's status says arrived
/// (`MPI_UNDEFINED` if not a whole number).
///
/// # Safety
/// `status` readable; `count` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MPI_Status,
    datatype: Handle,
    count_out: *mut c_int,
) -> c_int {
    call("MPI_Get_count", world_handler, || {
        // SAFETY: the caller's contract.
        let s = unsafe { status.as_ref() }.ok_or_else(|| Error::arg("status is null"))?;
        // SAFETY: the caller's contract.
        let out = unsafe { out(count_out, "count") }?;
        let (ty, _) = elements(0, datatype)?;
        let bytes = count(s);
        *out = match (ty.size as u64, bytes) {
            (0, 0) => 0,
            (0, _) => MPI_UNDEFINED,
            (n, b) if b % n == 0 => c_int::try_from(b / n).unwrap_or(MPI_UNDEFINED),
            _ => MPI_UNDEFINED,
        };
        Ok(())
    })
}
