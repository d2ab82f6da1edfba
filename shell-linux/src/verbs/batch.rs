//! Work requests held for the doorbell. A send to a peer whose queue pair
//! still has work outstanding waits here until the next
//! [`doorbell`](rmx_driver::Port::doorbell), where each queue pair's held
//! requests go in one `ibv_post_send` as a linked list: one call (on rxe,
//! one system call) for a burst, and, while they wait, the send entries
//! they hold are what makes the core pack the messages behind them
//! (message coalescing), as a NIC still busy with earlier sends would.

use ibverbs_sys as ib;

use super::MAX_SGE;

/// One held work request, its gather list beside it.
struct Held {
    peer: u16,
    wr: ib::ibv_send_wr,
    sges: [ib::ibv_sge; MAX_SGE],
    /// An inline send's bytes: their offset in [`Batch::bytes`] (copied at
    /// hold: the caller's buffer is free once the post returns).
    inline: Option<usize>,
}

/// The requests held since the last doorbell, at most `cap`.
pub(super) struct Batch {
    held: Vec<Held>,
    /// Inline sends' bytes, `inline_max` apart.
    bytes: Vec<u8>,
    inline_max: usize,
    cap: usize,
}

impl Batch {
    /// Room for `cap` (at most 64) requests and the inline bytes of as
    /// many.
    pub(super) fn new(cap: usize, inline_max: usize) -> Batch {
        assert!(cap <= 64, "a batch's requests are tracked in a u64");
        Batch {
            held: Vec::with_capacity(cap),
            bytes: vec![0; cap * inline_max],
            inline_max,
            cap,
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.held.len() == self.cap
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Holds `wr` (its first `wr.num_sge` entries of `sges`) for `peer`.
    /// An inline send's `parts` are copied here, joined, in place of its
    /// gather list. The caller checked [`is_full`](Self::is_full) and,
    /// for an inline send, that the parts fit in `inline_max`.
    pub(super) fn hold(
        &mut self,
        peer: u16,
        wr: &ib::ibv_send_wr,
        sges: &[ib::ibv_sge; MAX_SGE],
        parts: &[&[u8]],
    ) {
        assert!(!self.is_full(), "a full batch is flushed first");
        let mut h = Held {
            peer,
            wr: *wr,
            sges: *sges,
            inline: None,
        };
        if wr.send_flags & ib::ibv_send_flags::IBV_SEND_INLINE.0 != 0 {
            let at = self.held.len() * self.inline_max;
            let mut len = 0;
            for p in parts {
                self.bytes[at + len..at + len + p.len()].copy_from_slice(p);
                len += p.len();
            }
            h.inline = Some(at);
            h.sges[0].length = len as u32;
            h.wr.num_sge = i32::from(len > 0);
        }
        self.held.push(h);
    }

    /// Posts every queue pair's held requests, in the order held, as one
    /// list each: `post(peer, first)` returns the provider's status and
    /// the request it stopped at. Each request not posted is reported to
    /// `failed(peer, wr_id)`. The batch is empty after.
    pub(super) fn flush(
        &mut self,
        mut post: impl FnMut(u16, *mut ib::ibv_send_wr) -> (i32, *mut ib::ibv_send_wr),
        mut failed: impl FnMut(u16, u64),
    ) {
        let base = self.bytes.as_ptr();
        let n = self.held.len();
        // Every pointer below comes from this one, so none is invalidated
        // by a later borrow; `held` neither moves nor changes length until
        // it is cleared after the last post.
        let held = self.held.as_mut_ptr();
        let mut linked: u64 = 0;
        for first in 0..n {
            if linked & (1 << first) != 0 {
                continue;
            }
            // SAFETY: `first` is below `n`, the vector's length.
            let peer = unsafe { (*held.add(first)).peer };
            let mut prev: *mut ib::ibv_send_wr = std::ptr::null_mut();
            for i in first..n {
                // SAFETY: `i` is below `n`; no other reference to this
                // element is alive (`prev` points at an earlier one).
                let h = unsafe { &mut *held.add(i) };
                if h.peer != peer {
                    continue;
                }
                linked |= 1 << i;
                if let Some(at) = h.inline {
                    // `bytes` is never resized after `new`.
                    h.sges[0].addr = base.wrapping_add(at) as u64;
                }
                h.wr.sg_list = h.sges.as_mut_ptr();
                h.wr.next = std::ptr::null_mut();
                let me: *mut ib::ibv_send_wr = &mut h.wr;
                if !prev.is_null() {
                    // SAFETY: an earlier request of this list, in `held`.
                    unsafe { (*prev).next = me };
                }
                prev = me;
            }
            // SAFETY: `first` is below `n`.
            let head = unsafe { std::ptr::addr_of_mut!((*held.add(first)).wr) };
            let (rc, bad) = post(peer, head);
            if rc != 0 {
                // The provider posted none from the one it stopped at (all
                // if it names none).
                let mut w = if bad.is_null() { head } else { bad };
                while !w.is_null() {
                    // SAFETY: `w` is a request of the list linked above.
                    let r = unsafe { &*w };
                    failed(peer, r.wr_id);
                    w = r.next;
                }
            }
        }
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wr(wr_id: u64, inline: bool) -> ib::ibv_send_wr {
        ib::ibv_send_wr {
            wr_id,
            num_sge: 1,
            send_flags: match inline {
                true => ib::ibv_send_flags::IBV_SEND_INLINE.0,
                false => 0,
            },
            ..Default::default()
        }
    }

    /// What a provider sees of one list: each request's id and, for an
    /// inline send, its bytes.
    fn walk(mut w: *mut ib::ibv_send_wr) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        while !w.is_null() {
            // SAFETY: a list linked by `flush`, alive during its `post`.
            let r = unsafe { &*w };
            // SAFETY: as above; the list's first gather entry.
            let s = unsafe { &*r.sg_list };
            // The tests' sends that are not inline gather nothing (address
            // 0, length 0): only an entry with bytes is read.
            let bytes = match (r.num_sge, s.length) {
                (0, _) | (_, 0) => Vec::new(),
                // SAFETY: the entry's address and length, bytes `flush`
                // pointed at.
                _ => unsafe {
                    std::slice::from_raw_parts(s.addr as *const u8, s.length as usize).to_vec()
                },
            };
            out.push((r.wr_id, bytes));
            w = r.next;
        }
        out
    }

    #[test]
    fn each_queue_pair_gets_its_requests_in_order_as_one_list() {
        let mut b = Batch::new(8, 16);
        let sges = [ib::ibv_sge::default(); MAX_SGE];
        let mut part = [7u8; 5];
        b.hold(1, &wr(10, true), &sges, &[&part[..3], &part[3..]]);
        part.fill(9);
        b.hold(2, &wr(20, false), &sges, &[]);
        b.hold(1, &wr(11, true), &sges, &[&part[..2]]);
        b.hold(1, &wr(12, true), &sges, &[]);
        b.hold(2, &wr(21, false), &sges, &[]);
        let mut lists = Vec::new();
        b.flush(
            |peer, first| {
                lists.push((peer, walk(first)));
                (0, std::ptr::null_mut())
            },
            |_, _| panic!("nothing refused"),
        );
        assert_eq!(
            lists,
            [
                (1, vec![(10, vec![7; 5]), (11, vec![9; 2]), (12, vec![])]),
                (2, vec![(20, vec![]), (21, vec![])]),
            ]
        );
        assert!(b.is_empty());
    }

    #[test]
    fn requests_the_provider_did_not_post_are_reported() {
        let mut b = Batch::new(4, 8);
        let sges = [ib::ibv_sge::default(); MAX_SGE];
        for id in 0..3 {
            b.hold(5, &wr(id, false), &sges, &[]);
        }
        assert!(!b.is_full());
        b.hold(6, &wr(9, false), &sges, &[]);
        assert!(b.is_full());
        let mut failed = Vec::new();
        b.flush(
            |peer, first| match peer {
                // Stops at the second request of peer 5's list.
                // SAFETY: the list `flush` linked.
                5 => (libc::ENOMEM, unsafe { (*first).next }),
                // Names none: all of peer 6's were refused.
                _ => (libc::EINVAL, std::ptr::null_mut()),
            },
            |peer, id| failed.push((peer, id)),
        );
        assert_eq!(failed, [(5, 1), (5, 2), (6, 9)]);
        assert!(b.is_empty() && !b.is_full());
    }
}
