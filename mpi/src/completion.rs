//! What ends requests: `MPI_Wait`, `Waitall`, `Waitany`, `Test`,
//! `Testall`, `Testany`, and `Cancel`, `Request_free`, `Test_cancelled`.
//! An ended request's handle is set to `MPI_REQUEST_NULL`.

use std::ffi::c_int;

use crate::abi::*;
use crate::args::out;
use crate::error::{call, Error, Result};
use crate::p2p::put_status;
use crate::request::{cancelled, empty_status, status_error, Request};
use crate::state::{with, world_handler, Lib};

impl Lib {
    /// The request `h` names, taken out of the table.
    fn take(&mut self, h: Handle) -> Result<Request> {
        self.reqs
            .remove(h)
            .ok_or_else(|| Error::new(MPI_ERR_REQUEST, format!("{h:#x} is no live request")))
    }

    /// Whether request `h` ended (kept as its status if so), after no
    /// progress: the caller runs a round first.
    fn ended(&mut self, h: Handle) -> Result<bool> {
        if h == MPI_REQUEST_NULL {
            return Ok(true);
        }
        let q = self.take(h)?;
        let (done, kept) = match q.test(self.rank()) {
            Ok(r) => (true, Request::Done(r.unwrap_or_else(failed))),
            Err(q) => (false, q),
        };
        let h2 = self.reqs.insert(kept);
        debug_assert_eq!(h, h2, "a removed slot is the next one given");
        Ok(done)
    }

    /// Ends request `*h` (it ended already or waits for it): its status.
    fn finish(&mut self, h: &mut Handle) -> Result<MPI_Status> {
        if *h == MPI_REQUEST_NULL {
            return Ok(empty_status());
        }
        let q = self.take(*h)?;
        *h = MPI_REQUEST_NULL;
        Ok(q.wait(self.rank()).unwrap_or_else(failed))
    }
}

/// The status of a collective that failed with `e`.
fn failed(e: Error) -> MPI_Status {
    crate::words::keep(e.class, &e.what);
    MPI_Status {
        MPI_ERROR: e.class,
        ..empty_status()
    }
}

/// The requests of a C array.
///
/// # Safety
/// `reqs` is null or names `count` writable handles.
unsafe fn handles<'a>(count: c_int, reqs: *mut Handle) -> Result<&'a mut [Handle]> {
    let n = usize::try_from(count)
        .map_err(|_| Error::new(MPI_ERR_COUNT, format!("count {count} is negative")))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if reqs.is_null() {
        return Err(Error::new(MPI_ERR_REQUEST, "the request array is null"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(reqs, n) })
}

/// Ends every request of `hs` (each ended or waited for), its status
/// into `statuses`: `MPI_ERR_IN_STATUS` if one failed.
///
/// # Safety
/// `statuses` is null or names `hs.len()` writable statuses.
unsafe fn finish_all(lib: &mut Lib, hs: &mut [Handle], statuses: *mut MPI_Status) -> Result<()> {
    let mut bad = false;
    for (i, h) in hs.iter_mut().enumerate() {
        let s = lib.finish(h)?;
        bad |= s.MPI_ERROR != MPI_SUCCESS;
        // SAFETY: the caller's contract.
        unsafe { put_nth(statuses, i, s) };
    }
    match bad {
        true => Err(Error::new(
            MPI_ERR_IN_STATUS,
            "a request failed: see its status",
        )),
        false => Ok(()),
    }
}

/// Writes status `i` of a C array unless it is `MPI_STATUSES_IGNORE`.
///
/// # Safety
/// `statuses` is null or names more than `i` writable statuses.
unsafe fn put_nth(statuses: *mut MPI_Status, i: usize, s: MPI_Status) {
    if !statuses.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *statuses.add(i) = s };
    }
}

/// Waits for a request to end.
///
/// # Safety
/// `request` writable; `status` null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut Handle, status: *mut MPI_Status) -> c_int {
    call("MPI_Wait", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let h = unsafe { out(request, "request") }?;
            let s = lib.finish(h)?;
            // SAFETY: the caller's contract.
            unsafe { put_status(status, s) };
            status_error(&s)
        })
    })
}

/// Waits for every request (`MPI_ERR_IN_STATUS` if one failed: its
/// status says which).
///
/// # Safety
/// `requests` names `count` writable handles; `statuses` is null or names
/// `count` writable statuses.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut Handle,
    statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Waitall", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let hs = unsafe { handles(count, requests) }?;
            // Every handle is checked before any request is waited on.
            if let Some(h) = hs
                .iter()
                .find(|&&h| h != MPI_REQUEST_NULL && lib.reqs.get(h).is_none())
            {
                return Err(Error::new(
                    MPI_ERR_REQUEST,
                    format!("{h:#x} is no live request"),
                ));
            }
            // SAFETY: the caller's contract.
            unsafe { finish_all(lib, hs, statuses) }
        })
    })
}

