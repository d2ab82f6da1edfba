//! One simulated rank: the core's endpoint over an in-memory NIC, its
//! windows, and a CPU clock. It is a shell like any other: it hands the
//! core what arrived (charging the model's costs to its clock) and the
//! network what the core posted, and keeps the bytes of its messages in
//! buffers of its own.

use std::collections::VecDeque;

use rmx_core::onesided::imm_window;
use rmx_core::reuse::NoReuse;
use rmx_core::{
    Config, Endpoint, RecvError, Request, RequestError, SendError, Sizes, Source, Status, TagSel,
    UserBuf, WcResult, WorkId,
};

use crate::heap::Heap;
use crate::memnic::{MemNic, RdmaPost};
use crate::model::Model;
use crate::req::Req;
use crate::window::Win;

/// The endpoint a simulated rank runs.
pub type SimEndpoint = Endpoint<Heap, NoReuse>;

/// What arrived for a rank and waits for its CPU.
#[derive(Debug)]
pub enum Rx {
    Packet(Vec<u8>),
    /// A window's put with immediate landed.
    Immediate(u32),
    /// A work request finished.
    Done(u64, WcResult),
}

/// What a rank posted, for the network: a packet or an RDMA operation,
/// and when it left the CPU.
#[derive(Debug)]
pub enum ToWire {
    Packet { at: u64, to: u16, bytes: Vec<u8> },
    Rdma { at: u64, post: RdmaPost },
}

/// Slots of the NIC's send bounce buffers.
const SLOTS: usize = 16;

/// The settings of the std shell's `loop` transport (a reliable wire with
/// RDMA), or of a lossy wire with the reliability layer's timers scaled to
/// the model's microseconds.
pub fn config(lossy: bool) -> Config {
    match lossy {
        false => Config::reliable(8192, 64),
        true => Config {
            rto_ns: 50_000,
            ack_delay_ns: 5_000,
            ..Config::unreliable(8192, 16)
        },
    }
}

/// One simulated rank.
pub struct Node {
    pub me: u16,
    pub ep: SimEndpoint,
    pub nic: MemNic,
    /// The rank's virtual time: when its CPU is next free.
    pub cpu: u64,
    pub inbox: VecDeque<Rx>,
    pub windows: Vec<Win>,
    /// Collectives this rank started (the next one's number).
    pub collectives: u16,
    /// What the core posted, not yet handed to the network.
    pub posted: Vec<ToWire>,
    /// Buffers free for requests' bytes.
    free: Vec<UserBuf>,
    model: Model,
}

impl Node {
    /// Rank `me` of `ranks` under `cfg`: over a reliable wire with RDMA,
    /// or (`cfg.reliable` false) a lossy one without. Its tables are the
    /// ones the std shell sizes ([`Sizes::for_job`]), with room for a
    /// request to and from every rank (all-pairs flags) unless `requests`
    /// sizes that table, and fewer send bounce slots (a thousand ranks in
    /// one process).
    pub fn new(
        me: u16,
        ranks: u16,
        model: Model,
        cfg: Config,
        requests: Option<usize>,
    ) -> Result<Node, String> {
        let n = ranks as usize;
        let job = Sizes::for_job(ranks, &cfg);
        let sizes = Sizes {
            posted: job.posted.max(n + 64),
            requests: requests.unwrap_or(job.requests.max(2 * n + 64)),
            slots: SLOTS,
            ..job
        };
        let lossy = !cfg.reliable;
        let ep = SimEndpoint::new(cfg, me, ranks, rmx_core::Tables::new(&sizes))
            .map_err(|e| format!("config: {e:?}"))?;
        let eager = cfg.eager_threshold as usize;
        let mut nic = MemNic::new(SLOTS, eager + 64);
        if !lossy {
            nic = nic.with_rdma(1 << 24);
            nic.caps.write_imm = true;
            nic.windows = true;
        }
        Ok(Node {
            me,
            ep,
            nic,
            cpu: 0,
            inbox: VecDeque::new(),
            windows: Vec::new(),
            collectives: 0,
            posted: Vec::new(),
            free: Vec::new(),
            model,
        })
    }

    /// The costs the rank runs under.
    pub fn model(&self) -> &crate::model::Model {
        &self.model
    }

    /// A step every rank takes part in (a collective, a fence) starts: the
    /// core watches every rank while it runs, as the std shell's runner
    /// has it; a group that lost a rank already refuses the step.
    pub fn watch_group(&mut self, what: &str) -> Result<(), String> {
        if !self.ep.group_intact() {
            return Err(self.group_lost(what));
        }
        self.ep.watch_all(self.cpu);
        Ok(())
    }

    /// What a poll of such a step returned (`waiting`: not done yet), as
    /// the step ends it: a wait once the group lost a rank fails (the rank
    /// it waits on may have left the step for good), and the watch ends
    /// with the step.
    pub fn watched<T: PartialEq>(
        &mut self,
        what: &str,
        waiting: T,
        polled: Result<T, String>,
    ) -> Result<T, String> {
        let polled = match polled {
            Ok(w) if w == waiting && !self.ep.group_intact() => Err(self.group_lost(what)),
            r => r,
        };
        if polled.as_ref().map_or(true, |w| *w != waiting) {
            self.ep.unwatch_all();
        }
        polled
    }

