//! What a rank's progress notes for its windows as it polls: RDMA
//! operations that finished, and immediates that arrived. The windows'
//! fences read it; the core never sees either (their work-request ids and
//! immediates are the shell's own).

use std::collections::HashMap;

use rmx_core::WorkId;

/// The work-request id of a window's RDMA operation: the top bits zero,
/// which no core id has ([`WorkId::from_wr_id`] gives `None`).
pub fn wr_id(window: u16, seq: u32) -> u64 {
    (window as u64) << 32 | seq as u64
}

/// A window's finished operations.
#[derive(Debug, Default)]
pub struct Done {
    pub ok: u64,
    /// Sequence numbers of those that failed.
    pub failed: Vec<u32>,
}

#[derive(Debug, Default)]
pub struct Book {
    notified: HashMap<u32, u32>,
    done: HashMap<u16, Done>,
}

impl Book {
    /// A completion with `wr_id`: `false` if it is the core's.
    pub fn complete(&mut self, wr_id: u64, ok: bool) -> bool {
        if WorkId::from_wr_id(wr_id).is_some() {
            return false;
        }
        let d = self.done.entry((wr_id >> 32) as u16).or_default();
        if ok {
            d.ok += 1;
        } else {
            d.failed.push(wr_id as u32);
        }
        true
    }

    pub fn notify(&mut self, imm: u32) {
        *self.notified.entry(imm).or_default() += 1;
    }

    /// Immediates `imm` arrived so far.
    pub fn notified(&self, imm: u32) -> u32 {
        self.notified.get(&imm).copied().unwrap_or(0)
    }

    /// Forgets the immediates `imm`: its epoch is over.
    pub fn forget(&mut self, imm: u32) {
        self.notified.remove(&imm);
    }

    /// How many of `window`'s operations finished so far.
    pub fn finished(&self, window: u16) -> u64 {
        self.done
            .get(&window)
            .map_or(0, |d| d.ok + d.failed.len() as u64)
    }

    /// Takes `window`'s record, to start counting anew.
    pub fn take(&mut self, window: u16) -> Done {
        self.done.remove(&window).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_core::onesided::imm;

    #[test]
    fn window_ids_never_pass_for_the_cores_and_are_counted_apart() {
        let mut b = Book::default();
        let core = WorkId::Rdma(5).wr_id();
        assert!(!b.complete(core, true), "the core's stays the core's");
        assert!(b.complete(wr_id(3, 1), true));
        assert!(b.complete(wr_id(3, 2), false));
        assert!(b.complete(wr_id(4, 1), true));
        assert_eq!(b.finished(3), 2);
        let d = b.take(3);
        assert_eq!((d.ok, d.failed), (1, vec![2]));
        assert_eq!(b.finished(3), 0);
        assert_eq!(b.finished(4), 1);
        b.notify(imm(3, 7));
        b.notify(imm(3, 7));
        b.notify(imm(3, 8));
        assert_eq!(b.notified(imm(3, 7)), 2);
        b.forget(imm(3, 7));
        assert_eq!(b.notified(imm(3, 7)), 0);
        assert_eq!(b.notified(imm(3, 8)), 1);
    }
}
