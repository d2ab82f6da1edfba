//! `rmx calibrate`: measures the cost model's figures on this machine — one
//! copy C per size, one registration + deregistration R per size (page
//! granular, as the transport registers: the loop NIC's page walk and key
//! table, or verbs' `ibv_reg_mr`; and the userfaultfd watch when the
//! monitor runs), and the lookup overhead V
//! (tracker + registration cache on a hit) — and prints the minimum reuse
//! per size, the paper's Table 2.

use std::hint::black_box;

use rmx_core::reuse::SendReuse;
use rmx_core::{Loc, MemKey, Nic, PostError, Posted, RegError, RxBuf, SlotId};

use crate::anon::AnonMap;
use crate::clock::now_ns;
use crate::loopnic::{Fabric, LoopConfig};
use crate::monitor::Monitor;
use crate::reuse::{Calibration, Row, PAGE};
use crate::transport::{AnyPort, Net, Port as _, SetupError};

/// Sizes calibrated: the eager range, from where copies are cheaper than lookups.
pub const SIZES: [u32; 10] = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];

/// Batches each figure is measured in; the median batch is kept, so a
/// hiccup of a shared machine does not become the figure.
const BATCHES: u64 = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per call of `f`: the median of [`BATCHES`] batches of
/// `reps / BATCHES` (fewer where a batch would outlast a sample's time).
pub(crate) fn per_call(reps: u64, mut f: impl FnMut()) -> f64 {
    let n = crate::clock::reps_within((reps / BATCHES).max(1), &mut f);
    for _ in 0..n {
        f();
    }
    median(
        (0..BATCHES)
            .map(|_| {
                let t0 = now_ns();
                for _ in 0..n {
                    f();
                }
                (now_ns() - t0) as f64 / n as f64
            })
            .collect(),
    )
}

/// Nanoseconds of one copy of `size` bytes between warm buffers, as the
/// sender's eager copy into its bounce slot does it (through the copy engine).
pub fn copy_ns(size: usize, reps: u64) -> f64 {
    copy_ns_with(crate::copy::engine(), size, reps)
}

/// [`copy_ns`] with the routines of `engine`.
fn copy_ns_with(engine: &crate::copy::Engine, size: usize, reps: u64) -> f64 {
    let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut dst = vec![0u8; size.max(1)];
    per_call(reps, || {
        // SAFETY: both buffers hold `size` bytes.
        unsafe { engine.copy(black_box(dst.as_mut_ptr()), black_box(src.as_ptr()), size) };
        black_box(&mut dst);
    })
}

/// What `rmx calibrate` registers with: the port of the transport used
/// where it registers memory its own way (verbs' `ibv_reg_mr`: pinning
/// and the device's translation table in the kernel), else the loop NIC
/// (page walk, key table).
pub struct Registrar {
    name: &'static str,
    port: AnyPort,
}

impl Registrar {
    /// The registrar of `net`'s transport.
    pub fn of(net: &Net) -> Result<Registrar, SetupError> {
        if let Some(port) = net.registrar() {
            return Ok(Registrar {
                name: net.name(),
                port: port?,
            });
        }
        Ok(Registrar::loop_nic())
    }

    /// The loop NIC's registration.
    pub fn loop_nic() -> Registrar {
        let fabric = Fabric::new(1, LoopConfig::default()).expect("the default sizes fit");
        Registrar {
            name: crate::loopnic::ENTRY.name,
            port: fabric.port(0).into(),
        }
    }

    /// The transport whose registration is measured.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Registers `len` bytes at `addr` for remote access, then deregisters
    /// them.
    ///
    /// # Safety
    /// The range is mapped for the call and no operation names it.
    pub(crate) unsafe fn cycle(&mut self, addr: usize, len: usize) {
        // SAFETY: the caller's contract.
        if let Ok(mr) = unsafe { self.port.register_user(addr, len) } {
            self.port.deregister(mr);
        }
    }
}