    fn group_lost(&self, what: &str) -> String {
        format!(
            "rank {}: {what}: PeerFailed (the group lost a rank)",
            self.me
        )
    }

    /// Spends `ns` of CPU.
    pub fn spend(&mut self, ns: u64) {
        self.cpu += ns;
    }

    /// Takes what the NIC holds for the network, each post costing `o`.
    pub fn collect(&mut self) {
        let o = self.model.overhead_ns;
        for (to, bytes) in std::mem::take(&mut self.nic.outbox) {
            self.spend(o);
            self.posted.push(ToWire::Packet {
                at: self.cpu,
                to,
                bytes,
            });
        }
        for post in std::mem::take(&mut self.nic.rdma_out) {
            self.spend(o);
            self.posted.push(ToWire::Rdma { at: self.cpu, post });
        }
    }

    /// Hands the core everything that arrived, then whatever timer is
    /// due: one progress round at the rank's time.
    pub fn progress(&mut self) {
        while let Some(rx) = self.inbox.pop_front() {
            match rx {
                Rx::Packet(bytes) => {
                    self.spend(self.model.overhead_ns);
                    let buf = self.nic.deliver(bytes);
                    self.ep.on_receive(self.cpu, &mut self.nic, buf);
                }
                Rx::Immediate(imm) => {
                    self.spend(self.model.immediate_ns);
                    if let Some(w) = self.windows.get_mut(imm_window(imm) as usize) {
                        w.epoch.on_immediate(imm);
                    }
                }
                Rx::Done(wr_id, result) => {
                    let taken = match WorkId::from_wr_id(wr_id) {
                        Some(work @ WorkId::Window { window, .. }) => self
                            .windows
                            .get_mut(window as usize)
                            .is_some_and(|w| w.epoch.on_completion(work, result)),
                        _ => false,
                    };
                    if !taken {
                        self.ep.on_completion(&mut self.nic, wr_id, result);
                    }
                }
            }
            self.collect();
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= self.cpu) {
            self.ep.poll(self.cpu, &mut self.nic);
            self.collect();
        }
    }

    /// A buffer of at least `len` bytes for a request.
    fn buffer(&mut self, len: usize) -> UserBuf {
        let fits = |b: &UserBuf, nic: &MemNic| nic.user[b.0 as usize].len() >= len;
        if let Some(i) = self.free.iter().position(|b| fits(b, &self.nic)) {
            return self.free.swap_remove(i);
        }
        self.nic.user_buf(vec![0; len.next_power_of_two().max(64)])
    }

    /// Sends `bytes` to `to`.
    pub fn isend(&mut self, to: u16, tag: u32, ctx: u16, bytes: &[u8]) -> Result<Req, SendError> {
        let buf = self.buffer(bytes.len());
        self.nic.user[buf.0 as usize][..bytes.len()].copy_from_slice(bytes);
        let len = bytes.len() as u32;
        let r = self
            .ep
            .isend(self.cpu, &mut self.nic, to, tag, ctx, buf, len);
        self.collect();
        match r {
            Ok(req) => Ok(Req { req, buf }),
            Err(e) => {
                self.free.push(buf);
                Err(e)
            }
        }
    }

    /// Receives up to `len` bytes.
    pub fn irecv(
        &mut self,
        src: Source,
        tag: TagSel,
        ctx: u16,
        len: usize,
    ) -> Result<Req, RecvError> {
        let buf = self.buffer(len);
        let r = self
            .ep
            .irecv(self.cpu, &mut self.nic, src, tag, ctx, buf, len as u32);
        self.collect();
        match r {
            Ok(req) => Ok(Req { req, buf }),
            Err(e) => {
                self.free.push(buf);
                Err(e)
            }
        }
    }

    /// A finished request's status and the bytes it received (none for a
    /// send); its buffer is free again. `None` while it runs.
    pub fn test(&mut self, q: &Req) -> Result<Option<(Status, Vec<u8>)>, RequestError> {
        let st = if q.req == Request::COMPLETE {
            None
        } else {
            match self.ep.test(q.req)? {
                None => return Ok(None),
                Some(st) => Some(st),
            }
        };
        let bytes = match st {
            Some(st) if st.len > 0 => self.nic.user[q.buf.0 as usize][..st.len as usize].to_vec(),
            _ => Vec::new(),
        };
        self.free.push(q.buf);
        let sent = Status {
            source: self.me,
            tag: 0,
            len: 0,
            fault: None,
        };
        Ok(Some((st.unwrap_or(sent), bytes)))
    }

    /// Cancels a receive not yet matched: `true` if it was.
    pub fn cancel(&mut self, q: &Req) -> bool {
        self.ep.cancel(q.req).unwrap_or(false)
    }
}
