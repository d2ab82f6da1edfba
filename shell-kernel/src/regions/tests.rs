//! The regions' logic over the mock kernel ([`crate::mock`]).

extern crate std;

use std::vec::Vec;

use super::*;
use crate::mock::Mock;
use crate::region::PAGE;

type Ctx = Regions<Vec<Slot>, Vec<AtomicU32>>;

fn ctx(slots: usize, limit: u64) -> Ctx {
    let shared = (0..=slots).map(|_| AtomicU32::new(0)).collect();
    Regions::new(std::vec![Slot::default(); slots], shared, limit).unwrap()
}

fn seg(addr: u64, len: u64) -> Segment {
    Segment { addr, len }
}

const A: u64 = 0x10_0000;

#[test]
fn descriptors_name_one_declaration_of_one_context() {
    let mut k = Mock::default();
    let mut c = ctx(2, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 100)]).unwrap();
    let e = c.declare(&mut k, &[seg(A, 100)]).unwrap();
    assert_eq!(c.declare(&mut k, &[seg(A, 1)]), Err(Error::Full));
    assert_eq!(k.watched.len(), 2);
    c.undeclare(&mut k, d).unwrap();
    assert_eq!(c.undeclare(&mut k, d), Err(Error::BadDescriptor), "twice");
    let again = c.declare(&mut k, &[seg(A, 100)]).unwrap();
    assert_eq!(again.slot(), d.slot());
    assert_ne!(again, d);
    assert_eq!(c.region(d).err(), Some(Error::BadDescriptor), "a stale one");
    assert_eq!(c.region(Desc(0xffff)).err(), Some(Error::BadDescriptor));
    assert_eq!(c.region(Desc(u32::MAX)).err(), Some(Error::BadDescriptor));
    assert_eq!(c.declare(&mut k, &[seg(A, 0)]), Err(Error::Invalid));
    assert!(c.region(e).is_ok());
}

#[test]
fn a_region_is_pinned_in_doubling_chunks_and_read_only_where_pinned() {
    let mut k = Mock::default();
    k.map(A, 40);
    let mut c = ctx(4, 1 << 20);
    // 8 pages, then 30 pages elsewhere.
    let d = c
        .declare(&mut k, &[seg(A, 8 * PAGE), seg(A + 10 * PAGE, 30 * PAGE)])
        .unwrap();
    assert_eq!(c.span(d, 0, 1), Ok(None), "nothing pinned: an overlap miss");
    assert_eq!(c.pin_step(&mut k, d), Ok(Pinned::Part));
    assert_eq!(c.span(d, 0, PAGE), Ok(Some((0, 1))));
    assert_eq!(c.span(d, 0, PAGE + 1), Ok(None));
    c.pin_all(&mut k, d).unwrap();
    // 1, 2, 4, then the 1 left of the first segment; 8, 16, then the 6
    // left of the second.
    assert_eq!(k.calls, [1, 2, 4, 1, 16, 14]);
    assert_eq!(c.region(d).unwrap().pinned(), 38);
    assert_eq!(k.pins.len(), 38);
    assert_eq!(c.pinned(), 38);
    assert_eq!(c.span(d, 0, 38 * PAGE), Ok(Some((0, 38))));
    assert_eq!(c.span(d, 0, 38 * PAGE + 1), Err(Error::Invalid));
    assert_eq!(k.pins[&(d.slot(), 8)], A + 10 * PAGE);
    assert_eq!(c.pin_step(&mut k, d), Ok(Pinned::All), "nothing left");
}

#[test]
fn an_unmapped_range_is_declared_and_fails_when_pinned() {
    let mut k = Mock::default();
    k.map(A, 2);
    let mut c = ctx(2, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 4 * PAGE)]).unwrap();
    assert_eq!(c.pin_all(&mut k, d), Err(Error::Pin(-14)));
    assert_eq!(Error::Pin(-14).errno(), 14);
    // What was pinned before the hole stays, usable.
    assert_eq!(c.region(d).unwrap().pinned(), 2);
    assert_eq!(c.span(d, 0, 2 * PAGE), Ok(Some((0, 2))));
    k.map(A + 2 * PAGE, 2);
    c.pin_all(&mut k, d).unwrap();
    c.close(&mut k);
    assert!(k.pins.is_empty() && k.watched.is_empty());
    assert_eq!(c.pinned(), 0);
}