/// Nanoseconds to register and deregister the pages `size` bytes span, on
/// fresh anonymous memory each time round (as a new buffer would be).
fn reg_ns(size: usize, reps: usize, monitor: Option<&Monitor>, reg: &mut Registrar) -> f64 {
    let len = (size as u64).div_ceil(PAGE) * PAGE;
    let area = AnonMap::new(reps * len as usize);
    let base = area.addr();
    let times = (0..reps)
        .map(|i| {
            let a = base as u64 + i as u64 * len;
            let t0 = now_ns();
            if let Some(m) = monitor {
                let _ = m.watch(a, len);
            }
            // SAFETY: `area` outlives the registration, and no operation
            // names it.
            unsafe { reg.cycle(a as usize, len as usize) };
            (now_ns() - t0) as f64
        })
        .collect();
    drop(area);
    median(times)
}

/// A NIC that registers instantly: what is left of a lookup is the policy's own cost.
struct NullNic;

impl Nic for NullNic {
    fn slot_mut(&mut self, _: SlotId) -> &mut [u8] {
        &mut []
    }
    fn rx(&self, _: RxBuf) -> &[u8] {
        &[]
    }
    fn copy(&mut self, _: Loc, _: Loc, _: usize) {}
    fn post_send(&mut self, _: u16, _: SlotId, _: usize) -> Result<Posted, PostError> {
        Err(PostError::Unsupported)
    }
    fn repost(&mut self, _: RxBuf) {}
    fn register(&mut self, _: u64, _: u64) -> Result<MemKey, RegError> {
        Ok(MemKey(1))
    }
}

/// Nanoseconds of the zero-copy decision on a frequent, registered buffer:
/// tracker lookup, cache lookup and reference, and its release, in the
/// policy a rank runs.
pub fn lookup_ns(reps: u64) -> f64 {
    // Figures that make every 4 KiB buffer frequent on its first send.
    let cal = Calibration {
        lookup_ns: 0,
        speculate_permille: 0,
        rows: vec![Row {
            size: 4096,
            copy_ns: 1000,
            reg_ns: 1,
        }],
        copy: Vec::new(),
    };
    let mut fb = cal.policy().expect("policy");
    let mut nic = NullNic;
    let addr = 0x10_0000_0000u64;
    let p = fb.plan(&mut nic, addr, 4096).expect("frequent at once");
    fb.release(&mut nic, p.id);
    // Alternate with a second buffer so each send pays the full lookup, not
    // the repeat of the previous send.
    let other = addr + 65536;
    let p = fb.plan(&mut nic, other, 4096).expect("frequent at once");
    fb.release(&mut nic, p.id);
    let mut flip = false;
    per_call(reps, || {
        flip = !flip;
        let a = if flip { addr } else { other };
        if let Some(p) = fb.plan(&mut nic, black_box(a), black_box(4096)) {
            fb.release(&mut nic, p.id);
        }
    })
}

/// Measures every figure, the copy engine's candidates first;
/// registrations with `reg`.
pub fn measure(reg: &mut Registrar) -> Calibration {
    let copy = crate::copy::choose::measure(crate::copy::Effort::Thorough);
    let engine = crate::copy::Engine::with(copy.best(), crate::copy::Origin::Measured)
        .expect("measured routines run here");
    let monitor = Monitor::global().ok();
    let (copies, regs, lookups) = (200_000, 300, 2_000_000);
    let rows = SIZES
        .iter()
        .map(|&size| Row {
            size,
            copy_ns: copy_ns_with(&engine, size as usize, copies)
                .round()
                .max(1.0) as u32,
            reg_ns: reg_ns(size as usize, regs, monitor.as_deref(), reg).round() as u32,
        })
        .collect();
    Calibration {
        lookup_ns: lookup_ns(lookups).round().max(1.0) as u32,
        speculate_permille: 250,
        rows,
        copy: crate::copy::saved::rows(&copy),
    }
}
