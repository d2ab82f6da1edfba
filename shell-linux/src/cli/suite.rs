//! `rmx bench suite`: every benchmark of a transport, a Markdown report with plots.

use rmx_core::onesided::Design;
use rmx_linux::bench::{self, report::Report, Opts};
use rmx_linux::job::{EthNet, Net};
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

pub(crate) fn suite(out: &std::path::Path, iters: u64) -> Result<(), String> {
    check_iters(iters)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let o = suite_opts("loop", iters);
    let mut md = String::from("# rmx benchmark report\n\n");
    let cfg = rmx_linux::rank::loop_config();
    let r = bench::pingpong::run(&o, cfg, &loop_net(), &[]);
    record(out, &mut md, "pingpong", &r)?;
    r.svg(
        &out.join("pingpong.svg"),
        &[
            ("latency_us", "rmx latency"),
            ("floor_us", "shared-memory floor"),
        ],
        "one-way latency (us)",
    )?;
    // One streaming run serves both the message-rate and the bandwidth plot.
    let setups = bench::rate::Setup::PAPER;
    let r = bench::rate::run("msgrate", &o, cfg, &loop_net(), &setups);
    record(out, &mut md, "msgrate", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("msgrate.svg"))?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw.svg"))?;
    md.push_str("![bw](bw.svg)\n\n");
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
        ..o.clone()
    };
    let r = bench::rate::run("header-cache", &small, cfg, &loop_net(), &cache);
    record(out, &mut md, "header-cache", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("header-cache.svg"))?;
    large_messages(out, &mut md, &o)?;
    let r = memory_report(8192, &[5, 10, 200], LoopConfig::default(), true);
    record(out, &mut md, "memory", &r)?;
    memory_plot(&r, &out.join("memory.svg"))?;
    // Zero-copy eager sends of reused buffers, where the monitor they need runs.
    match reuse_ready() {
        Ok(cal) => {
            let o = Opts {
                min_size: 128,
                ..o.clone()
            };
            let cfg = rmx_linux::rank::loop_config();
            let r = bench::eager_reuse::run(&o, cfg, &loop_net(), &cal);
            record(out, &mut md, "eager-reuse", &r)?;
            r.svg_linear(
                &out.join("eager-reuse.svg"),
                &[
                    ("improvement_pct", "measured improvement"),
                    ("theoretical_pct", "one copy / copy-path latency"),
                ],
                "latency improvement (%)",
            )?;
            let r = bench::spectrum::run(&o, cfg, &loop_net(), &cal, 1000);
            record(out, &mut md, "spectrum", &r)?;
            bench::spectrum::plot(&r, &out.join("spectrum.svg"))?;
        }
        Err(e) => {
            eprintln!("rmx: skipping eager-reuse and spectrum: {e}");
            md.push_str(&format!("## eager-reuse, spectrum\n\nNot run: {e}\n\n"));
        }
    }
    // One-sided: the collectives the fences use, and the deferred fence.
    let few = Opts {
        iters: (iters / 10).max(100),
        warmup: 20,
        min_size: 16,
        max_size: 4096,
        ..o.clone()
    };
    let r = bench::collectives::run(&few, cfg, &[2, 4], |_| loop_net());
    record(out, &mut md, "collectives", &r)?;
    let path = out.join("collectives.svg");
    r.svg_by_ranks(&path, "collective", "latency_us", |_| true, "latency (us)")?;
    let all = Design::ALL;
    let r = bench::fence::run(
        &few,
        cfg,
        &[2, 4],
        &all,
        &bench::fence::PATTERNS,
        &loop_net(),
    );
    record(out, &mut md, "fence", &r)?;
    // One 16-byte put to the next rank (Fig. 8), beside the barrier.
    let keep = |row: &serde_json::Value| row["pattern"] == "single" || row["design"] == "barrier";
    r.svg_by_ranks(
        &out.join("fence.svg"),
        "design",
        "fence_us",
        keep,
        "fence (us)",
    )?;
    // The shape at scale, in the model.
    let m = bench::sim::Model::IB_DDR;
    let sizes = group_sizes(None, 0, true)?;
    let r = bench::sim::collectives_report(&few, &m, &sizes);
    record(out, &mut md, "collectives-sim", &r)?;
    let y = "latency (us)";
    r.svg_by_ranks(
        &out.join("collectives-sim.svg"),
        "collective",
        "latency_us",
        |_| true,
        y,
    )?;
    let r = bench::sim::fence_report(&few, &m, &all, &["zero", "neighbours"], &sizes);
    record(out, &mut md, "fence-sim", &r)?;
    for p in ["zero", "neighbours"] {
        let path = out.join(format!("fence-sim-{p}.svg"));
        let keep = |row: &serde_json::Value| row["pattern"] == p || row["design"] == "barrier";
        r.svg_by_ranks(&path, "design", "fence_us", keep, "fence (us)")?;
        md.push_str(&format!("![fence {p}](fence-sim-{p}.svg)\n\n"));
    }
    md.push_str("![collectives](collectives-sim.svg)\n\n");
    let r = bench::fence::overlap(
        &Opts {
            iters: 20,
            min_size: 1,
            max_size: 1 << 20,
            ..few.clone()
        },
        cfg,
        &all,
        &loop_net(),
    );
    record(out, &mut md, "fence-overlap", &r)?;
    let (curves, names) = r.pivot("design", "overlap_ratio");
    let series: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), n.as_str())).collect();
    curves.svg_linear(&out.join("fence-overlap.svg"), &series, "overlap ratio")?;
    std::fs::write(out.join("report.md"), without_missing_plots(out, &md))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

