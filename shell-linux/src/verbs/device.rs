//! One rank's verbs resources that every connection shares: the device
//! context, protection domain, completion channel, completion queues
//! (sends and receives apart: a failed completion carries no opcode, so
//! its queue tells which it was) and shared receive queue. Held in an `Arc` so that a sleeper's event
//! handle keeps them alive as long as it can touch them; queue pairs and
//! registrations belong to the port and go first.

use std::ffi::{CStr, CString};
use std::ptr;

use ibverbs_sys as ib;

/// Which device, port and GID a rank opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Select {
    /// Device name (`rxe0`); `None`: the first device libibverbs lists.
    pub device: Option<String>,
    /// The device's port, from 1.
    pub port: u8,
    /// GID table index; `None`: the first RoCE v2 GID of an IPv4 address,
    /// else the first valid GID.
    pub gid_index: Option<u8>,
}

impl Default for Select {
    fn default() -> Self {
        Select {
            device: None,
            port: 1,
            gid_index: None,
        }
    }
}

/// Sizes of one rank's device resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Sizes {
    /// Receive buffers posted to the shared receive queue.
    pub rx_buffers: u32,
    /// Bytes of each receive buffer (the largest send).
    pub buf_size: u32,
    /// Send work requests per connection (`Config::send_wqes`).
    pub sq_depth: u32,
    /// Connections (queue pairs) the completion queue serves.
    pub peers: u32,
    /// Buffers kept back from the shared receive queue, posted when it
    /// runs low (its limit event, or the core's `rx_pool_low`).
    pub rx_spare: u32,
    /// The shared receive queue's limit: fewer posted buffers than this
    /// raise its limit event (`Config::rx_low_water`); 0: never.
    pub rx_low: u32,
}

impl Sizes {
    /// Every receive buffer, posted or spare.
    pub fn rx_total(&self) -> u32 {
        self.rx_buffers.saturating_add(self.rx_spare)
    }
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            rx_buffers: 512,
            buf_size: 8192 + 64,
            sq_depth: 64,
            peers: 0,
            rx_spare: 128,
            rx_low: 64,
        }
    }
}

/// An asynchronous event of the device, as the port acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Async {
    /// The shared receive queue fell below its limit.
    SrqLimit,
    /// The queue pair of this number went to the error state.
    QpFailed(u32),
    /// The port, a queue or the device broke: every connection is lost.
    DeviceFailed,
    /// Informational (a port came up, a path migrated, …).
    Other,
}

/// What the device said about itself once opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub name: String,
    pub port: u8,
    pub gid_index: u8,
    pub gid: [u8; 16],
    /// The port's active MTU as verbs encodes it (`IBV_MTU_*`).
    pub mtu: u32,
    /// Largest message the port carries.
    pub max_msg: u32,
    /// Outstanding RDMA reads a queue pair may issue or answer.
    pub max_rd_atomic: u8,
    /// Largest inline send a queue pair of this device grants.
    pub inline_max: u32,
}

/// The device context and what hangs off it, destroyed in reverse order.
pub struct Device {
    pub ctx: *mut ib::ibv_context,
    pub pd: *mut ib::ibv_pd,
    pub channel: *mut ib::ibv_comp_channel,
    /// Sends, RDMA operations.
    pub scq: *mut ib::ibv_cq,
    /// Receives from the shared receive queue.
    pub rcq: *mut ib::ibv_cq,
    /// The connection handshake's datagrams, both ways.
    pub ucq: *mut ib::ibv_cq,
    pub srq: *mut ib::ibv_srq,
    pub facts: Facts,
}

// SAFETY: libibverbs objects may be used from any thread; the pointers are
// only dereferenced through libibverbs calls, which lock what they share.
unsafe impl Send for Device {}
// SAFETY: as above: every call on them is thread-safe in libibverbs.
unsafe impl Sync for Device {}

