//! Zero-copy eager sends: the registration cache, the endpoint's zero-copy
//! path, and the tracker + cache against a reference model.

use std::collections::HashMap;

use proptest::prelude::*;
use rmx_core::reuse::{CacheError, CostModel, Invalidation, Pending, RegCache, RegId, SendReuse};
use rmx_core::*;
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;
use rmx_proptest::reuse::{frequent, Frequent, NEVER_STOP, PAGE};

fn nic() -> MemNic {
    MemNic::new(16, 9000)
}

// ---------------------------------------------------------------- the cache

#[test]
fn registration_is_page_granular_and_hits_any_covering_entry() {
    let mut n = nic();
    let mut c: RegCache<4> = RegCache::new(PAGE).unwrap();
    assert_eq!(c.pages(0x1001, 1), (0x1000, 0x2000));
    assert_eq!(c.pages(0x1fff, 2), (0x1000, 0x3000), "page-crossing");
    let id = c.register(&mut n, 0x1100, 0x1f00).unwrap();
    assert_eq!(
        n.regs.values().copied().collect::<Vec<_>>(),
        [(0x1000, 0x2000)]
    );
    assert_eq!(c.lookup(0x2000, 0x100), Some(id), "inside the pages");
    assert_eq!(c.lookup(0x1000, 0x2000), Some(id), "exactly the pages");
    assert_eq!(c.lookup(0x2f00, 0x200), None, "runs past the end");
    assert_eq!(c.lookup(0xf00, 0x200), None, "starts before");
}

#[test]
fn released_entries_stay_registered_until_evicted_lru_first() {
    let mut n = nic();
    let mut c: RegCache<2> = RegCache::new(PAGE).unwrap();
    let a = c.register(&mut n, 0x10000, 10).unwrap();
    c.acquire(a);
    c.release(&mut n, a);
    let b = c.register(&mut n, 0x20000, 10).unwrap();
    c.acquire(b);
    c.release(&mut n, b);
    assert_eq!(
        (n.registrations, n.deregistrations),
        (2, 0),
        "lazy: nothing deregistered"
    );
    // `a` used again: now `b` is the least recently used.
    let hit = c.lookup(0x10000, 10).unwrap();
    c.acquire(hit);
    c.release(&mut n, hit);
    c.register(&mut n, 0x30000, 10).unwrap();
    assert_eq!(n.deregistrations, 1);
    assert!(c.lookup(0x20000, 10).is_none(), "b was evicted");
    assert!(c.lookup(0x10000, 10).is_some(), "a survived");
    assert_eq!(c.stats().evictions, 1);
}

#[test]
fn a_full_cache_of_referenced_entries_refuses_without_evicting() {
    let mut n = nic();
    let mut c: RegCache<1> = RegCache::new(PAGE).unwrap();
    let a = c.register(&mut n, 0x10000, 10).unwrap();
    c.acquire(a);
    assert_eq!(c.register(&mut n, 0x20000, 10), Err(CacheError::Full));
    assert_eq!((n.registrations, n.deregistrations), (1, 0));
    assert_eq!(c.stats().full, 1);
    n.refuse_registration = true;
    c.release(&mut n, a);
    assert_eq!(
        c.register(&mut n, 0x20000, 10),
        Err(CacheError::Register(RegError::NoResources))
    );
    n.refuse_registration = false;
    assert!(
        c.register(&mut n, 0x20000, 10).is_ok(),
        "a refused registration frees its slot"
    );
    assert_eq!(RegCache::<1>::new(3000).err(), Some(CacheError::PageSize));
}

