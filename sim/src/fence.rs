//! Windows of a simulated rank and their fences, carried out as the core's
//! [`Epoch`] says: the same steps the std shell's `window/fence.rs` takes,
//! without blocking (a step that waits returns, and the job wakes the rank
//! when something arrives).

use rmx_core::collective::{reduce, Collective, Int, Op};
use rmx_core::onesided::{
    channel::{DATA, FINISH, FLAG, HEADERS},
    tag, Arrival, Data, Descriptor, Design, Epoch, EpochError, OpHeader, Outcome, Reduction,
    RmaKind, Step, Target, Window, CONTEXT, FIRST, HEADER,
};
use rmx_core::{Gather, MemKey, Remote, Source, TagSel};

use crate::collective::CollTask;
use crate::node::Node;
use crate::req::Req;
use crate::window::{Got, Outgoing, Win};

/// How an epoch ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// A fence without assertions.
    Plain,
    /// A fence with MPI's assertions: no operation of this rank's epoch
    /// ends here, none follows until the next fence.
    Assert { no_precede: bool, no_succeed: bool },
    /// For the hazard's sake, the strawman: local completion, then a
    /// barrier. Not a design.
    Strawman,
}

/// What an operation does to its target's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Writes its bytes (RDMA in the immediate designs).
    Put,
    /// Adds its bytes, as u32s (a message in every design).
    Add,
    /// Reads bytes of the window as the epoch began (RDMA in the
    /// immediate designs, a request the target answers in Def).
    Get,
}

/// One operation of an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RmaOp {
    pub target: u16,
    /// Byte offset in the target's window.
    pub disp: u64,
    pub kind: Kind,
    /// What a put or an accumulate carries; a get's is as long as what it
    /// reads (its bytes unused).
    pub data: Vec<u8>,
}

/// Applies `op` to a window's bytes, as the target does (and the
/// reference model); a get changes nothing.
pub fn apply(mem: &mut [u8], kind: Kind, at: usize, data: &[u8]) {
    let to = &mut mem[at..at + data.len()];
    match kind {
        Kind::Put => to.copy_from_slice(data),
        Kind::Add => reduce(Op::Sum, Int::U32, to, data).expect("whole u32s"),
        Kind::Get => {}
    }
}

/// The key a rank's window `id` shows (what accesses must carry).
fn key(id: u16, rank: u16) -> u32 {
    0x5EED_0000 ^ (u32::from(id) << 16) ^ u32::from(rank)
}

impl Win {
    /// Every rank's window `id` under `design`, `lens[rank]` bytes each,
    /// each able to put and get `src_len` bytes per epoch: one per node,
    /// descriptors swapped.
    pub fn create(
        nodes: &mut [Node],
        id: u16,
        lens: &[usize],
        design: Design,
        src_len: usize,
    ) -> Result<(), String> {
        if lens.len() != nodes.len() {
            return Err(format!(
                "{} window sizes for {} ranks",
                lens.len(),
                nodes.len()
            ));
        }
        let mut descs = Vec::new();
        let mut mems = Vec::new();
        for (n, &len) in nodes.iter_mut().zip(lens) {
            let mem = n.nic.user_buf(vec![0; len]);
            let addr = n.nic.user_addr[mem.0 as usize];
            let remote = if design.immediate() {
                let k = rmx_core::Nic::register(&mut n.nic, addr, len as u64)
                    .map_err(|e| format!("{e:?}"))?;
                Remote { addr, key: k }
            } else {
                Remote {
                    addr: 0,
                    key: MemKey(0),
                }
            };
            descs.push(Descriptor {
                window: Window {
                    len: len as u64,
                    disp_unit: 1,
                    key: key(id, n.me),
                },
                remote,
            });
            mems.push(mem);
        }
        let targets: Vec<Target> = descs.iter().map(|d| Target::new(*d)).collect();
        for ((n, mem), &len) in nodes.iter_mut().zip(mems).zip(lens) {
            let epoch =
                Epoch::new(id, n.me, design, targets.clone()).ok_or("a rank outside its window")?;
            let s = n.nic.user_buf(vec![0; src_len.max(1)]);
            let sa = n.nic.user_addr[s.0 as usize];
            let sk = match design.immediate() {
                true => rmx_core::Nic::register(&mut n.nic, sa, src_len.max(1) as u64)
                    .map_err(|e| format!("{e:?}"))?,
                false => MemKey(0),
            };
            if n.windows.len() != id as usize {
                return Err(format!("window {id} created out of order"));
            }
            n.windows.push(Win {
                id,
                epoch,
                mem,
                len,
                queued: Vec::new(),
                src: (s, sa, sk),
                src_used: 0,
                gets: Vec::new(),
            });
        }
        Ok(())
    }

