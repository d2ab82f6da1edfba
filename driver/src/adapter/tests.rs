//! The adapter over a port that records what it is asked.

extern crate std;

use std::cell::RefCell;
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::port::Recv;

/// A port that records posts and registrations and answers as told.
#[derive(Default)]
struct Rec {
    posts: Vec<(u16, u64, Vec<Sge>, Option<u32>)>,
    regs: Vec<Mr>,
    next_key: u32,
    /// What the port was asked, in order, shared with the test.
    log: Rc<RefCell<Vec<&'static str>>>,
    refuse_regs: bool,
    /// Complete inline sends during the call.
    inline_done: bool,
    /// The bytes of each inline send, its parts joined, and how many
    /// parts were not empty.
    inlines: Vec<(Vec<u8>, usize)>,
}

impl Port for Rec {
    fn caps(&self) -> Caps {
        Caps::default()
    }
    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        if self.refuse_regs {
            return Err(RegError::NoResources);
        }
        self.next_key += 1;
        let mr = Mr {
            addr,
            len,
            key: self.next_key,
        };
        self.regs.push(mr);
        Ok(mr)
    }
    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract.
        unsafe { self.register(addr, len) }
    }
    fn deregister(&mut self, mr: Mr) {
        self.log.borrow_mut().push("deregister");
        self.regs.retain(|m| *m != mr);
    }
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        let (sges, imm) = match work {
            Work::Send { sges, .. } => (sges.to_vec(), None),
            Work::Inline { .. } => (Vec::new(), None),
            Work::Rdma { local, .. } => (vec![local], None),
            Work::WriteImm { local, imm, .. } => (vec![local], Some(imm)),
        };
        if let Work::Inline { head, body, .. } = work {
            let parts = usize::from(!head.is_empty()) + usize::from(!body.is_empty());
            self.inlines.push(([head, body].concat(), parts));
        }
        let done = self.inline_done && matches!(work, Work::Inline { .. });
        self.posts.push((peer, wr_id, sges, imm));
        Ok(done.then_some(Completion {
            wr_id,
            result: Ok(()),
        }))
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
    fn poll_cq(&mut self, _: &mut [Completion]) -> usize {
        0
    }
    fn drain(&mut self) {
        self.log.borrow_mut().push("drain");
    }
}

/// Fixed tables, as a kernel shell would give them.
struct Fixed;

impl AdapterTables for Fixed {
    type Bytes = Vec<u8>;
    type Users = [UserEntry; 3];
    type Regs = [Option<Mr>; 2];
}

fn adapter(port: Rec) -> Result<Adapter<Rec, Plain, Fixed>, AdapterError> {
    let size = Adapter::<Rec, Plain, Fixed>::slot_size(100);
    // SAFETY: a vector's heap buffer does not move.
    unsafe {
        Adapter::new(
            port,
            Plain,
            100,
            vec![0u8; 4 * size],
            [UserEntry::default(); 3],
            [None; 2],
        )
    }
}

#[test]
fn slots_are_registered_once_and_every_registration_ends_with_the_adapter() {
    let a = adapter(Rec::default()).unwrap();
    assert_eq!(a.port_ref().regs.len(), 1);
    let refused = adapter(Rec {
        refuse_regs: true,
        ..Rec::default()
    });
    assert_eq!(
        refused.err(),
        Some(AdapterError::Register(RegError::NoResources))
    );
}

#[test]
fn user_handles_are_bounded_and_reused() {
    let mut a = adapter(Rec::default()).unwrap();
    let mut mem = [0u8; 16];
    let p = mem.as_mut_ptr() as usize;
    // SAFETY: `mem` outlives the handles.
    let h: Vec<_> = (0..3).map(|i| unsafe { a.add_user(p + i, 1) }).collect();
    assert!(h.iter().all(Option::is_some));
    // SAFETY: as above.
    assert_eq!(unsafe { a.add_user(p, 1) }, None, "the table is full");
    a.drop_user(h[1].unwrap());
    a.drop_user(h[1].unwrap()); // twice: changes nothing
                                // SAFETY: as above.
    assert_eq!(unsafe { a.add_user(p + 7, 1) }, h[1]);
    // SAFETY: as above.
    assert_eq!(unsafe { a.add_user(p, 1) }, None);
    assert_eq!(a.user_addr(h[1].unwrap()), Some(p as u64 + 7));
    a.drop_user(UserBuf(99)); // out of range: ignored
}

#[test]
fn copies_reach_named_memory_and_a_range_past_an_object_is_refused() {
    let mut a = adapter(Rec::default()).unwrap();
    let mut mem = *b"hello, world";
    // SAFETY: `mem` outlives the handle.
    let u = unsafe { a.add_user(mem.as_mut_ptr() as usize, mem.len()) }.unwrap();
    a.copy(Loc::Slot(SlotId(2), 5), Loc::User(u, 7), 5);
    assert_eq!(&a.slot_mut(SlotId(2))[5..10], b"world");
    a.copy(Loc::User(u, 0), Loc::Slot(SlotId(2), 5), 5);
    assert_eq!(&mem, b"world, world");
    // Past an object, a handle never handed out, a slot past the arena:
    // nothing is copied, and each is counted (never a panic: a kernel
    // shell cannot have one).
    a.slot_mut(SlotId(0)).fill(7);
    a.copy(Loc::Slot(SlotId(0), 0), Loc::User(u, 8), 5);
    a.copy(Loc::Slot(SlotId(0), 0), Loc::User(UserBuf(2), 0), 1);
    a.copy(Loc::Slot(SlotId(0), 0), Loc::User(UserBuf(99), 0), 1);
    a.copy(Loc::Slot(SlotId(9), 0), Loc::User(u, 0), 1);
    a.copy(Loc::User(u, 0), Loc::Slot(SlotId(0), usize::MAX as u32), 2);
    assert_eq!(a.faults(), 5);
    assert!(a.slot_mut(SlotId(0)).iter().all(|&b| b == 7));
    assert_eq!(&mem, b"world, world");
    // A receive buffer the port has no bytes for reads as empty, and a
    // repost of one not held is counted.
    assert_eq!(a.rx(RxBuf(3)), &[] as &[u8]);
    a.repost(RxBuf(3));
    assert_eq!(a.faults(), 6);
    // An inline send of a buffer not held is refused with an access error.
    let hdr = [0u8; HEADER_LEN];
    assert_eq!(
        a.send_inline(1, &hdr, Loc::User(UserBuf(99), 0), 4, true),
        Err(PostError::Access)
    );
    assert_eq!(a.faults(), 7);
    assert!(a.port_ref().posts.is_empty(), "nothing posted");
}

