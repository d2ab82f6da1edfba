use rmx_core::collective::Collective;
use rmx_core::onesided::Design;
use rmx_sim::fence::Kind;
use rmx_sim::job::{Action, Job, OpSpec, Spec};
use rmx_sim::model::{Faults, Model};

fn spec(n: u16, design: Design, faults: Faults) -> Spec {
    Spec { ranks: n, model: Model::IB_DDR, faults, seed: 1, windows: vec![(64 * n as usize, design)], count_late: false }
}

#[test]
fn smoke() {
    for d in Design::ALL {
        let n = 4;
        let progs = (0..n)
            .map(|r| {
                let mut p = vec![Action::Collective(Collective::Barrier)];
                for _ in 0..3 {
                    p.push(Action::Epoch {
                        window: 0,
                        ops: vec![OpSpec { target: (r + 1) % n, disp: 64 * r as u64, kind: Kind::Put, len: 16 },
                                  OpSpec { target: (r + 2) % n, disp: 0, kind: Kind::Add, len: 8 }],
                        compute_ns: 0,
                        strawman: false,
                    });
                }
                p.push(Action::Collective(Collective::Allreduce { len: 64 }));
                p
            })
            .collect();
        let o = Job::new(spec(n, d, Faults::NONE), progs).unwrap().run();
        println!("{d:?} {o:?}");
        o.unwrap();
    }
}

#[test]
fn scale() {
    for n in [64u16, 256, 1024] {
        for d in Design::ALL {
            let t = std::time::Instant::now();
            let progs = (0..n)
                .map(|r| {
                    let mut p = vec![Action::Collective(Collective::Barrier)];
                    for _ in 0..3 {
                        p.push(Action::Epoch {
                            window: 0,
                            ops: vec![OpSpec { target: (r + 1) % n, disp: 0, kind: Kind::Put, len: 16 }],
                            compute_ns: 0,
                            strawman: false,
                        });
                    }
                    p
                })
                .collect();
            let o = Job::new(Spec { windows: vec![(64, d)], ..spec(n, d, Faults::NONE) }, progs).unwrap().run().unwrap();
            println!("{n} {d:?} {:?} {} packets, {:?}", o.ends, o.packets, t.elapsed());
        }
    }
}
