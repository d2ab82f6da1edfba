//! One progress round, the same for every shell: packets and immediates
//! from the receive pool, completions from the completion queue, each
//! handed to whoever the core says owns it.

use rmx_core::onesided::imm_window;
use rmx_core::reuse::SendReuse;
use rmx_core::storage::Storage;
use rmx_core::{Endpoint, RxBuf, WcResult, WorkId};

use crate::adapter::{Adapter, AdapterTables, Host};
use crate::port::{Completion, Port};

/// Where a rank's progress hands one-sided events: the epochs of its
/// windows ([`rmx_core::onesided::Epoch`]), by window number.
pub trait Windows {
    /// Window `window`'s RDMA (`work`, a [`WorkId::Window`]) completed;
    /// `false` if no window of that number awaits it.
    fn on_completion(&mut self, window: u16, work: WorkId, result: WcResult) -> bool;
    /// An immediate for window `window` arrived.
    fn on_immediate(&mut self, window: u16, imm: u32);
}

/// A rank without windows.
impl Windows for () {
    fn on_completion(&mut self, _: u16, _: WorkId, _: WcResult) -> bool {
        false
    }
    fn on_immediate(&mut self, _: u16, _: u32) {}
}

/// What one round found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    pub packets: usize,
    pub completions: usize,
}

/// Hands every received packet to the endpoint (stamped `now`, or on a
/// lossy transport with `clock()` read at the first packet, since
/// retransmission is timed from arrivals) and every immediate to its
/// window; how many buffers it took.
pub fn receive<P, H, S, T, Z, W>(
    ep: &mut Endpoint<T, Z>,
    nic: &mut Adapter<P, H, S>,
    windows: &mut W,
    now: &mut u64,
    lossy: bool,
    mut clock: impl FnMut() -> u64,
) -> usize
where
    P: Port,
    H: Host,
    S: AdapterTables,
    T: Storage,
    Z: SendReuse,
    W: Windows,
{
    let mut n = 0;
    while let Some(rx) = nic.port().poll_recv() {
        n += 1;
        if let Some(imm) = rx.imm {
            // A window's put landed; its buffer goes straight back to the
            // shared receive queue (replenished on each write's arrival).
            windows.on_immediate(imm_window(imm), imm);
            nic.port().repost(rx.buf);
            continue;
        }
        if n == 1 && lossy {
            *now = clock();
        }
        ep.on_receive(*now, nic, RxBuf(rx.buf));
    }
    n
}

/// Hands every completion to the window or endpoint that posted it,
/// `wcs.len()` at a time; how many.
// Every round runs it, and most find nothing: inlined, an empty round pays
// no call.
#[inline(always)]
pub fn complete<P, H, S, T, Z, W>(
    ep: &mut Endpoint<T, Z>,
    nic: &mut Adapter<P, H, S>,
    windows: &mut W,
    wcs: &mut [Completion],
) -> usize
where
    P: Port,
    H: Host,
    S: AdapterTables,
    T: Storage,
    Z: SendReuse,
    W: Windows,
{
    let mut total = 0;
    loop {
        let n = nic.port().poll_cq(wcs);
        for c in &wcs[..n] {
            let taken = match WorkId::from_wr_id(c.wr_id) {
                Some(w @ WorkId::Window { window, .. }) => {
                    windows.on_completion(window, w, c.result)
                }
                _ => false,
            };
            if !taken {
                // The endpoint's, or a stray it counts.
                ep.on_completion(nic, c.wr_id, c.result);
            }
        }
        total += n;
        if n < wcs.len() || wcs.is_empty() {
            return total;
        }
    }
}

/// One round: [`receive`], then [`complete`], then the doorbell for what
/// the core posted meanwhile.
pub fn progress<P, H, S, T, Z, W>(
    ep: &mut Endpoint<T, Z>,
    nic: &mut Adapter<P, H, S>,
    windows: &mut W,
    wcs: &mut [Completion],
    now: &mut u64,
    lossy: bool,
    clock: impl FnMut() -> u64,
) -> Round
where
    P: Port,
    H: Host,
    S: AdapterTables,
    T: Storage,
    Z: SendReuse,
    W: Windows,
{
    let packets = receive(ep, nic, windows, now, lossy, clock);
    let completions = complete(ep, nic, windows, wcs);
    nic.port().doorbell();
    Round {
        packets,
        completions,
    }
}
