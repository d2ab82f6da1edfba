//! The environment: starting and ending MPI, aborting, time, names and
//! versions, datatypes' sizes and names, and error strings.

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;
use std::time::Instant;

use rmx_linux::job;
use rmx_linux::transport::env as net_env;

use crate::abi::*;
use crate::args::{elements, out, string};
use crate::error::{call, Error, Result};
use crate::state::{lock, with, world_handler, Lib, Phase};
use crate::window::Window;

/// The thread level rmx provides: calls from several threads, one at a time.
const PROVIDED: c_int = MPI_THREAD_SERIALIZED;

/// What `MPI_Get_library_version` says.
pub const LIBRARY: &str = concat!(
    "rmx MPI library ",
    env!("CARGO_PKG_VERSION"),
    " (MPI 5.0 standard ABI 1.0, a subset) over rmx's transports"
);

fn init(thread: c_int) -> Result<c_int> {
    let mut phase = lock();
    match &*phase {
        Phase::Before => {}
        Phase::Running(_) => return Err(Error::new(MPI_ERR_OTHER, "MPI is already initialised")),
        Phase::After => {
            return Err(Error::new(
                MPI_ERR_OTHER,
                "MPI was finalised: it cannot start again",
            ))
        }
    }
    if !rmx_linux::pmi::launched() {
        return Err(Error::new(
            MPI_ERR_OTHER,
            "this program was not started by a launcher: start it with `mpiexec -n N` \
             (hydra), `srun` or Open MPI's `mpirun`, with RMX_TRANSPORT set \
             (e.g. RMX_TRANSPORT=eth RMX_IFACE=lo)",
        ));
    }
    let (net, _lab) = net_env::open(true, 1, |k| std::env::var(k).ok())
        .map_err(|e| Error::new(MPI_ERR_OTHER, e.to_string()))?;
    let attached = job::attach(&net, rmx_linux::rank::loop_config())
        .map_err(|e| Error::new(MPI_ERR_OTHER, format!("joining the job failed: {e}")))?;
    let provided = thread.clamp(MPI_THREAD_SINGLE, PROVIDED);
    *phase = Phase::Running(Box::new(Lib::new(attached, provided)));
    Ok(provided)
}

/// Starts MPI: this process joins the job its launcher started.
///
/// # Safety
/// `argc` and `argv` are null or `main`'s (unused).
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    call("MPI_Init", world_handler, || {
        init(MPI_THREAD_SINGLE).map(drop)
    })
}

/// Starts MPI asking for a thread level; `provided` is at most
/// `MPI_THREAD_SERIALIZED` (calls from any thread, one at a time).
///
/// # Safety
/// As `MPI_Init`; `provided` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    call("MPI_Init_thread", world_handler, || {
        // SAFETY: the caller's contract.
        let provided = unsafe { out(provided, "provided") }?;
        *provided = init(required)?;
        Ok(())
    })
}

/// Ends MPI once every rank got here: live requests end first (receives
/// cancelled), windows are freed, and the launcher is told.
#[no_mangle]
pub extern "C" fn MPI_Finalize() -> c_int {
    call("MPI_Finalize", world_handler, || {
        let lib = running(&mut lock())?;
        finalize(*lib)
    })
}

/// The running library, taken out of `phase`, which is then after MPI's
/// life; any other phase is left as it is, and refused.
fn running(phase: &mut Phase) -> Result<Box<Lib>> {
    match std::mem::replace(phase, Phase::After) {
        Phase::Running(lib) => Ok(lib),
        other => {
            let why = match other {
                Phase::After => "MPI was finalised already",
                _ => "MPI is not initialised: call MPI_Init first",
            };
            *phase = other;
            Err(Error::new(MPI_ERR_OTHER, why))
        }
    }
}

/// Ends every live request (receives cancelled first) and window, then
/// leaves the job, whose wind-down waits for every rank's sends.
fn finalize(mut lib: Lib) -> Result<()> {
    for q in lib
        .reqs
        .drain()
        .into_iter()
        .chain(std::mem::take(&mut lib.orphans))
    {
        q.cancel(lib.rank());
        let _ = q.wait(lib.rank());
    }
    for w in lib.wins.drain() {
        Window::free(w, lib.rank())?;
    }
    lib.detach()
}

/// Whether `MPI_Init` ran.
///
/// # Safety
/// `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    call("MPI_Initialized", world_handler, || {
        // SAFETY: the caller's contract.
        *unsafe { out(flag, "flag") }? = !matches!(*lock(), Phase::Before) as c_int;
        Ok(())
    })
}

/// Whether `MPI_Finalize` ran.
///
/// # Safety
/// `flag` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    call("MPI_Finalized", world_handler, || {
        // SAFETY: the caller's contract.
        *unsafe { out(flag, "flag") }? = matches!(*lock(), Phase::After) as c_int;
        Ok(())
    })
}

/// The thread level given.
///
/// # Safety
/// `provided` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", world_handler, || {
        with(|lib| {
            // SAFETY: the caller's contract.
            *unsafe { out(provided, "provided") }? = lib.thread;
            Ok(())
        })
    })
}

