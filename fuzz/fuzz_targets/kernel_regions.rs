//! rmx-kernel's requests and regions on arbitrary input: a declaration's
//! argument and segments decoded from the bytes userspace would write
//! (never a panic; what decodes re-encodes to the same bytes), then a
//! context over the mock kernel driven by the rest as operations, pins
//! split around unmappings included; after each, the context's pinned
//! count is the kernel's and within the limit, and closing it leaves
//! nothing pinned or watched.
#![no_main]

use std::sync::atomic::AtomicU32;

use libfuzzer_sys::fuzz_target;
use rmx_kernel::mock::Mock;
use rmx_kernel::request::{self, Declare, DECLARE_LEN};
use rmx_kernel::{Desc, Job, Regions, Slot, Step, PAGE};

/// A pin begun and run, its end not yet taken: the job, the notifier's
/// sequence, what was pinned.
type InFlight = Option<(Job, (u64, Result<u32, i32>))>;

const SLOTS: usize = 4;
const LIMIT: u64 = 32;
const BASE: u64 = 0x40_0000;

fuzz_target!(|data: &[u8]| {
    let mut k = Mock::default();
    k.map(BASE, 64);
    let shared: Vec<AtomicU32> = (0..=SLOTS).map(|_| AtomicU32::new(0)).collect();
    let mut c = Regions::new(vec![Slot::default(); SLOTS], shared, LIMIT).unwrap();
    let mut descs: Vec<Desc> = Vec::new();
    let mut job: InFlight = None;
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = rest.first().copied().unwrap_or(0);
        let pick = |descs: &[Desc]| descs.get(arg as usize % descs.len().max(1)).copied();
        match op % 8 {
            0 => {
                // A declaration as userspace writes it: argument, then segments.
                let Some(a) = rest.get(..DECLARE_LEN) else {
                    break;
                };
                rest = &rest[DECLARE_LEN..];
                let Ok(d) = Declare::decode(a) else { continue };
                assert_eq!(&d.encode()[..], a);
                let Some(b) = rest.get(..d.bytes()) else {
                    break;
                };
                rest = &rest[d.bytes()..];
                let segs = request::segments(d, b).expect("the right length decodes");
                let mut again = vec![0u8; d.bytes()];
                request::encode_segments(&segs, &mut again).unwrap();
                assert_eq!(&again[..], b);
                if let Ok(d) = c.declare(&mut k, &segs) {
                    descs.push(d);
                }
            }
            1 => {
                if let Some(d) = pick(&descs) {
                    if c.undeclare(&mut k, d).is_ok() {
                        descs.retain(|&x| x != d);
                    }
                }
            }
            2 => {
                if let Some(d) = pick(&descs) {
                    let _ = c.acquire(d);
                }
            }
            3 => {
                if let Some(d) = pick(&descs) {
                    let _ = c.release(d);
                }
            }
            4 => {
                if let Some(d) = pick(&descs) {
                    let _ = c.pin_step(&mut k, d);
                }
            }
            5 => match job.take() {
                Some((j, got)) => {
                    let _ = c.end_pin(&mut k, j, got.0, got.1);
                }
                None => {
                    if let Some(d) = pick(&descs) {
                        if let Ok(Step::Pin(j)) = c.begin_pin(&mut k, d) {
                            let got = j.run(&mut k);
                            job = Some((j, got));
                        }
                    }
                }
            },
            6 => {
                let (page, pages) = (u64::from(arg % 64), u64::from(arg / 64 + 1));
                let (start, end) = (BASE + page * PAGE, BASE + (page + pages) * PAGE);
                k.unmap(start, pages);
                let over: Vec<u16> = k
                    .watched
                    .iter()
                    .filter(|(_, &(s, l))| s < end && start < s.saturating_add(l))
                    .map(|(&slot, _)| slot)
                    .collect();
                for slot in over {
                    k.fire(slot);
                    c.invalidate(&mut k, slot, start, end);
                }
            }
            _ => {
                k.map(BASE + u64::from(arg % 64) * PAGE, u64::from(arg / 16 + 1));
                if let Some(d) = pick(&descs) {
                    let off = u64::from(arg) * 997;
                    let _ = c.span(d, off, u64::from(arg) + 1);
                }
            }
        }
        if job.is_none() {
            assert_eq!(k.pins.len() as u64, c.pinned());
        }
        assert!(c.pinned() <= LIMIT);
    }
    if let Some((j, got)) = job.take() {
        let _ = c.end_pin(&mut k, j, got.0, got.1);
    }
    c.close(&mut k);
    assert!(k.pins.is_empty() && k.watched.is_empty());
    assert_eq!(c.pinned(), 0);
});
