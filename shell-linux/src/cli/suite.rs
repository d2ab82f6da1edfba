//! `rmx bench suite`: every benchmark of a transport, a Markdown report with plots.

use rmx_core::Caps;
use rmx_linux::bench::perftest::{Perftest, Tool};
use rmx_linux::bench::{self, report::Report, Opts};
use rmx_linux::job::Net;
use rmx_linux::loopnic::LoopConfig;

use super::*;

/// Prints a suite member's table, writes `{name}.json`, and adds its section
/// (table and `{name}.svg`, which the caller draws) to the report.
pub(crate) fn record(
    out: &std::path::Path,
    md: &mut String,
    name: &str,
    r: &Report,
) -> Result<(), String> {
    println!("{}", r.table());
    let file = format!("{name}.json");
    std::fs::write(out.join(&file), r.json()).map_err(|e| format!("cannot write {file}: {e}"))?;
    md.push_str(&format!(
        "## {name}\n\n```\n{}```\n\n![{name}]({name}.svg)\n\n",
        r.table()
    ));
    Ok(())
}

/// The report without links to plots that were not drawn (a table whose
/// curve says nothing more gets none).
pub(crate) fn without_missing_plots(out: &std::path::Path, md: &str) -> String {
    md.lines()
        .filter(|l| {
            let file = l
                .strip_prefix("![")
                .and_then(|l| l.split_once("]("))
                .map(|(_, f)| f.trim_end_matches(')'));
            file.is_none_or(|f| out.join(f).exists())
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The suite's options: the eager sizes, `iters` per size.
pub(crate) fn suite_opts(transport: &str, iters: u64) -> Opts {
    Opts {
        transport: transport.into(),
        min_size: 1,
        max_size: EAGER_END,
        iters,
        warmup: (iters / 10).max(100),
        eager_reuse: None,
        quiet: false,
    }
}

/// One benchmark of the suite, run where the transport's capabilities
/// make it mean something.
struct Member {
    /// What `--only` calls it.
    name: &'static str,
    wants: fn(&Caps) -> bool,
    run: fn(&mut Suite) -> Result<(), String>,
}

/// What every member runs with, and the report it adds to.
struct Suite<'a> {
    out: &'a std::path::Path,
    md: String,
    /// The eager sizes, the suite's iterations per size.
    o: Opts,
    /// Fewer iterations, small sizes: the collectives and fences.
    few: Opts,
    cfg: rmx_core::Config,
    net: Net,
    caps: Caps,
    /// The legend of the floor's curve.
    floor: &'static str,
    /// The simulated group sizes.
    sim_sizes: Vec<u16>,
    /// perftest on the device measured (verbs, where it is installed).
    anchor: Option<Perftest>,
}

/// perftest on `net`'s device, if it has one and perftest is installed;
/// why not is said once.
fn perftest_on(net: &Net) -> Option<Perftest> {
    if !net.entry().device {
        return None;
    }
    if !Perftest::installed() {
        eprintln!("rmx: no perftest (apt-get install perftest): no anchor columns");
        return None;
    }
    net.device().map(Perftest::on)
}

/// Runs `tool` at each row's size (once per size) for as many messages
/// as rmx timed there (the row's `messages`, else the suite's
/// iterations), adds the figure `key` of its output to the row as
/// `column`, and rmx's `ours` over it as `ratio`; the columns join the
/// table.
fn anchor(
    s: &Suite,
    r: &mut Report,
    tool: Tool,
    key: &str,
    scale: f64,
    (column, ratio): (&'static str, &'static str),
    ours: &str,
) {
    let Some(p) = &s.anchor else { return };
    let mut seen: Vec<(u64, Option<f64>)> = Vec::new();
    for row in r.results.iter_mut() {
        let Some(size) = row["size"].as_u64() else {
            continue;
        };
        let v = match seen.iter().find(|x| x.0 == size) {
            Some(x) => x.1,
            // Beyond what the tool measures: no figure, and no complaint.
            None if !tool.sizes().contains(&(size as usize)) => None,
            None => {
                let n = row["messages"].as_u64().unwrap_or(s.o.iters);
                let v = match p.run(tool, size.max(1) as usize, n) {
                    Ok(cols) => cols.get(key).map(|v| v * scale),
                    Err(e) => {
                        eprintln!("rmx: {e}");
                        None
                    }
                };
                seen.push((size, v));
                v
            }
        };
        row[column] = serde_json::json!(v);
        let mine = row[ours].as_f64();
        row[ratio] = serde_json::json!(mine.zip(v).map(|(m, a)| m / a));
    }
    r.columns
        .push(bench::report::Column::new(column, column, 2));
    r.columns.push(bench::report::Column::new(ratio, ratio, 2));
}

/// The suite, in the report's order. A new transport gets the members its
/// [`Caps`] allow: RDMA rows where there is RDMA, lossy rows where the
/// wire is lossy.
const MEMBERS: [Member; 8] = [
    Member {
        name: "pingpong",
        wants: |_| true,
        run: pingpong,
    },
    Member {
        name: "msgrate",
        wants: |_| true,
        run: msgrate,
    },
    Member {
        name: "header-cache",
        wants: |_| true,
        run: header_cache,
    },
    Member {
        name: "rendezvous",
        wants: |_| true,
        run: large_messages,
    },
    // The memory of RDMA connections (queue pairs sized in WQEs).
    Member {
        name: "memory",
        wants: |c| c.rdma_write,
        run: memory_member,
    },
    // Zero-copy eager sends pay registrations as RDMA NICs price them.
    Member {
        name: "eager-reuse",
        wants: |c| c.rdma_write,
        run: eager_reuse,
    },
    // The fence designs (three of four need RDMA) and the collectives
    // they are built on, measured and at scale in the model.
    Member {
        name: "one-sided",
        wants: |c| c.rdma_write,
        run: one_sided,
    },
    // The same wire losing 1% of its packets and reordering 5%.
    Member {
        name: "lossy",
        wants: |c| c.lossy,
        run: lossy,
    },
];

/// Every name in `only` is a member's: checked before a transport opens.
fn known(only: &[String]) -> Result<(), String> {
    match only.iter().find(|n| !MEMBERS.iter().any(|m| m.name == *n)) {
        Some(n) => Err(format!(
            "--only {n} is not a member of the suite; members: {}",
            MEMBERS.map(|m| m.name).join(", ")
        )),
        None => Ok(()),
    }
}

/// The members `only` names (all if none), of those `caps` call for; one
/// the transport cannot run is an error that lists what it runs.
fn chosen(only: &[String], caps: &Caps) -> Result<Vec<&'static Member>, String> {
    let wanted: Vec<&Member> = MEMBERS.iter().filter(|m| (m.wants)(caps)).collect();
    if let Some(n) = only.iter().find(|n| !wanted.iter().any(|m| m.name == *n)) {
        let runs: Vec<_> = wanted.iter().map(|m| m.name).collect();
        return Err(format!(
            "--only {n}: not for this transport, which runs {}",
            runs.join(", ")
        ));
    }
    Ok(wanted
        .into_iter()
        .filter(|m| only.is_empty() || only.iter().any(|n| n == m.name))
        .collect())
}

/// `rmx bench suite --transport T`: every member `T` wants (or those
/// `only` names), into `out`.
pub(crate) fn suite(
    out: &std::path::Path,
    iters: u64,
    transport: &str,
    net: rmx_linux::transport::registry::Options,
    sim_ranks: u16,
    only: &[String],
) -> Result<(), String> {
    let entry = rmx_linux::transport::registry::find(transport)?;
    check_iters(iters)?;
    known(only)?;
    let sim_sizes =
        group_sizes(Some(sim_ranks), 0, true).map_err(|e| e.replace("--ranks", "--sim-ranks"))?;
    let args = BenchArgs {
        transport: transport.into(),
        net,
        medium_max: None,
        cq_mod: None,
        min_size: None,
        max_size: None,
        iters: Some(iters),
        warmup: None,
        json: false,
    };
    let (net, _lab) = network(&args, false)?;
    let members = chosen(only, &net.caps())?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let o = suite_opts(transport, iters);
    let mut s = Suite {
        out,
        md: match entry.name {
            t if t == rmx_linux::transport::registry::TRANSPORTS[0].name => {
                "# rmx benchmark report\n\n".into()
            }
            t => format!("# rmx benchmark report: {t}\n\n"),
        },
        few: Opts {
            iters: (iters / 10).max(100),
            warmup: 20,
            min_size: 16,
            max_size: 4096,
            ..o.clone()
        },
        o,
        cfg: rmx_linux::rank::loop_config(),
        caps: net.caps(),
        anchor: perftest_on(&net),
        net,
        floor: entry.floor,
        sim_sizes,
    };
    for m in members {
        (m.run)(&mut s)?;
    }
    std::fs::write(out.join("report.md"), without_missing_plots(out, &s.md))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

/// Latency up to the largest message without a rendezvous, beside the floor.
fn pingpong(s: &mut Suite) -> Result<(), String> {
    let o = Opts {
        max_size: s.net.eager_max(&s.cfg) as usize,
        ..s.o.clone()
    };
    let mut r = bench::pingpong::run(&o, s.cfg, &s.net, &[]);
    for (tool, cols) in [
        (Tool::SendLat, ("ib_send_lat_us", "x_ib_send_lat")),
        (Tool::WriteLat, ("ib_write_lat_us", "x_ib_write_lat")),
    ] {
        anchor(s, &mut r, tool, "t_avg[usec]", 1.0, cols, "latency_us");
    }
    let ucx = s.anchor.is_some() && Perftest::has(Tool::UcxAmLat);
    if ucx {
        let cols = ("ucx_am_lat_us", "x_ucx_am_lat");
        anchor(
            s,
            &mut r,
            Tool::UcxAmLat,
            "average[usec]",
            1.0,
            cols,
            "latency_us",
        );
    } else if s.anchor.is_some() {
        eprintln!("rmx: no ucx_perftest (apt-get install ucx-utils): no UCX column");
    }
    record(s.out, &mut s.md, "pingpong", &r)?;
    let mut series = vec![("latency_us", "rmx latency")];
    if r.results.iter().any(|row| row.get("p99_us").is_some()) {
        series.push(("p99_us", "rmx p99"));
    }
    if s.anchor.is_some() {
        series.push(("ib_send_lat_us", "ib_send_lat (perftest)"));
        series.push(("ib_write_lat_us", "ib_write_lat (perftest)"));
    }
    if ucx {
        series.push(("ucx_am_lat_us", "UCX am_lat (rc_verbs)"));
    }
    series.push(("floor_us", s.floor));
    r.svg(&s.out.join("pingpong.svg"), &series, "one-way latency (us)")
}

/// One streaming run serves both the message-rate and the bandwidth plot.
fn msgrate(s: &mut Suite) -> Result<(), String> {
    let setups = bench::rate::Setup::PAPER;
    let mut r = bench::rate::run("msgrate", &s.o, s.cfg, &s.net, &setups);
    let cols = ("ib_send_bw_msg_per_s", "x_ib_send_bw");
    anchor(
        s,
        &mut r,
        Tool::SendBw,
        "MsgRate[Mpps]",
        1e6,
        cols,
        "msg_per_s",
    );
    record(s.out, &mut s.md, "msgrate", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &s.out.join("msgrate.svg"))?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &s.out.join("bw.svg"))?;
    s.md.push_str("![bw](bw.svg)\n\n");
    Ok(())
}

fn header_cache(s: &mut Suite) -> Result<(), String> {
    let cache = [
        bench::rate::Setup::new(5, true),
        bench::rate::Setup {
            header_cache: false,
            ..bench::rate::Setup::new(5, true)
        },
    ];
    let small = Opts {
        min_size: 8,
        max_size: 512,
        ..s.o.clone()
    };
    let r = bench::rate::run("header-cache", &small, s.cfg, &s.net, &cache);
    record(s.out, &mut s.md, "header-cache", &r)?;
    bench::rate::plot(
        &r,
        "msg_per_s",
        "messages/s",
        &s.out.join("header-cache.svg"),
    )
}

fn memory_member(s: &mut Suite) -> Result<(), String> {
    let wqes = [5, 10, 200];
    // On a device, what its provider maps per queue pair, measured.
    let measured = measured_on(&s.net, &wqes, false)?;
    let device = |w: u16| measured.iter().find(|m| m.0 == w).map(|m| m.1);
    let r = memory_report(
        8192,
        &wqes,
        LoopConfig::default(),
        &device,
        s.net.name(),
        true,
    );
    record(s.out, &mut s.md, "memory", &r)?;
    memory_plot(&r, &s.out.join("memory.svg"))
}

/// Zero-copy eager sends of reused buffers, where the monitor they need runs.
fn eager_reuse(s: &mut Suite) -> Result<(), String> {
    match reuse_ready() {
        Ok(cal) => {
            let o = Opts {
                min_size: 128,
                ..s.o.clone()
            };
            let r = bench::eager_reuse::run(&o, s.cfg, &s.net, &cal);
            record(s.out, &mut s.md, "eager-reuse", &r)?;
            r.svg_linear(
                &s.out.join("eager-reuse.svg"),
                &[
                    ("improvement_pct", "measured improvement"),
                    ("theoretical_pct", "one copy / copy-path latency"),
                ],
                "latency improvement (%)",
            )?;
            // Buffer i is sent i times: a tenth of the iterations
            // bounds the run with them (1000 buffers at the default).
            let buffers = (s.o.iters / 10).clamp(10, 1000) as usize;
            let r = bench::spectrum::run(&o, s.cfg, &s.net, &cal, buffers);
            record(s.out, &mut s.md, "spectrum", &r)?;
            bench::spectrum::plot(&r, &s.out.join("spectrum.svg"))
        }
        Err(e) => {
            eprintln!("rmx: skipping eager-reuse and spectrum: {e}");
            s.md.push_str(&format!("## eager-reuse, spectrum\n\nNot run: {e}\n\n"));
            Ok(())
        }
    }
}

/// Ranks (threads) of the measured collectives and fences: to 8, where the
/// fence papers compare the designs at 8 neighbours.
const GROUPS: &[u16] = &[2, 4, 8];

/// The collectives the fences use, every fence design, the shape at scale
/// in the model, and how much each design overlaps.
fn one_sided(s: &mut Suite) -> Result<(), String> {
    let (out, few, cfg) = (s.out, s.few.clone(), s.cfg);
    let net = s.net.clone();
    let r = bench::collectives::run(&few, cfg, GROUPS, |_| net.clone());
    record(out, &mut s.md, "collectives", &r)?;
    let path = out.join("collectives.svg");
    r.svg_by_ranks(&path, "collective", "latency_us", |_| true, "latency (us)")?;
    let all = s.net.designs();
    let r = bench::fence::run(&few, cfg, GROUPS, &all, &bench::fence::PATTERNS, &s.net);
    record(out, &mut s.md, "fence", &r)?;
    // One 16-byte put to the next rank (Fig. 8), beside the barrier.
    let keep = |row: &serde_json::Value| row["pattern"] == "single" || row["design"] == "barrier";
    r.svg_by_ranks(
        &out.join("fence.svg"),
        "design",
        "fence_us",
        keep,
        "fence (us)",
    )?;
    let sizes = s.sim_sizes.clone();
    let sim = Opts {
        iters: SIM_ITERS,
        warmup: 1,
        ..few.clone()
    };
    let r = bench::sim::collectives_report(&sim, rmx_linux::rank::loop_config(), &sizes)?;
    record(out, &mut s.md, "collectives-sim", &r)?;
    let y = "latency (us)";
    r.svg_by_ranks(
        &out.join("collectives-sim.svg"),
        "collective",
        "latency_us",
        |_| true,
        y,
    )?;
    let r = bench::sim::fence_report(
        &sim,
        rmx_linux::rank::loop_config(),
        &all,
        &["zero", "neighbours"],
        &sizes,
    )?;
    record(out, &mut s.md, "fence-sim", &r)?;
    for p in ["zero", "neighbours"] {
        let path = out.join(format!("fence-sim-{p}.svg"));
        let keep = |row: &serde_json::Value| row["pattern"] == p || row["design"] == "barrier";
        r.svg_by_ranks(&path, "design", "fence_us", keep, "fence (us)")?;
        s.md.push_str(&format!("![fence {p}](fence-sim-{p}.svg)\n\n"));
    }
    s.md.push_str("![collectives](collectives-sim.svg)\n\n");
    let r = bench::fence::overlap(
        &Opts {
            iters: 20,
            min_size: 1,
            max_size: 1 << 20,
            ..few.clone()
        },
        cfg,
        &all,
        &s.net,
    );
    record(out, &mut s.md, "fence-overlap", &r)?;
    let (curves, names) = r.pivot("design", "overlap_ratio");
    let series: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), n.as_str())).collect();
    curves.svg_linear(&out.join("fence-overlap.svg"), &series, "overlap ratio")
}

