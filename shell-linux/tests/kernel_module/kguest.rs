//! Run in the guest with rmx.ko loaded (`pin_limit` = [`super::LIMIT`]);
//! each skips where `/dev/rmx` is missing.

use std::io;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmx_kernel::request::{ioctl, Declare};
use rmx_kernel::Segment;
use rmx_linux::kmod::{Desc, Device};

pub(crate) const PAGE: usize = 4096;

pub(crate) fn dev() -> Option<Device> {
    match Device::open() {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped: {e} (these run in the test VM)");
            None
        }
    }
}

/// Fresh anonymous read-write memory, at `at` when given (`MAP_FIXED`).
pub(crate) fn map(len: usize, at: Option<usize>) -> usize {
    let (hint, fixed) = at.map_or((0, 0), |a| (a, libc::MAP_FIXED));
    // SAFETY: a new mapping, or one over memory these tests own.
    let p = unsafe {
        libc::mmap(
            hint as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    // Kept apart from its neighbours and out of khugepaged's reach: a
    // collapse into a huge page invalidates every region in its 2 MiB,
    // at a moment no test chooses (the huge page test asks for one).
    // SAFETY: advice on the mapping just made.
    assert_eq!(unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) }, 0);
    p as usize
}

pub(crate) fn unmap(a: usize, len: usize) {
    // SAFETY: memory these tests mapped and no longer reference.
    assert_eq!(unsafe { libc::munmap(a as *mut libc::c_void, len) }, 0);
}

pub(crate) fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i / 7 + seed * 31 + i) as u8).collect()
}

/// Writes `bytes` at `a` (memory these tests mapped).
pub(crate) fn store(a: usize, bytes: &[u8]) {
    // SAFETY: `a..a + len` is mapped read-write and only these tests use it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), a as *mut u8, bytes.len()) };
}

fn load(a: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: as for `store`.
    unsafe { std::ptr::copy_nonoverlapping(a as *const u8, v.as_mut_ptr(), len) };
    v
}

pub(crate) fn declare(d: &Device, segs: &[(usize, usize)]) -> io::Result<Desc> {
    let segs: Vec<Segment> = segs
        .iter()
        .map(|&(addr, len)| Segment {
            addr: addr as u64,
            len: len as u64,
        })
        .collect();
    // SAFETY: these tests hold no references into the memory across the
    // module's writes.
    unsafe { d.declare(&segs) }
}

fn sent(d: &Device, r: Desc, len: usize) -> io::Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    d.read(r, 0, &mut v)?;
    Ok(v)
}

pub(crate) fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("refused").raw_os_error().expect("an errno")
}

/// A count the module reports under `/sys/module/rmx/parameters`.
pub(crate) fn module_count(name: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/module/rmx/parameters/{name}"))
        .expect("the module's parameter")
        .trim()
        .parse()
        .expect("a count")
}

fn sys_pinned() -> u64 {
    module_count("pinned_pages")
}

#[test]
fn kguest_a_region_unmapped_and_mapped_again_sends_the_new_pages() {
    let Some(d) = dev() else { return };
    let len = 16 * PAGE;
    let a = map(len, None);
    store(a, &pattern(1, len));
    let r = declare(&d, &[(a, len)]).unwrap();
    assert_eq!(d.pinned(), 0, "declaring pins nothing");
    assert!(sent(&d, r, len).unwrap() == pattern(1, len));
    assert_eq!(d.pinned(), 16);
    let g = d.generation(r).unwrap();
    unmap(a, len);
    assert_eq!(d.pinned(), 0, "the unmapping unpinned the region");
    assert_ne!(d.generation(r).unwrap(), g, "and userspace can see it");
    let g = d.generation(r).unwrap();
    assert_eq!(map(len, Some(a)), a);
    store(a, &pattern(2, len));
    let got = sent(&d, r, len).unwrap();
    let stale = got
        .iter()
        .zip(pattern(2, len))
        .filter(|(x, y)| **x != *y)
        .count();
    assert_eq!(stale, 0, "every byte is the new mapping's");
    // Unpinned by request (the synchronous mode): declared still, pinned
    // again on the next send.
    d.unpin(r).unwrap();
    assert_eq!(d.pinned(), 0);
    assert_ne!(d.generation(r).unwrap(), g);
    assert!(sent(&d, r, len).unwrap() == pattern(2, len));
    // A receive into the region lands in the process's memory.
    d.write(r, 100, &pattern(3, 3 * PAGE)).unwrap();
    assert!(load(a + 100, 3 * PAGE) == pattern(3, 3 * PAGE));
    assert!(load(a, 100) == pattern(2, 100));
    // Unmapped for good: the communication fails, the region stays declared.
    unmap(a, len);
    assert_eq!(errno(sent(&d, r, len)), libc::EFAULT);
    d.undeclare(r).unwrap();
    assert_eq!(d.pinned(), 0);
}

