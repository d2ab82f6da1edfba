//! The device over a port that records what lands, with a clock the test
//! moves.

extern crate std;

use std::boxed::Box;
use std::cell::Cell;
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

use rmx_core::MemKey;

use super::*;

/// What reached the wire: (peer, remote address or `None` for a send,
/// bytes).
type Log = Rc<core::cell::RefCell<Vec<(u16, Option<u64>, Vec<u8>)>>>;

#[derive(Default)]
struct Wire {
    log: Log,
    /// Completions of the posts, as a NIC reports them.
    done: Vec<Completion>,
    /// Registrations alive, shared with the test.
    regs: Rc<Cell<u32>>,
}

impl Port for Wire {
    fn caps(&self) -> Caps {
        Caps::default()
    }
    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        self.regs.set(self.regs.get() + 1);
        Ok(Mr {
            addr,
            len,
            key: self.regs.get(),
        })
    }
    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.register(addr, len) }
    }
    fn deregister(&mut self, _: Mr) {
        self.regs.set(self.regs.get() - 1);
    }
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        let read = |s: Sge| {
            // SAFETY: the tests post only memory they own.
            unsafe { core::slice::from_raw_parts(s.addr as *const u8, s.len) }.to_vec()
        };
        let entry = match work {
            Work::Rdma { local, remote, .. } | Work::WriteImm { local, remote, .. } => {
                (peer, Some(remote.addr), read(local))
            }
            Work::Send { sges, .. } => (peer, None, read(sges[0])),
            Work::Inline { head, .. } => (peer, None, head.to_vec()),
        };
        self.log.borrow_mut().push(entry);
        self.done.push(Completion {
            wr_id,
            result: Ok(()),
        });
        Ok(None)
    }
    fn poll_recv(&mut self) -> Option<Recv> {
        None
    }
    fn rx_bytes(&self, _: u32) -> Option<&[u8]> {
        None
    }
    fn repost(&mut self, _: u32) -> bool {
        false
    }
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        let n = self.done.len().min(out.len());
        for (o, c) in out.iter_mut().zip(self.done.drain(..n)) {
            *o = c;
        }
        n
    }
}

type Dev = Delayed<Wire, Box<dyn FnMut() -> u64>, Box<[u8]>>;

fn device(arena: usize, max_delay_ns: u64) -> (Dev, Log, Rc<Cell<u64>>) {
    let wire = Wire::default();
    let log = wire.log.clone();
    let now = Rc::new(Cell::new(0u64));
    let t = now.clone();
    let clock: Box<dyn FnMut() -> u64> = Box::new(move || t.get());
    // SAFETY: a boxed arena does not move with the device.
    let d = unsafe {
        Delayed::new(
            wire,
            vec![0u8; arena].into_boxed_slice(),
            max_delay_ns,
            5,
            clock,
        )
    }
    .expect("the wire registers anything");
    (d, log, now)
}

fn sge(b: &[u8]) -> Sge {
    Sge {
        addr: b.as_ptr() as usize,
        len: b.len(),
        key: 0,
    }
}

fn write(d: &mut Dev, peer: u16, b: &[u8], to: u64) -> Result<Option<Completion>, PostError> {
    let work = Work::Rdma {
        op: RdmaOp::Write,
        local: sge(b),
        remote: Remote {
            addr: to,
            key: MemKey(9),
        },
    };
    d.post(peer, 0x7000 + to, work)
}

fn send(d: &mut Dev, peer: u16, b: &[u8]) -> Result<Option<Completion>, PostError> {
    let sges = [sge(b)];
    d.post(
        peer,
        0x9000,
        Work::Send {
            sges: &sges,
            solicited: false,
        },
    )
}

/// The origin is told at once, may reuse its buffer, and the target gets
/// the bytes as they were, only once the delay has passed.
#[test]
fn a_write_completes_at_once_and_lands_its_bytes_later() {
    let (mut d, log, now) = device(1024, 1_000);
    let mut buf = [7u8; 16];
    let c = write(&mut d, 1, &buf, 100)
        .unwrap()
        .expect("completed at the post");
    assert_eq!((c.wr_id, c.result), (0x7000 + 100, Ok(())));
    buf.fill(0);
    assert_eq!(d.holding(), 1);
    assert!(log.borrow().is_empty());
    now.set(1_001);
    let mut wcs = [Completion {
        wr_id: 0,
        result: Ok(()),
    }; 4];
    assert_eq!(
        d.poll_cq(&mut wcs),
        0,
        "the device's own write completes for nobody"
    );
    assert_eq!(*log.borrow(), vec![(1, Some(100), vec![7u8; 16])]);
    assert_eq!(d.holding(), 0);
}

/// A send behind a held write on its channel waits; on another channel
/// it overtakes the write (Fig. 2's hazard).
#[test]
fn a_send_waits_behind_its_channels_write_and_overtakes_anothers() {
    let (mut d, log, now) = device(1024, 1_000_000);
    write(&mut d, 1, &[1; 8], 0).unwrap();
    assert_eq!(send(&mut d, 1, b"flag"), Err(PostError::Busy));
    assert!(send(&mut d, 2, b"other").is_ok());
    assert_eq!(*log.borrow(), vec![(2, None, b"other".to_vec())]);
    now.set(u64::MAX);
    assert!(send(&mut d, 1, b"flag").is_ok());
    let l = log.borrow();
    assert_eq!(l[1], (1, Some(0), vec![1; 8]), "the write landed first");
    assert_eq!(l[2], (1, None, b"flag".to_vec()));
}

/// Writes land in the order posted, whatever delays were drawn, and the
/// ring of bytes wraps without mixing them.
#[test]
fn writes_land_in_order_through_a_wrapping_arena() {
    let (mut d, log, now) = device(100, 5_000);
    let mut t = 0;
    for i in 0..200u8 {
        let b = vec![i; 1 + (i as usize * 7) % 40];
        loop {
            match write(&mut d, 1, &b, i as u64) {
                Ok(_) => break,
                Err(PostError::Busy) => {
                    t += 500;
                    now.set(t);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    now.set(t + 5_000);
    d.drain();
    let l = log.borrow();
    assert_eq!(l.len(), 200);
    for (i, (_, at, bytes)) in l.iter().enumerate() {
        assert_eq!(*at, Some(i as u64));
        assert_eq!(*bytes, vec![i as u8; 1 + (i * 7) % 40]);
    }
}

#[test]
fn writes_beyond_the_arena_or_the_slots_are_refused() {
    let (mut d, _, _) = device(64, 1_000);
    assert_eq!(write(&mut d, 1, &[0; 65], 0), Err(PostError::Unsupported));
    assert!(write(&mut d, 1, &[0; 40], 0).is_ok());
    assert_eq!(
        write(&mut d, 1, &[0; 40], 0),
        Err(PostError::Busy),
        "no room beside the held one"
    );
    let (mut d, _, _) = device(1024, 1_000);
    for _ in 0..HELD {
        assert!(write(&mut d, 1, &[], 0).is_ok());
    }
    assert_eq!(
        write(&mut d, 1, &[], 0),
        Err(PostError::Busy),
        "every slot held"
    );
}

/// The arena is registered once, with the device, and given back when
/// it goes.
#[test]
fn the_arena_is_registered_while_the_device_lives() {
    let (d, _, _) = device(64, 0);
    let regs = d.inner().regs.clone();
    assert_eq!(regs.get(), 1);
    drop(d);
    assert_eq!(regs.get(), 0);
}