    /// The window's bytes.
    pub fn bytes<'a>(&self, node: &'a Node) -> &'a [u8] {
        &node.nic.user[self.mem.0 as usize]
    }
}

/// The bytes of the gets of window `w`'s epoch the last fence ended, in
/// the order they were issued (taken: the next epoch's start afresh).
pub fn take_gets(node: &mut Node, w: u16) -> Result<Vec<Vec<u8>>, String> {
    let win = &mut node.windows[w as usize];
    let src = &node.nic.user[win.src.0 .0 as usize];
    std::mem::take(&mut win.gets)
        .into_iter()
        .map(|g| match g {
            Got::Bytes(b) => Ok(b),
            Got::Read { at, len } => Ok(src[at..at + len].to_vec()),
            Got::Asked { .. } | Got::Answer(_) => Err("a get the fence did not end".into()),
        })
        .collect()
}

/// Issues `op` on window `w` of `node`: an RDMA put, or the operation's
/// messages now (immediate designs), queued for the fence (deferred), or
/// applied here (its own window). Message requests go on `sends`.
pub fn issue(node: &mut Node, w: u16, op: &RmaOp, sends: &mut Vec<Req>) -> Result<(), String> {
    let me = node.me;
    let win = &mut node.windows[w as usize];
    let kind = match op.kind {
        Kind::Put => RmaKind::Put,
        Kind::Add => RmaKind::Accumulate(Op::Sum, Int::U32),
        Kind::Get => RmaKind::Get,
    };
    let refused = |e: EpochError| format!("rank {me}: {op:?} refused: {e:?}");
    let mut h = win
        .epoch
        .check(op.target, op.disp, op.data.len() as u64, kind)
        .map_err(refused)?;
    let design = win.epoch.design();
    if op.kind == Kind::Get {
        win.epoch.number_get(&mut h).map_err(refused)?;
        let len = op.data.len();
        if op.target == me || len == 0 {
            let at = h.offset as usize;
            let b = node.nic.user[win.mem.0 as usize][at..at + len].to_vec();
            win.gets.push(Got::Bytes(b));
            win.epoch.local();
            return Ok(());
        }
        if !design.immediate() {
            win.gets.push(Got::Asked {
                target: op.target,
                len: len as u32,
            });
            win.epoch.message(op.target);
            win.queued.push(Outgoing::new(op.target, &h, &[]));
            return Ok(());
        }
        win.gets.push(Got::Read {
            at: win.src_used,
            len,
        });
        return rdma(node, w, op.target, &h, None);
    }
    if op.target == me {
        win.epoch.local();
        let mem = win.mem.0 as usize;
        apply(
            &mut node.nic.user[mem],
            op.kind,
            h.offset as usize,
            &op.data,
        );
        return Ok(());
    }
    if op.kind == Kind::Put && design.immediate() {
        return rdma(node, w, op.target, &h, Some(&op.data));
    }
    win.epoch.message(op.target);
    let out = Outgoing::new(op.target, &h, &op.data);
    if design.immediate() {
        send(node, w, &out, sends)
    } else {
        node.windows[w as usize].queued.push(out);
        Ok(())
    }
}

/// Posts an RDMA put of `data` (copied to the epoch's source buffer) or,
/// without data, a get of `h.len` bytes into that buffer.
fn rdma(
    node: &mut Node,
    w: u16,
    target: u16,
    h: &OpHeader,
    data: Option<&[u8]>,
) -> Result<(), String> {
    let me = node.me;
    let win = &mut node.windows[w as usize];
    let (buf, addr, key) = win.src;
    let at = win.src_used;
    let len = h.len as usize;
    win.src_used += len;
    if let Some(data) = data {
        node.nic.user[buf.0 as usize][at..at + len].copy_from_slice(data);
    }
    let local = Gather {
        addr: addr + at as u64,
        key,
        len: h.len,
    };
    let Node { windows, nic, .. } = node;
    match windows[w as usize].epoch.post(nic, target, h, local) {
        Ok(()) => {}
        Err(EpochError::Busy) => return Err(format!("rank {me}: the NIC refused an RDMA post")),
        Err(e) => return Err(format!("rank {me}: {h:?}: {e:?}")),
    }
    node.collect();
    Ok(())
}