#[test]
fn invalidation_drops_unused_entries_now_and_in_use_ones_on_release() {
    let mut n = nic();
    let mut c: RegCache<4> = RegCache::new(PAGE).unwrap();
    let idle = c.register(&mut n, 0x10000, 100).unwrap();
    c.acquire(idle);
    c.release(&mut n, idle);
    let busy = c.register(&mut n, 0x11000, 100).unwrap();
    c.acquire(busy);
    let other = c.register(&mut n, 0x40000, 100).unwrap();
    // One byte of each of the first two pages changes.
    assert_eq!(c.invalidate(&mut n, 0x10fff, 2), 2);
    assert_eq!(n.deregistrations, 1, "the idle entry goes at once");
    assert!(
        c.lookup(0x11000, 100).is_none(),
        "the busy one is never hit again"
    );
    assert!(c.lookup(0x10000, 100).is_none());
    assert_eq!(c.occupancy(), (2, 1), "held: the busy one and the other");
    c.release(&mut n, busy);
    assert_eq!(n.deregistrations, 2, "deregistered with its last reference");
    assert_eq!(
        c.lookup(0x40000, 100),
        Some(other),
        "outside the range: kept"
    );
    c.flush(&mut n);
    assert_eq!((c.occupancy(), n.regs.len()), ((0, 0), 0));
}

// ------------------------------------------------------ the endpoint path

type Ep = Endpoint<Heap, Frequent<8>>;
type PlainEp = Endpoint<Heap>;
const SIZES: Sizes = sizes(2, 8, 32, 16, 32);

fn pair(cfg: Config, uses: u32) -> (Ep, MemNic, Ep, MemNic) {
    let mk = |me| {
        Ep::with_reuse(
            cfg,
            me,
            2,
            Tables::new(&SIZES),
            frequent(uses, 64, 64, NEVER_STOP),
        )
        .unwrap()
    };
    (mk(0), nic(), mk(1), nic())
}

fn pump<Z: SendReuse>(from: &mut MemNic, to: &mut Endpoint<Heap, Z>, to_nic: &mut MemNic) {
    for (_, p) in from.outbox.drain(..).collect::<Vec<_>>() {
        let b = to_nic.deliver(p);
        to.on_receive(0, to_nic, b);
    }
}

/// Receives one message on `b` and returns its bytes.
fn recv_one<Z: SendReuse>(b: &mut Endpoint<Heap, Z>, bn: &mut MemNic, cap: usize) -> Vec<u8> {
    let d = bn.user_buf(vec![0; cap]);
    let r = b
        .irecv(0, bn, Source::Any, TagSel::Any, 0, d, cap as u32)
        .unwrap();
    let st = b.test(r).unwrap().expect("message was waiting");
    bn.user[d.0 as usize][..st.len as usize].to_vec()
}

#[test]
fn a_frequent_buffer_goes_zero_copy_after_its_threshold() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(8192, 8), 3);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let s = an.user_buf(data.clone());
    for i in 0..6 {
        assert_eq!(a.isend(0, &mut an, 1, i, 0, s, 1000), Ok(Request::COMPLETE));
        pump(&mut an, &mut b, &mut bn);
        assert_eq!(recv_one(&mut b, &mut bn, 1000), data, "send {i}");
    }
    // Uses 1 and 2 count; from the 3rd the NIC gathers from the user buffer.
    assert_eq!(an.gathered, 4);
    assert_eq!(a.stats().zero_copy_sends, 4);
    assert_eq!(
        (an.registrations, an.deregistrations),
        (1, 0),
        "registered once, kept"
    );
    let r = a.reuse().stats();
    assert_eq!((r.counted, r.zero_copy), (2, 4));
}

#[test]
fn unreliable_transports_and_small_or_cold_buffers_copy() {
    let mut cfg = Config::unreliable(8192, 8);
    cfg.rto_ns = 1_000_000;
    let (mut a, mut an, ..) = pair(cfg, 1);
    let s = an.user_buf(vec![1; 500]);
    for _ in 0..4 {
        a.isend(0, &mut an, 1, 0, 0, s, 500).unwrap();
    }
    assert_eq!(
        (an.gathered, an.registrations),
        (0, 0),
        "a retransmission would reread the buffer"
    );
    let (mut a, mut an, ..) = pair(Config::reliable(8192, 8), 2);
    let tiny = an.user_buf(vec![1; 8]);
    for _ in 0..4 {
        a.isend(0, &mut an, 1, 0, 0, tiny, 8).unwrap();
    }
    assert_eq!(
        an.gathered, 0,
        "8 B: below the cost model's smallest profitable size"
    );
    assert_eq!(a.reuse().stats().unprofitable, 4);
}

