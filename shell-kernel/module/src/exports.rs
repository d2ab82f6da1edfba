//! The C ABI the module's glue calls (`rmx_rust.h` declares it), and the
//! glue's services rmx-kernel calls back ([`Glue`]). Results are
//! non-negative on success, a negative errno otherwise.
//!
//! Every function taking a context is called with the context's lock
//! held; `ctx` is what [`rmx_ctx_init`] initialised, `glue` the glue's own
//! context, passed back to its callbacks.

use core::ffi::c_void;
use core::sync::atomic::AtomicU32;

use rmx_kernel::{Desc, Error, Job, Kernel, Piece, Pinned, Slot, Step};

use crate::ctx::{Ctx, SHARED_WORDS, SLOTS};
use crate::frames;

extern "C" {
    fn rmx_glue_pin(glue: *mut c_void, slot: u16, first: u32, addr: u64, count: u32) -> i64;
    fn rmx_glue_unpin(glue: *mut c_void, slot: u16, first: u32, count: u32);
    fn rmx_glue_watch(glue: *mut c_void, slot: u16, start: u64, len: u64) -> i32;
    fn rmx_glue_unwatch(glue: *mut c_void, slot: u16);
    fn rmx_glue_read_begin(glue: *mut c_void, slot: u16) -> u64;
    fn rmx_glue_read_retry(glue: *mut c_void, slot: u16, seq: u64) -> bool;
    fn rmx_glue_bug() -> !;
}

/// The glue's services. `watch` and `unwatch` only record what to do:
/// the glue inserts and removes notifiers once the lock is dropped (both
/// may wait for an invalidation, which takes the lock).
struct Glue(*mut c_void);

/// A pin's result as C gives it (pages, or a negative errno) as the
/// logic takes it: anything not a positive count is an errno.
fn pinned(n: i64) -> Result<u32, i32> {
    match u32::try_from(n) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(i32::try_from(n).unwrap_or(-14).min(-1)),
    }
}

