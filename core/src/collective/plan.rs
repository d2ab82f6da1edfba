//! Schedules of collectives over point-to-point messages, for any group
//! size: which peer each rank sends to and receives from in each round,
//! which bytes, and what it does with them. A plan holds no buffers and
//! moves nothing: the shell posts the round's receives and sends (tagged
//! with the round's index and the message's part), waits for them, and
//! reduces where the round says, then goes to the next round.
//!
//! - Barrier: dissemination, ⌈log₂ n⌉ rounds of empty messages.
//! - Allreduce: recursive doubling among the largest power of two p ≤ n
//!   ranks, the other n − p first folding their data into a partner and
//!   getting the result back at the end: log₂ p + 2 rounds. From
//!   [`HALVING_FROM`] bytes, Rabenseifner's: a reduce-scatter by recursive
//!   halving, then an allgather by recursive doubling, so each rank moves
//!   about 2·len bytes instead of len·log₂ p (2·log₂ p + 2 rounds).
//! - Reduce_scatter (equal blocks): the allreduce of all n blocks, each
//!   rank keeping its own block; log rounds, n blocks a message.
//! - Allgather: Bruck's algorithm, ⌈log₂ n⌉ rounds, received straight into
//!   place (a message that wraps past the last rank goes in two parts).
//! - Bcast, Scatter (from a root), Reduce, Gather (to it): a binomial tree
//!   over the ranks counted from the root, ⌈log₂ n⌉ rounds; the root's
//!   half of what it holds goes down (Scatter: the blocks of the subtree
//!   below), or each subtree's comes up (Reduce: reduced at each step;
//!   Gather: its blocks, which lie together counted from the root, in at
//!   most two parts).
//! - Alltoall: pairwise exchange, n − 1 rounds (in round i, block for
//!   rank + i out, from rank − i in), after this rank's own block is
//!   copied across; the buffer is the n blocks out, then the n blocks in.

/// The allreduce size from which the buffer is reduce-scattered by
/// recursive halving and gathered back, rather than exchanged whole.
pub const HALVING_FROM: usize = 8192;

/// A byte range of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub at: usize,
    pub len: usize,
}

impl Span {
    pub const EMPTY: Span = Span { at: 0, len: 0 };

    /// The range as indices of a slice. A caller-made span whose end
    /// passes the address space ends there: no slice has it, so a lookup
    /// with it fails instead of overflowing.
    pub fn range(&self) -> core::ops::Range<usize> {
        self.at..self.at.saturating_add(self.len)
    }
}

/// One message of a round: to or from `peer`, the bytes at `span`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub peer: u16,
    /// 0, or 1 for the second part of a message that wraps.
    pub part: u8,
    pub span: Span,
}

/// What one rank does in one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// The round's number, the same at the sender and the receiver of each
    /// of its messages: tag them with it (and the part).
    pub index: u16,
    /// Sent from the data buffer.
    pub sends: [Option<Msg>; 2],
    /// Received into the data buffer, or (`reduce`) into the scratch
    /// buffer at the same span and then reduced into the data there.
    pub recvs: [Option<Msg>; 2],
    pub reduce: bool,
}

/// Which collective, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    Barrier,
    /// Every rank ends with the element-wise reduction of every rank's
    /// `len` bytes.
    Allreduce {
        len: usize,
    },
    /// Rank i contributes block i of an n-block buffer (`block` bytes at
    /// `i × block`); every rank ends with all of them.
    Allgather {
        block: usize,
    },
    /// Every rank contributes n blocks; rank i ends with the reduction of
    /// everyone's block i, at `i × block` of its buffer.
    ReduceScatter {
        block: usize,
    },
    /// Every rank ends with the root's `len` bytes.
    Bcast {
        len: usize,
        root: u16,
    },
    /// The root ends with the element-wise reduction of every rank's
    /// `len` bytes (the others' data is left partly reduced).
    Reduce {
        len: usize,
        root: u16,
    },
    /// Rank i contributes block i of an n-block buffer; the root ends with
    /// all of them.
    Gather {
        block: usize,
        root: u16,
    },
    /// The root holds n blocks; rank i ends with block i (at `i × block`).
    Scatter {
        block: usize,
        root: u16,
    },
    /// Rank i holds n blocks, block j for rank j, then n blocks of room;
    /// it ends with block i of every rank j at `(n + j) × block`.
    Alltoall {
        block: usize,
    },
}

impl Collective {
    /// The rank a rooted collective starts from or ends at.
    pub fn root(&self) -> Option<u16> {
        match *self {
            Collective::Bcast { root, .. }
            | Collective::Reduce { root, .. }
            | Collective::Gather { root, .. }
            | Collective::Scatter { root, .. } => Some(root),
            _ => None,
        }
    }
}