#[test]
fn kguest_mremap_dontneed_and_mprotect_unpin_and_the_next_send_is_current() {
    let Some(d) = dev() else { return };
    let len = 8 * PAGE;
    let a = map(len, None);
    store(a, &pattern(13, len));
    let r = declare(&d, &[(a, len)]).unwrap();
    d.pin(r, true).unwrap();
    // MADV_DONTNEED: the pages are dropped; the next send carries zeros.
    // SAFETY: advice on this test's memory.
    let dropped = unsafe { libc::madvise(a as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    assert_eq!(dropped, 0);
    assert_eq!(d.pinned(), 0);
    assert!(
        sent(&d, r, len).unwrap().iter().all(|&b| b == 0),
        "no stale byte"
    );
    // mprotect read-only: unpinned; a send cannot pin for writing until
    // the protection is back.
    store(a, &pattern(14, len));
    let protect = |prot| {
        // SAFETY: protection changes on this test's memory.
        unsafe { libc::mprotect(a as *mut libc::c_void, len, prot) }
    };
    assert_eq!(protect(libc::PROT_READ), 0);
    assert_eq!(d.pinned(), 0);
    assert_eq!(errno(sent(&d, r, len)), libc::EFAULT);
    assert_eq!(protect(libc::PROT_READ | libc::PROT_WRITE), 0);
    assert!(sent(&d, r, len).unwrap() == pattern(14, len));
    // mremap away: the range is gone; moved back with new bytes, they are sent.
    let b = map(len, None);
    let remap = |from: usize, to: usize| {
        // SAFETY: moves this test's mapping over another of its own.
        let p = unsafe {
            libc::mremap(
                from as *mut libc::c_void,
                len,
                len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                to as *mut libc::c_void,
            )
        };
        assert_eq!(p as usize, to, "mremap");
    };
    remap(a, b);
    assert_eq!(d.pinned(), 0);
    assert_eq!(
        errno(sent(&d, r, len)),
        libc::EFAULT,
        "nothing mapped there"
    );
    store(b, &pattern(15, len));
    remap(b, a);
    assert!(sent(&d, r, len).unwrap() == pattern(15, len));
    unmap(a, len);
}

#[test]
fn kguest_pages_unmapped_inside_a_region_fail_it_and_spare_the_regions_beside() {
    let Some(d) = dev() else { return };
    let len = 64 * PAGE;
    let a = map(len, None);
    store(a, &pattern(4, len));
    let whole = declare(&d, &[(a, len)]).unwrap();
    let head = declare(&d, &[(a, 16 * PAGE)]).unwrap();
    let tail = declare(&d, &[(a + 40 * PAGE, 24 * PAGE)]).unwrap();
    // Two segments around the hole, in reverse order.
    let split = declare(&d, &[(a + 40 * PAGE, PAGE), (a + 10 * PAGE, PAGE)]).unwrap();
    for r in [whole, head, tail, split] {
        d.pin(r, true).unwrap();
    }
    let (gh, gt) = (d.generation(head), d.generation(tail));
    unmap(a + 30 * PAGE, 4 * PAGE);
    assert_eq!(errno(sent(&d, whole, len)), libc::EFAULT, "a hole");
    assert_eq!(
        d.generation(head),
        gh,
        "a region beside the hole is untouched"
    );
    assert_eq!(d.generation(tail), gt);
    assert!(sent(&d, head, 16 * PAGE).unwrap() == pattern(4, len)[..16 * PAGE]);
    assert!(sent(&d, tail, 24 * PAGE).unwrap() == pattern(4, len)[40 * PAGE..]);
    let mut want = pattern(4, len)[40 * PAGE..41 * PAGE].to_vec();
    want.extend_from_slice(&pattern(4, len)[10 * PAGE..11 * PAGE]);
    assert!(sent(&d, split, 2 * PAGE).unwrap() == want);
    // The hole filled again: the whole region is whole, with the new pages.
    map(4 * PAGE, Some(a + 30 * PAGE));
    store(a + 30 * PAGE, &pattern(5, 4 * PAGE));
    let got = sent(&d, whole, len).unwrap();
    assert!(got[..30 * PAGE] == pattern(4, len)[..30 * PAGE]);
    assert!(got[30 * PAGE..34 * PAGE] == pattern(5, 4 * PAGE)[..]);
    assert!(got[34 * PAGE..] == pattern(4, len)[34 * PAGE..]);
    unmap(a, len);
    drop(d);
    assert_eq!(sys_pinned(), 0, "closing gave every page back");
}

#[test]
fn kguest_after_fork_the_parent_goes_on_and_the_child_is_refused() {
    let Some(d) = dev() else { return };
    let len = 8 * PAGE;
    let a = map(len, None);
    store(a, &pattern(6, len));
    let r = declare(&d, &[(a, len)]).unwrap();
    d.pin(r, true).unwrap();
    let mut small = [0u8; 16];
    // SAFETY: the child only makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let e = d
            .read(r, 0, &mut small)
            .err()
            .and_then(|e| e.raw_os_error());
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if e == Some(libc::EIO) { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child got EIO");
    // The parent writes after fork (copy-on-write): the module sends what
    // the parent now holds, never an error.
    store(a, &pattern(7, len));
    assert!(sent(&d, r, len).unwrap() == pattern(7, len));
    d.write(r, 0, &pattern(8, len)).unwrap();
    assert!(load(a, len) == pattern(8, len));
    unmap(a, len);
}

#[test]
fn kguest_an_evictor_thread_reads_what_changed() {
    let Some(d) = dev() else { return };
    let len = 4 * PAGE;
    let a = map(len, None);
    let r = declare(&d, &[(a, len)]).unwrap();
    let other = declare(&d, &[(a, PAGE)]).unwrap();
    // The declarations were changes; then nothing is pending.
    let first = d.changes().unwrap();
    assert_eq!(
        first.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec![r, other]
    );
    assert!(!d.ready(Some(Duration::ZERO)).unwrap());
    d.pin(r, true).unwrap();
    assert!(
        !d.ready(Some(Duration::ZERO)).unwrap(),
        "pinning is no change"
    );
    let seen = std::thread::scope(|s| {
        let t = s.spawn(|| {
            assert!(d.ready(Some(Duration::from_secs(30))).unwrap(), "woken");
            d.changes().unwrap()
        });
        std::thread::sleep(Duration::from_millis(50));
        unmap(a + 2 * PAGE, PAGE);
        t.join().unwrap()
    });
    assert_eq!(
        seen,
        vec![(r, d.generation(r).unwrap())],
        "only the region over the unmapped page"
    );
    // A read blocks until a change comes (requests meanwhile wake it
    // without one).
    d.pin(r, true).unwrap_err();
    let seen = std::thread::scope(|s| {
        let t = s.spawn(|| d.changes().unwrap());
        std::thread::sleep(Duration::from_millis(50));
        map(PAGE, Some(a + 2 * PAGE));
        d.pin(r, true).unwrap();
        unmap(a + 3 * PAGE, PAGE);
        t.join().unwrap()
    });
    assert_eq!(
        seen,
        vec![(r, d.generation(r).unwrap())],
        "woken by the unmapping"
    );
    d.undeclare(other).unwrap();
    assert_eq!(
        d.changes().unwrap(),
        vec![(other, d.generation(other).unwrap())]
    );
    unmap(a, len);
}

#[test]
fn kguest_the_region_cache_declares_once_and_the_synchronous_mode_pins_per_send() {
    use rmx_linux::kmod::cache::{Mode, RegionCache};
    let Some(d) = dev() else { return };
    let (n, size, stride) = (8, 3 * PAGE, 4 * PAGE);
    let a = map(n * stride, None);
    for i in 0..n {
        store(a + i * stride + 100, &pattern(i, size));
    }
    for (mode, capacity, declared) in [
        (Mode::Decoupled, 8, 8),
        (Mode::Decoupled, 4, 24),
        (Mode::Synchronous, 8, 8),
    ] {
        let mut c = RegionCache::new(&d, mode, capacity).unwrap();
        let mut out = vec![0u8; size];
        for _round in 0..3 {
            for i in 0..n {
                // SAFETY: this test's memory, not referenced across the calls.
                unsafe { c.read((a + i * stride + 100) as u64, &mut out) }.unwrap();
                assert!(out == pattern(i, size), "{mode:?} {i}");
                if mode == Mode::Synchronous {
                    assert_eq!(d.pinned(), 0, "unpinned after each send");
                }
            }
        }
        let st = c.stats();
        assert_eq!(st.declared, declared, "{mode:?} {capacity}");
        assert_eq!(st.hits + st.declared, 3 * n as u64);
        assert_eq!(st.undeclared, declared - capacity as u64);
        if mode == Mode::Decoupled {
            assert!(d.pinned() > 0, "decoupled pages stay pinned");
        }
        // A receive through the cache lands in memory.
        // SAFETY: as above.
        unsafe { c.write((a + 100) as u64, &pattern(20, size)) }.unwrap();
        assert!(load(a + 100, size) == pattern(20, size));
        store(a + 100, &pattern(0, size));
    }
    assert_eq!(d.pinned(), 0, "dropping the cache undeclared its regions");
    for bad in [0, 256] {
        assert!(RegionCache::new(&d, Mode::Decoupled, bad).is_err());
    }
    unmap(a, n * stride);
}

/// A hold on the region of this test's memory `[addr, addr + len)`.
fn hold(
    c: &mut rmx_linux::kmod::cache::RegionCache<&Device>,
    addr: u64,
    len: u64,
) -> io::Result<(Desc, u64)> {
    // SAFETY: the tests' memory, only read through the module.
    unsafe { c.acquire(addr, len) }
}

#[test]
fn kguest_a_held_region_stays_declared_and_in_synchronous_mode_pinned() {
    use rmx_linux::kmod::cache::{Mode, RegionCache};
    let Some(d) = dev() else { return };
    let a = map(4 * PAGE, None);
    let at = |i: usize| (a + i * PAGE) as u64;
    let mut c = RegionCache::new(&d, Mode::Decoupled, 2).unwrap();
    let (r0, off) = hold(&mut c, at(0) + 10, 100).unwrap();
    assert_eq!(off, 10);
    let (r1, _) = hold(&mut c, at(1), PAGE as u64).unwrap();
    assert_eq!(
        hold(&mut c, at(2), 8).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC),
        "every region held: none is undeclared to make room"
    );
    assert_eq!(hold(&mut c, at(0) + 500, 8).unwrap().0, r0, "a hit");
    c.release(r0);
    c.release(r0);
    c.release(r0); // not held: nothing
    let (r2, _) = hold(&mut c, at(2), 8).unwrap();
    assert_ne!(r2, r0);
    assert_eq!(
        c.stats().undeclared,
        1,
        "the region no longer held made room"
    );
    assert_eq!(hold(&mut c, at(1) + 8, 8).unwrap().0, r1, "still declared");
    drop(c);

    let mut c = RegionCache::new(&d, Mode::Synchronous, 2).unwrap();
    let (r, _) = hold(&mut c, at(0), 3 * PAGE as u64).unwrap();
    assert_eq!(d.pinned(), 3, "pinned whole when first held");
    let _ = hold(&mut c, at(1), 8).unwrap();
    assert_eq!(d.pinned(), 3);
    c.release(r);
    assert_eq!(d.pinned(), 3, "pinned while held");
    c.release(r);
    assert_eq!(d.pinned(), 0, "unpinned when the last hold ends");
    // Memory not mapped: the hold is refused, nothing left held.
    unmap(a, 4 * PAGE);
    assert!(hold(&mut c, at(0), 8).is_err());
    assert_eq!(d.pinned(), 0);
    drop(c);
    assert_eq!(d.pinned(), 0);
}

/// The `AnonHugePages` of this process, in kB.
fn huge_kb() -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn kguest_a_huge_page_split_is_pinned_again_not_an_error() {
    let Some(d) = dev() else { return };
    let huge = 2 << 20;
    let raw = map(2 * huge, None);
    let a = raw.next_multiple_of(huge);
    // SAFETY: advice on memory this test mapped.
    unsafe { libc::madvise(a as *mut libc::c_void, huge, libc::MADV_HUGEPAGE) };
    store(a, &pattern(9, huge));
    let was_huge = huge_kb() >= 2048;
    // The region is the huge page's first half; the split comes from the
    // second.
    let r = declare(&d, &[(a, huge / 2)]).unwrap();
    assert!(sent(&d, r, huge / 2).unwrap() == pattern(9, huge)[..huge / 2]);
    let g = d.generation(r);
    // SAFETY: a protection change on this test's memory, outside the region.
    let p = unsafe {
        libc::mprotect(
            (a + 3 * huge / 4) as *mut libc::c_void,
            PAGE,
            libc::PROT_READ,
        )
    };
    assert_eq!(p, 0);
    if was_huge {
        assert_ne!(d.generation(r), g, "the split invalidated the whole 2 MiB");
    } else {
        eprintln!("note: no transparent huge page here; the split was not exercised");
    }
    assert!(sent(&d, r, huge / 2).unwrap() == pattern(9, huge)[..huge / 2]);
    unmap(raw, 2 * huge);
}

#[test]
fn kguest_past_the_pinned_page_limit_unused_regions_give_their_pages_back() {
    let Some(d) = dev() else { return };
    let (n, pages) = (8, 64);
    let len = n * pages * PAGE;
    let a = map(len, None);
    store(a, &pattern(10, len));
    let regions: Vec<Desc> = (0..n)
        .map(|i| declare(&d, &[(a + i * pages * PAGE, pages * PAGE)]).unwrap())
        .collect();
    for round in 0..2 {
        for (i, &r) in regions.iter().enumerate() {
            let got = sent(&d, r, pages * PAGE).unwrap();
            assert!(
                got == pattern(10, len)[i * pages * PAGE..(i + 1) * pages * PAGE],
                "{round} {i}"
            );
            assert!(d.pinned() as usize <= super::LIMIT, "{}", d.pinned());
        }
    }
    assert!(
        d.pinned() as usize > super::LIMIT - pages,
        "the limit is used"
    );
    // One region larger than the limit cannot be pinned whole.
    let big = declare(&d, &[(a, (super::LIMIT + 1) * PAGE)]).unwrap();
    assert_eq!(errno(d.pin(big, true)), libc::ENOMEM);
    assert!(d.pinned() as usize <= super::LIMIT);
    // The regions stay declared and usable.
    assert!(sent(&d, regions[0], PAGE).unwrap() == pattern(10, PAGE));
    unmap(a, len);
}

/// A raw `RMX_DECLARE` of `count` segments read from `segs`, its reserved
/// word `zero`.
fn raw_declare(d: &Device, count: u32, zero: u32, segs: u64) -> i32 {
    use std::os::fd::AsRawFd;
    let mut arg = Declare {
        count,
        segments: segs,
    }
    .encode();
    arg[4..8].copy_from_slice(&zero.to_ne_bytes());
    // SAFETY: a 16-byte argument, as the request names.
    let r = unsafe { libc::ioctl(d.as_raw_fd(), ioctl::DECLARE as _, arg.as_mut_ptr()) };
    if r < 0 {
        io::Error::last_os_error().raw_os_error().unwrap()
    } else {
        0
    }
}

#[test]
fn kguest_bad_requests_get_an_errno_and_change_nothing() {
    use std::os::fd::AsRawFd;
    let Some(d) = dev() else { return };
    let a = map(4 * PAGE, None);
    store(a, &pattern(11, 4 * PAGE));
    let good = declare(&d, &[(a, 4 * PAGE)]).unwrap();
    d.pin(good, true).unwrap();
    let before = d.pinned();
    let one = |addr: u64, len: u64| {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&addr.to_ne_bytes());
        b[8..].copy_from_slice(&len.to_ne_bytes());
        b
    };
    let ok = one(a as u64, PAGE as u64);
    assert_eq!(
        raw_declare(&d, 0, 0, ok.as_ptr() as u64),
        libc::EINVAL,
        "no segments"
    );
    assert_eq!(
        raw_declare(&d, 65, 0, ok.as_ptr() as u64),
        libc::EINVAL,
        "too many"
    );
    assert_eq!(
        raw_declare(&d, u32::MAX, 0, ok.as_ptr() as u64),
        libc::EINVAL
    );
    assert_eq!(
        raw_declare(&d, 1, 1, ok.as_ptr() as u64),
        libc::EINVAL,
        "reserved word"
    );
    assert_eq!(raw_declare(&d, 1, 0, 0), libc::EFAULT, "segments at null");
    assert_eq!(
        raw_declare(&d, 1, 0, u64::MAX - 8),
        libc::EFAULT,
        "segments past the end"
    );
    for (addr, len) in [
        (a as u64, 0),
        (u64::MAX - 10, 100),
        (0xffff_8880_0000_0000, 64),
        ((1 << 47) - 4096, 8192),
    ] {
        let s = one(addr, len);
        assert_eq!(
            raw_declare(&d, 1, 0, s.as_ptr() as u64),
            libc::EINVAL,
            "{addr:#x}+{len}"
        );
    }
    // SAFETY: a null argument, refused before it is read.
    let r = unsafe {
        libc::ioctl(
            d.as_raw_fd(),
            ioctl::DECLARE as _,
            std::ptr::null_mut::<u8>(),
        )
    };
    assert_eq!(
        (r, io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::EFAULT))
    );
    // SAFETY: an unknown request.
    let r = unsafe { libc::ioctl(d.as_raw_fd(), 0xCE77 as _, 0usize) };
    assert_eq!(
        (r, io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ENOTTY))
    );
    // Descriptors never given, or stale.
    assert_eq!(errno(d.undeclare(Desc(12345))), libc::EBADF);
    assert_eq!(errno(sent(&d, Desc(good.0 ^ 1 << 16), 1)), libc::EBADF);
    assert_eq!(errno(d.pin(Desc(u32::MAX), false)), libc::EBADF);
    assert_eq!(errno(d.unpin(Desc(u32::MAX))), libc::EBADF);
    assert_eq!(d.generation(Desc(u32::MAX)), None);
    // Another context's descriptor, though its slot holds a region here.
    let other = Device::open().unwrap();
    let theirs = declare(&other, &[(a, PAGE)]).unwrap();
    assert_eq!(theirs.0 & 0xffff, good.0 & 0xffff, "the same slot");
    assert_eq!(errno(sent(&d, theirs, 1)), libc::EBADF);
    assert_eq!(errno(other.undeclare(good)), libc::EBADF);
    drop(other);
    // Ranges past a region's end, or whose end overflows.
    let mut b = [0u8; 8];
    assert_eq!(
        errno(d.read(good, 4 * PAGE as u64 - 4, &mut b)),
        libc::EINVAL
    );
    assert_eq!(errno(d.read(good, u64::MAX - 2, &mut b)), libc::EINVAL);
    // SAFETY: a buffer pointer the kernel must refuse, with a length to match.
    let bad_buf = unsafe { std::slice::from_raw_parts_mut(8 as *mut u8, 8) };
    assert_eq!(errno(d.read(good, 0, bad_buf)), libc::EFAULT);
    // A declared range that is not mapped: declared, failing when used.
    let hole = map(PAGE, None);
    unmap(hole, PAGE);
    let h = declare(&d, &[(hole, PAGE)]).unwrap();
    assert_eq!(errno(d.pin(h, true)), libc::EFAULT);
    assert_eq!(map(PAGE, Some(hole)), hole);
    store(hole, &pattern(12, PAGE));
    assert!(
        sent(&d, h, PAGE).unwrap() == pattern(12, PAGE),
        "usable once mapped"
    );
    d.undeclare(h).unwrap();
    assert_eq!(errno(d.undeclare(h)), libc::EBADF, "undeclared twice");
    // The mapped page is read-only and one page.
    for (len, prot, want) in [
        (PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::EPERM),
        (2 * PAGE, libc::PROT_READ, libc::EINVAL),
    ] {
        // SAFETY: a mapping of the device the kernel must refuse.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                d.as_raw_fd(),
                0,
            )
        };
        assert_eq!(p, libc::MAP_FAILED);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(want));
    }
    // A full table.
    let mut many = Vec::new();
    loop {
        match declare(&d, &[(a, PAGE)]) {
            Ok(r) => many.push(r),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
                break;
            }
        }
    }
    assert_eq!(many.len(), 255, "256 regions, one of them `good`");
    for r in many {
        d.undeclare(r).unwrap();
    }
    // Nothing accepted before was lost.
    assert_eq!(d.pinned(), before);
    assert!(sent(&d, good, 4 * PAGE).unwrap() == pattern(11, 4 * PAGE));
    unmap(a, 4 * PAGE);
}

