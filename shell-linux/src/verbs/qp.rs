//! One reliable-connected queue pair: created in INIT on the rank's
//! shared completion and receive queues, then taken to RTR and RTS
//! against the peer's address (RoCE needs the global route header).

use ibverbs_sys as ib;

use super::device::{qp_init, Device};

/// How long a queue pair waits for an acknowledgement before it retries
/// (4.096 µs × 2^14 ≈ 67 ms), and how often: 6 times, then the peer is
/// gone (about half a second of silence). Not 7: rxe retries for ever at
/// 7, as the RNR count does, so a dead peer's connection would never fail.
const TIMEOUT: u8 = 14;
const RETRY: u8 = 6;
/// Receiver-not-ready retries: 7 is "for ever". The core's credits keep
/// a peer's receive pool from running dry; should it, the sender waits.
const RNR_RETRY: u8 = 7;
/// The shortest RNR back-off a responder asks for (code 1: 0.01 ms).
const MIN_RNR_TIMER: u8 = 1;

pub struct Qp {
    pub qp: *mut ib::ibv_qp,
    pub psn: u32,
}

impl Qp {
    /// A queue pair of `sq_depth` sends in INIT.
    pub fn create(dev: &Device, sq_depth: u32) -> Result<Qp, String> {
        let mut attr = qp_init(dev, sq_depth, dev.facts.inline_max);
        // SAFETY: creates a queue pair on this device's objects.
        let qp = unsafe { ib::ibv_create_qp(dev.pd, &mut attr) };
        if qp.is_null() {
            return Err(format!(
                "ibv_create_qp ({sq_depth} sends): {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut psn = [0u8; 4];
        let _ = getrandom::fill(&mut psn);
        let q = Qp {
            qp,
            psn: u32::from_le_bytes(psn) & 0x00ff_ffff,
        };
        let mut a = ib::ibv_qp_attr {
            qp_state: ib::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: dev.facts.port,
            qp_access_flags: (ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
                | ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
                | ib::ibv_access_flags::IBV_ACCESS_REMOTE_READ)
                .0,
            ..Default::default()
        };
        use ib::ibv_qp_attr_mask as M;
        q.modify(
            &mut a,
            M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS,
            "INIT",
        )?;
        Ok(q)
    }

    pub fn num(&self) -> u32 {
        // SAFETY: the queue pair lives as long as `self`.
        unsafe { (*self.qp).qp_num }
    }

    fn modify(
        &self,
        a: &mut ib::ibv_qp_attr,
        mask: ib::ibv_qp_attr_mask,
        to: &str,
    ) -> Result<(), String> {
        // SAFETY: `a` holds every attribute `mask` names.
        let rc = unsafe { ib::ibv_modify_qp(self.qp, a, mask.0 as i32) };
        match rc {
            0 => Ok(()),
            e => Err(format!(
                "queue pair {} to {to}: {}",
                self.num(),
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Connects to the peer's queue pair `qpn` (first PSN `psn`) at `gid`,
    /// with path MTU `mtu` (the smaller of both ports').
    pub fn connect(
        &self,
        dev: &Device,
        gid: [u8; 16],
        qpn: u32,
        psn: u32,
        mtu: u32,
    ) -> Result<(), String> {
        use ib::ibv_qp_attr_mask as M;
        let mut a = ib::ibv_qp_attr {
            qp_state: ib::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: mtu,
            dest_qp_num: qpn,
            rq_psn: psn,
            max_dest_rd_atomic: dev.facts.max_rd_atomic,
            min_rnr_timer: MIN_RNR_TIMER,
            ah_attr: dev.route(gid),
            ..Default::default()
        };
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_AV
                | M::IBV_QP_PATH_MTU
                | M::IBV_QP_DEST_QPN
                | M::IBV_QP_RQ_PSN
                | M::IBV_QP_MAX_DEST_RD_ATOMIC
                | M::IBV_QP_MIN_RNR_TIMER,
            "RTR",
        )?;
        let mut a = ib::ibv_qp_attr {
            qp_state: ib::ibv_qp_state::IBV_QPS_RTS,
            sq_psn: self.psn,
            timeout: TIMEOUT,
            retry_cnt: RETRY,
            rnr_retry: RNR_RETRY,
            max_rd_atomic: dev.facts.max_rd_atomic,
            ..Default::default()
        };
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_SQ_PSN
                | M::IBV_QP_TIMEOUT
                | M::IBV_QP_RETRY_CNT
                | M::IBV_QP_RNR_RETRY
                | M::IBV_QP_MAX_QP_RD_ATOMIC,
            "RTS",
        )
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created in `create`, destroyed once.
        unsafe { ib::ibv_destroy_qp(self.qp) };
    }
}