/// A plan that cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// A group needs at least one rank, and this rank must be one of them.
    Rank { me: u16, n: u16 },
    /// The root is not a rank of the group.
    Root { root: u16, n: u16 },
    /// The data (`len`, or n blocks) is more than [`MAX_DATA`] bytes.
    TooLarge,
}

/// The most data a collective moves: every round sends part of it as one
/// message, whose length the wire carries in 32 bits.
pub const MAX_DATA: usize = u32::MAX as usize;

/// Rounds a collective may have: a tag carries the round in 15 bits.
pub const MAX_ROUNDS: u16 = 1 << 15;

/// One rank's schedule of one collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    what: Collective,
    n: u16,
    me: u16,
    /// Bytes of the data buffer.
    len: usize,
}

/// Rounds for a distance doubling from 1 up to n: ⌈log₂ n⌉.
fn log2_ceil(n: u16) -> u16 {
    (n.max(1) as u32).next_power_of_two().trailing_zeros() as u16
}

impl Plan {
    /// Rank `me`'s part of `what` in a group of `n` ranks.
    pub fn new(what: Collective, n: u16, me: u16) -> Result<Plan, PlanError> {
        if n == 0 || me >= n {
            return Err(PlanError::Rank { me, n });
        }
        if let Some(root) = what.root().filter(|&r| r >= n) {
            return Err(PlanError::Root { root, n });
        }
        let len = match what {
            Collective::Barrier => Some(0),
            Collective::Allreduce { len }
            | Collective::Bcast { len, .. }
            | Collective::Reduce { len, .. } => Some(len),
            Collective::Allgather { block }
            | Collective::ReduceScatter { block }
            | Collective::Gather { block, .. }
            | Collective::Scatter { block, .. } => block.checked_mul(n as usize),
            // Its n − 1 rounds must fit a tag's round field.
            Collective::Alltoall { .. } if n > MAX_ROUNDS => None,
            Collective::Alltoall { block } => block.checked_mul(2 * n as usize),
        };
        let len = len.filter(|&l| l <= MAX_DATA).ok_or(PlanError::TooLarge)?;
        Ok(Plan { what, n, me, len })
    }

    /// Bytes of the data buffer: the contribution in, the result out.
    pub fn data_len(&self) -> usize {
        self.len
    }

    /// Bytes of the scratch buffer the reductions receive into.
    pub fn scratch_len(&self) -> usize {
        match self.what {
            Collective::Allreduce { .. }
            | Collective::ReduceScatter { .. }
            | Collective::Reduce { .. } => self.len,
            _ => 0,
        }
    }

    /// Where the result lies in the data buffer once every round is done.
    pub fn result(&self) -> Span {
        match self.what {
            Collective::ReduceScatter { block } | Collective::Scatter { block, .. } => Span {
                at: self.me as usize * block,
                len: block,
            },
            Collective::Alltoall { .. } => Span {
                at: self.len / 2,
                len: self.len / 2,
            },
            _ => Span {
                at: 0,
                len: self.len,
            },
        }
    }

    /// Round numbers run `0..rounds()`; a rank may have nothing to do in some.
    pub fn rounds(&self) -> u16 {
        match self.what {
            Collective::Barrier
            | Collective::Allgather { .. }
            | Collective::Bcast { .. }
            | Collective::Reduce { .. }
            | Collective::Gather { .. }
            | Collective::Scatter { .. } => log2_ceil(self.n),
            Collective::Alltoall { .. } => self.n - 1,
            Collective::Allreduce { .. } if self.halving() => 2 * self.doubling().2 + 2,
            Collective::Allreduce { .. } | Collective::ReduceScatter { .. } => {
                self.doubling().2 + 2
            }
        }
    }

    /// A large allreduce: halving, then doubling.
    fn halving(&self) -> bool {
        matches!(self.what, Collective::Allreduce { len } if len >= HALVING_FROM)
    }

    /// This rank's part of round `index`; `None` if it has none.
    pub fn round(&self, index: u16) -> Option<Round> {
        if index >= self.rounds() {
            return None;
        }
        match self.what {
            Collective::Barrier => Some(self.dissemination(index)),
            Collective::Allgather { block } => Some(self.bruck(index, block)),
            Collective::Allreduce { .. } | Collective::ReduceScatter { .. } => {
                self.recursive_doubling(index)
            }
            Collective::Bcast { root, .. } | Collective::Scatter { root, .. } => {
                self.down(index, root)
            }
            Collective::Reduce { root, .. } | Collective::Gather { root, .. } => {
                self.up(index, root)
            }
            Collective::Alltoall { block } => Some(self.pairwise(index, block)),
        }
    }