#[test]
fn a_zero_copy_send_completing_later_holds_its_request_and_registration() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(8192, 8), 1);
    an.later = true;
    let s = an.user_buf(vec![9; 3000]);
    let r = a.isend(0, &mut an, 1, 0, 0, s, 3000).unwrap();
    assert_ne!(r, Request::COMPLETE, "the NIC still reads the user buffer");
    assert_eq!(a.test(r), Ok(None));
    // The memory is replaced while the NIC reads it: the entry is dropped
    // from lookups but deregistered only when the send completes.
    let addr = an.user_addr[s.0 as usize];
    a.invalidate(
        &mut an,
        Invalidation::Range {
            start: addr,
            len: 1,
        },
    );
    assert_eq!(an.deregistrations, 0);
    a.on_send_complete(&mut an, SlotId(0));
    assert_eq!(an.deregistrations, 1);
    assert!(a.test(r).unwrap().is_some());
    pump(&mut an, &mut b, &mut bn);
    assert_eq!(recv_one(&mut b, &mut bn, 3000), vec![9; 3000]);
    // The next send registers afresh.
    an.later = false;
    a.isend(0, &mut an, 1, 0, 0, s, 3000).unwrap();
    assert_eq!(an.registrations, 2);
}

#[test]
fn a_busy_gather_falls_back_to_the_copy_path_without_loss() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(8192, 8), 1);
    let s = an.user_buf(vec![5; 700]);
    an.busy = true;
    let r = a.isend(0, &mut an, 1, 0, 0, s, 700).unwrap();
    assert_eq!(
        a.test(r),
        Ok(Some(Status {
            source: 0,
            tag: 0,
            len: 0,
            fault: None
        })),
        "copied: complete"
    );
    an.busy = false;
    a.poll(0, &mut an);
    pump(&mut an, &mut b, &mut bn);
    assert_eq!(recv_one(&mut b, &mut bn, 700), vec![5; 700]);
    assert_eq!(an.gathered, 0);
    assert_eq!(an.registrations, 1);
    assert_eq!(a.reuse().cache().occupancy(), (1, 0), "reference released");
}