/// Latency to 4 MiB and PULL bandwidth with 1% of packets lost and 5%
/// reordered on receive.
fn lossy(s: &mut Suite) -> Result<(), String> {
    let faults = rmx_linux::transport::faulty::percent(1.0, 0.0, 5.0, 0x5eed)?;
    let lossy = s.net.with_faults(faults)?;
    let o = Opts {
        max_size: RNDV_END,
        ..s.o.clone()
    };
    let r = bench::pingpong::run(&o, s.cfg, &lossy, &[]);
    record(s.out, &mut s.md, "pingpong-lossy", &r)?;
    r.svg(
        &s.out.join("pingpong-lossy.svg"),
        &[
            ("latency_us", "rmx latency"),
            ("p99_us", "rmx p99"),
            ("floor_us", s.floor),
        ],
        "one-way latency (us)",
    )?;
    let pull = [bench::rate::Setup::new(10, true).rndv(rmx_core::Protocol::Pull)];
    let r = bench::rate::run("bw-lossy", &o, s.cfg, &lossy, &pull);
    record(s.out, &mut s.md, "bw-lossy", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &s.out.join("bw-lossy.svg"))
}

/// The rendezvous the transport offers: RDMA write and read where it has
/// them, PULL everywhere.
fn protocols(caps: &Caps) -> Vec<rmx_core::Protocol> {
    use rmx_core::Protocol;
    let mut p = Vec::new();
    if caps.rdma_write {
        p.push(Protocol::Rput);
    }
    if caps.rdma_read {
        p.push(Protocol::Rget);
    }
    p.push(Protocol::Pull);
    p
}