fn os(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Every device libibverbs lists, by name.
pub fn names() -> Vec<String> {
    let mut n = 0;
    // SAFETY: returns an array of `n` device pointers (or null), freed below.
    let list = unsafe { ib::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let out = (0..n.max(0) as usize)
        .map(|i| {
            // SAFETY: `i < n` entries of the list are valid devices.
            let name = unsafe { CStr::from_ptr(ib::ibv_get_device_name(*list.add(i))) };
            name.to_string_lossy().into_owned()
        })
        .collect();
    // SAFETY: the list came from ibv_get_device_list and is freed once.
    unsafe { ib::ibv_free_device_list(list) };
    out
}

impl Device {
    /// Opens the device `sel` names and creates its shared resources.
    pub fn open(sel: &Select, sizes: Sizes) -> Result<Device, String> {
        let ctx = open_context(sel.device.as_deref())?;
        let mut dev = Device {
            ctx,
            pd: ptr::null_mut(),
            channel: ptr::null_mut(),
            scq: ptr::null_mut(),
            rcq: ptr::null_mut(),
            ucq: ptr::null_mut(),
            srq: ptr::null_mut(),
            facts: Facts {
                name: String::new(),
                port: sel.port,
                gid_index: 0,
                gid: [0; 16],
                mtu: 0,
                max_msg: 0,
                max_rd_atomic: 0,
                inline_max: 0,
            },
        };
        // SAFETY: an open context; the name is a C string it owns.
        dev.facts.name = unsafe { CStr::from_ptr(ib::ibv_get_device_name((*ctx).device)) }
            .to_string_lossy()
            .into_owned();
        dev.query(sel)?;
        // SAFETY: calls on the open context; each result is checked.
        unsafe {
            dev.pd = ib::ibv_alloc_pd(ctx);
            if dev.pd.is_null() {
                return Err(os("ibv_alloc_pd"));
            }
            dev.channel = ib::ibv_create_comp_channel(ctx);
            if dev.channel.is_null() {
                return Err(os("ibv_create_comp_channel"));
            }
            // Both are read when something may be there, never waited on.
            for fd in [(*dev.channel).fd, (*ctx).async_fd] {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
            }
            // Any send may be signalled, and a failed queue pair gives
            // every one an entry: the send queue holds each connection's
            // send queue at once, the receive one every buffer, the
            // handshake's every datagram either way.
            let sends = sizes.sq_depth.saturating_mul(sizes.peers);
            let handshakes = 2 * HANDSHAKE_SLOTS as u32;
            for (cq, n) in [
                (&mut dev.scq, sends),
                (&mut dev.rcq, sizes.rx_total()),
                (&mut dev.ucq, handshakes),
            ] {
                let cqe = n.clamp(1, i32::MAX as u32) as i32;
                *cq = ib::ibv_create_cq(ctx, cqe, ptr::null_mut(), dev.channel, 0);
                if cq.is_null() {
                    return Err(os(&format!("ibv_create_cq ({cqe} entries)")));
                }
            }
            let mut attr = ib::ibv_srq_init_attr {
                srq_context: ptr::null_mut(),
                attr: ib::ibv_srq_attr {
                    max_wr: sizes.rx_total(),
                    max_sge: 1,
                    srq_limit: 0,
                },
            };
            dev.srq = ib::ibv_create_srq(dev.pd, &mut attr);
            if dev.srq.is_null() {
                return Err(os(&format!(
                    "ibv_create_srq ({} receives)",
                    sizes.rx_total()
                )));
            }
        }
        dev.facts.inline_max = dev.probe_inline();
        Ok(dev)
    }

    /// The port's state, MTU and GID, and the device's read depth.
    fn query(&mut self, sel: &Select) -> Result<(), String> {
        let mut port = ib::ibv_port_attr::default();
        // SAFETY: the exported call fills the older prefix of the attribute
        // structure, which `port` (zeroed, larger) holds.
        let rc = unsafe {
            ib::ibv_query_port(
                self.ctx,
                sel.port,
                (&mut port as *mut ib::ibv_port_attr).cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "{}: no port {} ({})",
                self.facts.name,
                sel.port,
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        if port.state != ib::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(format!(
                "{} port {} is not active (state {}): is its network interface up?",
                self.facts.name, sel.port, port.state
            ));
        }
        self.facts.mtu = port.active_mtu;
        self.facts.max_msg = port.max_msg_sz;
        let mut dev = ib::ibv_device_attr::default();
        // SAFETY: fills `dev`.
        if unsafe { ib::ibv_query_device(self.ctx, &mut dev) } != 0 {
            return Err(os("ibv_query_device"));
        }
        self.facts.max_rd_atomic = dev.max_qp_rd_atom.clamp(0, 16) as u8;
        let gids = port.gid_tbl_len.max(0) as usize;
        let index = match sel.gid_index {
            Some(i) if (i as usize) < gids => i,
            Some(i) => {
                return Err(format!(
                    "{} port {} has {gids} GIDs: --gid-index {i} is past them",
                    self.facts.name, sel.port
                ))
            }
            None => self.default_gid(sel.port, gids)?,
        };
        self.facts.gid_index = index;
        self.facts.gid = self
            .gid(sel.port, index)
            .ok_or_else(|| format!("{}: GID {index} cannot be read", self.facts.name))?;
        if self.facts.gid == [0; 16] {
            return Err(format!(
                "{} port {} GID {index} is empty: give --gid-index of a valid one (`ibv_devinfo -v` lists them)",
                self.facts.name, sel.port
            ));
        }
        Ok(())
    }

    fn gid(&self, port: u8, index: u8) -> Option<[u8; 16]> {
        let mut gid = ib::ibv_gid { raw: [0; 16] };
        // SAFETY: fills `gid`.
        let rc = unsafe { ib::ibv_query_gid(self.ctx, port, index as i32, &mut gid) };
        // SAFETY: every bit pattern is a valid byte array.
        let raw = unsafe { gid.raw };
        (rc == 0).then_some(raw)
    }

    /// RoCE v2 routes by IP: the GID of an IPv4 address (`::ffff:a.b.c.d`)
    /// whose type sysfs says is RoCE v2, else the first non-empty GID.
    fn default_gid(&self, port: u8, gids: usize) -> Result<u8, String> {
        let kind = |i: usize| {
            std::fs::read_to_string(format!(
                "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{i}",
                self.facts.name
            ))
            .unwrap_or_default()
        };
        let mut first = None;
        for i in 0..gids.min(256) {
            let Some(g) = self.gid(port, i as u8) else {
                continue;
            };
            if g == [0; 16] {
                continue;
            }
            first.get_or_insert(i as u8);
            let v4 = g[..10] == [0; 10] && g[10..12] == [0xff, 0xff];
            if v4 && kind(i).trim() == "RoCE v2" {
                return Ok(i as u8);
            }
        }
        first.ok_or_else(|| {
            format!(
                "{} port {port} has no valid GID: give its network interface an address",
                self.facts.name
            )
        })
    }

    /// The largest inline send a queue pair is granted: a throwaway queue
    /// pair asks for less and less until the device agrees, as UCX does.
    fn probe_inline(&self) -> u32 {
        for ask in [1024u32, 512, 256, 128, 64, 0] {
            let mut attr = qp_init(self, 1, ask);
            // SAFETY: creates a queue pair on this device's objects.
            let qp = unsafe { ib::ibv_create_qp(self.pd, &mut attr) };
            if !qp.is_null() {
                // SAFETY: a queue pair created just now, used by nothing.
                unsafe { ib::ibv_destroy_qp(qp) };
                return attr.cap.max_inline_data;
            }
        }
        0
    }

    /// The way from this port to `gid`: RoCE routes by the global route
    /// header, so every address is global.
    pub fn route(&self, gid: [u8; 16]) -> ib::ibv_ah_attr {
        ib::ibv_ah_attr {
            grh: ib::ibv_global_route {
                dgid: ib::ibv_gid { raw: gid },
                flow_label: 0,
                sgid_index: self.facts.gid_index,
                hop_limit: 64,
                traffic_class: 0,
            },
            is_global: 1,
            port_num: self.facts.port,
            ..Default::default()
        }
    }

    /// The completion channel's descriptor (non-blocking).
    pub fn channel_fd(&self) -> i32 {
        // SAFETY: the channel lives as long as `self`.
        unsafe { (*self.channel).fd }
    }

    /// Asks for an event on the next completion of either queue
    /// (`solicited`: of receives, only a solicited one).
    pub fn arm(&self, solicited: bool) {
        // SAFETY: the CQs live as long as `self`; the op is the provider's.
        unsafe {
            if let Some(f) = (*self.ctx).ops.req_notify_cq {
                f(self.scq, 0);
                f(self.rcq, solicited as i32);
                // A request for a connection is never solicited.
                f(self.ucq, 0);
            }
        }
    }

    /// Arms the shared receive queue's limit event: it fires (once) when
    /// fewer than `limit` buffers are posted. Whether the device took it.
    pub fn arm_srq_limit(&self, limit: u32) -> bool {
        let mut attr = ib::ibv_srq_attr {
            srq_limit: limit,
            ..Default::default()
        };
        // SAFETY: the SRQ lives as long as `self`.
        limit > 0
            && unsafe { ib::ibv_modify_srq(self.srq, &mut attr, ib::IBV_SRQ_LIMIT as i32) } == 0
    }

    /// Takes the device's asynchronous events (non-blocking), each
    /// acknowledged once read.
    pub fn take_async(&self, mut f: impl FnMut(Async)) {
        loop {
            // SAFETY: plain integers and pointers; all zeroes is valid.
            let mut ev: ib::ibv_async_event = unsafe { std::mem::zeroed() };
            // SAFETY: the context lives as long as `self`; its descriptor is
            // non-blocking, so this returns -1 once nothing is left.
            if unsafe { ib::ibv_get_async_event(self.ctx, &mut ev) } != 0 {
                break;
            }
            // SAFETY: the event names a live object until acknowledged;
            // the union's member is the one its type says.
            let what = unsafe {
                match ev.event_type {
                    ib::IBV_EVENT_SRQ_LIMIT_REACHED => Async::SrqLimit,
                    ib::IBV_EVENT_QP_FATAL
                    | ib::IBV_EVENT_QP_REQ_ERR
                    | ib::IBV_EVENT_QP_ACCESS_ERR => Async::QpFailed((*ev.element.qp).qp_num),
                    ib::IBV_EVENT_PORT_ERR
                    | ib::IBV_EVENT_DEVICE_FATAL
                    | ib::IBV_EVENT_CQ_ERR
                    | ib::IBV_EVENT_SRQ_ERR => Async::DeviceFailed,
                    _ => Async::Other,
                }
            };
            // SAFETY: taken just now, acknowledged once.
            unsafe { ib::ibv_ack_async_event(&mut ev) };
            f(what);
        }
    }

    /// Takes the events the channel holds (non-blocking), acknowledges
    /// them, and re-arms for solicited ones: a progress thread sleeping
    /// on the channel wakes for rendezvous traffic only.
    pub fn take_events(&self) {
        self.ack_events();
        self.arm(true);
    }

    /// Takes and acknowledges the events the channel holds.
    fn ack_events(&self) {
        loop {
            let mut cq = ptr::null_mut();
            let mut ctx = ptr::null_mut();
            // SAFETY: the channel is non-blocking: -1 once it is empty.
            if unsafe { ib::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) } != 0 {
                break;
            }
            // SAFETY: acknowledges the event taken just now, on its queue.
            unsafe { ib::ibv_ack_cq_events(cq, 1) };
        }
    }
}

/// The attributes of one RC queue pair on `dev`'s completion queue and
/// shared receive queue.
pub fn qp_init(dev: &Device, sq_depth: u32, inline: u32) -> ib::ibv_qp_init_attr {
    ib::ibv_qp_init_attr {
        qp_context: ptr::null_mut(),
        send_cq: dev.scq,
        recv_cq: dev.rcq,
        srq: dev.srq,
        cap: ib::ibv_qp_cap {
            max_send_wr: sq_depth.max(1),
            max_recv_wr: 0,
            max_send_sge: super::MAX_SGE as u32,
            max_recv_sge: 1,
            max_inline_data: inline,
        },
        qp_type: ib::ibv_qp_type::IBV_QPT_RC,
        sq_sig_all: 0,
    }
}

fn open_context(want: Option<&str>) -> Result<*mut ib::ibv_context, String> {
    let mut n = 0;
    // SAFETY: returns an array of `n` device pointers (or null), freed below.
    let list = unsafe { ib::ibv_get_device_list(&mut n) };
    if list.is_null() || n <= 0 {
        if !list.is_null() {
            // SAFETY: freed once.
            unsafe { ib::ibv_free_device_list(list) };
        }
        return Err("no RDMA device: load rdma_rxe and add one (`rdma link add rxe0 type rxe netdev IF`), or use --transport loop".into());
    }
    let want_c = want.map(|w| CString::new(w).unwrap_or_default());
    let mut found = None;
    let mut seen = Vec::new();
    for i in 0..n as usize {
        // SAFETY: `i < n` entries of the list are valid devices.
        let d = unsafe { *list.add(i) };
        // SAFETY: a listed device's name.
        let name = unsafe { CStr::from_ptr(ib::ibv_get_device_name(d)) };
        seen.push(name.to_string_lossy().into_owned());
        if found.is_none() && want_c.as_deref().is_none_or(|w| w == name) {
            found = Some(d);
        }
    }
    let ctx = found.map(|d| {
        // SAFETY: a listed device; the context outlives the list.
        unsafe { ib::ibv_open_device(d) }
    });
    // SAFETY: freed once, after the open.
    unsafe { ib::ibv_free_device_list(list) };
    match ctx {
        None => Err(format!(
            "no RDMA device {:?}: this machine has {}",
            want.unwrap_or_default(),
            seen.join(", ")
        )),
        Some(c) if c.is_null() => Err(os("ibv_open_device")),
        Some(c) => Ok(c),
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: each object was created here, is destroyed once, after
        // what depends on it (queue pairs and registrations went with the
        // port), in reverse order of creation.
        unsafe {
            if !self.srq.is_null() {
                ib::ibv_destroy_srq(self.srq);
            }
            // Destroying a queue waits for its events' acknowledgements.
            if !self.channel.is_null() {
                self.ack_events();
            }
            for cq in [self.scq, self.rcq, self.ucq] {
                if !cq.is_null() {
                    ib::ibv_destroy_cq(cq);
                }
            }
            if !self.channel.is_null() {
                ib::ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                ib::ibv_dealloc_pd(self.pd);
            }
            ib::ibv_close_device(self.ctx);
        }
    }
}

/// Datagrams the handshake's queue pair holds each way (its receive
/// buffers, and as many send slots): the completion queue they share
/// holds both.
pub const HANDSHAKE_SLOTS: usize = 32;

/// A zeroed work completion to poll into.
pub(super) fn wc() -> ib::ibv_wc {
    // SAFETY: plain integers; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

pub(super) fn poll(dev: &Device, cq: *mut ib::ibv_cq, wcs: &mut [ib::ibv_wc]) -> usize {
    // SAFETY: the provider's op on a live queue, into `wcs.len()` entries.
    let n = unsafe {
        match (*dev.ctx).ops.poll_cq {
            Some(f) => f(cq, wcs.len() as i32, wcs.as_mut_ptr()),
            None => 0,
        }
    };
    n.max(0) as usize
}