#[test]
fn queued_invalidations_apply_before_the_next_send() {
    let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(8192, 8), 1);
    let s = an.user_buf_at(0x7000_0000, vec![1; 4096]);
    a.isend(0, &mut an, 1, 0, 0, s, 4096).unwrap();
    pump(&mut an, &mut b, &mut bn);
    assert_eq!(recv_one(&mut b, &mut bn, 4096), vec![1; 4096]);
    // The buffer is unmapped and new memory appears at the same address.
    let pending: Pending<4> = Pending::new();
    pending.push(0x7000_0000, 4096);
    let s2 = an.user_buf_at(0x7000_0000, vec![2; 4096]);
    a.apply_invalidations(&mut an, &pending);
    a.isend(0, &mut an, 1, 0, 0, s2, 4096).unwrap();
    pump(&mut an, &mut b, &mut bn);
    assert_eq!(recv_one(&mut b, &mut bn, 4096), vec![2; 4096]);
    assert_eq!((an.registrations, an.deregistrations), (2, 1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Zero-copy and copy deliver the same bytes, for any size and any
    /// (unaligned, page-crossing) placement of the buffer.
    #[test]
    fn zero_copy_delivers_what_the_copy_path_delivers(
        sends in prop::collection::vec((1u32..=8192, 0u64..8192, any::<u8>()), 1..24)
    ) {
        let (mut a, mut an, mut b, mut bn) = pair(Config::reliable(8192, 8), 1);
        let mut pa = PlainEp::new(Config::reliable(8192, 8), 0, 2, Tables::new(&SIZES)).unwrap();
        let mut pb = PlainEp::new(Config::reliable(8192, 8), 1, 2, Tables::new(&SIZES)).unwrap();
        let (mut pan, mut pbn) = (nic(), nic());
        for (i, &(len, off, seed)) in sends.iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|k| seed.wrapping_add((k * 13) as u8)).collect();
            let at = 0x5000_0000 + (i as u64) * 0x10000 + off;
            let s = an.user_buf_at(at, data.clone());
            a.isend(0, &mut an, 1, i as u32, 0, s, len).unwrap();
            pump(&mut an, &mut b, &mut bn);
            let ps = pan.user_buf_at(at, data.clone());
            pa.isend(0, &mut pan, 1, i as u32, 0, ps, len).unwrap();
            pump(&mut pan, &mut pb, &mut pbn);
            let zc = recv_one(&mut b, &mut bn, 8192);
            let cp = recv_one(&mut pb, &mut pbn, 8192);
            pump(&mut bn, &mut a, &mut an);
            pump(&mut pbn, &mut pa, &mut pan);
            prop_assert_eq!(&zc, &data);
            prop_assert_eq!(zc, cp);
        }
        let cost = rmx_proptest::reuse::model(1);
        let profitable = sends.iter().filter(|s| cost.min_reuse(s.0).is_some()).count();
        prop_assert_eq!(an.gathered, profitable, "every send the cost model admits went zero-copy");
        prop_assert_eq!(pan.gathered, 0);
    }
}

// ------------------------------------------------ against a reference model

/// What a shell saw the policy do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Register(u64, u64),
    Deregister(u64, u64),
}

/// A NIC that logs registrations and remembers each page's generation at
/// registration, so a hit through a stale registration is caught.
#[derive(Default)]
struct LogNic {
    log: Vec<Event>,
    regs: HashMap<u32, (u64, u64, HashMap<u64, u64>)>,
    gen: HashMap<u64, u64>,
    next: u32,
}

impl LogNic {
    fn stale(&self, key: MemKey, addr: u64, len: u64) -> bool {
        let (_, _, seen) = &self.regs[&key.0];
        (addr / PAGE..=(addr + len - 1) / PAGE)
            .any(|p| self.gen.get(&p).copied().unwrap_or(0) != seen.get(&p).copied().unwrap_or(0))
    }
}

impl Nic for LogNic {
    fn slot_mut(&mut self, _: SlotId) -> &mut [u8] {
        unreachable!()
    }
    fn rx(&self, _: RxBuf) -> &[u8] {
        unreachable!()
    }
    fn copy(&mut self, _: Loc, _: Loc, _: usize) {
        unreachable!()
    }
    fn post_send(&mut self, _: u16, _: SlotId, _: usize) -> Result<Posted, PostError> {
        unreachable!()
    }
    fn repost(&mut self, _: RxBuf) {
        unreachable!()
    }
    fn register(&mut self, addr: u64, len: u64) -> Result<MemKey, RegError> {
        self.next += 1;
        let seen = (addr / PAGE..(addr + len) / PAGE)
            .map(|p| (p, self.gen.get(&p).copied().unwrap_or(0)))
            .collect();
        self.regs.insert(self.next, (addr, len, seen));
        self.log.push(Event::Register(addr, len));
        Ok(MemKey(self.next))
    }
    fn deregister(&mut self, key: MemKey) {
        let (a, l, _) = self.regs.remove(&key.0).expect("known key");
        self.log.push(Event::Deregister(a, l));
    }
}

