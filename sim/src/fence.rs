//! Windows of a simulated rank and their fences, carried out as the core's
//! [`Epoch`] says: the same steps the std shell's `window/fence.rs` takes,
//! without blocking (a step that waits returns, and the job wakes the rank
//! when something arrives).

use std::ops::Range;
use std::task::Poll;

use rmx_core::collective::{reduce, Collective, Int, Op};
use rmx_core::onesided::{
    channel::{DATA, HEADERS},
    tag, Descriptor, Design, Epoch, EpochError, OpHeader, Outcome, RmaKind, Target, Window,
    CONTEXT,
};
use rmx_core::{Gather, MemKey, Remote};
use rmx_driver::task::{Bytes, FenceHost, Messages, Outgoing as Parts, Reply};

use crate::collective::CollTask;
use crate::messages::TaskReq;
use crate::node::{buf, buf_mut, Node};
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
            let mem = n.user_buf(len);
            let addr = n.mem(mem).addr();
            let remote = if design.immediate() {
                let k = register(n, addr, len)?;
                Remote {
                    addr: addr as u64,
                    key: k,
                }
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
            let s = n.user_buf(src_len);
            let sa = n.mem(s).addr();
            let sk = match design.immediate() {
                true => register(n, sa, src_len.max(1))?,
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
                src: (s, sa as u64, sk),
                src_used: 0,
                gets: Vec::new(),
            });
        }
        Ok(())
    }

    /// The window's bytes.
    pub fn bytes<'a>(&self, node: &'a Node) -> &'a [u8] {
        &node.mem(self.mem).bytes()[..self.len]
    }
}

/// Registers a window's memory (or its epochs' source) for RDMA.
fn register(n: &mut Node, addr: usize, len: usize) -> Result<MemKey, String> {
    // SAFETY: the rank's buffers live as long as the rank, and its
    // adapter, dropped first, ends every registration it holds.
    let mr = unsafe { n.nic.register_kept(addr, len) }.map_err(|e| format!("{e:?}"))?;
    Ok(MemKey(mr.key))
}

/// The bytes of the gets of window `w`'s epoch the last fence ended, in
/// the order they were issued (taken: the next epoch's start afresh).
pub fn take_gets(node: &mut Node, w: u16) -> Result<Vec<Vec<u8>>, String> {
    let win = &mut node.windows[w as usize];
    let src = buf(&node.mem, win.src.0).bytes();
    std::mem::take(&mut win.gets)
        .into_iter()
        .map(|g| match g {
            Got::Bytes(b) => Ok(b),
            Got::Read { at, len } => Ok(src[at..at + len].to_vec()),
            Got::Asked { .. } | Got::Answer { .. } => Err("a get the fence did not end".into()),
        })
        .collect()
}

