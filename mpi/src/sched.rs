//! Collectives as schedules of point-to-point rounds in a communicator's
//! collective context: each round's sends and receives are posted at
//! once, and when all ended its local steps (copies, reductions) run.
//! One engine serves the blocking calls (start, then wait) and the
//! non-blocking ones (a request the caller tests), on any communicator.

use std::collections::VecDeque;
use std::sync::Arc;

use rmx_core::{Source, TagSel};
use rmx_linux::rank::{Rank, Req};

use crate::abi::*;
use crate::comm::{Comm, Group};
use crate::datatype::Type;
use crate::error::{Error, Result};
use crate::p2p::{recv_error, send_error};
use crate::reduce;

/// Where a piece of a collective's data lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The caller's send buffer.
    Send,
    /// The caller's receive buffer.
    Recv,
    /// The schedule's own scratch.
    Tmp,
}

/// `len` bytes at `at` of a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub place: Place,
    pub at: usize,
    pub len: usize,
}

impl Buf {
    pub fn new(place: Place, at: usize, len: usize) -> Buf {
        Buf { place, at, len }
    }

    /// The `i`-th of blocks of `len` bytes from this one's start.
    pub fn block(self, i: u16, len: usize) -> Buf {
        Buf::new(self.place, self.at + i as usize * len, len)
    }
}

/// A transfer with a member of the communicator.
#[derive(Clone, Copy, Debug)]
enum Xfer {
    Send(u16, Buf),
    Recv(u16, Buf),
}

/// A step on this rank's data once a round's transfers ended.
#[derive(Clone, Copy, Debug)]
enum Local {
    Copy { from: Buf, to: Buf },
    Reduce { from: Buf, into: Buf },
}

#[derive(Default, Debug)]
struct Round {
    xfers: Vec<Xfer>,
    after: Vec<Local>,
}

/// A collective being planned: its rounds, for `me` of `n` members.
pub struct Plan {
    pub n: u16,
    pub me: u16,
    rounds: Vec<Round>,
    tmp: usize,
}

impl Plan {
    pub fn new(n: u16, me: u16) -> Plan {
        Plan {
            n,
            me,
            rounds: Vec::new(),
            tmp: 0,
        }
    }

    /// Scratch of `len` bytes.
    pub fn tmp(&mut self, len: usize) -> Buf {
        let b = Buf::new(Place::Tmp, self.tmp, len);
        self.tmp += len;
        b
    }

    fn round(&mut self, xfers: Vec<Xfer>, after: Vec<Local>) {
        self.rounds.push(Round { xfers, after });
    }

    pub fn copy(&mut self, from: Buf, to: Buf) {
        if from != to && from.len > 0 {
            self.round(Vec::new(), vec![Local::Copy { from, to }]);
        }
    }

    /// Every member waits for every other (dissemination).
    pub fn barrier(&mut self) {
        let (n, me) = (self.n as u32, self.me as u32);
        let mut k = 1;
        while k < n {
            let to = ((me + k) % n) as u16;
            let from = ((me + n - k) % n) as u16;
            let z = Buf::new(Place::Tmp, 0, 0);
            self.round(vec![Xfer::Send(to, z), Xfer::Recv(from, z)], Vec::new());
            k *= 2;
        }
    }

    /// `buf` of `root` reaches `buf` of every member (binomial tree).
    pub fn bcast(&mut self, root: u16, buf: Buf) {
        let (n, vr) = (self.n, self.rel(root));
        let mut mask = 1u32;
        while (mask as u16) < n && mask < 1 << 16 {
            if vr as u32 & mask != 0 {
                let parent = self.abs(root, vr - mask as u16);
                self.round(vec![Xfer::Recv(parent, buf)], Vec::new());
                break;
            }
            mask <<= 1;
        }
        let mut sends = Vec::new();
        mask >>= 1;
        while mask > 0 {
            let child = vr as u32 + mask;
            if child < n as u32 {
                sends.push(Xfer::Send(self.abs(root, child as u16), buf));
            }
            mask >>= 1;
        }
        if !sends.is_empty() {
            self.round(sends, Vec::new());
        }
    }

    /// Every member's `src` combined into `dst` at `root` (binomial tree);
    /// `dst` is not touched elsewhere.
    pub fn reduce(&mut self, root: u16, src: Buf, dst: Buf) {
        let (n, vr) = (self.n as u32, self.rel(root) as u32);
        let acc = self.tmp(src.len);
        self.copy(src, acc);
        let mut mask = 1u32;
        while mask < n {
            if vr & mask == 0 {
                let child = vr | mask;
                if child < n {
                    let b = self.tmp(src.len);
                    let child = self.abs(root, child as u16);
                    self.round(
                        vec![Xfer::Recv(child, b)],
                        vec![Local::Reduce { from: b, into: acc }],
                    );
                }
            } else {
                let parent = self.abs(root, (vr - mask) as u16);
                self.round(vec![Xfer::Send(parent, acc)], Vec::new());
                return;
            }
            mask <<= 1;
        }
        self.copy(acc, dst);
    }

