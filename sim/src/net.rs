//! The virtual network: what is in flight and when it arrives, by the
//! LogGP model. Each rank's link sends one thing at a time (`G` per byte);
//! everything then takes `L`. On a reliable wire each channel (origin to
//! target: packets and RDMA alike, as one RC queue pair) stays in order;
//! a lossy wire loses, duplicates and reorders packets and has no RDMA.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rmx_core::{RdmaError, RdmaOp, WcResult};

use crate::model::{Model, NetFaults};
use crate::port::RdmaPost;
use crate::rng::Rng;

/// What reaches a rank.
#[derive(Debug)]
pub enum What {
    /// A packet for its receive queue.
    Packet(Vec<u8>),
    /// An RDMA write's bytes land in its memory (and report an immediate
    /// there); then, unless it completed early, its origin learns.
    Land {
        from: u16,
        post: RdmaPost,
        data: Vec<u8>,
        early: bool,
    },
    /// An RDMA read reaches its target: the bytes go back.
    Read { from: u16, post: RdmaPost },
    /// A work request of its own finished; a read's bytes are placed first.
    Complete {
        wr_id: u64,
        result: WcResult,
        place: Option<(RdmaPost, Vec<u8>)>,
    },
    /// Its CPU is free again, or a timer is due.
    Wake,
}

/// Something due at a rank at a virtual time.
#[derive(Debug)]
pub struct Event {
    pub at: u64,
    order: u64,
    pub rank: u16,
    pub what: What,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// Bytes of an RDMA read's request on the wire.
const READ_REQUEST: usize = 16;

/// The network of one job.
pub struct Net {
    pub model: Model,
    pub faults: NetFaults,
    rng: Rng,
    queue: BinaryHeap<Reverse<Event>>,
    order: u64,
    /// When each rank's link is free.
    link: Vec<u64>,
    /// The last arrival on each channel (reliable wire: nothing overtakes it).
    channel: HashMap<(u16, u16), u64>,
    /// Packets and RDMA operations sent.
    pub packets: u64,
    pub rdma: u64,
}

impl Net {
    pub fn new(ranks: u16, model: Model, faults: NetFaults, seed: u64) -> Net {
        Net {
            model,
            faults,
            rng: Rng::new(seed),
            queue: BinaryHeap::new(),
            order: 0,
            link: vec![0; ranks as usize],
            channel: HashMap::new(),
            packets: 0,
            rdma: 0,
        }
    }

    fn push(&mut self, at: u64, rank: u16, what: What) {
        self.order += 1;
        self.queue.push(Reverse(Event {
            at,
            order: self.order,
            rank,
            what,
        }));
    }

    /// The next event, earliest first (ties in the order they were made).
    pub fn pop(&mut self) -> Option<Event> {
        self.queue.pop().map(|Reverse(e)| e)
    }

    /// Nothing is in flight or due.
    pub fn idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Wakes `rank` at `at`.
    pub fn wake(&mut self, at: u64, rank: u16) {
        self.push(at, rank, What::Wake);
    }

    /// When `bytes` posted by `from` at `at` have left its link.
    fn leave(&mut self, at: u64, from: u16, bytes: usize) -> u64 {
        let link = &mut self.link[from as usize];
        let start = at.max(*link);
        *link = start + self.model.wire_ns(bytes);
        *link
    }

    fn jitter(&mut self) -> u64 {
        match self.faults.jitter_ns {
            0 => 0,
            j => self.rng.below(j),
        }
    }

    /// When something that left at `left` arrives on channel `from → to`,
    /// `extra` late: never before what went that way earlier.
    fn arrive(&mut self, left: u64, from: u16, to: u16, extra: u64) -> u64 {
        let at = left + self.model.latency_ns + self.jitter() + extra;
        let last = self.channel.entry((from, to)).or_insert(0);
        let at = at.max(*last);
        *last = at;
        at
    }

    /// A packet posted by `from` to `to` at `at`.
    pub fn send(&mut self, at: u64, from: u16, to: u16, bytes: Vec<u8>) {
        self.packets += 1;
        let left = self.leave(at, from, bytes.len());
        if !self.faults.lossy() {
            let at = self.arrive(left, from, to, 0);
            self.push(at, to, What::Packet(bytes));
            return;
        }
        if self.rng.chance(self.faults.loss_ppm) {
            return;
        }
        let copies = if self.rng.chance(self.faults.dup_ppm) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = left + self.model.latency_ns + self.jitter();
            if self.faults.reorder_ns > 0 && self.rng.chance(self.faults.reorder_ppm) {
                at += self.rng.below(self.faults.reorder_ns);
            }
            self.push(at, to, What::Packet(bytes.clone()));
        }
    }

    /// An RDMA operation `from` posted at `at`: `data`, a write's bytes
    /// (read when posted) or the local access error; `remote_ok` is whether
    /// the target's registration takes it, for a write that completes
    /// before it lands.
    pub fn rdma(
        &mut self,
        at: u64,
        from: u16,
        post: RdmaPost,
        data: Result<Vec<u8>, RdmaError>,
        remote_ok: bool,
    ) {
        self.rdma += 1;
        let wr_id = post.wr_id;
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                let at = self.leave(at, from, 0);
                let result = Err(e);
                let place = None;
                self.push(
                    at,
                    from,
                    What::Complete {
                        wr_id,
                        result,
                        place,
                    },
                );
                return;
            }
        };
        match post.op {
            RdmaOp::Write => {
                let len = data.len();
                let left = self.leave(at, from, len);
                let early = self.faults.land_late_ns > 0;
                let late = match early {
                    true => self.rng.below(self.faults.land_late_ns),
                    false => 0,
                };
                let land = self.arrive(left, from, post.peer, late);
                if early {
                    let result = if remote_ok {
                        Ok(())
                    } else {
                        Err(RdmaError::Access)
                    };
                    self.push(
                        left,
                        from,
                        What::Complete {
                            wr_id,
                            result,
                            place: None,
                        },
                    );
                }
                let to = post.peer;
                self.push(
                    land,
                    to,
                    What::Land {
                        from,
                        post,
                        data,
                        early,
                    },
                );
            }
            RdmaOp::Read => {
                let left = self.leave(at, from, READ_REQUEST);
                let reach = self.arrive(left, from, post.peer, 0);
                let to = post.peer;
                self.push(reach, to, What::Read { from, post });
            }
        }
    }

    /// A write landed at `target` (`result`): its origin learns one
    /// latency later, unless it already did.
    pub fn landed(&mut self, at: u64, from: u16, post: &RdmaPost, early: bool, result: WcResult) {
        if !early {
            self.push(
                at + self.model.latency_ns,
                from,
                What::Complete {
                    wr_id: post.wr_id,
                    result,
                    place: None,
                },
            );
        }
    }

    /// A read reached `target` at `at`: `bytes` (or the refusal) return.
    pub fn read_back(
        &mut self,
        at: u64,
        target: u16,
        from: u16,
        post: RdmaPost,
        bytes: Result<Vec<u8>, RdmaError>,
    ) {
        let n = bytes.as_ref().map_or(0, Vec::len);
        let left = self.leave(at, target, n);
        let back = self.arrive(left, target, from, 0);
        let (result, place) = match bytes {
            Ok(b) => (Ok(()), Some((post, b))),
            Err(e) => (Err(e), None),
        };
        self.push(
            back,
            from,
            What::Complete {
                wr_id: post.wr_id,
                result,
                place,
            },
        );
    }
}
