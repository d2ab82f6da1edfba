//! One-sided operations with fence synchronization, in each of the four
//! designs, among ranks that are threads over `loop` (and the deferred
//! design over a lossy `eth`): random sequences of put, get and accumulate
//! across several epochs against a model of every window's memory,
//! computed by every rank from the same seed; accesses outside a window,
//! misaligned accumulates and bad targets are refused at the origin, and
//! nothing of them reaches the target.

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::{Design, RmaError};
use rmx_core::Config;
use rmx_linux::job::{self, Net};
use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::loop_config;
use rmx_linux::window::{Assert, WinError};

#[path = "common/onesided.rs"]
mod onesided;

use onesided::{random_operations, N};

#[test]
fn random_operations_across_epochs_match_the_model() {
    for design in Design::ALL {
        random_operations(&Net::Loop(LoopConfig::default()), design, 0..6);
    }
}

/// Fence-Imm-RI with a shared receive queue of 16 buffers and 500 puts
/// per epoch to a rank that is busy computing: its buffers run out, the
/// NIC refuses further immediates (receiver not ready), the core counts a
/// retry and the origin's put progresses until the target hands buffers
/// back and the NIC takes it, in order; every put lands exactly once.
#[test]
fn immediates_survive_a_nearly_empty_receive_queue() {
    let net = Net::Loop(LoopConfig {
        srq_depth: 16,
        ..LoopConfig::default()
    });
    let cfg = Config {
        inline_max: u32::MAX,
        rx_reserve: 4,
        rx_low_water: 8,
        ..Config::reliable(8192, 4)
    };
    const PUTS: usize = 500;
    let out = job::run(2, cfg, &net, |r| {
        let mut w = r
            .win_create_with(PUTS * 4, 4, Design::ImmRi)
            .expect("window");
        w.fence(r).unwrap();
        for epoch in 0..3u32 {
            if r.rank() == 0 {
                for i in 0..PUTS {
                    let v = epoch * 10_000 + i as u32;
                    w.put(r, 1, i as u64, &v.to_le_bytes()).unwrap();
                }
            } else {
                // Not polling: the immediates fill the receive queue.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            w.fence_with(r, Assert::NO_SUCCEED).unwrap();
            let mem = w.to_vec();
            let ok = (0..PUTS).all(|i| {
                r.rank() == 0
                    || u32::from_le_bytes(mem[4 * i..4 * i + 4].try_into().unwrap())
                        == epoch * 10_000 + i as u32
            });
            assert!(ok, "epoch {epoch}: every put landed once");
            w.fence_with(r, Assert::NO_PRECEDE).unwrap();
        }
        (w.refused(), w.retries())
    });
    assert_eq!((out[0].0, out[1].0), (0, 0));
    assert!(out[0].1 > 0, "the receive queue ran out: {out:?}");
}

/// The same over eth, across a lab of three namespaces on a bridge, with
/// 5% of frames lost, 2% duplicated and 10% reordered by the transport.
/// Needs root; skipped with the reason otherwise.
#[test]
fn random_operations_over_a_lossy_wire_match_the_model() {
    use rmx_linux::eth::EthNet;
    use rmx_linux::eth::EthOpts;
    use rmx_linux::lab::{LabSpec, TempLab, IFACE};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root; raw sockets and network namespaces need it");
        return;
    }
    let spec = LabSpec {
        prefix: format!("rmxw{}", std::process::id() % 100_000),
        ranks: N,
        ..LabSpec::default()
    };
    let lab = match TempLab::up(spec) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let net = Net::Eth(EthNet {
        iface: IFACE.into(),
        netns: (0..N).map(|r| lab.spec().netns(r)).collect(),
        opts: EthOpts {
            faults: rmx_linux::transport::faulty::percent(5.0, 2.0, 10.0, 11).unwrap(),
            ..EthOpts::default()
        },
        launch: None,
    });
    random_operations(&net, Design::Def, 0..3);
}

#[test]
fn bad_accesses_are_refused_at_the_origin_and_never_reach_the_target() {
    for design in Design::ALL {
        bad_accesses(design);
    }
}