#[derive(Clone, Debug)]
struct MReg {
    start: u64,
    end: u64,
    refs: u32,
    last_use: u64,
    valid: bool,
    seq: u64,
}

/// The policy written the obvious way: a map of counts and a list of registrations.
struct Model {
    cost: CostModel<4>,
    cap: usize,
    /// (count, threshold fixed by the buffer's first send) per (address, class).
    counts: HashMap<(u64, u32), (u32, u32)>,
    regs: Vec<MReg>,
    clock: u64,
    seq: u64,
    log: Vec<Event>,
}

impl Model {
    fn pages(start: u64, len: u64) -> (u64, u64) {
        (start / PAGE * PAGE, (start + len).div_ceil(PAGE) * PAGE)
    }

    fn drop_at(&mut self, i: usize) {
        let r = self.regs.remove(i);
        self.log.push(Event::Deregister(r.start, r.end - r.start));
    }

    /// `Some(index)` of the registration the send gathers through.
    fn send(&mut self, addr: u64, len: u64) -> Option<u64> {
        let threshold = self.cost.threshold(len as u32)?;
        let class = (len as u32).next_power_of_two().trailing_zeros();
        let c = self.counts.entry((addr, class)).or_insert((0, threshold));
        c.0 += 1;
        if c.0 < c.1 {
            return None;
        }
        let end = addr + len;
        let hit = self
            .regs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.valid && r.start <= addr && r.end >= end)
            .max_by_key(|(_, r)| (r.start, r.seq))
            .map(|(i, _)| i);
        let i = match hit {
            Some(i) => i,
            None => {
                if self.regs.len() == self.cap {
                    let victim = self
                        .regs
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.refs == 0)
                        .min_by_key(|(_, r)| r.last_use)
                        .map(|(i, _)| i)?;
                    self.drop_at(victim);
                }
                let (s, e) = Model::pages(addr, len);
                self.seq += 1;
                self.log.push(Event::Register(s, e - s));
                self.regs.push(MReg {
                    start: s,
                    end: e,
                    refs: 0,
                    last_use: 0,
                    valid: true,
                    seq: self.seq,
                });
                self.regs.len() - 1
            }
        };
        self.clock += 1;
        self.regs[i].refs += 1;
        self.regs[i].last_use = self.clock;
        Some(self.regs[i].seq)
    }

    fn release(&mut self, seq: u64) {
        let i = self.regs.iter().position(|r| r.seq == seq).expect("held");
        self.regs[i].refs -= 1;
        if self.regs[i].refs == 0 && !self.regs[i].valid {
            self.drop_at(i);
        }
    }

    fn invalidate(&mut self, start: u64, len: u64) {
        let end = start.saturating_add(len);
        let mut i = 0;
        while i < self.regs.len() {
            let r = &mut self.regs[i];
            if r.valid && r.start < end && r.end > start {
                r.valid = false;
                if r.refs == 0 {
                    self.drop_at(i);
                    continue;
                }
            }
            i += 1;
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Send { buf: u8, len: u16, hold: bool },
    Release(u8),
    Invalidate { buf: u8, len: u16 },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..10, 1u16..9000, any::<bool>()).prop_map(|(buf, len, hold)| Op::Send { buf, len, hold }),
        2 => any::<u8>().prop_map(Op::Release),
        1 => (0u8..10, 1u16..6000).prop_map(|(buf, len)| Op::Invalidate { buf, len }),
        1 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The tracker and cache make the same register/deregister decisions as
    /// the model, and never hand out a registration older than its memory.
    #[test]
    fn tracker_and_cache_match_the_model(
        spacing in prop_oneof![Just(700u64), Just(PAGE + 64), Just(3 * PAGE)],
        uses in 1u32..4,
        ops in prop::collection::vec(op(), 1..150),
    ) {
        const CAP: usize = 4;
        let mut fb: Frequent<CAP> = frequent(uses, 4, 4096, NEVER_STOP);
        let mut nic = LogNic::default();
        let mut m = Model { cost: rmx_proptest::reuse::model(uses), cap: CAP, counts: HashMap::new(), regs: Vec::new(), clock: 0, seq: 0, log: Vec::new() };
        let mut held: Vec<(RegId, u64)> = Vec::new();
        let addr = |b: u8| 0x100_0000 + b as u64 * spacing + 3;
        let mut done = 0;
        for op in ops {
            match op {
                Op::Send { buf, len, hold } => {
                    let (a, l) = (addr(buf), len as u64);
                    let got = fb.plan(&mut nic, a, len as u32);
                    let want = m.send(a, l);
                    prop_assert_eq!(got.is_some(), want.is_some(), "decision for {:#x}+{}", a, l);
                    if let (Some(p), Some(seq)) = (got, want) {
                        prop_assert!(!nic.stale(p.key, a, l), "stale registration handed out");
                        if hold {
                            held.push((p.id, seq));
                        } else {
                            fb.release(&mut nic, p.id);
                            m.release(seq);
                        }
                    }
                }
                Op::Release(k) if !held.is_empty() => {
                    let (id, seq) = held.remove(k as usize % held.len());
                    fb.release(&mut nic, id);
                    m.release(seq);
                }
                Op::Release(_) => {}
                Op::Invalidate { buf, len } => {
                    let (a, l) = (addr(buf), len as u64);
                    for p in a / PAGE..=(a + l - 1) / PAGE {
                        *nic.gen.entry(p).or_insert(0) += 1;
                    }
                    fb.invalidate(&mut nic, Invalidation::Range { start: a, len: l });
                    m.invalidate(a, l);
                }
                Op::Flush => {
                    for g in nic.gen.values_mut() {
                        *g += 1;
                    }
                    for p in 0..0x2000u64 {
                        *nic.gen.entry(0x1000 + p).or_insert(0) += 0;
                    }
                    fb.invalidate(&mut nic, Invalidation::All);
                    m.invalidate(0, u64::MAX);
                }
            }
            // One operation may drop several entries; their order is free.
            let (mut got, mut want) = (nic.log[done..].to_vec(), m.log[done..].to_vec());
            got.sort();
            want.sort();
            prop_assert_eq!(got, want);
            prop_assert_eq!(nic.log.len(), m.log.len());
            done = nic.log.len();
        }
        for (id, seq) in held.drain(..) {
            fb.release(&mut nic, id);
            m.release(seq);
        }
        prop_assert_eq!(nic.log.len(), m.log.len());
        prop_assert!(nic.regs.is_empty() || m.regs.iter().all(|r| r.valid), "only valid entries outlive their users");
    }
}