/// Starts an operation's messages.
fn send(node: &mut Node, w: u16, out: &Outgoing, sends: &mut Vec<Req>) -> Result<(), String> {
    let epoch = node.windows[w as usize].epoch.epoch();
    for (what, b) in [(HEADERS, &out.first), (DATA, &out.rest)] {
        if what == DATA && b.is_empty() {
            break;
        }
        let q = node
            .isend(out.target, tag(w, epoch, what), CONTEXT, b)
            .map_err(|e| format!("rank {}: operation message: {e:?}", node.me))?;
        sends.push(q);
    }
    Ok(())
}

/// What a fence waits for now.
enum Wait {
    /// Nothing: ask the core for the next step.
    Step,
    /// The epoch's RDMA to complete.
    Flush,
    /// The fence's reduction (its length), or a barrier.
    Collective(Box<CollTask>, Option<usize>),
    /// A finish message.
    Finish(Req),
    /// An operation's first message (unless immediates satisfy first).
    First {
        q: Req,
        immediates: bool,
        cancelled: bool,
    },
    /// An admitted (or refused) operation's data, sent apart.
    Rest(Arrival, u16, Req),
    /// All-pairs flags: the receives posted first and the sends, or the
    /// receives cancelled.
    Flags(Vec<Req>),
    /// The messages this fence sent, before the fence is done.
    Sent(Outcome),
}

/// What the last step brought back, for the core with the next.
enum Input {
    Nothing,
    Reduced(usize),
    Finished(u16, [u8; 4]),
    /// An operation from this rank.
    Arrived(u16),
}

/// One rank's fence of one window.
pub struct FenceTask {
    w: u16,
    ranks: u16,
    epoch: u16,
    counts: Vec<u8>,
    input: Input,
    wait: Wait,
    /// Requests of messages sent this epoch.
    pub sends: Vec<Req>,
    /// Receives of every other rank's flag (naive), posted first.
    flags: Vec<Req>,
    /// The strawman ("local completion, then a barrier"): not a design.
    strawman: bool,
    /// The receive of the epoch's next operation (any rank), posted by a
    /// wait that stalled or an await step, and an operation whose data it
    /// still receives: the std shell's `window/inbox.rs`.
    op: Option<Req>,
    rest: Option<(Arrival, u16, Req)>,
}

impl FenceTask {
    /// Starts the fence of window `w` that ends this epoch, with the
    /// requests of operations' messages already sent in it.
    pub fn new(
        node: &mut Node,
        w: u16,
        ranks: u16,
        fence: Fence,
        sends: Vec<Req>,
    ) -> Result<FenceTask, String> {
        let e = &mut node.windows[w as usize].epoch;
        let epoch = e.epoch();
        let strawman = fence == Fence::Strawman;
        let (no_precede, no_succeed) = match fence {
            Fence::Assert {
                no_precede,
                no_succeed,
            } => (no_precede, no_succeed),
            _ => (false, false),
        };
        if !strawman {
            e.fence(no_precede, no_succeed)
                .map_err(|x| format!("fence: {x:?}"))?;
        }
        let design = e.design();
        // A fence is collective: every rank is watched while it runs, and
        // it ends once any has failed (a wait for any origin's operation
        // or finish would otherwise wait for ever on a dead one).
        node.watch_group("fence")?;
        Ok(FenceTask {
            w,
            ranks,
            epoch,
            counts: vec![0; Epoch::<Vec<Target>>::reduce_len(design, ranks as usize)],
            input: Input::Nothing,
            wait: if strawman { Wait::Flush } else { Wait::Step },
            sends,
            flags: Vec::new(),
            strawman,
            op: None,
            rest: None,
        })
    }

