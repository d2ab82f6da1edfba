//! A deterministic simulator of two-sided streams: N core endpoints on a
//! virtual network with virtual time, a base delay and the seeded faults
//! of [`rmx_sim::model::NetFaults`] (loss, duplication, reordering, jitter).
//!
//! Every rank sends a stream of messages of random sizes to random peers and
//! keeps receives posted with wildcards. Each payload names its sender, its
//! destination and its index in that pair's stream, so the checker can demand
//! exactly-once, in-order, byte-exact delivery. The same seed replays the same run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rmx_core::reuse::{NoReuse, SendReuse};
use rmx_core::{
    Config, Endpoint, Protocol, Request, Sizes, Source, Stats, Tables, TagSel, UserBuf,
};

use crate::heap::{sizes, Heap};
use crate::memnic::{execute_rdma, MemNic, RdmaPost};
use crate::reuse::{frequent, NEVER_STOP};
use crate::rng::Rng;
pub use rmx_sim::model::NetFaults;

/// The endpoint the simulator runs: tables on the heap, the peer table
/// sized from the job, 128 unexpected messages (the credit budget, whatever
/// the ranks).
pub type SimEndpoint<Z = NoReuse> = Endpoint<Heap, Z>;

/// The simulator's table sizes for `ranks` ranks.
pub fn sim_sizes(ranks: u16) -> Sizes {
    sizes(ranks as usize, 64, 128, 64, 256)
}

/// Send buffers each rank reuses (when no send from them is pending).
const POOL: usize = 6;

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub ranks: u16,
    /// Messages each rank sends.
    pub messages: usize,
    pub max_size: u32,
    pub faults: NetFaults,
    /// Every packet takes this long on the wire, plus the faults' jitter.
    pub delay_ns: u64,
    /// Bypass the reliability layer (only sensible with `NetFaults::NONE`).
    pub reliable: bool,
    /// Receives each rank keeps posted.
    pub posted: usize,
    /// Send frequently used buffers zero-copy (reliable transports only).
    pub reuse: bool,
    /// Bound each connection to this many outstanding sends, which complete
    /// one network delay after they were posted, and coalesce what waits.
    pub wqes: Option<u16>,
    /// Half the messages are large, up to this many bytes (0: none), and go
    /// by rendezvous: `rndv`, or the endpoint's choice; the NIC can do RDMA.
    pub large: u32,
    pub rndv: Option<Protocol>,
    /// `Config::medium_max`: messages above the eager threshold up to it go
    /// as fragments (`Some(0)`: none; `None`: the endpoint's choice).
    pub medium: Option<u32>,
    /// Every rank but this one sends only to it (a flood), and it sends nothing.
    pub flood: Option<u16>,
    /// No rank posts a receive before this virtual time: whatever arrives
    /// earlier is unexpected.
    pub receive_after_ns: u64,
    /// Buffers of each rank's shared receive pool (`Config::rx_buffers`;
    /// an eighth is the reserve, a quarter the low watermark).
    pub rx_buffers: u32,
    /// One rank, chosen by the seed (the flood's target if there is one),
    /// dies at a time chosen by the seed
    /// before this many virtual ns: it stops, and what it sends and is sent
    /// vanishes. Every survivor must then end every request: messages
    /// between survivors arrive exactly once and in order, sends to the
    /// dead rank end (at worst with `PeerFailed`), and no survivor gives up
    /// a live peer.
    pub death_before_ns: Option<u64>,
    /// Reliable transports with `wqes`: messages up to this many bytes go
    /// inline, and the NIC holds an unsignalled one's completion until the
    /// next signalled post to its peer (0: no inline sends).
    pub inline: u32,
}