    /// Each member's `src` into block `i` (of `src.len` bytes) of `dst` at `root`.
    pub fn gather(&mut self, root: u16, src: Buf, dst: Buf) {
        if self.me != root {
            self.round(vec![Xfer::Send(root, src)], Vec::new());
            return;
        }
        let len = src.len;
        let recvs = (0..self.n)
            .filter(|&i| i != root)
            .map(|i| Xfer::Recv(i, dst.block(i, len)))
            .collect();
        let own = dst.block(root, len);
        self.round(recvs, Vec::new());
        self.copy(src, own);
    }

    /// Block `i` (of `dst.len` bytes) of `src` at `root` into `dst` of member `i`.
    pub fn scatter(&mut self, root: u16, src: Buf, dst: Buf) {
        if self.me != root {
            self.round(vec![Xfer::Recv(root, dst)], Vec::new());
            return;
        }
        let len = dst.len;
        let sends = (0..self.n)
            .filter(|&i| i != root)
            .map(|i| Xfer::Send(i, src.block(i, len)))
            .collect();
        self.round(sends, Vec::new());
        self.copy(src.block(root, len), dst);
    }

    /// Block `j` of `src` to member `j`, block `i` of `dst` from member `i`.
    pub fn alltoall(&mut self, src: Buf, dst: Buf, len: usize) {
        let me = self.me;
        let mut xfers = Vec::new();
        for j in (0..self.n).filter(|&j| j != me) {
            xfers.push(Xfer::Recv(j, dst.block(j, len)));
            xfers.push(Xfer::Send(j, src.block(j, len)));
        }
        self.round(xfers, Vec::new());
        self.copy(src.block(me, len), dst.block(me, len));
    }

    fn rel(&self, root: u16) -> u16 {
        ((self.me as u32 + self.n as u32 - root as u32) % self.n as u32) as u16
    }

    fn abs(&self, root: u16, rel: u16) -> u16 {
        ((rel as u32 + root as u32) % self.n as u32) as u16
    }
}

/// A collective under way.
pub struct Schedule {
    rounds: VecDeque<Round>,
    posted: Vec<Req>,
    started: bool,
    tmp: Vec<u8>,
    send: *const u8,
    send_len: usize,
    recv: *mut u8,
    recv_len: usize,
    group: Arc<Group>,
    context: u16,
    tag: u32,
    /// The reduction its `Reduce` steps apply.
    op: Option<(Handle, Type)>,
    failed: Option<Error>,
}

// SAFETY: the caller's buffers the schedule points to are its until it
// ends (MPI's rule for a collective's buffers), and the library uses it
// under one lock.
unsafe impl Send for Schedule {}

/// The caller's buffers a collective works on.
pub struct Bufs {
    pub send: *const u8,
    pub send_len: usize,
    pub recv: *mut u8,
    pub recv_len: usize,
}

impl Schedule {
    /// A schedule from `plan` on `comm` (its next collective tag).
    ///
    /// # Safety
    /// `bufs` name readable (send) and writable (recv) bytes of their
    /// lengths, left to the collective until it ended.
    pub unsafe fn new(
        plan: Plan,
        comm: &mut Comm,
        bufs: Bufs,
        op: Option<(Handle, Type)>,
    ) -> Schedule {
        Schedule {
            rounds: plan.rounds.into(),
            posted: Vec::new(),
            started: false,
            tmp: vec![0; plan.tmp],
            send: bufs.send,
            send_len: bufs.send_len,
            recv: bufs.recv,
            recv_len: bufs.recv_len,
            group: Arc::clone(&comm.group),
            context: comm.coll_context(),
            tag: comm.next_coll(),
            op,
            failed: None,
        }
    }

    fn ptr(&mut self, b: Buf) -> *mut u8 {
        let (base, len) = match b.place {
            Place::Send => (self.send.cast_mut(), self.send_len),
            Place::Recv => (self.recv, self.recv_len),
            Place::Tmp => (self.tmp.as_mut_ptr(), self.tmp.len()),
        };
        assert!(
            b.at.checked_add(b.len).is_some_and(|end| end <= len),
            "a schedule's piece {b:?} lies inside its place of {len} bytes"
        );
        // SAFETY: inside the place (asserted), whose bytes are the
        // schedule's (its creator's contract).
        unsafe { base.add(b.at) }
    }

