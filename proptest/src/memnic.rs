//! An in-memory [`Nic`] for the core's own tests: vectors for every memory
//! object, an outbox for posts, and knobs for every fate a post can meet
//! (busy, refused, completed later, unsignalled). The simulator's ranks
//! run the driver's adapter over a port instead (`rmx_sim::port`).

use rmx_core::wire::HEADER_LEN;
use std::collections::HashMap;

use rmx_core::{
    Caps, Gather, Loc, MemKey, Nic, PostError, Posted, RdmaError, RdmaOp, RegError, Remote, RxBuf,
    SlotId, UserBuf, WorkId,
};

/// Memory and posts of one simulated rank.
pub struct MemNic {
    pub slots: Vec<Vec<u8>>,
    pub rx: Vec<Option<Vec<u8>>>,
    pub user: Vec<Vec<u8>>,
    /// Packets posted and not yet taken by the network: (destination, bytes).
    pub outbox: Vec<(u16, Vec<u8>)>,
    /// Reject posts with `Busy` while set.
    pub busy: bool,
    /// Refuse every send (from a slot, gathered or inline) with this
    /// error while set, as a NIC refuses a bad key or an invalid request.
    pub refuse: Option<PostError>,
    /// Reject posts to these peers with `Down` (their connection is gone).
    pub down: Vec<u16>,
    /// Report posted sends as completing later (`Posted::Later`).
    pub later: bool,
    /// Accept inline sends (else the trait's default: unsupported).
    pub inline: bool,
    /// With `later`: an inline send posted unsignalled owes its completion
    /// only at the next signalled post to its peer (before that one's), as
    /// a verbs queue pair completes in order.
    pub unsignalled: bool,
    /// Unsignalled inline sends per peer whose completion is not yet owed.
    quiet: HashMap<u16, usize>,
    pub inline_sent: usize,
    /// Of those, sent from bytes handed over (`send_inline_bytes`).
    pub bytes_inline: usize,
    /// Every receive buffer handed back, in order.
    pub reposted: Vec<u32>,
    /// Simulated address of each user buffer (for the reuse tracker).
    pub user_addr: Vec<u64>,
    next_addr: u64,
    /// Live registrations: key -> (start, len).
    pub regs: HashMap<u32, (u64, u64)>,
    next_key: u32,
    pub registrations: usize,
    pub deregistrations: usize,
    /// Refuse registrations (as an exhausted memlock limit would).
    pub refuse_registration: bool,
    /// Payloads gathered straight from user buffers.
    pub gathered: usize,
    /// With `later`: the completion each posted packet owes, in outbox order
    /// (the network reports it once it delivered the packet).
    pub owed: Vec<WorkId>,
    /// With `later`: refuse a post (`Busy`) while this many sends to one peer
    /// are uncompleted, as a send queue of that depth would.
    pub sq_depth: Option<usize>,
    uncompleted: Vec<u16>,
    /// What the NIC reports it can do (default: messages only).
    pub caps: Caps,
    /// RDMA operations posted and not yet carried out by [`execute_rdma`].
    pub rdma_out: Vec<RdmaPost>,
    /// Refuse RDMA posts with `Busy` while set.
    pub rdma_busy: bool,
    /// Take windows' RDMA (`WorkId::Window`) too, not only the endpoint's.
    pub windows: bool,
}

/// A posted RDMA operation, waiting for the test or simulator to run it.
#[derive(Clone, Copy, Debug)]
pub struct RdmaPost {
    pub peer: u16,
    pub op: RdmaOp,
    /// The work request (an endpoint's transfer, or a window's operation),
    /// as its completion reports it.
    pub work: WorkId,
    /// A write with immediate: the value the target's receive queue reports.
    pub imm: Option<u32>,
    pub local: Gather,
    pub remote: Remote,
}

