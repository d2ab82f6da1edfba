//! The datagram channel connections are asked for on: one UD queue pair
//! per rank, published in its address, with a few receive buffers of its
//! own and an address handle per peer made on first use. It carries the
//! core's handshake messages ([`rmx_core::handshake`]) and nothing else.

use std::ptr;

use ibverbs_sys as ib;
use rmx_core::handshake::LEN;

use super::device::{self, Device, HANDSHAKE_SLOTS as BUFS};
/// A UD receive starts with the 40-byte global route header.
const GRH: usize = 40;
const SLOT: usize = GRH + LEN;
/// The queue key every rmx datagram queue pair shares.
const QKEY: u32 = 0x524d_5831;
/// Work request ids of sends (receives are their buffer's index).
const SEND: u64 = 1 << 63;

pub struct Oob {
    qp: *mut ib::ibv_qp,
    /// `BUFS` receive slots, then `BUFS` send slots.
    mem: Box<[u8]>,
    mr: *mut ib::ibv_mr,
    next_send: usize,
    ahs: Vec<Option<*mut ib::ibv_ah>>,
}

fn os(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

impl Oob {
    /// The channel of a job of `ranks`, ready to send and receive.
    pub fn open(dev: &Device, ranks: u16) -> Result<Oob, String> {
        let mut attr = ib::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: dev.ucq,
            recv_cq: dev.ucq,
            srq: ptr::null_mut(),
            cap: ib::ibv_qp_cap {
                max_send_wr: BUFS as u32,
                max_recv_wr: BUFS as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ib::ibv_qp_type::IBV_QPT_UD,
            sq_sig_all: 1,
        };
        // SAFETY: creates a queue pair on this device's objects.
        let qp = unsafe { ib::ibv_create_qp(dev.pd, &mut attr) };
        if qp.is_null() {
            return Err(os("ibv_create_qp (UD)"));
        }
        let mut oob = Oob {
            qp,
            mem: vec![0u8; 2 * BUFS * SLOT].into_boxed_slice(),
            mr: ptr::null_mut(),
            next_send: 0,
            ahs: vec![None; ranks as usize],
        };
        use ib::ibv_qp_attr_mask as M;
        let steps = [
            (
                ib::ibv_qp_attr {
                    qp_state: ib::ibv_qp_state::IBV_QPS_INIT,
                    pkey_index: 0,
                    port_num: dev.facts.port,
                    qkey: QKEY,
                    ..Default::default()
                },
                M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_QKEY,
            ),
            (
                ib::ibv_qp_attr {
                    qp_state: ib::ibv_qp_state::IBV_QPS_RTR,
                    ..Default::default()
                },
                M::IBV_QP_STATE,
            ),
            (
                ib::ibv_qp_attr {
                    qp_state: ib::ibv_qp_state::IBV_QPS_RTS,
                    sq_psn: 0,
                    ..Default::default()
                },
                M::IBV_QP_STATE | M::IBV_QP_SQ_PSN,
            ),
        ];
        for (mut a, mask) in steps {
            // SAFETY: `a` holds every attribute `mask` names.
            let rc = unsafe { ib::ibv_modify_qp(qp, &mut a, mask.0 as i32) };
            if rc != 0 {
                return Err(format!(
                    "UD queue pair to state {}: {}",
                    a.qp_state,
                    std::io::Error::from_raw_os_error(rc)
                ));
            }
        }
        // SAFETY: the boxed slice stays where it is until the channel
        // drops, after its registration ends.
        oob.mr = unsafe {
            ib::ibv_reg_mr(
                dev.pd,
                oob.mem.as_mut_ptr().cast(),
                oob.mem.len(),
                ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32,
            )
        };
        if oob.mr.is_null() {
            return Err(os("ibv_reg_mr (handshake buffers)"));
        }
        for b in 0..BUFS {
            oob.post_recv(dev, b)?;
        }
        Ok(oob)
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: the queue pair lives as long as `self`.
        unsafe { (*self.qp).qp_num }
    }

    fn lkey(&self) -> u32 {
        // SAFETY: the registration lives as long as `self`.
        unsafe { (*self.mr).lkey }
    }

    fn post_recv(&mut self, dev: &Device, b: usize) -> Result<(), String> {
        let mut sge = ib::ibv_sge {
            addr: self.mem.as_ptr() as u64 + (b * SLOT) as u64,
            length: SLOT as u32,
            lkey: self.lkey(),
        };
        let mut wr = ib::ibv_recv_wr {
            wr_id: b as u64,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the provider's op on this queue pair; the slot lies in
        // the registered buffer and nothing reads it until it completes.
        let rc = unsafe {
            match (*dev.ctx).ops.post_recv {
                Some(f) => f(self.qp, &mut wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        match rc {
            0 => Ok(()),
            e => Err(format!(
                "post_recv (handshake): {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Sends `msg` to the datagram queue pair `qpn` of rank `to` at `gid`.
    /// Best effort: the handshake repeats what is lost.
    pub fn send(
        &mut self,
        dev: &Device,
        to: u16,
        gid: [u8; 16],
        qpn: u32,
        msg: &[u8; LEN],
    ) -> Result<(), String> {
        let ah = match self.ahs.get(to as usize).copied().flatten() {
            Some(ah) => ah,
            None => {
                let mut a = dev.route(gid);
                // SAFETY: an address handle on this device's domain.
                let ah = unsafe { ib::ibv_create_ah(dev.pd, &mut a) };
                if ah.is_null() {
                    return Err(os("ibv_create_ah"));
                }
                if let Some(slot) = self.ahs.get_mut(to as usize) {
                    *slot = Some(ah);
                }
                ah
            }
        };
        // Send slots are reused round-robin: a slot comes round again only
        // after BUFS later sends, by which time the device has sent it
        // (sends complete in order, and the queue holds BUFS).
        let slot = BUFS + self.next_send % BUFS;
        self.next_send = self.next_send.wrapping_add(1);
        self.mem[slot * SLOT..slot * SLOT + LEN].copy_from_slice(msg);
        let mut sge = ib::ibv_sge {
            addr: self.mem.as_ptr() as u64 + (slot * SLOT) as u64,
            length: LEN as u32,
            lkey: self.lkey(),
        };
        let mut wr = ib::ibv_send_wr {
            wr_id: SEND,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: ib::ibv_wr_opcode::IBV_WR_SEND,
            send_flags: ib::ibv_send_flags::IBV_SEND_SIGNALED.0,
            ..Default::default()
        };
        wr.wr.ud = ib::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: qpn,
            remote_qkey: QKEY,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the provider's op on this queue pair; the slot lies in
        // the registered buffer.
        let rc = unsafe {
            match (*dev.ctx).ops.post_send {
                Some(f) => f(self.qp, &mut wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        match rc {
            0 => Ok(()),
            e => Err(format!(
                "handshake send: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Calls `each` on every datagram received (its bytes after the
    /// route header), handing each buffer straight back.
    pub fn poll(&mut self, dev: &Device, mut each: impl FnMut(&[u8])) {
        let mut wcs = [device::wc(); 8];
        let n = device::poll(dev, dev.ucq, &mut wcs);
        for w in &wcs[..n] {
            if w.wr_id() & SEND != 0 {
                continue;
            }
            let b = w.wr_id() as usize;
            if b >= BUFS {
                continue;
            }
            if w.is_valid() {
                let len = w.len().clamp(GRH, SLOT);
                each(&self.mem[b * SLOT + GRH..b * SLOT + len]);
            }
            let _ = self.post_recv(dev, b);
        }
    }
}

impl Drop for Oob {
    fn drop(&mut self) {
        // SAFETY: each object was made here and is destroyed once, the
        // queue pair first.
        unsafe {
            ib::ibv_destroy_qp(self.qp);
            for ah in self.ahs.iter().flatten() {
                ib::ibv_destroy_ah(*ah);
            }
            if !self.mr.is_null() {
                ib::ibv_dereg_mr(self.mr);
            }
        }
    }
}