    /// Moves the collective on: `Some` once it ended.
    pub fn step(&mut self, rank: &mut Rank) -> Option<Result<()>> {
        loop {
            let Some(round) = self.rounds.front() else {
                return Some(self.failed.take().map_or(Ok(()), Err));
            };
            if !self.started {
                self.started = true;
                let xfers = round.xfers.clone();
                for x in xfers {
                    if let Err(e) = self.post(rank, x) {
                        self.failed.get_or_insert(e);
                    }
                }
            }
            for q in std::mem::take(&mut self.posted) {
                match rank.test(q) {
                    Ok(st) => {
                        if let Some(f) = st.fault {
                            self.failed.get_or_insert(Error::new(
                                MPI_ERR_OTHER,
                                format!("a collective's message failed: {f:?}"),
                            ));
                        }
                    }
                    Err(q) => self.posted.push(q),
                }
            }
            if !self.posted.is_empty() {
                return None;
            }
            let round = self.rounds.pop_front().expect("a round");
            self.started = false;
            if self.failed.is_none() {
                for l in round.after {
                    self.local(l);
                }
            }
        }
    }

    fn post(&mut self, rank: &mut Rank, x: Xfer) -> Result<()> {
        let (ctx, tag) = (self.context, self.tag);
        match x {
            Xfer::Send(to, b) => {
                let p = self.ptr(b);
                let dest = self.group.job_rank(to);
                // SAFETY: the piece's bytes are the schedule's until it ends,
                // which is after this request ended.
                let q = unsafe { rank.isend_in(dest, tag, ctx, p, b.len) }.map_err(send_error)?;
                self.posted.push(q);
            }
            Xfer::Recv(from, b) => {
                let p = self.ptr(b);
                let src = Source::Rank(self.group.job_rank(from));
                // SAFETY: as above.
                let q = unsafe { rank.irecv_in(src, TagSel::Tag(tag), ctx, p, b.len) }
                    .map_err(recv_error)?;
                self.posted.push(q);
            }
        }
        Ok(())
    }

    fn local(&mut self, l: Local) {
        match l {
            Local::Copy { from, to } => {
                let (f, t) = (self.ptr(from), self.ptr(to));
                // SAFETY: both pieces are the schedule's (`ptr`); a copy
                // within one place may overlap only when it is in place.
                unsafe { std::ptr::copy(f, t, from.len.min(to.len)) };
            }
            Local::Reduce { from, into } => {
                let (op, ty) = self.op.expect("a reducing schedule has its reduction");
                let (f, t) = (self.ptr(from), self.ptr(into));
                // SAFETY: two distinct scratch or caller pieces (a plan
                // never reduces a piece into itself), each the schedule's.
                let (other, acc) = unsafe {
                    (
                        std::slice::from_raw_parts(f, from.len),
                        std::slice::from_raw_parts_mut(t, into.len),
                    )
                };
                reduce::apply(op, ty, acc, other);
            }
        }
    }

    /// Waits for the collective to end.
    pub fn wait(mut self, rank: &mut Rank) -> Result<()> {
        if let Some(r) = self.step(rank) {
            return r;
        }
        rank.wait_until(|r| self.step(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who sends to whom in each round, for every member: each send has
    /// its receive in the same round at its peer.
    fn check_pairs(plans: &[Plan]) {
        let rounds = plans.iter().map(|p| p.rounds.len()).max().unwrap();
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for p in plans {
            for r in &p.rounds {
                for x in &r.xfers {
                    match *x {
                        Xfer::Send(to, b) => sends.push((p.me, to, b.len)),
                        Xfer::Recv(from, b) => recvs.push((from, p.me, b.len)),
                    }
                }
            }
        }
        sends.sort();
        recvs.sort();
        assert_eq!(sends, recvs, "every send is received ({rounds} rounds)");
    }

    #[test]
    fn every_send_of_every_collective_has_its_receive() {
        for n in 1..=9u16 {
            for root in 0..n {
                let plan = |f: &dyn Fn(&mut Plan)| -> Vec<Plan> {
                    (0..n)
                        .map(|me| {
                            let mut p = Plan::new(n, me);
                            f(&mut p);
                            p
                        })
                        .collect()
                };
                let b = Buf::new(Place::Recv, 0, 8);
                let all = Buf::new(Place::Recv, 0, 8 * n as usize);
                check_pairs(&plan(&|p| p.barrier()));
                check_pairs(&plan(&|p| p.bcast(root, b)));
                check_pairs(&plan(&|p| p.reduce(root, Buf::new(Place::Send, 0, 8), b)));
                check_pairs(&plan(&|p| p.gather(root, Buf::new(Place::Send, 0, 8), all)));
                check_pairs(&plan(&|p| p.scatter(root, Buf::new(Place::Send, 0, 64), b)));
                check_pairs(&plan(&|p| p.alltoall(Buf::new(Place::Send, 0, 64), all, 8)));
            }
        }
    }
}