/// Carries out `p`, posted by `me` to `peer`, checking both keys and bounds
/// as a NIC does; the result is what the completion reports.
pub fn execute_rdma(me: &mut MemNic, peer: &mut MemNic, p: &RdmaPost) -> Result<(), RdmaError> {
    if !me.covers(p.local.key, p.local.addr, p.local.len)
        || !peer.covers(p.remote.key, p.remote.addr, p.local.len)
    {
        return Err(RdmaError::Access);
    }
    let n = p.local.len as usize;
    match p.op {
        RdmaOp::Write => {
            let data = me.read_at(p.local.addr, n);
            peer.write_at(p.remote.addr, &data);
        }
        RdmaOp::Read => {
            let data = peer.read_at(p.remote.addr, n);
            me.write_at(p.local.addr, &data);
        }
    }
    Ok(())
}

impl MemNic {
    /// Whether registration `key` covers `[addr, addr+len)`, as a NIC checks
    /// a key before it reads or writes.
    pub fn covers(&self, key: MemKey, addr: u64, len: u32) -> bool {
        self.regs.get(&key.0).is_some_and(|&(s, l)| {
            // Addresses come from the wire: a range that wraps covers nothing.
            addr.checked_add(u64::from(len))
                .is_some_and(|end| s <= addr && end <= s + l)
        })
    }

    pub fn new(slots: usize, slot_size: usize) -> MemNic {
        MemNic {
            slots: vec![vec![0; slot_size]; slots],
            rx: Vec::new(),
            user: Vec::new(),
            outbox: Vec::new(),
            busy: false,
            refuse: None,
            down: Vec::new(),
            later: false,
            inline: false,
            unsignalled: false,
            quiet: HashMap::new(),
            inline_sent: 0,
            bytes_inline: 0,
            reposted: Vec::new(),
            user_addr: Vec::new(),
            next_addr: 0x1000_0000,
            regs: HashMap::new(),
            next_key: 1,
            registrations: 0,
            deregistrations: 0,
            refuse_registration: false,
            gathered: 0,
            owed: Vec::new(),
            sq_depth: None,
            uncompleted: Vec::new(),
            caps: Caps::default(),
            rdma_out: Vec::new(),
            rdma_busy: false,
            windows: false,
        }
    }

    /// A NIC that can do RDMA write and read, in operations of at most `max` bytes.
    pub fn with_rdma(mut self, max: u32) -> MemNic {
        self.caps = Caps {
            rdma_write: true,
            rdma_read: true,
            max_transfer: max,
            ..Caps::default()
        };
        self
    }

    /// Which user buffer holds `[addr, addr+len)`, and the offset there.
    fn find(&self, addr: u64, len: usize) -> (usize, usize) {
        let i = (0..self.user.len())
            .rev()
            .find(|&i| {
                let a = self.user_addr[i];
                a <= addr && addr + len as u64 <= a + self.user[i].len() as u64
            })
            .expect("memory no user buffer holds");
        (i, (addr - self.user_addr[i]) as usize)
    }

    /// Writes `data` at simulated address `addr` (inside one user buffer).
    pub fn write_at(&mut self, addr: u64, data: &[u8]) {
        let (i, o) = self.find(addr, data.len());
        self.user[i][o..o + data.len()].copy_from_slice(data);
    }

    fn posted(&mut self, peer: u16, t: WorkId) -> Posted {
        if !self.later {
            return Posted::Done;
        }
        self.release_quiet(peer);
        self.owed.push(t);
        self.uncompleted.push(peer);
        Posted::Later
    }

    /// A signalled post to `peer`: the unsignalled sends before it now
    /// owe their completions.
    fn release_quiet(&mut self, peer: u16) {
        let n = self.quiet.remove(&peer).unwrap_or(0);
        self.owed.extend((0..n).map(|_| WorkId::Inline(peer)));
    }

    /// Unsignalled inline sends to `peer` that wait for a signalled post.
    pub fn quiet(&self, peer: u16) -> usize {
        self.quiet.get(&peer).copied().unwrap_or(0)
    }

    fn limit_reached(&self, peer: u16) -> bool {
        self.sq_depth
            .is_some_and(|d| self.uncompleted.iter().filter(|&&p| p == peer).count() >= d)
    }