/// Ends the job: this process exits with `errorcode`, and the launcher
/// ends the others.
#[no_mangle]
pub extern "C" fn MPI_Abort(_comm: Handle, errorcode: c_int) -> c_int {
    eprintln!("rmx MPI: MPI_Abort with error code {errorcode}");
    std::process::exit(if errorcode == 0 { 1 } else { errorcode & 0xff })
}

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Seconds since a moment in this process's past (a monotonic clock).
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    origin().elapsed().as_secs_f64()
}

/// The resolution of `MPI_Wtime`, in seconds.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

/// The host's name.
///
/// # Safety
/// `name` names `MPI_MAX_PROCESSOR_NAME` writable bytes; `resultlen` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    call("MPI_Get_processor_name", world_handler, || {
        let mut host = [0u8; 256];
        // SAFETY: `host` is writable for its length.
        let rc = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
        let end = host.iter().position(|&b| b == 0).unwrap_or(0);
        let h = if rc == 0 {
            String::from_utf8_lossy(&host[..end]).into_owned()
        } else {
            "localhost".into()
        };
        // SAFETY: the caller's contract.
        unsafe { string(&h, name, MPI_MAX_PROCESSOR_NAME, resultlen) }
    })
}

/// The MPI version this library follows: 5.0.
///
/// # Safety
/// Both pointers writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    call("MPI_Get_version", world_handler, || {
        // SAFETY: the caller's contract.
        unsafe {
            *out(version, "version")? = MPI_VERSION;
            *out(subversion, "subversion")? = MPI_SUBVERSION;
        }
        Ok(())
    })
}

/// The standard ABI's version this library implements: 1.0.
///
/// # Safety
/// Both pointers writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_version(major: *mut c_int, minor: *mut c_int) -> c_int {
    call("MPI_Abi_get_version", world_handler, || {
        // SAFETY: the caller's contract.
        unsafe {
            *out(major, "abi_major")? = MPI_ABI_VERSION;
            *out(minor, "abi_minor")? = MPI_ABI_SUBVERSION;
        }
        Ok(())
    })
}

/// This library's name and version.
///
/// # Safety
/// `version` names `MPI_MAX_LIBRARY_VERSION_STRING` writable bytes;
/// `resultlen` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Get_library_version", world_handler, || {
        // SAFETY: the caller's contract.
        unsafe { string(LIBRARY, version, MPI_MAX_LIBRARY_VERSION_STRING, resultlen) }
    })
}

/// Bytes of one element of a datatype.
///
/// # Safety
/// `size` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: Handle, size: *mut c_int) -> c_int {
    call("MPI_Type_size", world_handler, || {
        // SAFETY: the caller's contract.
        *unsafe { out(size, "size") }? = elements(1, datatype)?.1 as c_int;
        Ok(())
    })
}

/// Bytes of one element of a datatype, as an `MPI_Count`.
///
/// # Safety
/// `size` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size_c(datatype: Handle, size: *mut i64) -> c_int {
    call("MPI_Type_size_c", world_handler, || {
        // SAFETY: the caller's contract.
        *unsafe { out(size, "size") }? = elements(1, datatype)?.1 as i64;
        Ok(())
    })
}

/// A predefined datatype's name (`MPI_INT`, …).
///
/// # Safety
/// `name` names `MPI_MAX_OBJECT_NAME` writable bytes; `resultlen` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_name(
    datatype: Handle,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Type_get_name", world_handler, || {
        let ty = elements(0, datatype)?.0;
        // SAFETY: the caller's contract.
        unsafe { string(ty.name, name, MPI_MAX_OBJECT_NAME, resultlen) }
    })
}

/// What an error code means (with the words of its last occurrence).
///
/// # Safety
/// `string_out` names `MPI_MAX_ERROR_STRING` writable bytes; `resultlen` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    code: c_int,
    string_out: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Error_string", world_handler, || {
        // SAFETY: the caller's contract.
        unsafe {
            string(
                &crate::words::string(code),
                string_out,
                MPI_MAX_ERROR_STRING,
                resultlen,
            )
        }
    })
}

/// The class of an error code (rmx's codes are their classes).
///
/// # Safety
/// `class` writable.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
    call("MPI_Error_class", world_handler, || {
        if !(0..=MPI_ERR_LASTCODE).contains(&code) {
            return Err(Error::arg(format!("{code} is no error code")));
        }
        // SAFETY: the caller's contract.
        *unsafe { out(class, "class") }? = code;
        Ok(())
    })
}

/// A function of the standard ABI rmx does not implement: its error,
/// handled by `MPI_COMM_WORLD`'s handler (fatal by default).
pub fn unsupported(name: &str) -> c_int {
    call(name, world_handler, || Err(Error::unsupported(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second `MPI_Finalize` is refused and leaves MPI finalised. Before,
    /// it set the state back to "before MPI_Init", and `MPI_Init` could run
    /// again.
    #[test]
    fn finalizing_outside_mpis_life_changes_nothing() {
        let mut after = Phase::After;
        let e = running(&mut after).err().expect("refused");
        assert!(e.what.contains("finalised already"), "{}", e.what);
        assert!(matches!(after, Phase::After));
        let mut before = Phase::Before;
        assert!(running(&mut before).is_err());
        assert!(matches!(before, Phase::Before));
    }
}
