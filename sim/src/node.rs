//! One simulated rank: the core's endpoint over the driver's adapter and
//! the simulator's port ([`crate::port`]), its windows, and the buffers of
//! its messages. It is a shell like any other: the driver's progress
//! round hands the core what arrived, the port charges the model's costs
//! to the rank's clock and keeps what was posted for the network.

use rmx_core::reuse::NoReuse;
use rmx_core::{
    Config, Endpoint, RecvError, Request, RequestError, SendError, Sizes, Source, Status, TagSel,
    UserBuf, WcResult, WorkId,
};
use rmx_driver::{Adapter, Completion, Plain, Windows};

use crate::heap::Heap;
use crate::mem::Buf;
use crate::model::Model;
use crate::port::SimPort;
use crate::req::Req;
use crate::window::Win;

/// The endpoint a simulated rank runs.
pub type SimEndpoint = Endpoint<Heap, NoReuse>;

/// The core's NIC of a simulated rank: the driver's adapter over its port.
pub type SimNic = Adapter<SimPort, Plain, Heap>;

/// Slots of the NIC's send bounce buffers.
const SLOTS: usize = 16;

/// Completions taken per poll of the port.
const WCS: usize = 16;

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
    pub nic: SimNic,
    pub windows: Vec<Win>,
    /// Collectives this rank started (the next one's number).
    pub collectives: u16,
    /// The memory behind each user buffer the adapter names, by handle.
    pub(crate) mem: Vec<Option<Buf>>,
    /// Buffers free for requests' bytes.
    free: Vec<UserBuf>,
    wcs: [Completion; WCS],
    lossy: bool,
    model: Model,
}

/// The memory behind user buffer `b` among a rank's (for callers that
/// borrow the rank's windows at the same time).
pub(crate) fn buf(mem: &[Option<Buf>], b: UserBuf) -> &Buf {
    mem[b.0 as usize].as_ref().expect("a buffer the rank made")
}

pub(crate) fn buf_mut(mem: &mut [Option<Buf>], b: UserBuf) -> &mut Buf {
    mem[b.0 as usize].as_mut().expect("a buffer the rank made")
}

/// A rank's windows as its progress hands them one-sided events.
struct Epochs<'a>(&'a mut [Win]);

impl Windows for Epochs<'_> {
    fn on_completion(&mut self, window: u16, work: WorkId, result: WcResult) -> bool {
        self.0
            .get_mut(window as usize)
            .is_some_and(|w| w.epoch.on_completion(work, result))
    }

    fn on_immediate(&mut self, window: u16, imm: u32) {
        if let Some(w) = self.0.get_mut(window as usize) {
            w.epoch.on_immediate(imm);
        }
    }
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
        let slots = vec![0; SLOTS * SimNic::slot_size(eager)];
        // A row for every request's buffer, kept or free, and the windows'.
        let rows = 2 * sizes.requests + 64;
        let users = vec![rmx_driver::UserEntry::default(); rows];
        let regs = vec![None; rows];
        let port = SimPort::new(model, lossy);
        // SAFETY: the slots are a vector's heap buffer, moved into the
        // adapter and never reallocated.
        let nic = unsafe { SimNic::new(port, Plain, eager, slots, users, regs) }
            .map_err(|e| format!("adapter: {e:?}"))?;
        Ok(Node {
            me,
            ep,
            nic,
            windows: Vec::new(),
            collectives: 0,
            mem: Vec::new(),
            free: Vec::new(),
            wcs: [Completion {
                wr_id: 0,
                result: Ok(()),
            }; WCS],
            lossy,
            model,
        })
    }

    /// The costs the rank runs under.
    pub fn model(&self) -> &crate::model::Model {
        &self.model
    }

    /// The rank's virtual time: when its CPU is next free.
    pub fn cpu(&self) -> u64 {
        self.nic.port_ref().cpu
    }

    /// The rank's port (its clock, what it posted, what arrived).
    pub fn port(&mut self) -> &mut SimPort {
        self.nic.port()
    }

    /// Spends `ns` of CPU.
    pub fn spend(&mut self, ns: u64) {
        self.port().cpu += ns;
    }

    /// One progress round at the rank's time, the driver's as every
    /// shell's (the port charges each packet taken), then whatever timer
    /// is due.
    pub fn progress(&mut self) {
        let t = self.cpu();
        let mut now = t;
        let mut wins = Epochs(&mut self.windows);
        let (ep, nic, wcs) = (&mut self.ep, &mut self.nic, &mut self.wcs);
        rmx_driver::progress(ep, nic, &mut wins, wcs, &mut now, self.lossy, || t);
        let cpu = self.cpu();
        if self.ep.poll_timeout().is_some_and(|t| t <= cpu) {
            self.ep.poll(cpu, &mut self.nic);
        }
    }

    /// A new user buffer of `len` zero bytes, named to the adapter.
    pub fn user_buf(&mut self, len: usize) -> UserBuf {
        let mut b = Buf::zeroed(len);
        // SAFETY: the buffer lives in `mem` until the rank drops, after
        // its adapter (declared first) has drained the port.
        let h = unsafe { self.nic.add_user(b.as_ptr() as usize, b.len()) }
            .expect("the simulator sizes its user table for every request and window");
        let i = h.0 as usize;
        if self.mem.len() <= i {
            self.mem.resize_with(i + 1, || None);
        }
        self.mem[i] = Some(b);
        h
    }

    /// The memory behind user buffer `b`.
    pub fn mem(&self, b: UserBuf) -> &Buf {
        buf(&self.mem, b)
    }

    pub fn mem_mut(&mut self, b: UserBuf) -> &mut Buf {
        buf_mut(&mut self.mem, b)
    }

    /// A buffer of at least `len` bytes for a request.
    fn buffer(&mut self, len: usize) -> UserBuf {
        let fits = |b: &UserBuf| self.mem(*b).len() >= len;
        if let Some(i) = self.free.iter().position(fits) {
            return self.free.swap_remove(i);
        }
        self.user_buf(len.next_power_of_two().max(64))
    }

    /// Sends `bytes` to `to`.
    pub fn isend(&mut self, to: u16, tag: u32, ctx: u16, bytes: &[u8]) -> Result<Req, SendError> {
        let buf = self.buffer(bytes.len());
        self.mem_mut(buf).bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        let len = bytes.len() as u32;
        let cpu = self.cpu();
        let r = self.ep.isend(cpu, &mut self.nic, to, tag, ctx, buf, len);
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
        let cpu = self.cpu();
        let r = self
            .ep
            .irecv(cpu, &mut self.nic, src, tag, ctx, buf, len as u32);
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
            Some(st) if st.len > 0 => self.mem(q.buf).bytes()[..st.len as usize].to_vec(),
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
