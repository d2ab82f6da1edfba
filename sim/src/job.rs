//! A job in virtual time: one program per rank (collectives and epochs
//! of one-sided operations, the same sequence on every rank), run by
//! simulated ranks over the virtual network until every rank has finished,
//! with every collective's result and every window after every fence
//! checked against a reference computed here from the programs.

use std::collections::HashMap;

use rmx_core::collective::{reduce, Collective, Int, Op, Plan};
use rmx_core::onesided::Design;

use crate::collective::CollTask;
pub use crate::fence::Fence;
use crate::fence::{apply, issue, FenceTask, Kind, RmaOp};
use crate::flood::{self, DrainTask};
use crate::model::{Model, NetFaults};
use crate::net::{Net, What};
use crate::node::Node;
use crate::port::ToWire;
use crate::window::Win;

/// One one-sided operation of a program; its bytes are made from where
/// it stands in the job, so the reference can make them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSpec {
    pub target: u16,
    /// Byte offset in the target's window.
    pub disp: u64,
    pub kind: Kind,
    pub len: u32,
}

/// One step of a rank's program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A collective summing u32s, over data made from the rank and step.
    Collective(Collective),
    /// An epoch of window `window`: these operations, `compute_ns` of
    /// work, then `fence`.
    Epoch {
        window: u16,
        ops: Vec<OpSpec>,
        compute_ns: u64,
        fence: Fence,
    },
    /// Every rank but `to` sends it `count` small messages and goes on
    /// without waiting ([`crate::flood`]).
    Flood { to: u16, count: u32 },
    /// The floods' targets receive every message of the floods before
    /// (wildcard sources when `any_source`), and their senders wait for
    /// their sends.
    Drain { any_source: bool },
}

/// A window every rank creates before the programs start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WinSpec {
    pub design: Design,
    /// Each rank's bytes: MPI lets every rank expose a size of its own.
    pub lens: Vec<usize>,
}