impl Kernel for Glue {
    fn pin(&mut self, slot: u16, first: u32, addr: u64, count: u32) -> Result<u32, i32> {
        // SAFETY: the glue's callback, on the glue's own context.
        pinned(unsafe { rmx_glue_pin(self.0, slot, first, addr, count) })
    }
    fn unpin(&mut self, slot: u16, first: u32, count: u32) {
        // SAFETY: as above; the pages were pinned into this slot's array.
        unsafe { rmx_glue_unpin(self.0, slot, first, count) }
    }
    fn watch(&mut self, slot: u16, start: u64, len: u64) -> Result<(), i32> {
        // SAFETY: as above.
        match unsafe { rmx_glue_watch(self.0, slot, start, len) } {
            0 => Ok(()),
            e => Err(e),
        }
    }
    fn unwatch(&mut self, slot: u16) {
        // SAFETY: as above.
        unsafe { rmx_glue_unwatch(self.0, slot) }
    }
    fn read_begin(&mut self, slot: u16) -> u64 {
        // SAFETY: as above.
        unsafe { rmx_glue_read_begin(self.0, slot) }
    }
    fn read_retry(&mut self, slot: u16, seq: u64) -> bool {
        // SAFETY: as above.
        unsafe { rmx_glue_read_retry(self.0, slot, seq) }
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: the glue reports a bug and stops this thread.
    unsafe { rmx_glue_bug() }
}

fn code(r: Result<impl Into<i64>, Error>) -> i64 {
    match r {
        Ok(v) => v.into(),
        Err(e) => -i64::from(e.errno()),
    }
}

/// A job as the glue keeps it between [`rmx_begin_pin`] and
/// [`rmx_end_pin`].
#[repr(C)]
pub struct RmxJob {
    pub desc: u32,
    pub first: u32,
    pub addr: u64,
    pub count: u32,
    pub pad: u32,
}

/// Bytes of a region inside one page, as [`rmx_piece`] gives them.
#[repr(C)]
pub struct RmxPiece {
    pub page: u32,
    pub at: u32,
    pub len: u32,
}

/// # Safety
/// `ctx` is a context [`rmx_ctx_init`] initialised and not yet closed.
unsafe fn ctx<'a>(ctx: *mut c_void) -> &'a mut Ctx<'static> {
    // SAFETY: the caller's contract; the lock makes the borrow unique.
    unsafe { &mut *ctx.cast::<Ctx<'static>>() }
}

/// Bytes and alignment of a context, and bytes of its slot table.
#[no_mangle]
pub extern "C" fn rmx_ctx_bytes() -> usize {
    core::mem::size_of::<Ctx<'static>>()
}

#[no_mangle]
pub extern "C" fn rmx_ctx_align() -> usize {
    core::mem::align_of::<Ctx<'static>>().max(core::mem::align_of::<Slot>())
}

#[no_mangle]
pub extern "C" fn rmx_slots_bytes() -> usize {
    SLOTS * core::mem::size_of::<Slot>()
}

/// Regions a context holds, and words of the page userspace maps.
#[no_mangle]
pub extern "C" fn rmx_slots() -> u32 {
    SLOTS as u32
}

#[no_mangle]
pub extern "C" fn rmx_shared_words() -> u32 {
    SHARED_WORDS as u32
}

/// Initialises a context in `ctx` over the slot table `slots` and the
/// zeroed page `shared`, holding at most `limit` pages pinned, its
/// descriptors seeded by `seed`.
///
/// # Safety
/// `ctx` holds [`rmx_ctx_bytes`] bytes and `slots` [`rmx_slots_bytes`],
/// both aligned to [`rmx_ctx_align`]; `shared` holds [`rmx_shared_words`]
/// words. All three stay allocated, and are touched by nothing else,
/// until [`rmx_ctx_close`] returns.
#[no_mangle]
pub unsafe extern "C" fn rmx_ctx_init(
    ctx: *mut c_void,
    slots: *mut c_void,
    shared: *mut u32,
    limit: u64,
    seed: u16,
) -> i32 {
    let slots = slots.cast::<Slot>();
    for i in 0..SLOTS {
        // SAFETY: within the table the caller allocated; each slot is
        // written once, before any is read.
        unsafe { slots.add(i).write(Slot::default()) };
    }
    // SAFETY: initialised just now, exclusively the context's until closed.
    let slots = unsafe { core::slice::from_raw_parts_mut(slots, SLOTS) };
    // SAFETY: AtomicU32 has u32's layout; the page outlives the context
    // and userspace only reads it.
    let shared = unsafe { core::slice::from_raw_parts(shared.cast::<AtomicU32>(), SHARED_WORDS) };
    match Ctx::new(slots, shared, limit, seed) {
        Ok(c) => {
            // SAFETY: the caller's allocation, size and alignment.
            unsafe { ctx.cast::<Ctx<'static>>().write(c) };
            0
        }
        Err(e) => -e.errno(),
    }
}

/// Ends a context: every region unpinned and undeclared (the glue
/// removes the notifiers it was told to unwatch). Its memory may then be
/// freed.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_ctx_close(c: *mut c_void, glue: *mut c_void) {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    c.regions.close(&mut Glue(glue));
}

/// Bytes of segments a declaration's argument (16 bytes at `arg`) asks
/// to copy in.
///
/// # Safety
/// `arg` points to 16 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_declare_len(arg: *const u8) -> i64 {
    // SAFETY: the caller's contract.
    let arg = unsafe { core::slice::from_raw_parts(arg, rmx_kernel::request::DECLARE_LEN) };
    code(Ctx::declare_len(arg).map(|n| n as i64))
}

/// Declares a region: `arg` the declaration's 16 bytes, `segs` the
/// `len` bytes of segments copied in. Its descriptor.
///
/// # Safety
/// As for every context call; `arg` and `segs` readable for 16 and
/// `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_declare(
    c: *mut c_void,
    glue: *mut c_void,
    arg: *const u8,
    segs: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (c, arg, segs) = unsafe {
        (
            ctx(c),
            core::slice::from_raw_parts(arg, rmx_kernel::request::DECLARE_LEN),
            core::slice::from_raw_parts(segs, len),
        )
    };
    code(
        c.declare(&mut Glue(glue), arg, segs)
            .map(|d| i64::from(d.0)),
    )
}

