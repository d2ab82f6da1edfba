//! The copy engine: every copy of message data the shell makes goes through
//! [`copy_bytes`] (eager copy-in and copy-out, unexpected messages, packed
//! records, the loop NIC's data movement and RDMA, PULL frames, the
//! benchmarks' floors), so a routine that is slow on this host slows
//! nothing, and a ratio to a floor compares like with like.
//!
//! Up to 32 bytes are copied inline. Above, each size class has the routine
//! measured fastest on this machine ([`choose`]): taken from the saved
//! calibration (`rmx calibrate`) when there is one, else measured once at
//! start-up in a few milliseconds.

pub mod choose;
pub mod routines;
pub mod saved;
pub(crate) mod small;

use std::sync::OnceLock;

pub use choose::{class_of, class_size, Effort, Table, CLASSES};
pub use routines::{CopyFn, Routine};

/// Where the engine's choice came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Measured at start-up.
    Measured,
    /// The calibration file `rmx calibrate` saved.
    Calibration,
}

/// A routine per size class.
pub struct Engine {
    fns: [CopyFn; CLASSES],
    routines: [Routine; CLASSES],
    origin: Origin,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// The engine, chosen on first use (call it at start-up to keep the few
/// milliseconds of measuring out of anything timed).
pub fn engine() -> &'static Engine {
    ENGINE.get_or_init(Engine::start)
}

impl Engine {
    /// The saved choice if it runs on this CPU, else a quick measurement.
    fn start() -> Engine {
        let saved = crate::reuse::Calibration::load()
            .ok()
            .filter(|(_, found)| *found)
            .and_then(|(cal, _)| saved::choice(&cal.copy));
        match saved.and_then(|r| Engine::with(r, Origin::Calibration)) {
            Some(e) => e,
            None => Engine::with(choose::measure(Effort::Quick).best(), Origin::Measured)
                .expect("measured routines run here"),
        }
    }

    /// An engine running `routines`, if this CPU has every one of them.
    pub fn with(routines: [Routine; CLASSES], origin: Origin) -> Option<Engine> {
        let mut fns = [routines[0].function()?; CLASSES];
        for (f, r) in fns.iter_mut().zip(routines) {
            *f = r.function()?;
        }
        Some(Engine {
            fns,
            routines,
            origin,
        })
    }

    pub fn routines(&self) -> &[Routine; CLASSES] {
        &self.routines
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Copies inline up to 32 bytes, else with the routine of `len`'s class.
    ///
    /// # Safety
    /// `dst` and `src` valid for `len` bytes and not overlapping.
    #[inline(always)]
    pub unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            if len <= 32 {
                small::copy(dst, src, len)
            } else {
                (self.fns[class_of(len)])(dst, src, len)
            }
        }
    }
}

/// Copies `len` bytes from `src` to `dst`: inline up to 32 bytes, else with
/// the routine chosen for the size.
///
/// # Safety
/// Both ranges must be valid for `len` bytes and must not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        // Small copies, the commonest, never look the engine up: doing so
        // first cost an 8-byte ping-pong about 5% on loop.
        if len <= 32 {
            small::copy(dst, src, len)
        } else {
            engine().copy(dst, src, len)
        }
    }
}

/// Copies `len` bytes from `src` to `dst`, which may overlap (`memmove`):
/// through the engine when they do not, as they do not in any transfer
/// between two buffers.
///
/// # Safety
/// Both ranges must be valid for `len` bytes.
#[inline]
pub unsafe fn move_bytes(dst: *mut u8, src: *const u8, len: usize) {
    let (d, s) = (dst as usize, src as usize);
    // SAFETY: the caller's contract; disjoint ranges take the engine.
    unsafe {
        if d.abs_diff(s) >= len {
            copy_bytes(dst, src, len)
        } else {
            std::ptr::copy(src, dst, len)
        }
    }
}
