//! PMIx, the bootstrap of Open MPI's `mpirun` and of Slurm's pmix plugin
//! (`srun --mpi=pmix`), through the PMIx library the launcher's own
//! package installs (Debian's libpmix2). The library is loaded when a
//! PMIx launcher started this process, never linked: rmx runs where it is
//! absent, and says what to install when a PMIx launcher finds it missing.
//!
//! Only what the address swap needs: init (this rank, the job's
//! namespace), the job's size, put, commit with a fence (the barrier),
//! get, finalize. Values are text, as over PMI-1.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use super::PmiError;

/// The library's names, newest first.
const LIBRARIES: [&str; 2] = ["libpmix.so.2", "libpmix.so"];

/// `pmix_proc_t`: a namespace of `PMIX_MAX_NSLEN + 1` bytes and a rank.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; 256],
    rank: u32,
}

/// `PMIX_RANK_WILDCARD`: the job itself, for job-level keys.
const WILDCARD: u32 = u32::MAX - 1;

/// `pmix_value_t`: a 16-bit type, then (8-aligned) a union no larger than
/// this; only the string and 32-bit members are read or written here.
#[repr(C)]
struct Value {
    kind: u16,
    data: [u64; 7],
}

const PMIX_STRING: u16 = 3;
const PMIX_UINT32: u16 = 14;
const PMIX_GLOBAL: u8 = 3;
const PMIX_SUCCESS: c_int = 0;
/// `PMIX_MAX_KEYLEN`.
const MAX_KEY: usize = 511;

type Init = unsafe extern "C" fn(*mut Proc, *mut c_void, usize) -> c_int;
type Finalize = unsafe extern "C" fn(*const c_void, usize) -> c_int;
type Put = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type Commit = unsafe extern "C" fn() -> c_int;
type Fence = unsafe extern "C" fn(*const Proc, usize, *const c_void, usize) -> c_int;
type Get = unsafe extern "C" fn(
    *const Proc,
    *const c_char,
    *const c_void,
    usize,
    *mut *mut Value,
) -> c_int;
type Destruct = unsafe extern "C" fn(*mut Value);
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// The library's entry points this client calls.
struct Lib {
    init: Init,
    finalize: Finalize,
    put: Put,
    commit: Commit,
    fence: Fence,
    get: Get,
    destruct: Destruct,
    error_string: ErrorString,
}

/// A PMIx client: this process's rank in its launcher's job.
pub struct Client {
    lib: Lib,
    me: Proc,
    size: u16,
}

// SAFETY: the client is used by one thread at a time (`&mut self`); the
// library is thread-safe once initialised.
unsafe impl Send for Client {}

/// Whether this process was started by a PMIx launcher.
pub fn launched() -> bool {
    std::env::var_os("PMIX_RANK").is_some()
}

fn load() -> Result<Lib, PmiError> {
    load_from(&LIBRARIES)
}

