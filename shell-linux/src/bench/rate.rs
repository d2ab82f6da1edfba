//! `rmx bench msgrate` and `rmx bench bw`: uni-directional streaming, osu_bw
//! style — a window of 64 non-blocking sends, then a small acknowledgement back
//! — under several send-queue and coalescing configurations alternating in one
//! run (the coalescing paper's Figures 2–5). On `eth` each size is also
//! measured beside its floor, bare frames streamed over the same link,
//! as full as the stack's frames and paced by a window as its PULL is, a
//! round before each slice: the best round is `floor_msg_per_s`, and
//! `floor_spread_pct` says how far the worst fell below it.

use rmx_core::{Coalesce, Config, Protocol, Source, TagSel};
use serde_json::json;

use super::frame_floor::{Tend, WireFloor, WireSide};
use super::report::{Column, Report};
use super::Opts;
use crate::job;
use crate::job::Net;
use crate::rank::{Rank, Req};
use crate::transport::Floor;

/// Messages in flight per window, as osu_bw and osu_mbw_mr use.
pub const WINDOW: usize = 64;
const DATA: u32 = 2;
const ACK: u32 = 3;
/// Each configuration's windows are split into this many slices, taken in
/// turn with the other configurations', so that the machine's slow spells
/// fall on all of them alike.
const SLICES: u64 = 10;

/// One configuration of a connection's sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub wqes: u16,
    pub coalesce: bool,
    pub header_cache: bool,
    /// Coalesce once this many sends are outstanding (MVAPICH2's threshold)
    /// instead of once every entry is in use.
    pub after: Option<u16>,
    /// The rendezvous above the eager threshold (the transport's choice if `None`).
    pub rndv: Option<Protocol>,
}

impl Setup {
    /// The paper's four: 200 entries (MVAPICH's default), 5 without and with
    /// coalescing, and 10 with coalescing.
    pub const PAPER: [Setup; 4] = [
        Setup::new(200, false),
        Setup::new(5, false),
        Setup::new(5, true),
        Setup::new(10, true),
    ];

    pub const fn new(wqes: u16, coalesce: bool) -> Setup {
        Setup {
            wqes,
            coalesce,
            header_cache: true,
            after: None,
            rndv: None,
        }
    }

    /// `self` with rendezvous `p`.
    pub const fn rndv(self, p: Protocol) -> Setup {
        Setup {
            rndv: Some(p),
            ..self
        }
    }

    /// How the table and the plot name it.
    pub fn label(&self) -> String {
        let mut s = format!("{} WQEs", self.wqes);
        if self.coalesce {
            s.push_str(" + coalescing");
            if let Some(n) = self.after {
                s.push_str(&format!(" after {n}"));
            }
            if !self.header_cache {
                s.push_str(", no header cache");
            }
        }
        if let Some(p) = self.rndv {
            s.push_str(&format!(", {}", p.name()));
        }
        s
    }

    /// `cfg` with this configuration's send entries and coalescing.
    pub fn apply(&self, cfg: Config) -> Config {
        Config {
            send_wqes: self.wqes,
            coalesce: if self.coalesce {
                self.after.map_or(Coalesce::WhenFull, Coalesce::Outstanding)
            } else {
                Coalesce::Off
            },
            header_cache: self.header_cache,
            rendezvous: self.rndv.or(cfg.rendezvous),
            ..cfg
        }
    }
}

/// The messages of `size` bytes per second that bare frames carry over the
/// link: the frame rate of a paced, batched stream of frames as full as
/// the transport's own for that size (`per_frame` bytes of message each),
/// over the frames one message takes. `None` if the stream stalled.
fn floor_rate(
    side: &mut WireSide,
    size: usize,
    per_frame: usize,
    frames: u64,
    tend: Tend<'_>,
) -> Option<f64> {
    let payload = size.clamp(1, per_frame.min(side.mtu()));
    let fps = side.stream(frames, payload, tend)?;
    Some(fps / size.div_ceil(payload).max(1) as f64)
}

/// Frames of one floor round for messages of `size`: about 3 MiB or 2 000
/// frames, whichever is fewer, and at least 100 (a round runs beside each
/// slice of the stack's windows; the best round is the floor).
fn floor_frames(size: usize, per_frame: usize) -> u64 {
    let payload = size.clamp(1, per_frame) as u64;
    (2_000u64).min((3 << 20) / payload).max(100)
}