/// A reliable transport reports a dead peer by completing its sends with an
/// error: the zero-copy send's request ends with `PeerFailed` (before, it
/// ended as if delivered), its registration is released, and the peer is
/// failed at the next poll.
#[test]
fn a_zero_copy_send_completed_with_an_error_fails_its_request_and_its_peer() {
    let (mut a, mut an, _, _) = pair(Config::reliable(8192, 8), 1);
    an.later = true;
    let s = an.user_buf(vec![9; 3000]);
    let r = a.isend(0, &mut an, 1, 0, 0, s, 3000).unwrap();
    assert_ne!(r, Request::COMPLETE);
    let w = an.owed.remove(0);
    a.on_completion(&mut an, w.wr_id(), Err(RdmaError::Down));
    let st = a.test(r).unwrap().expect("ended");
    assert_eq!(st.fault, Some(RecvFault::PeerFailed));
    assert_eq!(a.stats().send_faults, 1);
    assert_eq!(an.deregistrations, 0, "the cache keeps it, released");
    a.poll(0, &mut an);
    assert!(a.failed(1));
    assert_eq!(
        a.isend(0, &mut an, 1, 0, 0, s, 3000),
        Err(SendError::PeerFailed)
    );
    // A key error fails that send only.
    let (mut a, mut an, _, _) = pair(Config::reliable(8192, 8), 1);
    an.later = true;
    let s = an.user_buf(vec![9; 3000]);
    let r = a.isend(0, &mut an, 1, 0, 0, s, 3000).unwrap();
    let w = an.owed.remove(0);
    a.on_completion(&mut an, w.wr_id(), Err(RdmaError::Access));
    let st = a.test(r).unwrap().expect("ended");
    assert_eq!(st.fault, Some(RecvFault::Rdma(RdmaError::Access)));
    a.poll(0, &mut an);
    assert!(!a.failed(1));
}