/// Runs the helper `name` (an ignored test) as a process of its own.
fn spawn(name: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a helper")
}

#[test]
#[ignore = "a helper: kguest_a_killed_process_leaves_no_page_pinned runs it"]
fn kguest_helper_pin_and_wait() {
    let d = Device::open().unwrap();
    let len = 64 * PAGE;
    let a = map(len, None);
    let r = declare(&d, &[(a, len)]).unwrap();
    d.pin(r, true).unwrap();
    println!("PINNED");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
#[ignore = "a helper: kguest_two_processes_at_once_each_see_their_own_pages runs it"]
fn kguest_helper_loop() {
    let d = Device::open().unwrap();
    let len = 32 * PAGE;
    let a = map(len, None);
    let r = declare(&d, &[(a, len)]).unwrap();
    for i in 0..50 {
        store(a, &pattern(i, len));
        assert!(sent(&d, r, len).unwrap() == pattern(i, len), "round {i}");
        if i % 10 == 9 {
            unmap(a, len);
            map(len, Some(a));
        }
    }
    println!("LOOPED");
}

fn wait_for_line(c: &mut std::process::Child, want: &str) {
    use std::io::BufRead;
    let out = c.stdout.as_mut().unwrap();
    for line in io::BufReader::new(out).lines() {
        if line.unwrap().contains(want) {
            return;
        }
    }
    panic!("the helper never printed {want}");
}

#[test]
fn kguest_a_killed_process_leaves_no_page_pinned() {
    if dev().is_none() {
        return;
    }
    let before = sys_pinned();
    let mut c = spawn("kguest::kguest_helper_pin_and_wait");
    wait_for_line(&mut c, "PINNED");
    assert_eq!(sys_pinned(), before + 64);
    c.kill().unwrap();
    c.wait().unwrap();
    let t = Instant::now();
    while sys_pinned() != before {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "pinned: {}",
            sys_pinned()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn kguest_two_processes_at_once_each_see_their_own_pages() {
    if dev().is_none() {
        return;
    }
    let mut a = spawn("kguest::kguest_helper_loop");
    let mut b = spawn("kguest::kguest_helper_loop");
    wait_for_line(&mut a, "LOOPED");
    wait_for_line(&mut b, "LOOPED");
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
}