/// The suite on `eth`: what the wire changes, each beside its floor.
pub(crate) fn suite_eth(
    out: &std::path::Path,
    iters: u64,
    iface: Option<String>,
) -> Result<(), String> {
    use rmx_core::Protocol;
    check_iters(iters)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let args = BenchArgs {
        transport: "eth".into(),
        iface,
        mtu: None,
        loss: None,
        dup: None,
        reorder: None,
        rx: None,
        medium_max: None,
        min_size: None,
        max_size: None,
        iters: Some(iters),
        warmup: None,
        json: false,
    };
    let (net, _lab) = network(&args, false)?;
    let o = suite_opts("eth", iters);
    let cfg = rmx_linux::rank::loop_config();
    let mut md = String::from("# rmx benchmark report: eth\n\n");
    let latency = |md: &mut String, name: &str, o: &Opts, net: &Net| -> Result<(), String> {
        let r = bench::pingpong::run(o, cfg, net, &[]);
        record(out, md, name, &r)?;
        r.svg(
            &out.join(format!("{name}.svg")),
            &[
                ("latency_us", "rmx latency"),
                ("p99_us", "rmx p99"),
                ("floor_us", "bare-frame floor"),
            ],
            "one-way latency (us)",
        )
    };
    // One packet and fragments, where the latency target lies.
    let small = Opts {
        max_size: 32 * 1024,
        ..o.clone()
    };
    latency(&mut md, "pingpong", &small, &net)?;
    let r = bench::rate::run("msgrate", &o, cfg, &net, &bench::rate::Setup::PAPER);
    record(out, &mut md, "msgrate", &r)?;
    bench::rate::plot(&r, "msg_per_s", "messages/s", &out.join("msgrate.svg"))?;
    let big = Opts {
        min_size: 65536,
        max_size: RNDV_END,
        ..o.clone()
    };
    latency(&mut md, "pingpong-pull", &big, &net)?;
    let pull = [bench::rate::Setup::new(10, true).rndv(Protocol::Pull)];
    let r = bench::rate::run(
        "bw",
        &Opts {
            min_size: 1,
            ..big.clone()
        },
        cfg,
        &net,
        &pull,
    );
    record(out, &mut md, "bw", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw.svg"))?;
    let ov = Opts {
        min_size: 1,
        max_size: 1 << 20,
        iters: (iters / 100).max(20),
        warmup: 10,
        ..o.clone()
    };
    for side in [bench::Side::Send, bench::Side::Recv] {
        let name = format!("overlap-{}", side.name());
        let r = bench::overlap::run(&ov, cfg, &net, side, &[Protocol::Pull], &[false, true]);
        record(out, &mut md, &name, &r)?;
        bench::overlap::plot(&r, &out.join(format!("{name}.svg")))?;
        let name = format!("progress-{}", side.name());
        let r = bench::progress::run(&ov, cfg, &net, side, &[Protocol::Pull], &[false, true]);
        record(out, &mut md, &name, &r)?;
        bench::progress::plot(&r, &out.join(format!("{name}.svg")))?;
    }
    // The same wire losing 1% of its frames and reordering 5%.
    let lossy = match &net {
        Net::Eth(e) => Net::Eth(EthNet {
            opts: rmx_linux::eth::EthOpts {
                faults: rmx_linux::eth::Faults::percent(1.0, 0.0, 5.0, 0x5eed)?,
                ..e.opts
            },
            ..e.clone()
        }),
        n => n.clone(),
    };
    latency(
        &mut md,
        "pingpong-lossy",
        &Opts {
            max_size: RNDV_END,
            ..o.clone()
        },
        &lossy,
    )?;
    let r = bench::rate::run(
        "bw-lossy",
        &Opts {
            max_size: RNDV_END,
            ..o.clone()
        },
        cfg,
        &lossy,
        &pull,
    );
    record(out, &mut md, "bw-lossy", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw-lossy.svg"))?;
    std::fs::write(out.join("report.md"), without_missing_plots(out, &md))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

/// The suite's rendezvous part: latency and bandwidth to 4 MiB per
/// rendezvous, then overlap and progress on both sides.
pub(crate) fn large_messages(
    out: &std::path::Path,
    md: &mut String,
    o: &Opts,
) -> Result<(), String> {
    use rmx_core::Protocol;
    let cfg = rmx_linux::rank::loop_config();
    let nic = &loop_net();
    let all = [Protocol::Rput, Protocol::Rget, Protocol::Pull];
    let big = Opts {
        min_size: 65536,
        max_size: RNDV_END,
        ..o.clone()
    };
    let r = bench::pingpong::run(&big, cfg, nic, &all);
    record(out, md, "pingpong-rndv", &r)?;
    let (curves, labels) = r.pivot("rndv", "latency_us");
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
    let r = bench::rate::run("bw-rndv", &big, cfg, nic, &setups);
    record(out, md, "bw-rndv", &r)?;
    bench::rate::plot(&r, "mb_per_s", "MB/s", &out.join("bw-rndv.svg"))?;
    let ov = Opts {
        min_size: 1,
        max_size: 1 << 20,
        iters: (o.iters / 100).max(20),
        warmup: 10,
        ..o.clone()
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