/// The ranks of a thread's other setups, while it measures one. The peer's
/// thread may still be in one of them, waiting for a packet of this
/// thread's (its last one lost, or the answer to a probe) that only a
/// driven rank resends; and a rank tended on one side listens, so its
/// peer here must not go undriven for long either. So they are tended
/// whenever a wait stalls, and between windows once [`TEND_EVERY_NS`]
/// passed: the measured rank has the thread to itself but for a few polls
/// a millisecond (and a clock read a window).
struct Others<'a> {
    before: &'a mut [Rank],
    after: &'a mut [Rank],
    last: u64,
}

/// How long a thread's other ranks go untended while traffic flows.
const TEND_EVERY_NS: u64 = 1_000_000;

impl Others<'_> {
    fn tend(&mut self) {
        // A setup measured alone has none: a stalled wait calls this at
        // every poll, and a clock read there delays the poll that sees
        // the awaited packet.
        if self.before.is_empty() && self.after.is_empty() {
            return;
        }
        self.before
            .iter_mut()
            .chain(self.after.iter_mut())
            .for_each(Rank::tend);
        self.last = crate::clock::now_ns();
    }

    fn tend_if_due(&mut self) {
        if crate::clock::now_ns().saturating_sub(self.last) >= TEND_EVERY_NS {
            self.tend();
        }
    }

    /// Waits for `q` on `r`, tending these ranks if it stalls.
    fn wait(&mut self, r: &mut Rank, q: Req) {
        r.wait_tending(q, || self.tend());
    }
}

/// Runs `n` windows of `size`-byte messages on `ranks[k]`, tending the
/// thread's other ranks ([`Others`]); the sender's elapsed time.
fn windows(
    ranks: &mut [Rank],
    k: usize,
    n: u64,
    size: usize,
    sbuf: &[u8],
    rbufs: &mut [Vec<u8>],
) -> u64 {
    let (before, rest) = ranks.split_at_mut(k);
    let (r, after) = rest.split_first_mut().expect("a rank of the setup");
    let mut others = Others {
        before,
        after,
        last: crate::clock::now_ns(),
    };
    let mut ack = [0u8; 4];
    let mut reqs: Vec<Req> = Vec::with_capacity(WINDOW);
    let t0 = crate::clock::now_ns();
    // SAFETY: every request is waited for within the window that posted it.
    unsafe {
        if r.rank() == 0 {
            for _ in 0..n {
                others.tend_if_due();
                let a = r
                    .irecv_raw(Source::Rank(1), TagSel::Tag(ACK), ack.as_mut_ptr(), 4)
                    .unwrap();
                for _ in 0..WINDOW {
                    reqs.push(r.isend_raw(1, DATA, sbuf.as_ptr(), size).unwrap());
                }
                for q in reqs.drain(..) {
                    others.wait(r, q);
                }
                others.wait(r, a);
            }
        } else {
            for _ in 0..n {
                others.tend_if_due();
                for b in rbufs.iter_mut() {
                    reqs.push(
                        r.irecv_raw(Source::Rank(0), TagSel::Tag(DATA), b.as_mut_ptr(), size)
                            .unwrap(),
                    );
                }
                for q in reqs.drain(..) {
                    others.wait(r, q);
                }
                let q = r.isend_raw(0, ACK, ack.as_ptr(), ack.len()).unwrap();
                others.wait(r, q);
            }
        }
    }
    let ns = crate::clock::now_ns() - t0;
    // The ACK (or a FIN) may still wait in this rank's queue for a send
    // entry: it leaves now rather than at this thread's next stall.
    r.flush();
    ns
}

