//! The decorator over a port that holds numbered packets.

extern crate std;

use std::vec::Vec;

use super::*;

/// A port whose receive pool holds `n` one-byte packets (byte = buffer
/// id), counting what is given back.
struct Pool {
    next: u32,
    n: u32,
    out: Vec<bool>,
    reposts: u32,
    bytes: Vec<[u8; 1]>,
}

impl Pool {
    fn new(n: u32) -> Pool {
        Pool {
            next: 0,
            n,
            out: std::vec![false; n as usize],
            reposts: 0,
            bytes: (0..n).map(|i| [i as u8]).collect(),
        }
    }
}

impl Port for Pool {
    fn caps(&self) -> Caps {
        Caps::default()
    }
    unsafe fn register(&mut self, _: usize, _: usize) -> Result<Mr, RegError> {
        Err(RegError::NoResources)
    }
    unsafe fn register_user(&mut self, _: usize, _: usize) -> Result<Mr, RegError> {
        Err(RegError::NoResources)
    }
    fn deregister(&mut self, _: Mr) {}
    fn post(&mut self, _: u16, _: u64, _: Work<'_>) -> Result<Option<Completion>, PostError> {
        Err(PostError::Busy)
    }
    fn poll_recv(&mut self) -> Option<Recv> {
        if self.next == self.n {
            return None;
        }
        self.out[self.next as usize] = true;
        self.next += 1;
        Some(Recv {
            buf: self.next - 1,
            imm: None,
        })
    }
    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        let i = buf as usize;
        (i < self.out.len() && self.out[i]).then(|| &self.bytes[i][..])
    }
    fn repost(&mut self, buf: u32) -> bool {
        let Some(o) = self.out.get_mut(buf as usize).filter(|o| **o) else {
            return false;
        };
        *o = false;
        self.reposts += 1;
        true
    }
    fn poll_cq(&mut self, _: &mut [Completion]) -> usize {
        0
    }
}

fn faults(loss: u32, dup: u32, reorder: u32) -> Faults {
    Faults {
        loss_ppm: loss,
        dup_ppm: dup,
        reorder_ppm: reorder,
        seed: 7,
    }
}

/// Every packet polled, its byte, and each given back at once.
fn drain(f: &mut Faulty<Pool>) -> Vec<u8> {
    let mut seen = Vec::new();
    while let Some(r) = f.poll_recv() {
        seen.push(f.rx_bytes(r.buf).expect("a packet handed out has bytes")[0]);
        assert!(f.repost(r.buf), "{r:?} goes back");
    }
    seen
}

#[test]
fn without_faults_every_packet_passes_once_in_order() {
    let mut f = Faulty::new(Pool::new(50), Faults::default());
    assert_eq!(drain(&mut f), (0..50).collect::<Vec<u8>>());
    assert!(!f.caps().lossy, "no fault: the port is what it was");
}

#[test]
fn lost_packets_go_back_to_the_port_and_are_counted() {
    let mut f = Faulty::new(Pool::new(100), faults(1_000_000, 0, 0));
    assert!(f.caps().lossy);
    assert_eq!(drain(&mut f), Vec::<u8>::new());
    assert_eq!((f.dropped(), f.inner().reposts), (100, 100));
}

/// A duplicate is the same bytes under another id, and the port gets the
/// buffer back only once both came back, whichever comes first.
#[test]
fn a_duplicate_shares_its_buffer_until_both_are_returned() {
    let mut f = Faulty::new(Pool::new(2), faults(0, 1_000_000, 0));
    let a = f.poll_recv().unwrap();
    let d = f.poll_recv().unwrap();
    assert_ne!(a.buf, d.buf);
    assert_eq!(f.rx_bytes(d.buf), Some(&[0u8][..]));
    assert!(f.repost(a.buf));
    assert_eq!(f.inner().reposts, 0, "the duplicate still reads it");
    assert!(!f.repost(a.buf), "the original given back twice is refused");
    assert_eq!(f.inner().reposts, 0);
    assert_eq!(f.rx_bytes(d.buf), Some(&[0u8][..]));
    assert!(f.repost(d.buf));
    assert_eq!(f.inner().reposts, 1);
    assert!(!f.repost(d.buf), "a duplicate given back twice is refused");
    assert_eq!(f.rx_bytes(d.buf), None);
    // The other order.
    let b = f.poll_recv().unwrap();
    let e = f.poll_recv().unwrap();
    assert!(f.repost(e.buf));
    assert_eq!(f.inner().reposts, 1);
    assert_eq!(f.rx_bytes(b.buf), Some(&[1u8][..]));
    assert!(!f.repost(e.buf), "nor twice the other way");
    assert!(f.repost(b.buf));
    assert_eq!(f.inner().reposts, 2);
    assert!(!f.repost(DUP | 63), "an id never handed out is refused");
}

/// More duplicates than slots held at once: the extra ones are not made,
/// nothing is lost, and every buffer goes back once.
#[test]
fn duplicates_beyond_the_slots_are_not_made() {
    let n = DUPS as u32 + 20;
    let mut f = Faulty::new(Pool::new(n), faults(0, 1_000_000, 0));
    let mut held = Vec::new();
    while let Some(r) = f.poll_recv() {
        held.push(r);
    }
    assert_eq!(held.len(), n as usize + DUPS);
    for r in held {
        assert!(f.repost(r.buf));
    }
    assert_eq!(f.inner().reposts, n);
}

/// Held back, duplicated and lost at once: every packet not lost arrives
/// at least once, none out of thin air, and every buffer goes back once.
#[test]
fn mixed_faults_lose_no_buffer() {
    let mut f = Faulty::new(Pool::new(250), faults(100_000, 100_000, 200_000));
    let seen = drain(&mut f);
    let mut once: Vec<u8> = seen.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len() as u64 + f.dropped(), 250);
    assert!(seen.len() > once.len(), "some were duplicated");
    assert!(seen.windows(2).any(|w| w[0] > w[1]), "some were held back");
    assert_eq!(f.inner().reposts, 250);
}