/// Undeclares `desc`.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_undeclare(c: *mut c_void, glue: *mut c_void, desc: u32) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(c.regions.undeclare(&mut Glue(glue), Desc(desc)).map(|()| 0))
}

/// Unpins every page of `desc`; it stays declared.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_unpin(c: *mut c_void, glue: *mut c_void, desc: u32) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(c.regions.unpin(&mut Glue(glue), Desc(desc)).map(|()| 0))
}

/// The pages of `desc` (the length of the page array the glue keeps),
/// and its bytes.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_region_pages(c: *mut c_void, desc: u32) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(c.regions.region(Desc(desc)).map(|r| r.pages()))
}

/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_region_bytes(c: *mut c_void, desc: u32) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(
        c.regions
            .region(Desc(desc))
            .map(|r| r.bytes().min(i64::MAX as u64) as i64),
    )
}

/// A communication starts (`on`) or ends using `desc`.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_use(c: *mut c_void, desc: u32, on: bool) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    let d = Desc(desc);
    code(
        if on {
            c.regions.acquire(d)
        } else {
            c.regions.release(d)
        }
        .map(|()| 0),
    )
}

/// What to pin next of `desc`: 0 every page is pinned, 1 pin `job` (then
/// [`rmx_end_pin`]), 2 another pin is in flight.
///
/// # Safety
/// As for every context call; `job` writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_begin_pin(
    c: *mut c_void,
    glue: *mut c_void,
    desc: u32,
    job: *mut RmxJob,
) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(
        c.regions
            .begin_pin(&mut Glue(glue), Desc(desc))
            .map(|s| match s {
                Step::Done => 0,
                Step::Wait => 2,
                Step::Pin(j) => {
                    // SAFETY: the caller's contract.
                    unsafe {
                        job.write(RmxJob {
                            desc: j.desc.0,
                            first: j.first,
                            addr: j.addr,
                            count: j.count,
                            pad: 0,
                        })
                    };
                    1
                }
            }),
    )
}

/// [`rmx_run_job`] ran `job` and read the notifier's sequence `seq`:
/// `got` pages, or a negative errno. 1 if every page of the region
/// is now pinned, 0 if not (pin again).
///
/// # Safety
/// As for every context call; `job` is what [`rmx_begin_pin`] wrote.
#[no_mangle]
pub unsafe extern "C" fn rmx_end_pin(
    c: *mut c_void,
    glue: *mut c_void,
    job: *const RmxJob,
    seq: u64,
    got: i64,
) -> i64 {
    // SAFETY: the caller's contract.
    let (c, j) = unsafe { (ctx(c), &*job) };
    code(
        c.regions
            .end_pin(&mut Glue(glue), job_of(j), seq, pinned(got))
            .map(|p| i64::from(p == Pinned::All)),
    )
}

fn job_of(j: &RmxJob) -> Job {
    Job {
        desc: Desc(j.desc),
        first: j.first,
        addr: j.addr,
        count: j.count,
    }
}

/// Runs `job` without the context's lock (it may wait for an
/// invalidation and fault pages in): the notifier's sequence into `seq`,
/// then the pin; pages pinned, or a negative errno. Touches no context.
///
/// # Safety
/// `job` is what [`rmx_begin_pin`] wrote, its slot watched; `seq` writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_run_job(glue: *mut c_void, job: *const RmxJob, seq: *mut u64) -> i64 {
    // SAFETY: the caller's contract.
    let j = job_of(unsafe { &*job });
    let (s, got) = j.run(&mut Glue(glue));
    // SAFETY: the caller's contract.
    unsafe { seq.write(s) };
    match got {
        Ok(n) => i64::from(n),
        Err(e) => i64::from(e),
    }
}