    /// A wait of the fence stalled: receives the operations that have come
    /// while the core awaits any, each applied and fed to the core.
    fn drain(&mut self, node: &mut Node) -> Result<(), String> {
        let me = node.me;
        let w = self.w as usize;
        loop {
            if !node.windows[w].epoch.awaiting() {
                return Ok(());
            }
            if let Some((arrival, from, q)) = &self.rest {
                let data = node
                    .test(q)
                    .map_err(|e| format!("rank {me}: data: {e:?}"))?;
                let Some((_, data)) = data else {
                    return Ok(());
                };
                let from = *from;
                land(node, w, arrival, &data);
                node.windows[w].epoch.arrived(from);
                self.rest = None;
                continue;
            }
            let q = match self.op.take() {
                Some(q) => q,
                None => post_op(node, self.w, self.epoch)?,
            };
            let Some((st, first)) = node
                .test(&q)
                .map_err(|e| format!("rank {me}: operation: {e:?}"))?
            else {
                self.op = Some(q);
                return Ok(());
            };
            match first_message(node, self.w, self.epoch, st.source, &first, &mut self.sends)? {
                None => node.windows[w].epoch.arrived(st.source),
                Some(rest) => self.rest = Some(rest),
            }
        }
    }

    /// Moves the fence on as far as it goes now: its outcome once done.
    pub fn poll(&mut self, node: &mut Node) -> Result<Option<Outcome>, String> {
        let polled = self.steps(node);
        node.watched("fence", None, polled)
    }

    fn steps(&mut self, node: &mut Node) -> Result<Option<Outcome>, String> {
        let me = node.me;
        let fail = |what: &str, e: &dyn std::fmt::Debug| format!("rank {me}: {what}: {e:?}");
        loop {
            let w = self.w as usize;
            match &mut self.wait {
                Wait::Step => {}
                Wait::Flush => {
                    if node.windows[w].epoch.in_flight() > 0 {
                        self.drain(node)?;
                        return Ok(None);
                    }
                    if self.strawman {
                        let c = CollTask::new(node, self.ranks, Collective::Barrier, Vec::new())?;
                        self.wait = Wait::Collective(Box::new(c), None);
                        continue;
                    }
                }
                Wait::Collective(c, len) => {
                    if !c.poll(node)? {
                        self.drain(node)?;
                        return Ok(None);
                    }
                    if let Some(len) = *len {
                        self.counts[..len].copy_from_slice(&c.data);
                        self.input = Input::Reduced(len);
                    } else if self.strawman {
                        node.windows[w].epoch.abort();
                        node.windows[w].src_used = 0;
                        self.wait = Wait::Sent(Outcome {
                            failed: 0,
                            disagree: false,
                            false_assertion: false,
                        });
                        continue;
                    }
                }
                Wait::Finish(q) => {
                    let Some((st, b)) = node.test(q).map_err(|e| fail("finish", &e))? else {
                        self.drain(node)?;
                        return Ok(None);
                    };
                    let body: [u8; 4] = b.try_into().map_err(|b| fail("finish body", &b))?;
                    self.input = Input::Finished(st.source, body);
                }
                Wait::First {
                    q,
                    immediates,
                    cancelled,
                } => {
                    if *immediates && !*cancelled && node.windows[w].epoch.satisfied() {
                        *cancelled = node.cancel(q);
                    }
                    let Some((st, first)) = node.test(q).map_err(|e| fail("operation", &e))? else {
                        return Ok(None);
                    };
                    if *cancelled {
                        // The rest came as immediates.
                        self.wait = Wait::Step;
                        continue;
                    }
                    match first_message(
                        node,
                        self.w,
                        self.epoch,
                        st.source,
                        &first,
                        &mut self.sends,
                    )? {
                        None => self.input = Input::Arrived(st.source),
                        Some((arrival, from, q)) => {
                            self.wait = Wait::Rest(arrival, from, q);
                            continue;
                        }
                    }
                }
                Wait::Rest(arrival, from, q) => {
                    let Some((_, data)) = node.test(q).map_err(|e| fail("operation data", &e))?
                    else {
                        return Ok(None);
                    };
                    land(node, w, arrival, &data);
                    self.input = Input::Arrived(*from);
                }
                Wait::Flags(reqs) => {
                    while let Some(q) = reqs.first() {
                        if node.test(q).map_err(|e| fail("flag", &e))?.is_none() {
                            return Ok(None);
                        }
                        reqs.remove(0);
                    }
                }
                Wait::Sent(outcome) => {
                    while let Some(q) = self.sends.first() {
                        match node.test(q).map_err(|e| fail("send", &e))? {
                            None => return Ok(None),
                            Some((st, _)) if st.fault.is_some() => {
                                return Err(fail("send", &st.fault))
                            }
                            Some(_) => {}
                        }
                        self.sends.remove(0);
                    }
                    let mut gets = std::mem::take(&mut node.windows[w].gets);
                    let answered = answers(node, &mut gets);
                    node.windows[w].gets = gets;
                    if !answered.map_err(|e| fail("get answer", &e))? {
                        return Ok(None);
                    }
                    return Ok(Some(*outcome));
                }
            }
            self.wait = Wait::Step;
            let step = {
                let e = &mut node.windows[w].epoch;
                match std::mem::replace(&mut self.input, Input::Nothing) {
                    Input::Nothing => {}
                    Input::Reduced(len) => e.reduced(&self.counts[..len]),
                    Input::Finished(src, body) => e.finished(src, body),
                    Input::Arrived(from) => e.arrived(from),
                }
                e.step(&mut self.counts)
            };
            self.wait = self.start(node, step)?;
        }
    }