/// Loads the first of `names` that the dynamic linker finds.
fn load_from(names: &[&str]) -> Result<Lib, PmiError> {
    let handle = names.iter().find_map(|name| {
        let c = CString::new(*name).expect("no NUL");
        // SAFETY: a NUL-terminated name; the handle is never closed, so the
        // functions taken from it stay valid for the process's life.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        (!h.is_null()).then_some(h)
    });
    let Some(h) = handle else {
        return Err(PmiError::Env(format!(
            "started by a PMIx launcher (PMIX_RANK is set) but the PMIx library ({}) is not installed: install it (Debian: apt install libpmix2), or start rmx with MPICH's `{} -n 2 rmx …`",
            names.join(" or "),
            super::HYDRA
        )));
    };
    let sym = |name: &str| -> Result<*mut c_void, PmiError> {
        let c = CString::new(name).expect("no NUL");
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(h, c.as_ptr()) };
        if p.is_null() {
            Err(PmiError::Env(format!("the PMIx library has no {name}")))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the PMIx function of that name, whose C
    // signature the type spells (PMIx 4's pmix.h).
    unsafe {
        Ok(Lib {
            init: std::mem::transmute::<*mut c_void, Init>(sym("PMIx_Init")?),
            finalize: std::mem::transmute::<*mut c_void, Finalize>(sym("PMIx_Finalize")?),
            put: std::mem::transmute::<*mut c_void, Put>(sym("PMIx_Put")?),
            commit: std::mem::transmute::<*mut c_void, Commit>(sym("PMIx_Commit")?),
            fence: std::mem::transmute::<*mut c_void, Fence>(sym("PMIx_Fence")?),
            get: std::mem::transmute::<*mut c_void, Get>(sym("PMIx_Get")?),
            destruct: std::mem::transmute::<*mut c_void, Destruct>(sym("PMIx_Value_destruct")?),
            error_string: std::mem::transmute::<*mut c_void, ErrorString>(sym(
                "PMIx_Error_string",
            )?),
        })
    }
}

impl Client {
    /// Connects to the launcher's PMIx server and learns this rank and
    /// the job's size.
    pub fn connect() -> Result<Client, PmiError> {
        let lib = load()?;
        let mut me = Proc {
            nspace: [0; 256],
            rank: 0,
        };
        // SAFETY: `me` is a pmix_proc_t the call fills; no info.
        let rc = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
        let mut c = Client { lib, me, size: 0 };
        c.check("PMIx_Init", rc)?;
        let job = Proc {
            rank: WILDCARD,
            ..c.me
        };
        let size = c.get_value(&job, "pmix.job.size", |v| match v.kind {
            PMIX_UINT32 => Some(v.data[0] as u32),
            _ => None,
        })?;
        let (_, size) = super::rank_and_size(c.me.rank as u64, size as u64)?;
        c.size = size;
        Ok(c)
    }

    pub fn rank(&self) -> u16 {
        self.me.rank as u16
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    fn check(&self, what: &str, rc: c_int) -> Result<(), PmiError> {
        if rc == PMIX_SUCCESS {
            return Ok(());
        }
        // SAFETY: the library returns a static string for any status.
        let why = unsafe { CStr::from_ptr((self.lib.error_string)(rc)) };
        Err(PmiError::Failed {
            rc: rc.to_string(),
            msg: format!("{what}: {}", why.to_string_lossy()),
        })
    }

    fn key(key: &str) -> Result<CString, PmiError> {
        if key.len() > MAX_KEY {
            return Err(PmiError::BadArgument(format!(
                "key of {} bytes: PMIx keys hold at most {MAX_KEY}",
                key.len()
            )));
        }
        CString::new(key).map_err(|_| PmiError::BadArgument(format!("key {key:?} holds a NUL")))
    }

    /// Stores `value` under `key`, for every rank after the next barrier.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let k = Self::key(key)?;
        let v =
            CString::new(value).map_err(|_| PmiError::BadArgument("a value holds a NUL".into()))?;
        let mut val = Value {
            kind: PMIX_STRING,
            data: [0; 7],
        };
        val.data[0] = v.as_ptr() as u64;
        // SAFETY: a NUL-terminated key and a string value the library
        // copies during the call.
        let rc = unsafe { (self.lib.put)(PMIX_GLOBAL, k.as_ptr(), &mut val) };
        self.check("PMIx_Put", rc)
    }

    /// Publishes what was put, and waits until every rank of the job has.
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.lib.commit)() };
        self.check("PMIx_Commit", rc)?;
        // SAFETY: no procs (the caller's whole namespace) and no info.
        let rc = unsafe { (self.lib.fence)(std::ptr::null(), 0, std::ptr::null(), 0) };
        self.check("PMIx_Fence", rc)
    }

    /// The text rank `rank` stored under `key`.
    pub fn get(&mut self, rank: u16, key: &str) -> Result<String, PmiError> {
        let who = Proc {
            rank: rank as u32,
            ..self.me
        };
        self.get_value(&who, key, |v| match v.kind {
            PMIX_STRING if v.data[0] != 0 => {
                // SAFETY: a string value holds a NUL-terminated string the
                // library owns until the value is destructed.
                let s = unsafe { CStr::from_ptr(v.data[0] as *const c_char) };
                Some(s.to_string_lossy().into_owned())
            }
            _ => None,
        })
    }

    /// Gets `key` of `who` and reads it with `read` (`None`: not the type
    /// stored there), then releases the library's value.
    fn get_value<R>(
        &self,
        who: &Proc,
        key: &str,
        read: impl FnOnce(&Value) -> Option<R>,
    ) -> Result<R, PmiError> {
        let k = Self::key(key)?;
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: a pmix_proc_t, a NUL-terminated key, no info, and a
        // place for the library's value.
        let rc = unsafe { (self.lib.get)(who, k.as_ptr(), std::ptr::null(), 0, &mut out) };
        self.check(&format!("PMIx_Get {key}"), rc)?;
        if out.is_null() {
            return Err(PmiError::Malformed(format!("PMIx_Get {key}: no value")));
        }
        // SAFETY: the library allocated a pmix_value_t at `out`.
        let got = read(unsafe { &*out });
        // SAFETY: released as PMIX_VALUE_RELEASE does: its data, then the
        // struct (malloc'd by the library).
        unsafe {
            (self.lib.destruct)(out);
            libc::free(out as *mut c_void);
        }
        got.ok_or_else(|| PmiError::Malformed(format!("PMIx_Get {key}: a value of another type")))
    }

    /// Tells the launcher this rank is done.
    pub fn finalize(self) -> Result<(), PmiError> {
        // SAFETY: no info.
        let rc = unsafe { (self.lib.finalize)(std::ptr::null(), 0) };
        self.check("PMIx_Finalize", rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_says_what_to_install() {
        let Err(PmiError::Env(why)) = load_from(&["libpmix-not-here.so.9"]) else {
            panic!("loaded a library that is not there");
        };
        assert!(why.contains("apt install libpmix2") && why.contains("libpmix-not-here.so.9"));
    }

    #[test]
    fn keys_past_pmix_limits_are_refused_before_the_library() {
        assert!(matches!(
            Client::key(&"k".repeat(MAX_KEY + 1)),
            Err(PmiError::BadArgument(_))
        ));
        assert!(matches!(Client::key("a\0b"), Err(PmiError::BadArgument(_))));
        assert!(Client::key("addr-7").is_ok());
    }
}