#[test]
fn an_invalidation_unpins_and_the_next_use_pins_again() {
    let mut k = Mock::default();
    k.map(A, 16);
    let mut c = ctx(2, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 16 * PAGE)]).unwrap();
    let other = c.declare(&mut k, &[seg(A + 64 * PAGE, PAGE)]).unwrap();
    c.pin_all(&mut k, d).unwrap();
    let g = c.shared[1 + d.slot() as usize].load(Ordering::Acquire);
    assert_eq!(c.shared[0].load(Ordering::Acquire), 16);
    // An invalidation beside the region changes nothing.
    c.invalidate(&mut k, d.slot(), A + 16 * PAGE, A + 32 * PAGE);
    assert_eq!(c.region(d).unwrap().pinned(), 16);
    c.invalidate(&mut k, d.slot(), A + 3 * PAGE, A + 4 * PAGE);
    assert_eq!(c.region(d).unwrap().pinned(), 0);
    assert!(k.pins.is_empty());
    let g2 = c.shared[1 + d.slot() as usize].load(Ordering::Acquire);
    assert_ne!(g, g2, "userspace sees the change with one load");
    assert_eq!(c.shared[0].load(Ordering::Acquire), 0);
    assert_eq!(c.span(d, 0, 1), Ok(None));
    c.pin_all(&mut k, d).unwrap();
    assert_eq!(c.pinned(), 16);
    assert_eq!(
        c.generation(other.slot()),
        Some(1),
        "another slot untouched"
    );
}

/// A region of 4 mapped pages whose first pin has begun.
fn pinning() -> (Mock, Ctx, Desc, Job) {
    let mut k = Mock::default();
    k.map(A, 4);
    let mut c = ctx(1, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 4 * PAGE)]).unwrap();
    let Step::Pin(job) = c.begin_pin(&mut k, d).unwrap() else {
        panic!("something to pin");
    };
    (k, c, d, job)
}

#[test]
fn an_invalidation_between_read_begin_and_retry_gives_the_pages_back() {
    let (mut k, mut c, d, job) = pinning();
    assert_eq!(c.begin_pin(&mut k, d), Ok(Step::Wait), "one pin at a time");
    assert_eq!(c.undeclare(&mut k, d), Err(Error::Busy));
    let got = job.run(&mut k);
    k.fire(d.slot());
    c.invalidate(&mut k, d.slot(), A, A + PAGE);
    assert_eq!(c.end_pin(&mut k, job, got.0, got.1), Ok(Pinned::Part));
    assert!(k.pins.is_empty(), "the stale pages went back");
    assert_eq!(c.region(d).unwrap().pinned(), 0);
    c.pin_all(&mut k, d).unwrap();
    assert_eq!(k.pins.len(), 4);
}

#[test]
fn a_region_undeclared_during_its_pin_keeps_no_page() {
    let (mut k, mut c, _, job) = pinning();
    let got = job.run(&mut k);
    c.close(&mut k);
    assert_eq!(
        c.end_pin(&mut k, job, got.0, got.1),
        Err(Error::BadDescriptor)
    );
    assert!(k.pins.is_empty());
}

#[test]
fn past_the_limit_unused_regions_give_their_pages_back_oldest_first() {
    let mut k = Mock::default();
    k.map(A, 64);
    let mut c = ctx(4, 8);
    let r: Vec<Desc> = (0..3)
        .map(|i| {
            c.declare(&mut k, &[seg(A + i * 16 * PAGE, 4 * PAGE)])
                .unwrap()
        })
        .collect();
    for &d in &r[..2] {
        c.acquire(d).unwrap();
        c.pin_all(&mut k, d).unwrap();
        c.release(d).unwrap();
    }
    assert_eq!(c.pinned(), 8);
    // The third needs room: the least recently used (the first) goes.
    c.acquire(r[2]).unwrap();
    c.pin_all(&mut k, r[2]).unwrap();
    assert_eq!(c.region(r[0]).unwrap().pinned(), 0);
    assert_eq!(c.region(r[1]).unwrap().pinned(), 4);
    assert_eq!(c.pinned(), 8);
    // In use, nothing can go: the first cannot be pinned again.
    c.acquire(r[1]).unwrap();
    c.acquire(r[0]).unwrap();
    assert_eq!(c.pin_step(&mut k, r[0]), Err(Error::Limit));
    assert_eq!(c.undeclare(&mut k, r[1]), Err(Error::Busy));
    c.release(r[1]).unwrap();
    c.pin_all(&mut k, r[0]).unwrap();
    assert_eq!(
        c.region(r[1]).unwrap().pinned(),
        0,
        "the unused one gave way"
    );
    assert_eq!(c.release(r[1]), Err(Error::Invalid), "released twice");
    assert_eq!(k.pins.len() as u64, c.pinned());
}