/// Where byte `offset` of `desc` lies: 1 and `piece` written if its page
/// is pinned, 0 if not (an overlap miss: pin first).
///
/// # Safety
/// As for every context call; `piece` writable.
#[no_mangle]
pub unsafe extern "C" fn rmx_piece(
    c: *mut c_void,
    desc: u32,
    offset: u64,
    piece: *mut RmxPiece,
) -> i64 {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    code(c.regions.piece(Desc(desc), offset).map(|p| match p {
        Some(Piece { page, at, len }) => {
            // SAFETY: the caller's contract.
            unsafe { piece.write(RmxPiece { page, at, len }) };
            1
        }
        None => 0,
    }))
}

/// The notifier of `slot` reports `[start, end)` invalidated.
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_invalidate(
    c: *mut c_void,
    glue: *mut c_void,
    slot: u32,
    start: u64,
    end: u64,
) {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    if let Ok(slot) = u16::try_from(slot) {
        c.regions.invalidate(&mut Glue(glue), slot, start, end);
    }
}

/// A change as `read` gives it to userspace: a region's descriptor and
/// its generation now.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RmxChange {
    pub desc: u32,
    pub generation: u32,
}

/// Whether a region changed since last read (the device is readable).
///
/// # Safety
/// As for every context call.
#[no_mangle]
pub unsafe extern "C" fn rmx_changed(c: *mut c_void) -> bool {
    // SAFETY: the caller's contract.
    unsafe { ctx(c) }.regions.changed()
}

/// Writes up to `max` changes to `out`; how many.
///
/// # Safety
/// As for every context call; `out` writable for `max` changes.
#[no_mangle]
pub unsafe extern "C" fn rmx_changes(c: *mut c_void, out: *mut RmxChange, max: usize) -> usize {
    // SAFETY: the caller's contract.
    let c = unsafe { ctx(c) };
    let mut buf = [(Desc(0), 0u32); 32];
    let mut n = 0;
    while n < max {
        let want = (max - n).min(buf.len());
        let got = c.regions.changes(&mut buf[..want]);
        for (i, &(d, g)) in buf[..got].iter().enumerate() {
            // SAFETY: n + i < max, within the caller's buffer.
            unsafe {
                out.add(n + i).write(RmxChange {
                    desc: d.0,
                    generation: g,
                })
            };
        }
        n += got;
        if got < want {
            break;
        }
    }
    n
}

/// The endpoint a received frame is for: `head` holds its first
/// [`frames::HEAD`] bytes (fewer if the frame is shorter), `len` its length
/// in all; a negative errno if it is not an rmx frame of `ethertype`.
///
/// # Safety
/// `head` is readable for `head_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn rmx_frame_dest(
    head: *const u8,
    head_len: usize,
    len: usize,
    ethertype: u16,
) -> i32 {
    // SAFETY: the caller's contract.
    let head = unsafe { core::slice::from_raw_parts(head, head_len) };
    match frames::destination(head, len, ethertype) {
        Ok(e) => i32::from(e),
        Err(r) => -r.errno(),
    }
}

/// 0 if the `len` bytes at `frame` are an rmx frame of `ethertype` from
/// the endpoint `endpoint` of the interface whose address is `mac`;
/// `-EINVAL` otherwise.
///
/// # Safety
/// `frame` is readable for `len` bytes, `mac` for 6.
#[no_mangle]
pub unsafe extern "C" fn rmx_frame_check_send(
    frame: *const u8,
    len: usize,
    ethertype: u16,
    mac: *const u8,
    endpoint: u16,
) -> i32 {
    // SAFETY: the caller's contract.
    let (frame, mac) = unsafe {
        (
            core::slice::from_raw_parts(frame, len),
            *mac.cast::<[u8; 6]>(),
        )
    };
    match frames::check_send(frame, ethertype, mac, endpoint) {
        Ok(()) => 0,
        Err(r) => -r.errno(),
    }
}