/// What a drain handed over: each pusher's last range, ranges, flushes.
#[derive(Default)]
struct Drained {
    last: [Option<u64>; 4],
    seen: u64,
    flushes: u64,
}

impl Drained {
    fn take(&mut self, i: Invalidation) {
        match i {
            Invalidation::Range { start, len } => {
                let (t, k) = ((start >> 32) as usize, start & 0xFFFF_FFFF);
                assert_eq!(len, k + 1, "a range's two words come from one push");
                let last = self.last[t];
                assert!(last.is_none_or(|l| k > l), "thread {t}: {k} after {last:?}");
                self.last[t] = Some(k);
                self.seen += 1;
            }
            Invalidation::All => self.flushes += 1,
        }
    }
}

/// Notifiers on four threads push ranges at once while the endpoint's
/// thread drains (the queue has no lock for a notifier to spin on): each
/// range is handed over at most once and in its pusher's order, none is
/// lost without a flush (`All`) covering it, and the last of each pusher
/// is drained or flushed once the pushes are over.
#[test]
fn ranges_pushed_from_many_threads_are_drained_once_in_order_or_flushed() {
    for small in [true, false] {
        // The large queue holds every range: none may be lost.
        let each: u64 = if small { 50_000 } else { 1000 };
        let few: Pending<8> = Pending::new();
        let many: Pending<4096> = Pending::new();
        let mut d = Drained::default();
        let drain = |d: &mut Drained| match small {
            true => few.drain(|i| d.take(i)),
            false => many.drain(|i| d.take(i)),
        };
        std::thread::scope(|s| {
            let pushers: Vec<_> = (0..4u64)
                .map(|t| {
                    let (few, many) = (&few, &many);
                    s.spawn(move || {
                        for k in 0..each {
                            match small {
                                true => few.push(t << 32 | k, k + 1),
                                false => many.push(t << 32 | k, k + 1),
                            }
                        }
                    })
                })
                .collect();
            while pushers.iter().any(|p| !p.is_finished()) {
                drain(&mut d);
            }
        });
        drain(&mut d);
        let total = 4 * each;
        if !small {
            assert_eq!(d.flushes, 0, "a queue of 4096 overflowed with {total}");
        }
        assert!(d.seen <= total);
        if d.flushes == 0 {
            assert_eq!(d.seen, total, "nothing flushed, nothing lost");
        }
        for (t, l) in d.last.iter().enumerate() {
            assert!(
                *l == Some(each - 1) || d.flushes > 0,
                "thread {t}'s last range neither drained nor flushed: {l:?}"
            );
        }
        assert!(few.is_empty() && many.is_empty());
        // The queue is whole after the race: a range pushed now is the one
        // drained.
        let mut after = Drained::default();
        for k in 0..3 {
            match small {
                true => few.push(3 << 32 | (each + k), each + k + 1),
                false => many.push(3 << 32 | (each + k), each + k + 1),
            }
        }
        drain(&mut after);
        assert_eq!(
            (after.seen, after.flushes, after.last[3]),
            (3, 0, Some(each + 2))
        );
        eprintln!(
            "queue of {}: {} of {total} drained, {} flushes",
            if small { 8 } else { 4096 },
            d.seen,
            d.flushes
        );
    }
}