/// Measures every size under every setup; `name` is `msgrate` or `bw`
/// (the same measurement, tabled by message rate or by bandwidth first).
pub fn run(name: &str, opts: &Opts, cfg: Config, net: &Net, setups: &[Setup]) -> Report {
    let sizes = opts.sizes();
    let max = sizes.iter().copied().max().unwrap_or(0).max(1);
    let pb = opts.progress(name, sizes.len());
    // Windows per size and setup: the iteration count spread over 64-message
    // windows, at least 100 windows, in SLICES slices.
    let per_slice = ((opts.iters / 10).max(100)).div_ceil(SLICES);
    let warm = (opts.warmup / 10).max(10);
    let cfgs: Vec<Config> = setups.iter().map(|s| s.apply(cfg)).collect();
    let wire = match net.floor() {
        Floor::Frames { iface } => Some(WireFloor::new(&iface)),
        Floor::Memory | Floor::None => None,
    };
    let out = job::run_configs(&cfgs, net, |ranks| {
        let sbuf: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut rbufs = vec![vec![0u8; max]; WINDOW];
        let mut rows = Vec::new();
        // A frame of the stack's carries at most an eager message's bytes.
        let per_frame = ranks[0].config().eager_threshold as usize;
        let mut bare = wire.as_ref().and_then(|w| {
            w.side(&mut ranks[0], false)
                .expect("the floor's raw socket")
        });
        for &size in &sizes {
            // Beyond 64 KiB the windows shrink with the size, so that each
            // size moves about as many bytes as 64 KiB messages do.
            let scale = |w: u64| (w * 65536 / size.max(65536) as u64).max(1);
            let (warm, per_slice) = (scale(warm), scale(per_slice));
            for k in 0..ranks.len() {
                windows(ranks, k, warm, size, &sbuf, &mut rbufs);
            }
            let mut ns = vec![0u64; ranks.len()];
            let before: Vec<_> = ranks.iter().map(|r| r.stats()).collect();
            // The floor's rounds alternate with the stack's slices, so both
            // see the same moments of a shared, noisy machine.
            let mut rounds: Vec<f64> = Vec::new();
            for _ in 0..SLICES {
                if let Some(b) = bare.as_mut() {
                    rounds.extend(floor_rate(
                        b,
                        size,
                        per_frame,
                        floor_frames(size, per_frame),
                        &mut || ranks.iter_mut().for_each(Rank::tend),
                    ));
                }
                for (k, ns) in ns.iter_mut().enumerate() {
                    *ns += windows(ranks, k, per_slice, size, &sbuf, &mut rbufs);
                }
            }
            let floor = (!rounds.is_empty()).then(|| {
                let best = rounds.iter().copied().fold(0.0, f64::max);
                let worst = rounds.iter().copied().fold(f64::MAX, f64::min);
                (best, worst)
            });
            if ranks[0].rank() == 0 {
                for (k, r) in ranks.iter().enumerate() {
                    let s = r.stats();
                    let msgs = (s.messages_out - before[k].messages_out) as f64;
                    let packets = (s.packets_out - before[k].packets_out) as f64;
                    let timed = (per_slice * SLICES) as f64 * WINDOW as f64;
                    let secs = ns[k] as f64 / 1e9;
                    let row = (size, k, timed, timed / secs, msgs / packets.max(1.0));
                    rows.push((row, floor));
                }
                pb.inc(1);
            }
        }
        rows
    });
    pb.finish_and_clear();
    let results = out[0]
        .iter()
        .map(|&((size, k, timed, rate, per_packet), floor)| {
            let s = setups[k];
            let best = floor.map(|(best, _)| best);
            json!({
                "floor_msg_per_s": best,
                "floor_min_msg_per_s": floor.map(|(_, worst)| worst),
                "floor_spread_pct": floor.map(|(b, w)| 100.0 * (b - w) / b.max(f64::MIN_POSITIVE)),
                "floor_mb_per_s": best.map(|f| f * size as f64 / 1e6),
                "x_floor": best.map(|f| rate / f),
                "size": size,
                "config": s.label(),
                "rndv": s.rndv.map(|p| p.name()),
                "wqes": s.wqes,
                "coalesce": s.coalesce,
                "header_cache": s.header_cache,
                "messages": timed as u64,
                "msg_per_s": rate,
                "mb_per_s": rate * size as f64 / 1e6,
                "msgs_per_packet": per_packet,
            })
        })
        .collect();
    let mut config = opts.config_json(&cfg, net);
    config["window"] = json!(WINDOW);
    config["windows"] = json!(per_slice * SLICES);
    config["setups"] = json!(setups.iter().map(Setup::label).collect::<Vec<_>>());
    let (first, second) = if name == "bw" {
        (
            Column::new("mb_per_s", "mb_per_s", 2),
            Column::new("msg_per_s", "msg_per_s", 0),
        )
    } else {
        (
            Column::new("msg_per_s", "msg_per_s", 0),
            Column::new("mb_per_s", "mb_per_s", 2),
        )
    };
    let mut columns = vec![
        Column::new("config", "config", 0),
        first,
        second,
        Column::new("msgs_per_packet", "msgs/packet", 2),
    ];
    if wire.is_some() {
        columns.push(Column::new("floor_msg_per_s", "floor_msg_per_s", 0));
        columns.push(Column::new("floor_spread_pct", "floor_spread_%", 1));
        columns.push(Column::new("x_floor", "x_floor", 2));
    }
    Report::new(name, opts, config, results, columns)
}

/// The report's `value` against size, one curve per configuration (log-log).
pub fn plot(r: &Report, value: &str, y_label: &str, path: &std::path::Path) -> Result<(), String> {
    let (curves, labels) = r.pivot("config", value);
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    curves.svg(path, &series, y_label)
}