/// The suite's rendezvous part: latency and bandwidth to 4 MiB per
/// rendezvous, then overlap and progress on both sides.
fn large_messages(s: &mut Suite) -> Result<(), String> {
    let (cfg, nic) = (s.cfg, &s.net);
    let all = protocols(&s.caps);
    let big = Opts {
        min_size: 65536,
        max_size: RNDV_END,
        ..s.o.clone()
    };
    let mut r = bench::pingpong::run(&big, cfg, nic, &all);
    // The device's floor for the RDMA writes these sizes move by.
    let cols = ("ib_write_lat_us", "x_ib_write_lat");
    anchor(
        s,
        &mut r,
        Tool::WriteLat,
        "t_avg[usec]",
        1.0,
        cols,
        "latency_us",
    );
    let (out, md) = (s.out, &mut s.md);
    record(out, md, "pingpong-rndv", &r)?;
    let (mut curves, mut labels) = r.pivot("rndv", "latency_us");
    if s.anchor.is_some() {
        let floor = "ib_write_lat (perftest)";
        for row in curves.results.iter_mut() {
            let size = row["size"].as_u64();
            let v = r.results.iter().find(|x| x["size"].as_u64() == size);
            row[floor] = v.map_or(serde_json::Value::Null, |x| x["ib_write_lat_us"].clone());
        }
        labels.push(floor.into());
    }
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    curves.svg(
        &out.join("pingpong-rndv.svg"),
        &series,
        "one-way latency (us)",
    )?;
    let setups: Vec<_> = all
        .iter()
        .map(|&p| bench::rate::Setup::new(10, true).rndv(p))
        .collect();
    let mut r = bench::rate::run("bw-rndv", &big, cfg, nic, &setups);
    let cols = ("ib_write_bw_mb_per_s", "x_ib_write_bw");
    anchor(
        s,
        &mut r,
        Tool::WriteBw,
        "BW average[MB/sec]",
        1.0,
        cols,
        "mb_per_s",
    );
    let (out, md) = (s.out, &mut s.md);
    record(out, md, "bw-rndv", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw-rndv.svg"))?;
    let ov = Opts {
        min_size: 1,
        max_size: 1 << 20,
        iters: (s.o.iters / 100).max(20),
        warmup: 10,
        ..s.o.clone()
    };
    for side in [bench::Side::Send, bench::Side::Recv] {
        let name = format!("overlap-{}", side.name());
        let r = bench::overlap::run(&ov, cfg, nic, side, &all, &[false, true]);
        record(out, md, &name, &r)?;
        bench::overlap::plot(&r, &out.join(format!("{name}.svg")))?;
        let name = format!("progress-{}", side.name());
        let r = bench::progress::run(&ov, cfg, nic, side, &all, &[false, true]);
        record(out, md, &name, &r)?;
        bench::progress::plot(&r, &out.join(format!("{name}.svg")))?;
    }
    Ok(())
}
