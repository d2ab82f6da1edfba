//! rmx-kernel's regions under random sequences of declarations, pins
//! (some split around an invalidation, as a fault in the kernel's pin
//! would let one in), uses, unmappings and undeclarations, over the mock
//! kernel. After every step: the context's pinned count is the kernel's,
//! within the limit; every region's pinned prefix is exactly its pages
//! the kernel holds, at the addresses the region names; and no page the
//! kernel holds is unmapped (an unmapping reaches every notifier over it,
//! so nothing stale stays pinned).

use std::sync::atomic::AtomicU32;

use proptest::prelude::*;
use rmx_kernel::mock::Mock;
use rmx_kernel::{Desc, Error, Job, Pinned, Regions, Segment, Slot, Step, PAGE};

/// A pin begun and run, its end not yet taken: the job, the notifier's
/// sequence, what was pinned.
type InFlight = Option<(Job, (u64, Result<u32, i32>))>;

const SLOTS: usize = 6;
const LIMIT: u64 = 48;
const BASE: u64 = 0x40_0000;

#[derive(Clone, Debug)]
enum Op {
    Declare { page: u64, pages: u64, split: bool },
    Undeclare(usize),
    Acquire(usize),
    Release(usize),
    Pin(usize),
    Begin(usize),
    End,
    Unmap { page: u64, pages: u64 },
    Map { page: u64, pages: u64 },
    Span { i: usize, off: u64, len: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..64u64, 1..24u64, any::<bool>())
            .prop_map(|(page, pages, split)| Op::Declare { page, pages, split }),
        1 => (0..SLOTS).prop_map(Op::Undeclare),
        1 => (0..SLOTS).prop_map(Op::Acquire),
        1 => (0..SLOTS).prop_map(Op::Release),
        3 => (0..SLOTS).prop_map(Op::Pin),
        1 => (0..SLOTS).prop_map(Op::Begin),
        1 => Just(Op::End),
        1 => (0..80u64, 1..6u64).prop_map(|(page, pages)| Op::Unmap { page, pages }),
        1 => (0..80u64, 1..12u64).prop_map(|(page, pages)| Op::Map { page, pages }),
        1 => (0..SLOTS, 0..30_000u64, 1..30_000u64).prop_map(|(i, off, len)| Op::Span { i, off, len }),
    ]
}

type Ctx = Regions<Vec<Slot>, Vec<AtomicU32>>;

fn check(c: &Ctx, k: &Mock, descs: &[Option<Desc>]) {
    assert_eq!(
        k.pins.len() as u64,
        c.pinned(),
        "the context's count is the kernel's"
    );
    assert!(c.pinned() <= LIMIT);
    for (&(slot, page), &addr) in &k.pins {
        assert!(k.mapped.contains(&addr), "slot {slot} page {page} stale");
    }
    for d in descs.iter().flatten() {
        let r = c.region(*d).expect("live");
        for p in 0..r.pages() {
            let held = k.pins.get(&(d.slot(), p));
            if p < r.pinned() {
                let (addr, _) = r.page_run(p).expect("in the region");
                assert_eq!(held, Some(&addr), "page {p} of {d:?}");
            } else {
                assert_eq!(held, None, "page {p} of {d:?} past the prefix");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pinned_pages_are_exactly_the_prefixes_and_never_stale(ops in prop::collection::vec(op(), 1..120)) {
        let mut k = Mock::default();
        k.map(BASE, 80);
        let shared = (0..=SLOTS).map(|_| AtomicU32::new(0)).collect();
        let mut c: Ctx = Regions::new(vec![Slot::default(); SLOTS], shared, LIMIT).unwrap();
        let mut descs: Vec<Option<Desc>> = vec![None; SLOTS];
        let mut job: InFlight = None;
        for op in ops {
            match op {
                Op::Declare { page, pages, split } => {
                    let addr = BASE + page * PAGE;
                    let segs: Vec<Segment> = match split {
                        // Two pieces, the second first, sharing no page.
                        true if pages > 2 => vec![
                            Segment { addr: addr + 2 * PAGE + 100, len: (pages - 2) * PAGE - 100 },
                            Segment { addr, len: PAGE },
                        ],
                        _ => vec![Segment { addr, len: pages * PAGE }],
                    };
                    match c.declare(&mut k, &segs) {
                        Ok(d) => descs[d.slot() as usize] = Some(d),
                        Err(e) => prop_assert_eq!(e, Error::Full),
                    }
                }
                Op::Undeclare(i) => {
                    if let Some(d) = descs[i] {
                        match c.undeclare(&mut k, d) {
                            Ok(()) => descs[i] = None,
                            Err(e) => prop_assert_eq!(e, Error::Busy),
                        }
                    }
                }
                Op::Acquire(i) => {
                    if let Some(d) = descs[i] {
                        c.acquire(d).unwrap();
                    }
                }
                Op::Release(i) => {
                    if let Some(d) = descs[i] {
                        let _ = c.release(d);
                    }
                }
                Op::Pin(i) => {
                    if let Some(d) = descs[i] {
                        match c.pin_step(&mut k, d) {
                            Ok(Pinned::All | Pinned::Part) | Err(Error::Limit | Error::Pin(_)) => {}
                            Err(e) => prop_assert!(false, "{e:?}"),
                        }
                    }
                }
                Op::Begin(i) => {
                    if let (Some(d), true) = (descs[i], job.is_none()) {
                        if let Ok(Step::Pin(j)) = c.begin_pin(&mut k, d) {
                            // The pin runs now; what follows until `End`
                            // (an unmapping) races its publication.
                            let got = j.run(&mut k);
                            job = Some((j, got));
                        }
                    }
                }
                Op::End => {
                    if let Some((j, got)) = job.take() {
                        let _ = c.end_pin(&mut k, j, got.0, got.1);
                    }
                }
                Op::Unmap { page, pages } => {
                    let (start, end) = (BASE + page * PAGE, BASE + (page + pages) * PAGE);
                    k.unmap(start, pages);
                    // The kernel invalidates every notifier over the range.
                    let over: Vec<u16> = k
                        .watched
                        .iter()
                        .filter(|(_, &(s, l))| s < end && start < s + l)
                        .map(|(&slot, _)| slot)
                        .collect();
                    for slot in over {
                        k.fire(slot);
                        c.invalidate(&mut k, slot, start, end);
                    }
                }
                Op::Map { page, pages } => k.map(BASE + page * PAGE, pages),
                Op::Span { i, off, len } => {
                    if let Some(d) = descs[i] {
                        let r = c.region(d).unwrap();
                        match c.span(d, off, len) {
                            Ok(Some((first, end))) => {
                                prop_assert!(first < end && end <= r.pinned());
                            }
                            Ok(None) => prop_assert!(r.pages_of(off, len).unwrap().1 > r.pinned()),
                            Err(e) => {
                                prop_assert_eq!(e, Error::Invalid);
                                prop_assert!(off + len > r.bytes());
                            }
                        }
                    }
                }
            }
            if job.is_none() {
                check(&c, &k, &descs);
            }
        }
        if let Some((j, got)) = job.take() {
            let _ = c.end_pin(&mut k, j, got.0, got.1);
        }
        check(&c, &k, &descs);
        c.close(&mut k);
        prop_assert!(k.pins.is_empty() && k.watched.is_empty());
        prop_assert_eq!(c.pinned(), 0);
    }
}