/// Issues `op` on window `w` of `node`: an RDMA put, or the operation's
/// messages now (immediate designs), queued for the fence (deferred), or
/// applied here (its own window). Message requests go on `sends`.
pub fn issue(node: &mut Node, w: u16, op: &RmaOp, sends: &mut Vec<Req>) -> Result<(), String> {
    let me = node.me;
    let Node { windows, mem, .. } = &mut *node;
    let win = &mut windows[w as usize];
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
            let b = buf(mem, win.mem).bytes()[at..at + len].to_vec();
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
        let m = buf_mut(mem, win.mem);
        apply(m.bytes_mut(), op.kind, h.offset as usize, &op.data);
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
        node.mem_mut(buf).bytes_mut()[at..at + len].copy_from_slice(data);
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

/// The fence's own buffers: the bytes the driver task is lent, the
/// operations it sends, the gets it receives answers to (their places in
/// the window's list), its answers to others' gets and an operation's data.
#[derive(Default)]
struct Io {
    mem: Vec<u8>,
    outgoing: Vec<Outgoing>,
    replies: Vec<usize>,
    answers: Vec<Vec<u8>>,
    data: Vec<u8>,
}

/// One rank's fence of one window: the driver layer's task, the one every
/// shell runs, or (for the hazard's sake) the strawman.
pub struct FenceTask {
    w: u16,
    io: Io,
    how: How,
}

enum How {
    Task(Box<rmx_driver::task::FenceTask<TaskReq, Vec<Option<TaskReq>>>>),
    /// Local completion, then a barrier: not a design.
    Strawman {
        sends: Vec<TaskReq>,
        barrier: Option<Box<CollTask>>,
    },
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
        let me = node.me;
        let sends: Vec<TaskReq> = sends.into_iter().map(TaskReq::sent).collect();
        let (no_precede, no_succeed) = match fence {
            Fence::Strawman => {
                let how = How::Strawman {
                    sends,
                    barrier: None,
                };
                let io = Io::default();
                return Ok(FenceTask { w, io, how });
            }
            Fence::Plain => (false, false),
            Fence::Assert {
                no_precede,
                no_succeed,
            } => (no_precede, no_succeed),
        };
        let e = &mut node.windows[w as usize].epoch;
        e.fence(no_precede, no_succeed)
            .map_err(|x| format!("rank {me}: fence: {x:?}"))?;
        let (design, gets) = (e.design(), e.gets());
        let layout = rmx_driver::task::FenceLayout::new(design, ranks, me);
        type Task = rmx_driver::task::FenceTask<TaskReq, Vec<Option<TaskReq>>>;
        let mut io = Io {
            mem: vec![0; layout.bytes()],
            ..Io::default()
        };
        let want = Task::slots_len(ranks, gets, sends.len());
        let mut slots: Vec<Option<TaskReq>> = sends.into_iter().map(Some).collect();
        slots.resize_with(want, || None);
        let (ptr, len) = (io.mem.as_mut_ptr(), io.mem.len());
        let mut host = Host {
            node,
            w,
            io: &mut io,
        };
        let seq = host.node.collectives;
        host.node.collectives = seq.wrapping_add(Task::COLLECTIVES);
        // SAFETY: `io` and the window's memory and gets live in the task's
        // holder and the rank, polled to the task's end (a job that fails
        // drops every rank at once).
        let task = unsafe { Task::start(&mut host, layout, ptr, len, slots, seq) };
        let how = How::Task(Box::new(task));
        Ok(FenceTask { w, io, how })
    }

    /// Moves the fence on as far as it goes now: its outcome once done.
    pub fn poll(&mut self, node: &mut Node) -> Result<Option<Outcome>, String> {
        let me = node.me;
        let w = self.w;
        match &mut self.how {
            How::Task(task) => {
                let mut host = Host {
                    node,
                    w,
                    io: &mut self.io,
                };
                match task.poll(&mut host) {
                    Poll::Pending => Ok(None),
                    Poll::Ready(r) => {
                        let win = &mut node.windows[w as usize];
                        win.src_used = 0;
                        for g in &mut win.gets {
                            if let Got::Answer { buf, .. } = g {
                                *g = Got::Bytes(std::mem::take(buf));
                            }
                        }
                        let f = r.map_err(|e| format!("rank {me}: fence: {e} ({e:?})"))?;
                        match f.fault {
                            Some(fault) => Err(format!("rank {me}: fence: {fault:?}")),
                            None => Ok(Some(f.outcome)),
                        }
                    }
                }
            }
            How::Strawman { sends, barrier } => {
                if barrier.is_none() {
                    if node.windows[w as usize].epoch.in_flight() > 0 {
                        return Ok(None);
                    }
                    let ranks = node.windows[w as usize].epoch.group();
                    let c = CollTask::new(node, ranks, Collective::Barrier, Vec::new())?;
                    *barrier = Some(Box::new(c));
                }
                if !barrier.as_mut().expect("started").poll(node)? {
                    return Ok(None);
                }
                while let Some(q) = sends.pop() {
                    match Messages::test(node, q) {
                        Ok(_) => {}
                        Err(q) => {
                            sends.push(q);
                            return Ok(None);
                        }
                    }
                }
                let win = &mut node.windows[w as usize];
                win.epoch.abort();
                win.src_used = 0;
                Ok(Some(Outcome {
                    failed: 0,
                    disagree: false,
                    false_assertion: false,
                }))
            }
        }
    }
}

/// A simulated rank's window as its fence sees it.
struct Host<'a> {
    node: &'a mut Node,
    w: u16,
    io: &'a mut Io,
}

impl Host<'_> {
    fn win(&mut self) -> &mut Win {
        &mut self.node.windows[self.w as usize]
    }
}

impl FenceHost for Host<'_> {
    type Rank = Node;
    type Targets = Vec<Target>;

    fn rank(&mut self) -> &mut Node {
        self.node
    }

    fn epoch(&mut self) -> &mut Epoch<Vec<Target>> {
        &mut self.win().epoch
    }

    fn send_queued(&mut self) {
        // Operations on the rank's own window were applied when issued.
        let win = &mut self.node.windows[self.w as usize];
        self.io.outgoing = std::mem::take(&mut win.queued);
        for (i, g) in win.gets.iter_mut().enumerate() {
            if let Got::Asked { target, len } = *g {
                let buf = vec![0; len as usize];
                *g = Got::Answer { target, buf };
                self.io.replies.push(i);
            }
        }
    }

    fn outgoing(&mut self, i: usize) -> Option<Parts> {
        self.io.outgoing.get(i).map(|o| Parts {
            target: o.target,
            first: Bytes::of(&o.first),
            rest: Bytes::of(&o.rest),
        })
    }

    fn reply(&mut self, i: usize) -> Option<Reply> {
        let gid = *self.io.replies.get(i)?;
        let win = &mut self.node.windows[self.w as usize];
        match &mut win.gets[gid] {
            Got::Answer { target, buf } => Some(Reply::new(*target, gid as u32, buf)),
            _ => None,
        }
    }

    fn data(&mut self, len: usize) -> *mut u8 {
        self.io.data.clear();
        self.io.data.resize(len, 0);
        self.io.data.as_mut_ptr()
    }

    fn apply(&mut self, h: &OpHeader, range: Range<u64>, data: &[u8]) {
        let mem = self.win().mem;
        let at = range.start as usize;
        apply(self.node.mem_mut(mem).bytes_mut(), kind_of(h), at, data);
    }

    fn answer(&mut self, range: Range<u64>) -> *const u8 {
        let mem = self.win().mem;
        let (at, end) = (range.start as usize, range.end as usize);
        let b = self.node.mem(mem).bytes()[at..end].to_vec();
        self.io.answers.push(b);
        self.io.answers.last().expect("just pushed").as_ptr()
    }
}

fn kind_of(h: &OpHeader) -> Kind {
    match h.kind {
        RmaKind::Put => Kind::Put,
        RmaKind::Get => Kind::Get,
        _ => Kind::Add,
    }
}