impl WinSpec {
    /// `len` bytes on each of `ranks` ranks.
    pub fn same(len: usize, design: Design, ranks: u16) -> WinSpec {
        WinSpec {
            design,
            lens: vec![len; ranks as usize],
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Spec {
    pub ranks: u16,
    pub model: Model,
    pub faults: NetFaults,
    /// Every rank's endpoint settings: reliable exactly when the wire is
    /// not lossy ([`crate::node::config`] gives the usual ones).
    pub config: rmx_core::Config,
    pub seed: u64,
    /// The windows, created before the programs start.
    pub windows: Vec<WinSpec>,
    /// Every rank's request table, if not the std shell's size: a small
    /// one makes collectives and fences wait for free handles.
    pub requests: Option<usize>,
    /// Count windows unlike the reference after a fence (the strawman's
    /// hazard) rather than fail at the first.
    pub count_late: bool,
    /// A rank killed part way through its program. Then a step of another
    /// rank that fails ends that rank's program (recorded in
    /// [`Outcome::ended`]) instead of the job.
    pub death: Option<Death>,
}

/// A rank killed `after_ns` after it started step `step`: from then on it
/// does nothing (its process gone: packets to it are lost, RDMA aimed at
/// it fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Death {
    pub rank: u16,
    pub step: usize,
    pub after_ns: u64,
}

impl Spec {
    /// `ranks` ranks of the IB DDR model over a wire with `faults`, with
    /// that wire's usual settings ([`crate::node::config`]), no windows
    /// and the std shell's tables: tests change what they are about.
    pub fn new(ranks: u16, faults: NetFaults, seed: u64) -> Spec {
        Spec {
            ranks,
            model: Model::IB_DDR,
            faults,
            config: crate::node::config(faults.lossy()),
            seed,
            windows: Vec::new(),
            requests: None,
            count_late: false,
            death: None,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// For each step of the programs, when the last rank finished it.
    pub ends: Vec<u64>,
    /// Fences after which a rank's window was not what the reference says.
    pub late: u64,
    pub packets: u64,
    pub rdma: u64,
    /// Packets the ranks' reliability layers sent again (a lossy wire).
    pub retransmits: u64,
    /// The programs a failed step ended (a job with a [`Death`]): rank,
    /// step and what failed. The dead rank is not among them.
    pub ended: Vec<(u16, usize, String)>,
}

/// A rank's place in its program.
enum Task {
    Collective(Box<CollTask>),
    Fence(Box<FenceTask>),
    Drain(Box<DrainTask>),
}

struct Place {
    step: usize,
    task: Option<Task>,
    wake_at: Option<u64>,
    /// Flood sends not yet waited for.
    flood: Vec<crate::req::Req>,
    /// A step failed: the program ends there (its endpoint still runs).
    failed: bool,
}

/// Why a rank's program stopped moving.
enum Fail {
    /// One of its steps failed (its endpoint said so).
    Step(String),
    /// It went wrong: unlike the reference.
    Check(String),
}

impl From<String> for Fail {
    fn from(e: String) -> Fail {
        Fail::Step(e)
    }
}

/// The numbers of the messages `origin` sent `target` in the floods
/// before `step` since the drain before it: first, and past the last.
fn flooded(program: &[Action], target: u16, origin: u16, step: usize) -> (u32, u32) {
    let (mut first, mut end) = (0, 0);
    for a in &program[..step] {
        match a {
            Action::Flood { to, count } if *to == target && origin != target => end += count,
            Action::Drain { .. } => first = end,
            _ => {}
        }
    }
    (first, end)
}

/// The bytes of operation `i` of rank `origin` in step `step`: u32s small
/// enough that a sum of a thousand ranks' never wraps.
fn op_bytes(step: usize, origin: u16, i: usize, s: &OpSpec) -> Vec<u8> {
    let mut x = (step as u64) << 40 ^ (origin as u64) << 20 ^ i as u64 ^ s.disp << 8;
    (0..s.len as usize)
        .map(|k| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            match s.kind {
                Kind::Put => (x >> 56) as u8,
                // Each u32's low byte only: small addends.
                Kind::Add => ((k % 4 == 0) as u8) * ((x >> 60) as u8),
                Kind::Get => 0,
            }
        })
        .collect()
}

/// The bytes each rank's gets read in an epoch step, by (step, rank), in
/// the order the rank issued them.
type Reads = HashMap<(usize, u16), Vec<Vec<u8>>>;

/// Applies epoch step `step`'s operations `inc` (origin, index) to a
/// target's window bytes `mem` (only the puts if `puts_only`).
fn apply_incoming(
    programs: &[Vec<Action>],
    inc: &[(u16, u32)],
    step: usize,
    mem: &mut [u8],
    puts_only: bool,
) {
    for &(o, i) in inc {
        let Action::Epoch { ops, .. } = &programs[o as usize][step] else {
            unreachable!()
        };
        let op = &ops[i as usize];
        if puts_only && op.kind != Kind::Put {
            continue;
        }
        apply(
            mem,
            op.kind,
            op.disp as usize,
            &op_bytes(step, o, i as usize, op),
        );
    }
}

/// What every get of the programs reads: its target's window as the epoch
/// began, from `windows` (every rank's, before the first step). A get of
/// bytes another operation of its epoch changes is erroneous in MPI, and
/// refused here.
fn read_by_gets(
    programs: &[Vec<Action>],
    incoming: &HashMap<usize, Vec<Vec<(u16, u32)>>>,
    mut windows: Vec<Vec<Vec<u8>>>,
) -> Result<Reads, String> {
    let mut read = HashMap::new();
    for (step, a) in programs[0].iter().enumerate() {
        let Action::Epoch { window, .. } = a else {
            continue;
        };
        let w = *window as usize;
        let ops = |o: usize| match &programs[o][step] {
            Action::Epoch { ops, .. } => ops,
            _ => unreachable!(),
        };
        let span = |s: &OpSpec| s.disp..s.disp + s.len as u64;
        for o in 0..programs.len() {
            let mut got = Vec::new();
            for g in ops(o).iter().filter(|s| s.kind == Kind::Get) {
                let t = g.target as usize;
                let clash = incoming[&step][t].iter().any(|&(p, i)| {
                    let u = &ops(p as usize)[i as usize];
                    let (a, b) = (span(g), span(u));
                    u.kind != Kind::Get && a.start < b.end && b.start < a.end
                });
                if clash {
                    return Err(format!(
                        "rank {o} step {step}: {g:?} reads bytes another operation of its epoch changes"
                    ));
                }
                let r = span(g);
                got.push(windows[t][w][r.start as usize..r.end as usize].to_vec());
            }
            read.insert((step, o as u16), got);
        }
        for (t, inc) in incoming[&step].iter().enumerate() {
            apply_incoming(programs, inc, step, &mut windows[t][w], false);
        }
    }
    Ok(read)
}

/// Rank `r`'s contribution to collective step `step`.
fn contribution(what: Collective, step: usize, r: u16, n: u16) -> Vec<u8> {
    let plan = Plan::new(what, n, r).expect("checked");
    let mut d = vec![0u8; plan.data_len()];
    let fill = |d: &mut [u8]| {
        for (k, b) in d.iter_mut().enumerate() {
            *b = if k % 4 == 0 {
                ((step * 7 + r as usize * 13 + k) % 61) as u8
            } else {
                0
            };
        }
    };
    match what {
        Collective::Allgather { block } => {
            fill(&mut d[r as usize * block..(r as usize + 1) * block])
        }
        _ => fill(&mut d),
    }
    d
}

/// What every rank holds after collective step `step`.
fn collective_result(what: Collective, step: usize, n: u16) -> Vec<u8> {
    let mut acc = contribution(what, step, 0, n);
    for r in 1..n {
        let c = contribution(what, step, r, n);
        match what {
            Collective::Allgather { .. } => {
                for (a, b) in acc.iter_mut().zip(&c) {
                    *a |= b;
                }
            }
            _ => reduce(Op::Sum, Int::U32, &mut acc, &c).expect("whole u32s"),
        }
    }
    acc
}

/// Virtual time a job may take: past it, the job has stopped moving (a
/// rank's timers alone keep the clock going).
pub const LIMIT_NS: u64 = 60_000_000_000;

/// The job: ranks, network, programs and the reference.
pub struct Job {
    spec: Spec,
    nodes: Vec<Node>,
    net: Net,
    programs: Vec<Vec<Action>>,
    places: Vec<Place>,
    /// For each epoch step, each target's incoming operations: (origin, index).
    incoming: HashMap<usize, Vec<Vec<(u16, u32)>>>,
    /// Each rank's windows as the reference has them after its last fence.
    reference: Vec<Vec<Vec<u8>>>,
    /// What each rank's gets of each epoch step read, in issue order.
    gets: Reads,
    /// Each collective step's result, once computed.
    results: HashMap<usize, Vec<u8>>,
    /// When each rank finished each step.
    ends: Vec<Vec<u64>>,
    late: u64,
    /// When the rank of [`Spec::death`] dies, once it reached its step.
    dies_at: Option<u64>,
    ended: Vec<(u16, usize, String)>,
}

impl Job {
    /// A job of `programs` (one per rank, the same sequence of steps).
    pub fn new(spec: Spec, programs: Vec<Vec<Action>>) -> Result<Job, String> {
        let n = spec.ranks;
        if programs.len() != n as usize || n < 1 {
            return Err(format!("{} programs for {n} ranks", programs.len()));
        }
        let shape = |p: &[Action]| -> Vec<(u8, u16)> {
            p.iter()
                .map(|a| match a {
                    Action::Collective(_) => (0, 0),
                    Action::Epoch { window, .. } => (1, *window),
                    Action::Flood { to, .. } => (2, *to),
                    Action::Drain { .. } => (3, 0),
                })
                .collect()
        };
        if programs.iter().any(|p| shape(p) != shape(&programs[0])) {
            return Err("every rank's program must have the same steps".into());
        }
        let lossy = spec.faults.lossy();
        if spec.config.reliable == lossy {
            return Err(
                "a lossy wire needs the reliability layer (config.reliable false), and only it"
                    .into(),
            );
        }
        if let Some(w) = spec.windows.iter().find(|w| lossy && w.design.immediate()) {
            return Err(format!(
                "{} needs RDMA, which a lossy wire lacks",
                w.design.name()
            ));
        }
        if let Some(w) = spec.windows.iter().find(|w| w.lens.len() != n as usize) {
            return Err(format!("{} window sizes for {n} ranks", w.lens.len()));
        }
        let mut nodes = (0..n)
            .map(|me| Node::new(me, n, spec.model, spec.config, spec.requests))
            .collect::<Result<Vec<_>, _>>()?;
        let mut incoming = HashMap::new();
        for (step, a) in programs[0].iter().enumerate() {
            let Action::Epoch { window, .. } = a else {
                continue;
            };
            let lens = &spec
                .windows
                .get(*window as usize)
                .ok_or(format!("step {step}: no window {window}"))?
                .lens;
            let mut to: Vec<Vec<(u16, u32)>> = vec![Vec::new(); n as usize];
            for (o, p) in programs.iter().enumerate() {
                let Action::Epoch { ops, .. } = &p[step] else {
                    unreachable!()
                };
                for (i, s) in ops.iter().enumerate() {
                    let len = lens.get(s.target as usize).copied().unwrap_or(0);
                    if s.target >= n || s.disp.saturating_add(s.len as u64) > len as u64 {
                        return Err(format!("rank {o} step {step}: {s:?} is outside the window"));
                    }
                    to[s.target as usize].push((o as u16, i as u32));
                }
            }
            incoming.insert(step, to);
        }
        for (id, win) in spec.windows.iter().enumerate() {
            let src = programs
                .iter()
                .flat_map(|p| p.iter())
                .filter_map(|a| match a {
                    Action::Epoch { window, ops, .. } if *window as usize == id => {
                        Some(ops.iter().map(|s| s.len as usize).sum::<usize>())
                    }
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            Win::create(&mut nodes, id as u16, &win.lens, win.design, src)?;
        }
        let reference: Vec<Vec<Vec<u8>>> = (0..n as usize)
            .map(|r| spec.windows.iter().map(|w| vec![0u8; w.lens[r]]).collect())
            .collect();
        let gets = read_by_gets(&programs, &incoming, reference.clone())?;
        let places = (0..n)
            .map(|_| Place {
                step: 0,
                task: None,
                wake_at: None,
                flood: Vec::new(),
                failed: false,
            })
            .collect();
        let steps = programs[0].len();
        Ok(Job {
            net: Net::new(n, spec.model, spec.faults, spec.seed),
            spec,
            nodes,
            programs,
            places,
            incoming,
            reference,
            gets,
            results: HashMap::new(),
            ends: vec![vec![0; steps]; n as usize],
            late: 0,
            dies_at: None,
            ended: Vec::new(),
        })
    }

    /// Runs every program to its end.
    pub fn run(mut self) -> Result<Outcome, String> {
        let n = self.spec.ranks;
        for r in 0..n {
            self.net.wake(0, r);
        }
        let mut now = 0;
        while let Some(ev) = self.net.pop() {
            now = ev.at;
            if now > LIMIT_NS {
                break;
            }
            let r = ev.rank;
            let ri = r as usize;
            if self.is_dead(r, now) {
                // Its process is gone: what reaches it is lost, RDMA
                // aimed at it fails at its origin.
                match ev.what {
                    What::Land {
                        from, post, early, ..
                    } => {
                        let down = Err(rmx_core::RdmaError::Down);
                        self.net.landed(now, from, &post, early, down);
                    }
                    What::Read { from, post } => {
                        let down = Err(rmx_core::RdmaError::Down);
                        self.net.read_back(now, r, from, post, down);
                    }
                    _ => {}
                }
                continue;
            }
            let port = self.nodes[ri].port();
            let run = match ev.what {
                What::Packet(b) => {
                    port.arrive(b);
                    true
                }
                What::Land {
                    from,
                    post,
                    data,
                    early,
                } => {
                    let ok = port.write_remote(post.remote, &data);
                    let result = match ok {
                        true => Ok(()),
                        false => Err(rmx_core::RdmaError::Access),
                    };
                    self.net.landed(now, from, &post, early, result);
                    match post.imm {
                        Some(imm) if ok => {
                            port.immediate(imm);
                            true
                        }
                        _ => false,
                    }
                }
                What::Read { from, post } => {
                    let bytes = port
                        .read_remote(post.remote, post.local.len)
                        .ok_or(rmx_core::RdmaError::Access);
                    self.net.read_back(now, r, from, post, bytes);
                    false
                }
                What::Complete {
                    wr_id,
                    mut result,
                    place,
                } => {
                    if let Some((post, b)) = place {
                        let l = post.local;
                        if !port.write(l.key, l.addr, &b, false) {
                            result = Err(rmx_core::RdmaError::Access);
                        }
                    }
                    port.complete(wr_id, result);
                    true
                }
                What::Wake => {
                    if self.places[ri].wake_at == Some(now) {
                        self.places[ri].wake_at = None;
                    }
                    true
                }
            };
            if !run {
                continue;
            }
            let cpu = self.nodes[ri].cpu();
            if cpu > now {
                self.wake(r, cpu);
                continue;
            }
            self.nodes[ri].port().cpu = now;
            self.run_rank(r)?;
        }
        let unfinished: Vec<usize> = (0..n as usize)
            .filter(|&r| self.places[r].step < self.programs[r].len())
            .filter(|&r| !self.places[r].failed && !self.is_dead(r as u16, u64::MAX))
            .collect();
        if !unfinished.is_empty() {
            let r = unfinished[0];
            let mut at: Vec<(usize, usize)> = Vec::new();
            for p in &self.places {
                match at.iter_mut().find(|(s, _)| *s == p.step) {
                    Some(x) => x.1 += 1,
                    None => at.push((p.step, 1)),
                }
            }
            return Err(format!(
                "stalled at {now} ns (nothing in flight, or past {LIMIT_NS} ns): {} ranks unfinished (ranks at each step: {at:?}), rank {r} at step {} of {}; its endpoint: {:?}, {:?}",
                unfinished.len(),
                self.places[r].step,
                self.programs[r].len(),
                self.nodes[r].ep.stall(),
                self.nodes[r].ep.stats()
            ));
        }
        let steps = self.programs[0].len();
        Ok(Outcome {
            ends: (0..steps)
                .map(|s| self.ends.iter().map(|e| e[s]).max().unwrap_or(0))
                .collect(),
            late: self.late,
            packets: self.net.packets,
            rdma: self.net.rdma,
            retransmits: self.nodes.iter().map(|n| n.ep.stats().retransmits).sum(),
            ended: self.ended,
        })
    }

    /// Rank `r` is the one of [`Spec::death`], dead by `now`.
    fn is_dead(&self, r: u16, now: u64) -> bool {
        let rank = self.spec.death.map(|d| d.rank);
        rank == Some(r) && self.dies_at.is_some_and(|t| now >= t)
    }

    fn wake(&mut self, r: u16, at: u64) {
        let p = &mut self.places[r as usize];
        if p.wake_at != Some(at) {
            p.wake_at = Some(at);
            self.net.wake(at, r);
        }
    }

    /// Runs rank `r` at its time as far as it goes, then hands the
    /// network what it posted.
    /// Moves rank `r`'s program on as far as it goes now.
    fn advance(&mut self, r: u16) -> Result<(), Fail> {
        let ri = r as usize;
        let n = self.spec.ranks;
        loop {
            let step = self.places[ri].step;
            if step == self.programs[ri].len() {
                break;
            }
            let node = &mut self.nodes[ri];
            let task = match self.places[ri].task.take() {
                Some(t) => t,
                None if self
                    .spec
                    .death
                    .is_some_and(|d| (d.rank, d.step) == (r, step))
                    && self.dies_at.is_none() =>
                {
                    let d = self.spec.death.expect("matched");
                    self.dies_at = Some(node.cpu().saturating_add(d.after_ns));
                    continue;
                }
                None => match &self.programs[ri][step] {
                    Action::Collective(what) => {
                        let data = contribution(*what, step, r, n);
                        Task::Collective(Box::new(CollTask::new(node, n, *what, data)?))
                    }
                    Action::Epoch {
                        window,
                        ops,
                        compute_ns,
                        fence,
                    } => {
                        let mut sends = Vec::new();
                        for (i, s) in ops.iter().enumerate() {
                            let op = RmaOp {
                                target: s.target,
                                disp: s.disp,
                                kind: s.kind,
                                data: op_bytes(step, r, i, s),
                            };
                            issue(node, *window, &op, &mut sends)?;
                        }
                        node.spend(*compute_ns);
                        let f = FenceTask::new(node, *window, n, *fence, sends)?;
                        Task::Fence(Box::new(f))
                    }
                    &Action::Flood { to, count } => {
                        if r != to {
                            let (_, end) = flooded(&self.programs[ri], to, r, step);
                            flood::send(node, to, end, count, &mut self.places[ri].flood)?;
                        }
                        self.ends[ri][step] = self.nodes[ri].cpu();
                        self.places[ri].step += 1;
                        continue;
                    }
                    &Action::Drain { any_source } => {
                        let from = (0..n)
                            .map(|o| flooded(&self.programs[ri], r, o, step))
                            .collect();
                        let sends = std::mem::take(&mut self.places[ri].flood);
                        Task::Drain(Box::new(DrainTask::new(node, from, any_source, sends)?))
                    }
                },
            };
            let done = match task {
                Task::Collective(mut c) => match c.poll(node)? {
                    true => {
                        self.check_collective(r, step, &c.data)
                            .map_err(Fail::Check)?;
                        true
                    }
                    false => {
                        self.places[ri].task = Some(Task::Collective(c));
                        false
                    }
                },
                Task::Drain(mut d) => match d.poll(node)? {
                    true => true,
                    false => {
                        self.places[ri].task = Some(Task::Drain(d));
                        false
                    }
                },
                Task::Fence(mut f) => match f.poll(node)? {
                    Some(o) => {
                        if o.failed > 0 || o.disagree || o.false_assertion {
                            return Err(Fail::Step(format!(
                                "rank {r} step {step}: the fence ended with {o:?}"
                            )));
                        }
                        self.check_window(r, step).map_err(Fail::Check)?;
                        self.check_gets(r, step).map_err(Fail::Check)?;
                        true
                    }
                    None => {
                        self.places[ri].task = Some(Task::Fence(f));
                        false
                    }
                },
            };
            if !done {
                break;
            }
            self.ends[ri][step] = self.nodes[ri].cpu();
            self.places[ri].step += 1;
        }
        Ok(())
    }

    fn run_rank(&mut self, r: u16) -> Result<(), String> {
        let ri = r as usize;
        self.nodes[ri].progress();
        if !self.places[ri].failed {
            match self.advance(r) {
                Ok(()) => {}
                Err(Fail::Step(e)) if self.spec.death.is_some() => {
                    self.ended.push((r, self.places[ri].step, e));
                    self.places[ri].failed = true;
                }
                Err(Fail::Step(e) | Fail::Check(e)) => return Err(e),
            }
        }
        for p in std::mem::take(&mut self.nodes[ri].port().outbox) {
            match p {
                ToWire::Packet { at, to, bytes } => {
                    // A reliable wire (RC) retries a packet to a process
                    // that is gone until it gives the connection up: the
                    // sender's next post to it fails.
                    let gone = !self.spec.faults.lossy() && self.is_dead(to, at);
                    let down = &mut self.nodes[ri].port().down;
                    if gone && !down.contains(&to) {
                        down.push(to);
                    }
                    self.net.send(at, r, to, bytes)
                }
                ToWire::Rdma { at, post, data } => {
                    let t = self.nodes[post.peer as usize].port();
                    let ok = t.reachable(post.remote, post.local.len);
                    self.net.rdma(at, r, post, data, ok);
                }
            }
        }
        let node = &mut self.nodes[ri];
        let cpu = node.cpu();
        if let Some(t) = node.ep.poll_timeout() {
            self.wake(r, t.max(cpu));
        } else if node.port().pending() {
            self.wake(r, cpu);
        }
        Ok(())
    }

    fn check_collective(&mut self, r: u16, step: usize, data: &[u8]) -> Result<(), String> {
        let Action::Collective(what) = self.programs[r as usize][step] else {
            unreachable!()
        };
        let n = self.spec.ranks;
        let want = self
            .results
            .entry(step)
            .or_insert_with(|| collective_result(what, step, n));
        let span = Plan::new(what, n, r).expect("checked").result();
        if data[span.range()] != want[span.range()] {
            return Err(format!(
                "rank {r} step {step}: {what:?} gave a wrong result"
            ));
        }
        Ok(())
    }

    /// What the rank's gets of this epoch read, against the reference.
    fn check_gets(&mut self, r: u16, step: usize) -> Result<(), String> {
        let ri = r as usize;
        let Action::Epoch { window, .. } = self.programs[ri][step] else {
            unreachable!()
        };
        let got = crate::fence::take_gets(&mut self.nodes[ri], window)
            .map_err(|e| format!("rank {r} step {step}: {e}"))?;
        let want = &self.gets[&(step, r)];
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            return Err(format!(
                "rank {r} step {step}: get {i} of the epoch read {:?}, the reference {:?}",
                got.get(i),
                want[i]
            ));
        }
        if got.len() != want.len() {
            return Err(format!(
                "rank {r} step {step}: {} gets ended, {} issued",
                got.len(),
                want.len()
            ));
        }
        Ok(())
    }

    /// The reference's window after this epoch, against the rank's.
    fn check_window(&mut self, r: u16, step: usize) -> Result<(), String> {
        let ri = r as usize;
        let Action::Epoch { window, .. } = self.programs[ri][step] else {
            unreachable!()
        };
        let w = window as usize;
        let mut want = std::mem::take(&mut self.reference[ri][w]);
        apply_incoming(
            &self.programs,
            &self.incoming[&step][ri],
            step,
            &mut want,
            false,
        );
        let got = self.nodes[ri].windows[w].bytes(&self.nodes[ri]);
        let design = self.spec.windows[w].design;
        let len = got.len();
        let mut ok = got == want.as_slice();
        if !ok && design.immediate() {
            // A rank that left this fence first may already have put for
            // the next epoch of the window: those bytes may be there too.
            let next = self.programs[ri]
                .iter()
                .enumerate()
                .skip(step + 1)
                .find(|(_, a)| matches!(a, Action::Epoch { window: x, .. } if *x == window))
                .map(|(s, _)| s);
            if let Some(s) = next {
                let mut ahead = want.clone();
                apply_incoming(&self.programs, &self.incoming[&s][ri], s, &mut ahead, true);
                ok = (0..len).all(|k| got[k] == want[k] || got[k] == ahead[k]);
            }
        }
        if !ok {
            if !self.spec.count_late {
                let k = (0..len).find(|&k| got[k] != want[k]).unwrap_or(0);
                return Err(format!(
                    "rank {r} step {step}: after the fence window {w} differs from the reference at byte {k} ({} there, {} expected)",
                    got[k], want[k]
                ));
            }
            self.late += 1;
        }
        // The reference goes on from what should be there.
        self.reference[ri][w] = want;
        Ok(())
    }
}