#[test]
fn pins_in_flight_count_against_the_limit() {
    let mut k = Mock::default();
    k.map(A, 64);
    let mut c = ctx(2, 3);
    let d = c.declare(&mut k, &[seg(A, 8 * PAGE)]).unwrap();
    let e = c.declare(&mut k, &[seg(A + 16 * PAGE, 8 * PAGE)]).unwrap();
    c.pin_step(&mut k, d).unwrap();
    let Step::Pin(job) = c.begin_pin(&mut k, d).unwrap() else {
        panic!("a second chunk");
    };
    assert_eq!(job.count, 2);
    // The limit's last pages are promised to the pin in flight.
    assert_eq!(c.pin_step(&mut k, e), Err(Error::Limit));
    let got = job.run(&mut k);
    assert_eq!(c.end_pin(&mut k, job, got.0, got.1), Ok(Pinned::Part));
    assert_eq!(c.pinned(), 3);
}

#[test]
fn a_byte_is_reachable_only_once_its_page_is_pinned() {
    let mut k = Mock::default();
    k.map(A, 4);
    let mut c = ctx(1, 1 << 20);
    let d = c.declare(&mut k, &[seg(A + 100, 3 * PAGE)]).unwrap();
    assert_eq!(c.piece(d, 0), Ok(None), "nothing pinned yet");
    c.pin_step(&mut k, d).unwrap();
    let p = c.piece(d, 0).unwrap().unwrap();
    assert_eq!((p.page, p.at, p.len), (0, 100, PAGE as u32 - 100));
    assert_eq!(c.piece(d, PAGE), Ok(None), "page 1 is past the first chunk");
    assert_eq!(c.piece(d, 3 * PAGE), Err(Error::Invalid), "past the end");
    assert_eq!(c.piece(Desc(d.0 ^ 1 << 16), 0), Err(Error::BadDescriptor));
}

#[test]
fn a_region_unpinned_by_request_stays_declared_and_pins_again() {
    let mut k = Mock::default();
    k.map(A, 8);
    let mut c = ctx(1, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 8 * PAGE)]).unwrap();
    c.pin_all(&mut k, d).unwrap();
    let g = c.generation(d.slot());
    c.acquire(d).unwrap();
    assert_eq!(c.unpin(&mut k, d), Err(Error::Busy), "in use");
    c.release(d).unwrap();
    c.unpin(&mut k, d).unwrap();
    assert!(k.pins.is_empty());
    assert_eq!(c.pinned(), 0);
    assert_ne!(c.generation(d.slot()), g);
    c.pin_all(&mut k, d).unwrap();
    assert_eq!(k.pins.len(), 8);
    assert_eq!(
        c.unpin(&mut k, Desc(d.0 + (1 << 16))),
        Err(Error::BadDescriptor)
    );
}

#[test]
fn changes_are_reported_once_each_until_the_next() {
    let mut k = Mock::default();
    k.map(A, 8);
    let mut c = ctx(4, 1 << 20);
    let d = c.declare(&mut k, &[seg(A, 4 * PAGE)]).unwrap();
    let e = c.declare(&mut k, &[seg(A + 4 * PAGE, 4 * PAGE)]).unwrap();
    let mut out = [(Desc(0), 0); 1];
    // Declaring is a change; one fits at a time.
    assert!(c.changed());
    assert_eq!(c.changes(&mut out), 1);
    assert_eq!(out[0], (d, c.generation(d.slot()).unwrap()));
    assert_eq!(c.changes(&mut out), 1);
    assert_eq!(out[0].0, e);
    assert!(!c.changed());
    assert_eq!(c.changes(&mut out), 0);
    c.pin_all(&mut k, e).unwrap();
    assert!(!c.changed(), "pinning is no change");
    k.unmap(A + 4 * PAGE, 1);
    c.invalidate(&mut k, e.slot(), A + 4 * PAGE, A + 5 * PAGE);
    let mut many = [(Desc(0), 0); 4];
    assert_eq!(c.changes(&mut many), 1);
    assert_eq!(many[0], (e, c.generation(e.slot()).unwrap()));
    // An undeclared slot reports its last descriptor, now refused.
    c.undeclare(&mut k, d).unwrap();
    assert_eq!(c.changes(&mut many), 1);
    assert_eq!(many[0].0, d);
    assert_eq!(c.region(d).err(), Some(Error::BadDescriptor));
}

#[test]
fn a_descriptor_of_a_context_seeded_apart_is_refused() {
    let (mut k1, mut k2) = (Mock::default(), Mock::default());
    let mut one = ctx(2, 64).seeded(1);
    let mut two = ctx(2, 64).seeded(2);
    let d1 = one.declare(&mut k1, &[seg(A, PAGE)]).unwrap();
    let d2 = two.declare(&mut k2, &[seg(A, PAGE)]).unwrap();
    assert_eq!(d1.slot(), d2.slot());
    assert_ne!(d1, d2);
    assert_eq!(two.region(d1).err(), Some(Error::BadDescriptor));
    assert_eq!(one.region(d2).err(), Some(Error::BadDescriptor));
}