    /// What this rank copies within its data before any round: its own
    /// block of an alltoall, from its place out to its place in.
    pub fn local_copy(&self) -> Option<(Span, Span)> {
        match self.what {
            Collective::Alltoall { block } => {
                let me = self.me as usize;
                let from = Span {
                    at: me * block,
                    len: block,
                };
                let to = Span {
                    at: (self.n as usize + me) * block,
                    len: block,
                };
                Some((from, to))
            }
            _ => None,
        }
    }

    /// Round `index` of an alltoall: at distance `index + 1`, the block
    /// for the rank that far ahead goes out, the one from the rank that
    /// far behind comes in.
    fn pairwise(&self, index: u16, block: usize) -> Round {
        let (n, me, i) = (self.n as u32, self.me as u32, index as u32 + 1);
        let (to, from) = ((me + i) % n, (me + n - i) % n);
        let msg = |peer: u32, at: u32| {
            Some(Msg {
                peer: peer as u16,
                part: 0,
                span: Span {
                    at: at as usize * block,
                    len: block,
                },
            })
        };
        Round {
            index,
            sends: [msg(to, to), None],
            recvs: [msg(from, n + from), None],
            reduce: false,
        }
    }

    /// This rank counted from `root`.
    fn counted_from(&self, root: u16) -> u32 {
        let n = self.n as u32;
        (self.me as u32 + n - root as u32) % n
    }

    /// What goes between this rank and `peer` (counted from `root`) in a
    /// tree step over the subtree `[first, end)` counted from the root:
    /// the whole buffer, or those ranks' blocks.
    fn subtree(&self, root: u16, peer: u32, first: u32, end: u32) -> [Option<Msg>; 2] {
        let real = (peer + root as u32) % self.n as u32;
        match self.what {
            Collective::Gather { block, .. } | Collective::Scatter { block, .. } => {
                let start = (first + root as u32) % self.n as u32;
                self.wrapped(real as u16, start, end - first, block)
            }
            _ => [
                Some(Msg {
                    peer: real as u16,
                    part: 0,
                    span: Span {
                        at: 0,
                        len: self.len,
                    },
                }),
                None,
            ],
        }
    }

    /// Round `index` of a tree from the root down (Bcast, Scatter): at
    /// distance 2^(rounds − 1 − index), a rank holding a subtree hands its
    /// upper half to that half's first rank.
    fn down(&self, index: u16, root: u16) -> Option<Round> {
        let n = self.n as u32;
        let v = self.counted_from(root);
        let dist = 1u32 << (self.rounds() - 1 - index);
        let (sends, recvs) = if v.is_multiple_of(2 * dist) && v + dist < n {
            let end = (v + 2 * dist).min(n);
            (self.subtree(root, v + dist, v + dist, end), [None, None])
        } else if v % (2 * dist) == dist {
            let end = (v + dist).min(n);
            ([None, None], self.subtree(root, v - dist, v, end))
        } else {
            return None;
        };
        Some(Round {
            index,
            sends,
            recvs,
            reduce: false,
        })
    }

    /// Round `index` of a tree up to the root (Reduce, Gather): at
    /// distance 2^index, a subtree's first rank hands what it gathered to
    /// the rank below, which reduces it in (Reduce) or places it (Gather).
    fn up(&self, index: u16, root: u16) -> Option<Round> {
        let n = self.n as u32;
        let v = self.counted_from(root);
        let dist = 1u32 << index;
        let reduce = matches!(self.what, Collective::Reduce { .. });
        let (sends, recvs, reduce) = if v % (2 * dist) == dist {
            let end = (v + dist).min(n);
            (self.subtree(root, v - dist, v, end), [None, None], false)
        } else if v.is_multiple_of(2 * dist) && v + dist < n {
            let end = (v + 2 * dist).min(n);
            (
                [None, None],
                self.subtree(root, v + dist, v + dist, end),
                reduce,
            )
        } else {
            return None;
        };
        Some(Round {
            index,
            sends,
            recvs,
            reduce,
        })
    }

    /// Bytes `[seg(i), seg(i + 1))` are segment `i` of `p`: split on
    /// 8-byte boundaries, so every segment holds whole elements of any type.
    fn seg(&self, i: u32, p: u32) -> usize {
        if i >= p {
            return self.len;
        }
        let units = (self.len / 8) as u128;
        (units * i as u128 / p as u128) as usize * 8
    }

    /// Segments `[lo, lo + count)` of `p` as a message to or from `peer`.
    fn segs(&self, peer: u32, lo: u32, count: u32, p: u32) -> [Option<Msg>; 2] {
        let at = self.seg(lo, p);
        let msg = Msg {
            peer: peer as u16,
            part: 0,
            span: Span {
                at,
                len: self.seg(lo + count, p) - at,
            },
        };
        [Some(msg), None]
    }