impl Params {
    /// Four ranks, 300 messages of up to 512 bytes each, a reliable transport,
    /// plain sends: tests change what they are about.
    pub const RELIABLE: Params = Params {
        ranks: 4,
        messages: 300,
        max_size: 512,
        faults: NetFaults::NONE,
        delay_ns: 1_000,
        reliable: true,
        posted: 4,
        reuse: false,
        wqes: None,
        large: 0,
        rndv: None,
        medium: Some(0),
        flood: None,
        receive_after_ns: 0,
        rx_buffers: 256,
        death_before_ns: None,
        inline: 0,
    };

    /// The same over the hostile network, with the reliability layer.
    pub const LOSSY: Params = Params {
        faults: NetFaults::LOSSY,
        delay_ns: 2_000,
        reliable: false,
        ..Params::RELIABLE
    };
}

/// What a successful run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub delivered: usize,
    /// Order-free digest of every delivered message (source, destination,
    /// index, bytes): equal digests mean the same messages arrived.
    pub digest: u64,
    pub virtual_ns: u64,
    pub stats: Vec<Stats>,
    /// The most receive buffers any rank held for unexpected messages.
    pub peak_held: usize,
}

const EAGER: u32 = 512;
const ID: usize = 8;

fn payload(src: u16, dst: u16, n: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&src.to_le_bytes());
    v.extend_from_slice(&dst.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    let mut x = (src as u32) << 20 ^ (dst as u32) << 10 ^ n;
    while v.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        v.push((x >> 16) as u8);
    }
    v
}

struct Rank<Z> {
    ep: SimEndpoint<Z>,
    /// Reused send buffers and the send each may still be reading for.
    pool: Vec<(UserBuf, Option<Request>)>,
    digest: u64,
    nic: MemNic,
    /// (destination, size) of each send still to start.
    to_send: Vec<(u16, usize)>,
    next_n: Vec<u32>,
    /// Sends pending: (request, destination).
    sends: Vec<(Request, u16)>,
    recvs: Vec<(Request, UserBuf)>,
    expect_n: Vec<u32>,
    expected_total: usize,
    /// Messages each rank is to send here.
    expected_from: Vec<u32>,
    received: usize,
    /// Died (`Params::death_before_ns`): no longer runs.
    dead: bool,
}

struct InFlight {
    at: u64,
    order: u64,
    dst: u16,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// What completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Done {
    /// A send, by its work-request id.
    Send(u64),
    /// An RDMA operation: the one kept under this entry's order.
    Rdma,
}

/// A completion due: (time, order, rank, what).
type Due = (u64, u64, u16, Done);

/// The largest RDMA operation of the simulated NIC: transfers split.
const MAX_TRANSFER: u32 = 1000;
/// RDMA operations complete up to this long after the network delay, so
/// their completions come in any order.
const RDMA_JITTER_NS: u64 = 4_000;

/// Runs one simulation. `Err` explains the first violation; include the seed
/// when reporting it, since the same seed replays the same run.
pub fn run(seed: u64, p: &Params) -> Result<Outcome, String> {
    if p.faults.land_late_ns > 0 {
        // RDMA here completes once landed: late landings are the one-sided
        // simulator's (rmx-sim), where fences must wait them out.
        return Err("land_late_ns: the stream simulator lands RDMA before it completes".into());
    }
    if p.reuse {
        run_with(seed, p, || frequent::<8>(3, 16, 256, NEVER_STOP))
    } else {
        run_with(seed, p, || NoReuse)
    }
}