/// Waits for one of the requests: its index (`MPI_UNDEFINED` if none is live).
///
/// # Safety
/// `requests` names `count` writable handles; `index` writable; `status`
/// null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut Handle,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Waitany", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let hs = unsafe { handles(count, requests) }?;
            // SAFETY: the caller's contract.
            let index = unsafe { out(index, "index") }?;
            let found = loop {
                match any(lib, hs)? {
                    Some(f) => break f,
                    None => {
                        lib.rank().progress();
                    }
                }
            };
            finish_any(lib, hs, found, index, status)
        })
    })
}

/// Whether a request ended, ending it if so.
///
/// # Safety
/// `request`, `flag` writable; `status` null or writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut Handle,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Test", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let h = unsafe { out(request, "request") }?;
            // SAFETY: the caller's contract.
            let flag = unsafe { out(flag, "flag") }?;
            lib.rank().progress();
            *flag = lib.ended(*h)? as c_int;
            if *flag == 0 {
                return Ok(());
            }
            let s = lib.finish(h)?;
            // SAFETY: the caller's contract.
            unsafe { put_status(status, s) };
            status_error(&s)
        })
    })
}

/// Whether every request ended, ending them all if so (none otherwise).
///
/// # Safety
/// As `MPI_Waitall`, and `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    requests: *mut Handle,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Testall", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let hs = unsafe { handles(count, requests) }?;
            // SAFETY: the caller's contract.
            let flag = unsafe { out(flag, "flag") }?;
            lib.rank().progress();
            let mut all = true;
            for &h in hs.iter() {
                all &= lib.ended(h)?;
            }
            *flag = all as c_int;
            if !all {
                return Ok(());
            }
            // SAFETY: the caller's contract.
            unsafe { finish_all(lib, hs, statuses) }
        })
    })
}

/// Whether one of the requests ended: ends it and gives its index.
///
/// # Safety
/// As `MPI_Waitany`, and `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    requests: *mut Handle,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Testany", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let hs = unsafe { handles(count, requests) }?;
            // SAFETY: the caller's contract.
            let (index, flag) = unsafe { (out(index, "index")?, out(flag, "flag")?) };
            lib.rank().progress();
            match any(lib, hs)? {
                None => {
                    *flag = 0;
                    *index = MPI_UNDEFINED;
                    Ok(())
                }
                Some(f) => {
                    *flag = 1;
                    finish_any(lib, hs, f, index, status)
                }
            }
        })
    })
}

/// The first request of `hs` that ended (`Some(None)`: none is live).
fn any(lib: &mut Lib, hs: &[Handle]) -> Result<Option<Option<usize>>> {
    let mut live = false;
    for (i, &h) in hs.iter().enumerate() {
        if h == MPI_REQUEST_NULL {
            continue;
        }
        live = true;
        if lib.ended(h)? {
            return Ok(Some(Some(i)));
        }
    }
    Ok((!live).then_some(None))
}

/// Ends request `found` of `hs` for a `…any` call.
fn finish_any(
    lib: &mut Lib,
    hs: &mut [Handle],
    found: Option<usize>,
    index: &mut c_int,
    status: *mut MPI_Status,
) -> Result<()> {
    let Some(i) = found else {
        *index = MPI_UNDEFINED;
        // SAFETY: the caller's contract.
        unsafe { put_status(status, empty_status()) };
        return Ok(());
    };
    *index = i as c_int;
    let s = lib.finish(&mut hs[i])?;
    // SAFETY: the caller's contract.
    unsafe { put_status(status, s) };
    status_error(&s)
}

/// Asks a receive to stop if it has not matched; the request still ends
/// through a wait or test (whose status says whether it was cancelled).
///
/// # Safety
/// `request` readable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cancel(request: *mut Handle) -> c_int {
    call("MPI_Cancel", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let h = *unsafe { out(request, "request") }?;
            let q = lib.take(h)?;
            q.cancel(lib.rank());
            lib.reqs.insert(q);
            Ok(())
        })
    })
}

/// Gives a request up: it ends on its own (its buffer stays the
/// library's until then), and its handle is set to `MPI_REQUEST_NULL`.
///
/// # Safety
/// `request` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Request_free(request: *mut Handle) -> c_int {
    call("MPI_Request_free", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            let h = unsafe { out(request, "request") }?;
            let q = lib.take(*h)?;
            *h = MPI_REQUEST_NULL;
            lib.orphans.push(q);
            Ok(())
        })
    })
}

/// Whether the request a status came from was cancelled.
///
/// # Safety
/// `status` readable; `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    call("MPI_Test_cancelled", world_handler, || {
        // SAFETY: the caller's contract.
        let s = unsafe { status.as_ref() }.ok_or_else(|| Error::arg("status is null"))?;
        // SAFETY: the caller's contract.
        *unsafe { out(flag, "flag") }? = cancelled(s) as c_int;
        Ok(())
    })
}