    /// Starts carrying out `step`.
    fn start(&mut self, node: &mut Node, step: Step) -> Result<Wait, String> {
        let me = node.me;
        let fail = |what: &str, e: &dyn std::fmt::Debug| format!("rank {me}: {what}: {e:?}");
        let w = self.w;
        Ok(match step {
            Step::SendQueued => {
                // The answers' receives first: a target answers as soon as
                // it takes the get.
                let mut gets = std::mem::take(&mut node.windows[w as usize].gets);
                for (gid, g) in gets.iter_mut().enumerate() {
                    if let Got::Asked { target, len } = *g {
                        let sel = TagSel::Tag(tag(w, self.epoch, gid as u32));
                        let q = node.irecv(Source::Rank(target), sel, CONTEXT, len as usize);
                        *g = Got::Answer(q.map_err(|e| fail("get answer", &e))?);
                    }
                }
                node.windows[w as usize].gets = gets;
                let queued = std::mem::take(&mut node.windows[w as usize].queued);
                for out in &queued {
                    send(node, w, out, &mut self.sends)?;
                }
                Wait::Step
            }
            Step::Flush => Wait::Flush,
            Step::Reduce { collective, len } => {
                let n = self.ranks as usize;
                let what = match collective {
                    Reduction::ReduceScatter => Collective::ReduceScatter { block: len / n },
                    Reduction::Allreduce => Collective::Allreduce { len },
                };
                let c = CollTask::new(node, self.ranks, what, self.counts[..len].to_vec())?;
                Wait::Collective(Box::new(c), Some(len))
            }
            Step::SendFinish { to, body } => {
                let q = node
                    .isend(to, tag(w, self.epoch, FINISH), CONTEXT, &body)
                    .map_err(|e| fail("finish", &e))?;
                self.sends.push(q);
                Wait::Step
            }
            Step::RecvFinish => {
                let sel = TagSel::Tag(tag(w, self.epoch, FINISH));
                let q = node
                    .irecv(Source::Any, sel, CONTEXT, 4)
                    .map_err(|e| fail("finish", &e))?;
                Wait::Finish(q)
            }
            // From any rank (the core counts each origin's), on the receive
            // a stalled wait posted if there is one.
            Step::Await { immediates, .. } => match self.rest.take() {
                Some((arrival, from, q)) => Wait::Rest(arrival, from, q),
                None => Wait::First {
                    q: match self.op.take() {
                        Some(q) => q,
                        None => post_op(node, w, self.epoch)?,
                    },
                    immediates,
                    cancelled: false,
                },
            },
            Step::ExpectFlags => {
                let t = tag(w, self.epoch, FLAG);
                for p in (0..self.ranks).filter(|&p| p != me) {
                    let q = node.irecv(Source::Rank(p), TagSel::Tag(t), CONTEXT, 1);
                    self.flags.push(q.map_err(|e| fail("flag", &e))?);
                }
                Wait::Step
            }
            Step::Flags => {
                let t = tag(w, self.epoch, FLAG);
                let mut reqs = std::mem::take(&mut self.flags);
                for p in (0..self.ranks).filter(|&p| p != me) {
                    let q = node.isend(p, t, CONTEXT, &[0]);
                    reqs.push(q.map_err(|e| fail("flag", &e))?);
                }
                Wait::Flags(reqs)
            }
            Step::DropFlags => {
                let reqs = std::mem::take(&mut self.flags);
                for q in &reqs {
                    node.cancel(q);
                }
                Wait::Flags(reqs)
            }
            Step::Barrier => {
                let c = CollTask::new(node, self.ranks, Collective::Barrier, Vec::new())?;
                Wait::Collective(Box::new(c), None)
            }
            Step::Done(outcome) => {
                node.windows[w as usize].src_used = 0;
                // Every operation counted came: one that matched after
                // all was announced by nobody (admission, the epoch moved
                // on, refuses it).
                if let Some(q) = self.op.take() {
                    let cancelled = node.cancel(&q);
                    let got = node.test(&q).map_err(|e| fail("operation", &e))?;
                    if let (false, Some((_, first))) = (cancelled, got) {
                        node.windows[w as usize].epoch.admit(&first);
                    }
                }
                Wait::Sent(outcome)
            }
        })
    }
}