fn run_with<Z: SendReuse>(seed: u64, p: &Params, reuse: impl Fn() -> Z) -> Result<Outcome, String> {
    let mut rng = Rng::new(seed);
    let cfg = if p.reliable {
        Config::reliable(EAGER, 16)
    } else {
        let mut c = Config::unreliable(EAGER, 16);
        c.rto_ns = 50_000;
        c.ack_delay_ns = 5_000;
        c
    };
    let mut cfg = cfg;
    if let Some(w) = p.wqes {
        cfg.send_wqes = w;
    }
    cfg.rendezvous = p.rndv;
    cfg.inline_max = p.inline;
    cfg.medium_max = p.medium;
    cfg.rx_buffers = p.rx_buffers;
    cfg.rx_reserve = p.rx_buffers / 8;
    cfg.rx_low_water = p.rx_buffers / 4;
    let max = (p.max_size.min(EAGER) as usize).max(ID);
    // Receive buffers (and pool buffers) take the largest message.
    let biggest = max.max(p.large as usize);
    let mut ranks: Vec<Rank<Z>> = (0..p.ranks)
        .map(|me| {
            let messages = if p.flood == Some(me) { 0 } else { p.messages };
            let to_send = (0..messages)
                .map(|_| {
                    let mut d = rng.below(p.ranks as u64 - 1) as u16;
                    if d >= me {
                        d += 1;
                    }
                    if let Some(t) = p.flood {
                        d = t;
                    }
                    let len = if p.large > 0 && rng.below(2) == 0 {
                        // Around and above the threshold.
                        EAGER as usize - 8 + rng.below(p.large as u64 - EAGER as u64 + 9) as usize
                    } else {
                        ID + rng.below((max - ID + 1) as u64) as usize
                    };
                    (d, len)
                })
                .collect();
            let mut nic = MemNic::new(64, EAGER as usize + 64);
            nic.later = p.wqes.is_some();
            nic.inline = p.inline > 0;
            nic.unsignalled = p.inline > 0;
            if p.large > 0 {
                nic = nic.with_rdma(MAX_TRANSFER);
            }
            let pool = (0..POOL)
                .map(|_| (nic.user_buf(vec![0; biggest]), None))
                .collect();
            Ok(Rank {
                ep: SimEndpoint::with_reuse(
                    cfg,
                    me,
                    p.ranks,
                    Tables::new(&sim_sizes(p.ranks)),
                    reuse(),
                )
                .map_err(|e| format!("config: {e:?}"))?,
                pool,
                digest: 0,
                nic,
                to_send,
                next_n: vec![0; p.ranks as usize],
                sends: Vec::new(),
                recvs: Vec::new(),
                expect_n: vec![0; p.ranks as usize],
                expected_total: 0,
                expected_from: vec![0; p.ranks as usize],
                received: 0,
                dead: false,
            })
        })
        .collect::<Result<_, String>>()?;
    for s in 0..ranks.len() {
        for i in 0..ranks[s].to_send.len() {
            let d = ranks[s].to_send[i].0 as usize;
            ranks[d].expected_total += 1;
            ranks[d].expected_from[s] += 1;
        }
    }
    let total: usize = ranks.iter().map(|r| r.expected_total).sum();
    let mut net: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let mut done: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
    let mut rdma: HashMap<u64, RdmaPost> = HashMap::new();
    let mut order = 0u64;
    let mut now = 0u64;
    let limit = 120_000_000_000u64;
    let mut peak_held = 0;
    // The target of a flood is the one that dies, if one does.
    let death = p.death_before_ns.map(|before| {
        let victim = rng.below(p.ranks as u64) as usize;
        (p.flood.map_or(victim, usize::from), rng.below(before))
    });
    for _step in 0..10_000_000u64 {
        if let Some((victim, at)) = death {
            if now >= at && !ranks[victim].dead {
                ranks[victim].dead = true;
            }
        }
        for r in &ranks {
            peak_held = peak_held.max(r.ep.held_buffers());
        }
        // Application work on every rank.
        let dead = death
            .map(|(v, _)| v as u16)
            .filter(|&v| ranks[v as usize].dead);
        for (me, r) in ranks.iter_mut().enumerate() {
            if !r.dead {
                app_step(now, me as u16, r, p, biggest, dead)?;
            }
        }
        if dead.is_some() {
            // Whatever the dead rank posted vanishes with it.
            let r = &mut ranks[death.expect("a victim").0];
            r.nic.owed.clear();
            r.nic.rdma_out.clear();
            r.nic.outbox.clear();
        }
        // The network takes what was posted.
        for (me, r) in ranks.iter_mut().enumerate() {
            for w in r.nic.owed.drain(..) {
                order += 1;
                let t = Done::Send(w.wr_id());
                done.push(Reverse((now + p.delay_ns, order, me as u16, t)));
            }
            // RDMA moves the data when it completes, a delay (and jitter) on.
            for post in r.nic.rdma_out.drain(..) {
                order += 1;
                let at = now + p.delay_ns + rng.below(RDMA_JITTER_NS);
                rdma.insert(order, post);
                done.push(Reverse((at, order, me as u16, Done::Rdma)));
            }
            for (dst, bytes) in r.nic.outbox.drain(..) {
                if rng.chance(p.faults.loss_ppm) {
                    continue;
                }
                let copies = if rng.chance(p.faults.dup_ppm) { 2 } else { 1 };
                for _ in 0..copies {
                    let mut at = now + p.delay_ns;
                    if p.faults.jitter_ns > 0 {
                        at += rng.below(p.faults.jitter_ns);
                    }
                    if p.faults.reorder_ns > 0 && rng.chance(p.faults.reorder_ppm) {
                        at += rng.below(p.faults.reorder_ns);
                    }
                    order += 1;
                    net.push(Reverse(InFlight {
                        at,
                        order,
                        dst,
                        bytes: bytes.clone(),
                    }));
                }
            }
        }
        let delivered: usize = ranks.iter().map(|r| r.received).sum();
        let sends_left = ranks
            .iter()
            .any(|r| !r.dead && (!r.to_send.is_empty() || !r.sends.is_empty()));
        let survivors_done = dead.is_some_and(|d| {
            ranks.iter().enumerate().all(|(me, r)| {
                me == d as usize
                    || (0..ranks.len())
                        .all(|s| s == d as usize || r.expect_n[s] == r.expected_from[s])
            })
        });
        if (delivered == total || survivors_done) && !sends_left {
            return Ok(Outcome {
                delivered,
                digest: ranks.iter().fold(0, |d, r| d.wrapping_add(r.digest)),
                virtual_ns: now,
                stats: ranks.iter().map(|r| *r.ep.stats()).collect(),
                peak_held,
            });
        }
        // Advance virtual time to the next packet or timer.
        let next_pkt = net.peek().map(|Reverse(f)| f.at);
        let next_done = done.peek().map(|Reverse(d)| d.0);
        let next_done = if ranks.iter().any(|r| !r.nic.rdma_out.is_empty()) {
            Some(now)
        } else {
            next_done
        };
        // Receives start at `receive_after_ns`: a time the clock must reach.
        let receives = (now < p.receive_after_ns).then_some(p.receive_after_ns);
        let next_timer = ranks
            .iter()
            .filter(|r| !r.dead)
            .filter_map(|r| r.ep.poll_timeout())
            .chain(next_done)
            .chain(receives)
            .min();
        let next = match (next_pkt, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => {
                if sends_left || ranks.iter().any(|r| r.received < r.expected_total) {
                    return Err(format!(
                        "stalled at {now} ns: {delivered}/{total} delivered, nothing in flight, no timer; stats of the first ranks {:?}",
                        ranks.iter().take(4).map(|r| *r.ep.stats()).collect::<Vec<_>>()
                    ));
                }
                now
            }
        };
        now = now.max(next);
        if now > limit {
            return Err(format!(
                "no completion within {limit} virtual ns: {delivered}/{total}"
            ));
        }
        while done.peek().is_some_and(|Reverse(d)| d.0 <= now) {
            let Reverse((_, o, me, t)) = done.pop().expect("peeked");
            if ranks[me as usize].dead {
                rdma.remove(&o);
                continue;
            }
            if t == Done::Rdma {
                let post = rdma.remove(&o).expect("an RDMA post per entry");
                let (a, b) = (me as usize, post.peer as usize);
                let result = if ranks[b].dead {
                    Err(rmx_core::RdmaError::Down)
                } else if a < b {
                    let (x, y) = ranks.split_at_mut(b);
                    execute_rdma(&mut x[a].nic, &mut y[0].nic, &post)
                } else {
                    let (x, y) = ranks.split_at_mut(a);
                    execute_rdma(&mut y[0].nic, &mut x[b].nic, &post)
                };
                let r = &mut ranks[a];
                let wr_id = post.work.wr_id();
                r.ep.on_completion(&mut r.nic, wr_id, result);
                continue;
            }
            if let Done::Send(wr_id) = t {
                let r = &mut ranks[me as usize];
                r.ep.on_completion(&mut r.nic, wr_id, Ok(()));
            }
        }
        while net.peek().is_some_and(|Reverse(f)| f.at <= now) {
            let Reverse(f) = net.pop().expect("peeked");
            if ranks[f.dst as usize].dead {
                continue;
            }
            let r = &mut ranks[f.dst as usize];
            let buf = r.nic.deliver(f.bytes);
            r.ep.on_receive(now, &mut r.nic, buf);
        }
        for r in ranks.iter_mut().filter(|r| !r.dead) {
            if r.ep.poll_timeout().is_some_and(|t| t <= now) {
                r.ep.poll(now, &mut r.nic);
            }
        }
        for (me, r) in ranks.iter_mut().enumerate().filter(|(_, r)| !r.dead) {
            no_work_without_timer(now, me, r)?;
            if r.ep.stats().peers_failed > dead.is_some() as u64 {
                let x = (0..p.ranks).find(|&x| Some(x) != dead && r.ep.failed(x));
                return Err(format!(
                    "rank {me} at {now} ns gave up rank {x:?}, which is alive"
                ));
            }
        }
    }
    Err(format!(
        "step limit reached at {now} ns: {:?}",
        ranks
            .iter()
            .map(|r| (
                r.received,
                r.expected_total,
                r.ep.poll_timeout(),
                r.ep.stats().rndv_stray,
                r.ep.stats().malformed
            ))
            .collect::<Vec<_>>()
    ))
}