fn bad_accesses(design: Design) {
    let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
        let mut w = r.win_create_with(64, 4, design).expect("window");
        w.fence(r).unwrap();
        let peer = 1 - r.rank();
        let oob =
            |e: Result<(), WinError>| matches!(e, Err(WinError::Rma(RmaError::OutOfBounds { .. })));
        // 16 units of 4 bytes: unit 15 holds 4 bytes, not 5.
        assert!(oob(w.put(r, peer, 15, &[1; 5])));
        assert!(oob(w.put(r, peer, 16, &[1])));
        assert!(oob(w.put(r, peer, u64::MAX, &[1])));
        assert!(matches!(
            w.get(r, peer, 17, 1),
            Err(WinError::Rma(RmaError::OutOfBounds { .. }))
        ));
        assert_eq!(
            w.accumulate(r, peer, 1, &[1; 6], Op::Sum, Int::U32),
            Err(WinError::Rma(RmaError::Misaligned))
        );
        assert_eq!(w.put(r, 7, 0, &[1]), Err(WinError::Rma(RmaError::Target)));
        // A good one in the same epoch still lands.
        w.put(r, peer, 15, &[9; 4]).unwrap();
        w.fence(r).unwrap();
        let mem = w.to_vec();
        assert_eq!(&mem[60..], &[9; 4]);
        assert!(
            mem[..60].iter().all(|&b| b == 0),
            "nothing refused was written"
        );
        w.refused()
    });
    assert_eq!(out, vec![0, 0]);
}

/// Assertions: `NO_PRECEDE` skips the exchange and refuses an epoch that
/// had operations (keeping them for the next fence); `NO_SUCCEED` refuses
/// operations until the next fence.
#[test]
fn fence_assertions_skip_what_they_allow_and_refuse_what_they_forbid() {
    for design in Design::ALL {
        fence_assertions(design);
    }
}

fn fence_assertions(design: Design) {
    let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
        let mut w = r.win_create_with(16, 1, design).expect("window");
        let peer = 1 - r.rank();
        w.fence_with(r, Assert::NO_PRECEDE).unwrap();
        w.put(r, peer, r.rank() as u64, &[5]).unwrap();
        // A false assertion: the fence completes the put all the same.
        assert_eq!(
            w.fence_with(r, Assert::NO_PRECEDE),
            Err(WinError::Assertion)
        );
        assert_eq!(w.to_vec()[peer as usize], 5, "landed in that fence");
        w.fence_with(r, Assert::NO_SUCCEED).unwrap();
        assert_eq!(w.memory().unwrap()[peer as usize], 5, "closed: a slice");
        assert_eq!(w.put(r, peer, 0, &[1]), Err(WinError::Assertion));
        w.fence_with(r, Assert::NO_PRECEDE | Assert::NO_STORE)
            .unwrap();
        if design.immediate() {
            assert_eq!(w.memory(), Err(WinError::Exposed), "open to RDMA");
        }
        w.put(r, peer, 8, &[6]).unwrap();
        w.fence(r).unwrap();
        w.to_vec()[8]
    });
    assert_eq!(out, vec![6, 6], "{design:?}");
}

/// Floating-point accumulates in every design: each rank adds and maxes
/// f64s into every window; a bitwise operation on floats and a misaligned
/// one are refused at the origin.
#[test]
fn float_accumulates_combine_in_every_design() {
    use rmx_core::onesided::Float;
    for design in Design::ALL {
        let out = job::run(N, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let mut w = r.win_create_with(16, 8, design).expect("window");
            w.fence(r).unwrap();
            let me = r.rank() as f64;
            for t in 0..N {
                let add = (0.5 + me).to_ne_bytes();
                w.accumulate_float(r, t, 0, &add, Op::Sum, Float::F64)
                    .unwrap();
                let max = (-me).to_ne_bytes();
                w.accumulate_float(r, t, 1, &max, Op::Max, Float::F64)
                    .unwrap();
            }
            assert_eq!(
                w.accumulate_float(r, 0, 0, &[0; 8], Op::BitOr, Float::F64),
                Err(WinError::Rma(RmaError::Malformed))
            );
            assert_eq!(
                w.accumulate_float(r, 0, 0, &[0; 12], Op::Sum, Float::F64),
                Err(WinError::Rma(RmaError::Misaligned))
            );
            w.fence_with(r, Assert::NO_SUCCEED).unwrap();
            let m = w.memory().unwrap();
            let f = |i: usize| f64::from_ne_bytes(m[8 * i..8 * i + 8].try_into().unwrap());
            (f(0), f(1))
        });
        // 0.5 + 1.5 + 2.5; max(0, -0, -1, -2) with the window's 0 first.
        assert!(out.iter().all(|&v| v == (4.5, 0.0)), "{design:?} {out:?}");
    }
}

/// A window within a page of the end of the address space (before: a
/// 0-byte allocation believing it held `usize::MAX` bytes, so safe reads
/// and writes reached other memory) is refused on every rank alike, and
/// the ranks go on to make a good one.
#[test]
fn windows_that_cannot_be_reserved_are_refused() {
    let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
        for len in [usize::MAX, usize::MAX - 100, isize::MAX as usize] {
            match r.win_create(len, 1) {
                Err(WinError::Memory { len: l }) => assert_eq!(l, len),
                Err(e) => panic!("{len:#x}: {e:?}"),
                Ok(w) => panic!("{len:#x}: a window of {} bytes", w.to_vec().len()),
            }
        }
        let mut w = r.win_create(64, 1).expect("window");
        w.fence(r).unwrap();
        w.put(r, 1 - r.rank(), 0, &[r.rank() as u8 + 1; 8]).unwrap();
        w.fence(r).unwrap();
        let v = w.to_vec();
        w.free(r).unwrap();
        v[0]
    });
    assert_eq!(out, vec![2, 1]);
}