/// Takes the gets' answers received (Def): `true` once every one is.
fn answers(node: &mut Node, gets: &mut [Got]) -> Result<bool, String> {
    for g in gets.iter_mut() {
        let Got::Answer(q) = g else {
            continue;
        };
        match node.test(q).map_err(|e| format!("{e:?}"))? {
            None => return Ok(false),
            Some((st, _)) if st.fault.is_some() => return Err(format!("{:?}", st.fault)),
            Some((_, b)) => *g = Got::Bytes(b),
        }
    }
    Ok(true)
}

/// Posts the receive of window `w`'s next operation of `epoch`, from any
/// rank.
fn post_op(node: &mut Node, w: u16, epoch: u16) -> Result<Req, String> {
    let sel = TagSel::Tag(tag(w, epoch, HEADERS));
    node.irecv(Source::Any, sel, CONTEXT, FIRST)
        .map_err(|e| format!("rank {}: operation: {e:?}", node.me))
}

/// An operation's first message from `src`: admitted and applied (a get
/// answered, the answer's send on `sends`), or the receive of its data
/// apart posted (then `Some`).
fn first_message(
    node: &mut Node,
    w: u16,
    epoch: u16,
    src: u16,
    first: &[u8],
    sends: &mut Vec<Req>,
) -> Result<Option<(Arrival, u16, Req)>, String> {
    let arrival = node.windows[w as usize].epoch.admit(first);
    match arrival.data {
        Data::Inline(_) if matches!(&arrival.admitted, Ok((h, _)) if h.kind == RmaKind::Get) => {
            let Ok((h, range)) = &arrival.admitted else {
                unreachable!()
            };
            let mem = &node.nic.user[node.windows[w as usize].mem.0 as usize];
            let b = mem[range.start as usize..range.end as usize].to_vec();
            let q = node
                .isend(src, tag(w, epoch, h.id), CONTEXT, &b)
                .map_err(|e| format!("rank {}: get answer: {e:?}", node.me))?;
            sends.push(q);
            Ok(None)
        }
        Data::Inline(n) => {
            land(
                node,
                w as usize,
                &arrival,
                &first[HEADER..HEADER + n as usize],
            );
            Ok(None)
        }
        Data::Apart(n) => {
            let sel = TagSel::Tag(tag(w, epoch, DATA));
            let q = node
                .irecv(Source::Rank(src), sel, CONTEXT, n as usize)
                .map_err(|e| format!("rank {}: operation data: {e:?}", node.me))?;
            Ok(Some((arrival, src, q)))
        }
    }
}

/// Applies an admitted operation's data to window `w` (a refused one's is
/// dropped).
fn land(node: &mut Node, w: usize, arrival: &Arrival, data: &[u8]) {
    if let Ok((h, range)) = &arrival.admitted {
        let mem = node.windows[w].mem.0 as usize;
        apply(
            &mut node.nic.user[mem],
            kind_of(h),
            range.start as usize,
            data,
        );
    }
}

fn kind_of(h: &OpHeader) -> Kind {
    match h.kind {
        RmaKind::Put => Kind::Put,
        RmaKind::Get => Kind::Get,
        _ => Kind::Add,
    }
}
