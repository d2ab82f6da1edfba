//! Faults injected on receive, on any transport: the driver layer's
//! [`Faulty`] decorator, plus what the std shell adds (percentages as the
//! command line takes them, a transport's reports).

pub use rmx_driver::faulty::{Faults, Faulty};

use super::{Counters, Events, Transport};

/// Faults from percentages (as `rmx lab` and netem take them); `Err`
/// names the value outside 0–100.
pub fn percent(loss: f64, dup: f64, reorder: f64, seed: u64) -> Result<Faults, String> {
    let ppm = |name: &str, p: f64| {
        if (0.0..=100.0).contains(&p) {
            Ok((p * 10_000.0).round() as u32)
        } else {
            Err(format!("--{name} {p}: give a percentage from 0 to 100"))
        }
    };
    Ok(Faults {
        loss_ppm: ppm("loss", loss)?,
        dup_ppm: ppm("dup", dup)?,
        reorder_ppm: ppm("reorder", reorder)?,
        seed,
    })
}

impl<T: Transport> Transport for Faulty<T> {
    fn rank(&self) -> u16 {
        self.inner().rank()
    }

    fn events(&self) -> Events {
        self.inner().events()
    }

    fn busy(&self) -> bool {
        self.inner().busy()
    }

    fn counters(&self) -> Counters {
        let mut c = self.inner().counters();
        c.injected_drops += self.dropped();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopnic::{Fabric, LoopConfig};
    use crate::rank::Rank;
    use rmx_core::{Config, Source, TagSel};
    use std::sync::atomic::{AtomicBool, Ordering};

    fn pattern(seed: u32, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u32 * 7 + seed * 13) as u8).collect()
    }

    /// The decorator on `loop`, which loses nothing by itself: with 10%
    /// of packets lost, 10% duplicated and 10% held back, every message of
    /// every size path (eager, medium, PULL) arrives once, in order and
    /// whole, through the core's reliability layer; and the faults did
    /// happen.
    #[test]
    fn messages_cross_a_faulty_loop_once_in_order_and_whole() {
        const N: u32 = 120;
        let size = |i: u32| (i as usize * 997) % 40_000;
        let fabric = Fabric::new(2, LoopConfig::default()).expect("the default sizes fit");
        let faults = percent(10.0, 10.0, 10.0, 42).unwrap();
        let cfg = Config::unreliable(8192, 64);
        // Each side keeps answering until the other is done too (a last
        // acknowledgement or FIN may be lost and asked for again), as the
        // job runner's finish does.
        let done = [AtomicBool::new(false), AtomicBool::new(false)];
        let finish = |r: &mut Rank<Faulty<crate::loopnic::Port>>, me: usize| {
            done[me].store(true, Ordering::Release);
            while !done[1 - me].load(Ordering::Acquire) {
                r.progress();
            }
        };
        std::thread::scope(|s| {
            let (f, finish) = (&fabric, &finish);
            s.spawn(move || {
                let mut r = Rank::new(Faulty::new(f.port(0), faults), 2, cfg).unwrap();
                for i in 0..N {
                    r.send(1, i, &pattern(i, size(i))).unwrap();
                }
                finish(&mut r, 0);
            });
            let receiver = s.spawn(move || {
                let mut r = Rank::new(Faulty::new(f.port(1), faults), 2, cfg).unwrap();
                for i in 0..N {
                    let mut b = vec![0u8; size(i)];
                    let st = r.recv(Source::Rank(0), TagSel::Any, &mut b).unwrap();
                    assert_eq!((st.tag, st.len as usize), (i, size(i)), "in order, whole");
                    assert!(b == pattern(i, size(i)), "message {i}'s bytes");
                }
                finish(&mut r, 1);
                (r.transport_counters(), r.stats())
            });
            let (c, st) = receiver.join().unwrap();
            assert!(c.injected_drops > 0, "{c:?}");
            assert!(st.duplicates > 0 && st.out_of_order > 0, "{st:?}");
        });
    }

    #[test]
    fn percentages_outside_0_to_100_are_named() {
        assert_eq!(
            percent(1.0, 0.0, 101.0, 0),
            Err("--reorder 101: give a percentage from 0 to 100".into())
        );
        assert!(!percent(0.0, 0.0, 0.0, 0).unwrap().any());
        assert_eq!(percent(0.5, 0.0, 0.0, 0).unwrap().loss_ppm, 5000);
    }
}