    /// The send to `peer` that completed first is done (for `sq_depth`).
    pub fn completed(&mut self, peer: u16) {
        if let Some(i) = self.uncompleted.iter().position(|&p| p == peer) {
            self.uncompleted.remove(i);
        }
    }

    /// A user buffer holding `bytes`, placed after the previous one.
    pub fn user_buf(&mut self, bytes: Vec<u8>) -> UserBuf {
        let addr = self.next_addr;
        self.user_buf_at(addr, bytes)
    }

    /// A user buffer holding `bytes` at simulated address `addr`.
    pub fn user_buf_at(&mut self, addr: u64, bytes: Vec<u8>) -> UserBuf {
        self.next_addr = self
            .next_addr
            .max(addr + (bytes.len() as u64).div_ceil(64) * 64 + 64);
        self.user.push(bytes);
        self.user_addr.push(addr);
        UserBuf(self.user.len() as u32 - 1)
    }

    /// The bytes at simulated `[addr, addr+len)`, from the newest buffer there.
    pub fn read_at(&self, addr: u64, len: usize) -> Vec<u8> {
        let (i, o) = self.find(addr, len);
        self.user[i][o..o + len].to_vec()
    }

    /// Places a packet in a receive buffer.
    pub fn deliver(&mut self, bytes: Vec<u8>) -> RxBuf {
        if let Some(i) = self.rx.iter().position(Option::is_none) {
            self.rx[i] = Some(bytes);
            return RxBuf(i as u32);
        }
        self.rx.push(Some(bytes));
        RxBuf(self.rx.len() as u32 - 1)
    }

    fn rdma(
        &mut self,
        peer: u16,
        work: WorkId,
        op: RdmaOp,
        local: Gather,
        remote: Remote,
        imm: Option<u32>,
    ) -> Result<Posted, PostError> {
        match work {
            WorkId::Rdma(_) => {}
            // A window's operation, where windows are modelled.
            WorkId::Window { .. } if self.windows => {}
            _ => return Err(PostError::Unsupported),
        }
        if !(self.caps.rdma_read || self.caps.rdma_write) {
            return Err(PostError::Unsupported);
        }
        assert!(
            local.len <= self.caps.max_transfer,
            "an RDMA operation above the transport's maximum"
        );
        if self.down.contains(&peer) {
            return Err(PostError::Down);
        }
        if self.rdma_busy {
            return Err(PostError::Busy);
        }
        if self.later {
            self.release_quiet(peer);
        }
        self.rdma_out.push(RdmaPost {
            peer,
            op,
            work,
            imm,
            local,
            remote,
        });
        Ok(Posted::Later)
    }

    fn place(&mut self, l: Loc) -> (&mut [u8], usize) {
        match l {
            Loc::Slot(s, o) => (&mut self.slots[s.0 as usize], o as usize),
            Loc::Rx(b, o) => (
                self.rx[b.0 as usize].as_mut().expect("rx buffer in use"),
                o as usize,
            ),
            Loc::User(b, o) => (&mut self.user[b.0 as usize], o as usize),
        }
    }
}