    fn dissemination(&self, index: u16) -> Round {
        let (n, me) = (self.n as u32, self.me as u32);
        let dist = 1u32 << index;
        let msg = |peer: u32| {
            Some(Msg {
                peer: peer as u16,
                part: 0,
                span: Span::EMPTY,
            })
        };
        Round {
            index,
            sends: [msg((me + dist) % n), None],
            recvs: [msg((me + n - dist % n) % n), None],
            reduce: false,
        }
    }

    /// Blocks `[first, first + count)` counted from this rank, as the
    /// messages of ranks in place (two when they wrap past the last rank).
    fn blocks(&self, peer: u16, first: u32, count: u32, block: usize) -> [Option<Msg>; 2] {
        let start = (self.me as u32 + first) % self.n as u32;
        self.wrapped(peer, start, count, block)
    }

    /// `count` blocks from block `start` on, wrapping past the last rank
    /// to the first, as the messages of ranks in place.
    fn wrapped(&self, peer: u16, start: u32, count: u32, block: usize) -> [Option<Msg>; 2] {
        let n = self.n as u32;
        let head = count.min(n - start);
        let span = |from: u32, blocks: u32| Span {
            at: from as usize * block,
            len: blocks as usize * block,
        };
        let first = Msg {
            peer,
            part: 0,
            span: span(start, head),
        };
        let rest = (count > head).then_some(Msg {
            peer,
            part: 1,
            span: span(0, count - head),
        });
        [Some(first), rest]
    }

    fn bruck(&self, index: u16, block: usize) -> Round {
        let (n, me) = (self.n as u32, self.me as u32);
        let dist = 1u32 << index;
        let count = dist.min(n - dist);
        let to = ((me + n - dist) % n) as u16;
        let from = ((me + dist) % n) as u16;
        Round {
            index,
            sends: self.blocks(to, 0, count, block),
            recvs: self.blocks(from, dist, count, block),
            reduce: false,
        }
    }

    /// (p, r, d): the largest power of two p ≤ n, the r = n − p ranks
    /// folded in, and d = log₂ p doubling rounds.
    fn doubling(&self) -> (u32, u32, u16) {
        let n = self.n as u32;
        let d = 31 - n.leading_zeros();
        let p = 1u32 << d;
        (p, n - p, d as u16)
    }

    fn recursive_doubling(&self, index: u16) -> Option<Round> {
        let (_, r, d) = self.doubling();
        let me = self.me as u32;
        let all = Span {
            at: 0,
            len: self.len,
        };
        let msg = |peer: u32| {
            Some(Msg {
                peer: peer as u16,
                part: 0,
                span: all,
            })
        };
        let folded = me < 2 * r;
        let round = |sends, recvs, reduce| {
            Some(Round {
                index,
                sends,
                recvs,
                reduce,
            })
        };
        if index == 0 {
            // The first 2r ranks pair up: even ones hand their data over.
            return match (folded, me % 2) {
                (false, _) => None,
                (true, 0) => round([msg(me + 1), None], [None, None], false),
                (true, _) => round([None, None], [msg(me - 1), None], true),
            };
        }
        if index == self.rounds() - 1 {
            // ... and get the result back.
            return match (folded, me % 2) {
                (false, _) => None,
                (true, 0) => round([None, None], [msg(me + 1), None], false),
                (true, _) => round([msg(me - 1), None], [None, None], false),
            };
        }
        let virtual_rank = match (folded, me % 2) {
            (true, 0) => return None,
            (true, _) => me / 2,
            (false, _) => me - r,
        };
        let real = |v: u32| if v < r { 2 * v + 1 } else { v + r };
        if !self.halving() {
            let partner = real(virtual_rank ^ (1 << (index - 1)));
            return round([msg(partner), None], [msg(partner), None], true);
        }
        let p = 1u32 << d;
        let v = virtual_rank;
        let k = index as u32;
        if k <= d as u32 {
            // Halving: of the 2·mask segments this rank still holds, keep
            // the half its bit names, send the other to the partner, and
            // reduce what the partner sends of the kept half.
            let mask = p >> k;
            let lo = v & !(2 * mask - 1);
            let (keep, give) = if v & mask == 0 {
                (lo, lo + mask)
            } else {
                (lo + mask, lo)
            };
            let to = real(v ^ mask);
            return round(
                self.segs(to, give, mask, p),
                self.segs(to, keep, mask, p),
                true,
            );
        }
        // Doubling back: send the block of segments held, receive the
        // partner's, which lies beside it.
        let mask = 1u32 << (k - d as u32 - 1);
        let mine = v & !(mask - 1);
        let theirs = (v ^ mask) & !(mask - 1);
        let to = real(v ^ mask);
        round(
            self.segs(to, mine, mask, p),
            self.segs(to, theirs, mask, p),
            false,
        )
    }
}