/// A get's handle names its epoch: kept past a later fence it is refused,
/// and the later epoch's get still has its own bytes. Before, the handle
/// was an index restarting each epoch, and the old one took the new
/// get's bytes.
#[test]
fn a_get_handle_from_an_earlier_epoch_is_refused() {
    for design in Design::ALL {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let mut w = r.win_create_with(8, 1, design).expect("window");
            let me = r.rank();
            w.fence_with(r, Assert::NO_SUCCEED).unwrap();
            w.write(0, &[10 + me as u8; 8]).unwrap();
            w.fence_with(r, Assert::NO_PRECEDE).unwrap();
            let first = w.get(r, 1 - me, 0, 8).unwrap();
            w.fence_with(r, Assert::NO_SUCCEED).unwrap();
            w.write(0, &[20 + me as u8; 8]).unwrap();
            w.fence_with(r, Assert::NO_PRECEDE).unwrap();
            let second = w.get(r, 1 - me, 0, 8).unwrap();
            w.fence_with(r, Assert::NO_SUCCEED).unwrap();
            let stale = w.take(first);
            let fresh = w.take(second);
            w.free(r).unwrap();
            (stale, fresh)
        });
        for (me, (stale, fresh)) in out.into_iter().enumerate() {
            assert_eq!(stale, None, "{design:?}: a stale handle taken");
            let peer = 1 - me as u8;
            assert_eq!(fresh, Some(vec![20 + peer; 8]), "{design:?}");
        }
    }
}

/// Hundreds of accumulates in an open epoch, then a barrier and an
/// allgather before the fence (MPI allows a collective between fences):
/// in the immediate designs the accumulates go as messages at once and
/// the target receives them only in its fence, so they held its credit
/// and both ranks waited in the barrier for ever. A collective's
/// messages now go ahead of them.
#[test]
fn a_collective_inside_an_epoch_of_many_accumulates_ends() {
    const ADDS: u64 = 400;
    for design in Design::ALL {
        let out = job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let mut w = r.win_create_with(64, 4, design).expect("window");
            w.fence(r).unwrap();
            let peer = 1 - r.rank();
            for k in 0..ADDS {
                let one = 1u32.to_le_bytes();
                w.accumulate(r, peer, k % 16, &one, Op::Sum, Int::U32)
                    .unwrap();
            }
            r.barrier().expect("barrier");
            let mut all = [0u8; 8];
            all[4 * r.rank() as usize..][..4].copy_from_slice(&[7; 4]);
            r.allgather(&mut all).expect("allgather");
            w.fence(r).unwrap();
            let mem = w.to_vec();
            let sum: u64 = (0..16)
                .map(|i| u32::from_le_bytes(mem[4 * i..4 * i + 4].try_into().unwrap()) as u64)
                .sum();
            (sum, all == [7; 8])
        });
        assert_eq!(out, vec![(ADDS, true); 2], "{design:?}");
    }
}

/// Ranks passing different `NO_PRECEDE` to one fence (erroneous in MPI):
/// the asserting rank once ran another reduction than the others, and
/// every rank waited for ever. Now every rank ends the fence with
/// `Disagree`; a rank that asserts it falsely gets `Assertion` while the
/// others end normally, its put landed; the window goes on.
#[test]
fn ranks_disagreeing_on_no_precede_all_end_their_fence() {
    for design in Design::ALL {
        let out = job::run(3, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            let me = r.rank();
            let mut w = r.win_create_with(8, 1, design).expect("window");
            w.fence(r).unwrap();
            let only_0 = if me == 0 {
                Assert::NO_PRECEDE
            } else {
                Assert::NONE
            };
            let apart = w.fence_with(r, only_0);
            if me == 1 {
                w.put(r, 2, 1, &[9]).unwrap();
            }
            let falsely = w.fence_with(
                r,
                if me == 1 {
                    Assert::NO_PRECEDE
                } else {
                    Assert::NONE
                },
            );
            w.put(r, (me + 1) % 3, 0, &[me as u8 + 1]).unwrap();
            w.fence(r).unwrap();
            let mem = w.to_vec();
            (apart, falsely, mem[0], mem[1])
        });
        let d = || Err(WinError::Disagree);
        assert_eq!(
            out,
            vec![
                (d(), Ok(()), 3, 0),
                (d(), Err(WinError::Assertion), 1, 0),
                (d(), Ok(()), 2, 9)
            ],
            "{design:?}"
        );
    }
}