impl Nic for MemNic {
    fn slot_mut(&mut self, slot: SlotId) -> &mut [u8] {
        &mut self.slots[slot.0 as usize]
    }
    fn rx(&self, buf: RxBuf) -> &[u8] {
        self.rx[buf.0 as usize]
            .as_deref()
            .expect("rx buffer in use")
    }
    fn copy(&mut self, dst: Loc, src: Loc, len: usize) {
        let (v, o) = self.place(src);
        let data = v[o..o + len].to_vec();
        let (v, o) = self.place(dst);
        v[o..o + len].copy_from_slice(&data);
    }
    fn post_send(&mut self, peer: u16, slot: SlotId, len: usize) -> Result<Posted, PostError> {
        if self.down.contains(&peer) {
            return Err(PostError::Down);
        }
        if let Some(e) = self.refuse {
            return Err(e);
        }
        if self.busy {
            return Err(PostError::Busy);
        }
        if self.limit_reached(peer) {
            return Err(PostError::Busy);
        }
        let bytes = self.slots[slot.0 as usize][..len].to_vec();
        self.outbox.push((peer, bytes));
        Ok(self.posted(peer, WorkId::Send(slot)))
    }
    fn repost(&mut self, buf: RxBuf) {
        self.rx[buf.0 as usize] = None;
        self.reposted.push(buf.0);
    }
    fn user_addr(&self, buf: UserBuf) -> Option<u64> {
        self.user_addr.get(buf.0 as usize).copied()
    }
    fn register(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        if self.refuse_registration {
            return Err(RegError::NoResources);
        }
        let key = self.next_key;
        self.next_key += 1;
        self.regs.insert(key, (addr, len));
        self.registrations += 1;
        Ok(MemKey(key))
    }
    fn deregister(&mut self, key: MemKey) {
        assert!(
            self.regs.remove(&key.0).is_some(),
            "deregistered an unknown key"
        );
        self.deregistrations += 1;
    }
    fn caps(&self) -> Caps {
        self.caps
    }
    fn post_rdma(
        &mut self,
        peer: u16,
        work: WorkId,
        op: RdmaOp,
        local: Gather,
        remote: Remote,
    ) -> Result<Posted, PostError> {
        self.rdma(peer, work, op, local, remote, None)
    }
    fn post_write_imm(
        &mut self,
        peer: u16,
        work: WorkId,
        local: Gather,
        remote: Remote,
        imm: u32,
    ) -> Result<Posted, PostError> {
        if !self.caps.write_imm {
            return Err(PostError::Unsupported);
        }
        self.rdma(peer, work, RdmaOp::Write, local, remote, Some(imm))
    }
    fn post_send_gather(
        &mut self,
        peer: u16,
        slot: SlotId,
        header_len: usize,
        payload: Gather,
    ) -> Result<Posted, PostError> {
        if let Some(e) = self.refuse {
            return Err(e);
        }
        if self.busy {
            return Err(PostError::Busy);
        }
        let (start, len) = *self
            .regs
            .get(&payload.key.0)
            .expect("gather through a key that is not registered");
        assert!(
            start <= payload.addr && payload.addr + payload.len as u64 <= start + len,
            "gather outside its registration"
        );
        let mut bytes = self.slots[slot.0 as usize][..header_len].to_vec();
        bytes.extend_from_slice(&self.read_at(payload.addr, payload.len as usize));
        self.outbox.push((peer, bytes));
        self.gathered += 1;
        Ok(self.posted(peer, WorkId::Send(slot)))
    }
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        payload: Loc,
        len: usize,
        signal: bool,
    ) -> Result<Posted, PostError> {
        self.inline_ready(peer)?;
        let (v, o) = self.place(payload);
        let body = v[o..o + len].to_vec();
        self.inline_out(peer, header, &body, signal)
    }
    fn send_inline_bytes(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        body: &[u8],
        signal: bool,
    ) -> Result<Posted, PostError> {
        self.inline_ready(peer)?;
        self.bytes_inline += 1;
        self.inline_out(peer, header, body, signal)
    }
}

impl MemNic {
    /// Whether an inline send to `peer` may be posted now.
    fn inline_ready(&self, peer: u16) -> Result<(), PostError> {
        if !self.inline {
            return Err(PostError::Unsupported);
        }
        if let Some(e) = self.refuse {
            return Err(e);
        }
        if self.busy || self.limit_reached(peer) {
            return Err(PostError::Busy);
        }
        Ok(())
    }

    /// An inline send of `header` and `body` put in the outbox.
    fn inline_out(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        body: &[u8],
        signal: bool,
    ) -> Result<Posted, PostError> {
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(body);
        self.outbox.push((peer, bytes));
        self.inline_sent += 1;
        if self.later && self.unsignalled && !signal {
            *self.quiet.entry(peer).or_default() += 1;
            self.uncompleted.push(peer);
            return Ok(Posted::Later);
        }
        Ok(self.posted(peer, WorkId::Inline(peer)))
    }
}
