//! The simulated port checks every address it is given against its
//! registrations, as a NIC checks keys: nothing outside one is read or
//! written, whatever a peer's packet or a post names.

use rmx_core::{MemKey, PostError, RdmaError, RdmaOp, Remote};
use rmx_driver::{Port, Sge, Work};

use super::{SimPort, ToWire};
use crate::mem::Buf;
use crate::model::Model;

fn port(lossy: bool) -> SimPort {
    SimPort::new(Model::IB_DDR, lossy)
}

#[test]
fn memory_outside_a_registration_is_never_touched() {
    let mut p = port(false);
    let b = Buf::zeroed(64);
    // SAFETY: `b` outlives the port's use of it (dropped last).
    let user = unsafe { p.register_user(b.addr(), 32) }.expect("registers");
    // SAFETY: as above.
    let local = unsafe { p.register(b.addr() + 32, 32) }.expect("registers");
    assert!(p.write(user.key, b.addr(), &[7; 32], true));
    assert_eq!(p.read(user.key, b.addr(), 32, true), Some(vec![7; 32]));
    // One byte past the registration, a wrapping address, a wrong key, a
    // peer's access to local-only memory: all refused, nothing written.
    assert!(!p.write(user.key, b.addr() + 1, &[9; 32], true));
    assert!(!p.write(user.key, usize::MAX - 3, &[9; 8], true));
    assert!(!p.write(user.key + 100, b.addr(), &[9; 1], true));
    assert!(!p.write(local.key, b.addr() + 32, &[9; 1], true));
    assert!(p.write(local.key, b.addr() + 32, &[5; 1], false));
    assert_eq!(p.read(user.key, b.addr(), 33, true), None);
    let remote = Remote {
        addr: b.addr() as u64,
        key: MemKey(user.key),
    };
    assert!(p.reachable(remote, 32));
    assert!(!p.reachable(remote, 33));
    assert!(!p.reachable(
        Remote {
            addr: u64::MAX,
            ..remote
        },
        1
    ));
    p.deregister(user);
    assert!(!p.write(user.key, b.addr(), &[9; 1], true));
    assert_eq!(&b.bytes()[..33], &[[7; 32].as_slice(), &[5]].concat()[..]);
}

#[test]
fn a_post_naming_unregistered_memory_or_a_gone_peer_is_refused() {
    let mut p = port(false);
    let b = Buf::zeroed(16);
    let sges = [Sge {
        addr: b.addr(),
        len: 16,
        key: 1,
    }];
    let send = Work::Send {
        sges: &sges,
        solicited: false,
    };
    assert_eq!(p.post(1, 5, send), Err(PostError::Access));
    p.down.push(1);
    assert_eq!(p.post(1, 5, send), Err(PostError::Down));
    assert!(p.outbox.is_empty(), "nothing refused leaves");
    assert_eq!(p.cpu, 0, "nothing refused costs the CPU");
}

#[test]
fn a_send_leaves_with_its_bytes_and_costs_one_overhead() {
    let mut p = port(false);
    let mut b = Buf::zeroed(8);
    b.bytes_mut().copy_from_slice(b"abcdefgh");
    // SAFETY: `b` outlives the port's use of it.
    let mr = unsafe { p.register(b.addr(), 8) }.expect("registers");
    let sges = [
        Sge {
            addr: b.addr() + 4,
            len: 4,
            key: mr.key,
        },
        Sge {
            addr: b.addr(),
            len: 2,
            key: mr.key,
        },
    ];
    let send = Work::Send {
        sges: &sges,
        solicited: false,
    };
    let done = p.post(3, 42, send).expect("posts").expect("completes now");
    assert_eq!((done.wr_id, done.result), (42, Ok(())));
    let o = Model::IB_DDR.overhead_ns;
    match p.outbox.as_slice() {
        [ToWire::Packet { at, to: 3, bytes }] => {
            assert_eq!(*at, o);
            assert_eq!(bytes, b"efghab");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rdma_is_refused_on_a_lossy_port_and_a_bad_local_key_fails_at_completion() {
    let mut lossy = port(true);
    let local = Sge {
        addr: 0x1000,
        len: 8,
        key: 1,
    };
    let remote = Remote {
        addr: 0,
        key: MemKey(1),
    };
    let w = Work::Rdma {
        op: RdmaOp::Write,
        local,
        remote,
    };
    assert_eq!(lossy.post(0, 1, w), Err(PostError::Unsupported));
    let mut p = port(false);
    assert_eq!(p.post(0, 1, w), Ok(None), "completes later");
    match p.outbox.as_slice() {
        [ToWire::Rdma { data, .. }] => assert_eq!(*data, Err(RdmaError::Access)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn received_packets_cost_the_cpu_and_only_held_buffers_go_back() {
    let mut p = port(false);
    p.arrive(vec![1, 2, 3]);
    p.immediate(9);
    assert!(p.pending());
    let r = p.poll_recv().expect("a packet");
    assert_eq!((r.imm, p.rx_bytes(r.buf)), (None, Some(&[1u8, 2, 3][..])));
    let i = p.poll_recv().expect("an immediate");
    assert_eq!(i.imm, Some(9));
    let m = Model::IB_DDR;
    assert_eq!(p.cpu, m.overhead_ns + m.immediate_ns);
    assert!(p.repost(r.buf));
    assert!(!p.repost(r.buf), "a buffer goes back once");
    assert!(!p.repost(77));
    assert_eq!(p.rx_bytes(r.buf), None);
    assert!(!p.pending());
}