/// The invariant a driver that sleeps relies on: whenever `poll()` would
/// do work, `poll_timeout()` is not `None`. Checked after every step by
/// polling each rank that has no timer and demanding that nothing happens.
fn no_work_without_timer<Z: SendReuse>(now: u64, me: usize, r: &mut Rank<Z>) -> Result<(), String> {
    if r.ep.poll_timeout().is_some() {
        return Ok(());
    }
    let seen = |r: &Rank<Z>| {
        (
            r.nic.outbox.len(),
            r.nic.rdma_out.len(),
            r.nic.owed.len(),
            *r.ep.stats(),
        )
    };
    let before = seen(r);
    r.ep.poll(now, &mut r.nic);
    if seen(r) != before {
        return Err(format!(
            "rank {me} at {now} ns: poll() did work while poll_timeout() was None \
             (a driver sleeping until its next timeout or packet would hang): \
             {} packets, {} RDMA operations posted",
            r.nic.outbox.len() - before.0,
            r.nic.rdma_out.len() - before.1
        ));
    }
    Ok(())
}

fn app_step<Z: SendReuse>(
    now: u64,
    me: u16,
    r: &mut Rank<Z>,
    p: &Params,
    max: usize,
    dead: Option<u16>,
) -> Result<(), String> {
    // Start one send per step (a burst of four when send entries are
    // bounded, so that sends queue), from a pool buffer no pending send still reads.
    let burst = if p.wqes.is_some() { 4 } else { 1 };
    for _ in 0..burst {
        let Some(&(dst, len)) = r.to_send.first() else {
            break;
        };
        let n = r.next_n[dst as usize];
        let data = payload(me, dst, n, len);
        let slot = r.pool.iter().position(|(_, q)| q.is_none());
        let buf = match slot {
            Some(k) => {
                let b = r.pool[k].0;
                r.nic.user[b.0 as usize][..len].copy_from_slice(&data);
                b
            }
            None => r.nic.user_buf(data),
        };
        // Tags vary by pair and index; receives take any (wildcards).
        let tag = (me as u32 * 31 + dst as u32 * 17 + n * 7) % 97;
        match r.ep.isend(now, &mut r.nic, dst, tag, 0, buf, len as u32) {
            Ok(req) => {
                r.to_send.remove(0);
                r.next_n[dst as usize] += 1;
                if req != Request::COMPLETE {
                    r.sends.push((req, dst));
                    if let Some(k) = slot {
                        r.pool[k].1 = Some(req);
                    }
                }
            }
            Err(rmx_core::SendError::RequestTableFull) => {}
            Err(rmx_core::SendError::PeerFailed) if Some(dst) == dead => {
                r.to_send.remove(0);
            }
            Err(e) => return Err(format!("rank {me}: isend to {dst} failed: {e:?}")),
        }
    }
    let mut i = 0;
    while i < r.sends.len() {
        match r.ep.test(r.sends[i].0) {
            Ok(Some(st)) => {
                let (done, dst) = r.sends.swap_remove(i);
                if st.fault.is_some() && Some(dst) != dead {
                    return Err(format!(
                        "rank {me}: send to {dst} ended with {:?}",
                        st.fault
                    ));
                }
                for (_, q) in r.pool.iter_mut() {
                    if *q == Some(done) {
                        *q = None;
                    }
                }
            }
            Ok(None) => i += 1,
            Err(e) => return Err(format!("rank {me}: send test: {e:?}")),
        }
    }
    // Check completed receives in the order they were posted (the order
    // they matched: a rendezvous receive completes after a later eager one),
    // then keep `posted` receives outstanding.
    let i = 0;
    while i < r.recvs.len() {
        let (req, buf) = r.recvs[i];
        match r.ep.test(req) {
            Ok(Some(st)) => {
                r.recvs.remove(i);
                if st.fault == Some(rmx_core::RecvFault::PeerFailed) && Some(st.source) == dead {
                    // A message of the dead rank's, cut off part way.
                    continue;
                }
                let got = &r.nic.user[buf.0 as usize][..st.len as usize];
                if got.len() < ID {
                    return Err(format!("rank {me}: short message {got:?}"));
                }
                let src = u16::from_le_bytes([got[0], got[1]]);
                let dst = u16::from_le_bytes([got[2], got[3]]);
                let n = u32::from_le_bytes([got[4], got[5], got[6], got[7]]);
                if dst != me || src != st.source {
                    return Err(format!(
                        "rank {me}: misdelivered {src}->{dst} (status source {})",
                        st.source
                    ));
                }
                let want = r.expect_n[src as usize];
                if n != want {
                    return Err(format!(
                        "rank {me}: from {src} got message #{n}, expected #{want} (lost, duplicated or reordered)"
                    ));
                }
                if got != payload(src, dst, n, got.len()) {
                    return Err(format!("rank {me}: message #{n} from {src} corrupted"));
                }
                r.expect_n[src as usize] += 1;
                r.received += 1;
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&(src, dst, n, got), &mut h);
                r.digest = r.digest.wrapping_add(std::hash::Hasher::finish(&h));
            }
            Ok(None) => break,
            Err(e) => return Err(format!("rank {me}: recv test: {e:?}")),
        }
    }
    while now >= p.receive_after_ns
        && r.recvs.len() < p.posted
        && r.received + r.recvs.len() < r.expected_total
    {
        let buf = r.nic.user_buf(vec![0; max]);
        match r.ep.irecv(
            now,
            &mut r.nic,
            Source::Any,
            TagSel::Any,
            0,
            buf,
            max as u32,
        ) {
            Ok(req) => r.recvs.push((req, buf)),
            Err(e) => return Err(format!("rank {me}: irecv failed: {e:?}")),
        }
    }
    Ok(())
}