/// A port that completes an inline send during the call: the core is
/// told it is done, not left waiting for a completion that never comes
/// (its send entry leaked before).
#[test]
fn an_inline_send_completed_during_the_call_is_done() {
    let mut a = adapter(Rec {
        inline_done: true,
        ..Rec::default()
    })
    .unwrap();
    let hdr = [0u8; HEADER_LEN];
    assert_eq!(
        a.send_inline(1, &hdr, Loc::Slot(SlotId(0), 0), 4, true),
        Ok(Posted::Done)
    );
    let mut b = adapter(Rec::default()).unwrap();
    assert_eq!(
        b.send_inline(1, &hdr, Loc::Slot(SlotId(0), 0), 4, true),
        Ok(Posted::Later)
    );
}

/// A queued packet leaves from its slot in one part, exactly the bytes
/// encoded there; a length no slot holds is refused and counted, and
/// nothing is posted.
#[test]
fn a_slot_goes_inline_in_one_part_and_a_bad_length_is_refused() {
    let mut a = adapter(Rec::default()).unwrap();
    let len = HEADER_LEN + 5;
    for (i, b) in a.slot_mut(SlotId(2))[..len].iter_mut().enumerate() {
        *b = i as u8;
    }
    assert_eq!(
        a.send_inline_slot(1, SlotId(2), len, false),
        Ok(Posted::Later)
    );
    let want: Vec<u8> = (0..len as u8).collect();
    assert_eq!(a.port_ref().inlines, vec![(want, 1)]);
    assert_eq!(a.port_ref().posts[0].1, WorkId::Inline(1).wr_id());
    let size = a.slot_mut(SlotId(0)).len();
    let slots = AsRef::<[u8]>::as_ref(&a.slots).len() / size;
    for (slot, len) in [
        (2, HEADER_LEN - 1),
        (2, size + 1),
        (slots as u16, HEADER_LEN),
        (u16::MAX, usize::MAX),
    ] {
        let before = a.faults();
        assert_eq!(
            a.send_inline_slot(1, SlotId(slot), len, true),
            Err(PostError::Access),
            "slot {slot}, {len} bytes"
        );
        assert_eq!(a.faults(), before + 1);
    }
    assert_eq!(a.port_ref().posts.len(), 1, "nothing more was posted");
}

#[test]
fn each_post_is_one_work_request_with_the_cores_id() {
    let mut a = adapter(Rec::default()).unwrap();
    let slots_key = a.port_ref().regs[0].key;
    assert_eq!(a.post_send(3, SlotId(1), 40), Ok(Posted::Later));
    let g = Gather {
        addr: 0x1000,
        len: 64,
        key: MemKey(9),
    };
    a.post_send_gather(4, SlotId(0), 28, g).unwrap();
    let remote = Remote {
        addr: 0x2000,
        key: MemKey(5),
    };
    let w = WorkId::Window {
        window: 2,
        target: 1,
        epoch: 3,
        op: 5,
        imm: true,
    };
    a.post_write_imm(1, w, g, remote, 77).unwrap();
    let posts = &a.port_ref().posts;
    assert_eq!(posts[0].0, 3);
    assert_eq!(posts[0].1, WorkId::Send(SlotId(1)).wr_id());
    assert_eq!((posts[0].2[0].len, posts[0].2[0].key), (40, slots_key));
    let size = Adapter::<Rec, Plain, Fixed>::slot_size(100);
    assert_eq!(posts[0].2[0].addr - posts[1].2[0].addr, size);
    assert_eq!(posts[1].2[1], Sge::from(g));
    assert_eq!((posts[2].1, posts[2].3), (w.wr_id(), Some(77)));
}

#[test]
fn registrations_fill_a_bounded_table_and_end_by_key() {
    let mut a = adapter(Rec::default()).unwrap();
    let k1 = a.register_once(0x1000, 10).unwrap();
    let _k2 = a.register_once(0x2000, 10).unwrap();
    assert_eq!(a.register_once(0x3000, 10), Err(RegError::NoResources));
    assert_eq!(
        a.register(0x3000, 10),
        Err(RegError::Unmonitored),
        "Plain watches nothing"
    );
    a.deregister(k1);
    assert!(!a.deregister_key(k1.0), "ended once");
    assert!(a.register_once(0x3000, 10).is_ok());
    assert_eq!(a.port_ref().regs.len(), 3, "slots and two");
}

#[test]
fn dropping_the_adapter_drains_the_port_then_ends_every_registration() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut a = adapter(Rec {
        log: Rc::clone(&log),
        ..Rec::default()
    })
    .unwrap();
    a.register_once(0x1000, 1).unwrap();
    drop(a);
    assert_eq!(*log.borrow(), ["drain", "deregister", "deregister"]);
}
