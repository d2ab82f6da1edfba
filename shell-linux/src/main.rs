//! `rmx`: information, benchmarks and the benchmark suite of the rmx transport.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rmx_core::Config;
use rmx_linux::bench::{self, report::Report, Opts};
use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::CoreEndpoint;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "rmx",
    version,
    about = "rmx messaging transport: information and benchmarks",
    long_about = "rmx is the transport core an MPI library, a PGAS runtime or a network driver \
embeds to move messages over RDMA and Ethernet. This tool reports what this build can do and \
runs its benchmark suite (OSU-style: latency, bandwidth, message rate)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Transports, default configuration, and the core's memory figures.
    Info {
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// One-way latency (half round trip) beside the bare shared-memory floor.
    Pingpong(BenchArgs),
    /// Windows of 64 non-blocking sends, then an ack: MB/s and messages/s.
    Bw(BenchArgs),
    /// Every benchmark; writes tables, JSON and SVG plots into a folder.
    Suite {
        /// Folder for the report (created if missing).
        #[arg(long, default_value = "rmx-report")]
        out: PathBuf,
        /// Timed iterations per size.
        #[arg(long, default_value_t = 10_000)]
        iters: u64,
    },
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// Transport to measure: loop (in-process software NIC).
    #[arg(long, default_value = "loop")]
    transport: String,
    /// Smallest message size in bytes.
    #[arg(long, default_value_t = 1)]
    min_size: usize,
    /// Largest message size in bytes (the eager range ends at 8192).
    #[arg(long, default_value_t = 8192)]
    max_size: usize,
    /// Timed iterations per size (after the warm-up).
    #[arg(long, default_value_t = 10_000)]
    iters: u64,
    /// Untimed warm-up iterations per size.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

const TRANSPORTS: [(&str, bool, &str); 3] = [
    (
        "loop",
        true,
        "in-process software NIC with verbs semantics (default)",
    ),
    ("eth", false, "raw Ethernet frames: not in this build yet"),
    (
        "verbs",
        false,
        "rdma-core verbs RC queue pairs: not in this build yet",
    ),
];

fn check_transport(t: &str) -> Result<(), String> {
    match TRANSPORTS.iter().find(|x| x.0 == t) {
        Some((_, true, _)) => Ok(()),
        Some((name, false, why)) => Err(format!(
            "transport `{name}` is not available ({why}); run with --transport loop, or see `rmx info`"
        )),
        None => Err(format!(
            "unknown transport `{t}`; choose one of: loop, eth, verbs (see `rmx info`)"
        )),
    }
}

fn opts(a: &BenchArgs) -> Result<Opts, String> {
    check_transport(&a.transport)?;
    if a.min_size > a.max_size {
        return Err(format!(
            "--min-size {} is larger than --max-size {}",
            a.min_size, a.max_size
        ));
    }
    let cfg = rmx_linux::rank::loop_config();
    if a.max_size > cfg.eager_threshold as usize {
        return Err(format!(
            "--max-size {} exceeds the eager threshold ({} bytes); larger messages need the \
rendezvous protocol, which this build does not have yet",
            a.max_size, cfg.eager_threshold
        ));
    }
    if a.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    Ok(Opts {
        transport: a.transport.clone(),
        min_size: a.min_size,
        max_size: a.max_size,
        iters: a.iters,
        warmup: a.warmup,
        quiet: a.json,
    })
}

fn emit(r: &Report, json: bool) {
    if json {
        println!("{}", r.json());
    } else {
        print!("{}", r.table());
    }
}

fn info(json_out: bool) {
    let cfg = rmx_linux::rank::loop_config();
    let nic = LoopConfig::default();
    let doc = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "cores": rmx_linux::clock::cores(),
        "transports": TRANSPORTS.iter().map(|(n, a, d)| json!({"name": n, "available": a, "about": d})).collect::<Vec<_>>(),
        "config": {
            "eager_threshold": cfg.eager_threshold,
            "credits": cfg.credits,
            "credit_return": cfg.credit_return,
            "header_bytes": rmx_core::wire::HEADER_LEN,
            "wire_version": rmx_core::wire::VERSION,
            "loop": nic,
        },
        "endpoint_bytes": CoreEndpoint::ENDPOINT_BYTES,
        "peer_bytes": CoreEndpoint::PEER_BYTES,
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return;
    }
    println!(
        "rmx {}  ({} cores)",
        env!("CARGO_PKG_VERSION"),
        doc["cores"]
    );
    println!("transports:");
    for (n, a, d) in TRANSPORTS {
        println!(
            "  {n:<6} {:<12} {d}",
            if a { "available" } else { "unavailable" }
        );
    }
    println!("configuration:");
    println!("  eager threshold   {} bytes", cfg.eager_threshold);
    println!(
        "  credits per peer  {} (returned after {})",
        cfg.credits, cfg.credit_return
    );
    println!(
        "  header            {} bytes, wire version {}",
        rmx_core::wire::HEADER_LEN,
        rmx_core::wire::VERSION
    );
    println!(
        "  loop NIC          SRQ {} x {} B, SQ depth {}, inline up to {} B",
        nic.srq_depth, nic.buf_size, nic.sq_depth, nic.inline_max
    );
    println!("memory (core, from the types):");
    println!("  endpoint_bytes    {}", CoreEndpoint::ENDPOINT_BYTES);
    println!("  peer_bytes        {}", CoreEndpoint::PEER_BYTES);
}

/// One benchmark of the suite and how to plot it.
struct SuiteEntry {
    name: &'static str,
    run: fn(&Opts, Config, LoopConfig) -> Report,
    series: &'static [(&'static str, &'static str)],
    y_label: &'static str,
}

fn suite(out: &std::path::Path, iters: u64) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let o = Opts {
        transport: "loop".into(),
        min_size: 1,
        max_size: 8192,
        iters,
        warmup: (iters / 10).max(100),
        quiet: false,
    };
    let mut md = String::from("# rmx benchmark report\n\n");
    let runs: [SuiteEntry; 2] = [
        SuiteEntry {
            name: "pingpong",
            run: bench::pingpong::run,
            series: &[
                ("latency_us", "rmx latency"),
                ("floor_us", "shared-memory floor"),
            ],
            y_label: "one-way latency (us)",
        },
        SuiteEntry {
            name: "bw",
            run: bench::bw::run,
            series: &[("mb_per_s", "rmx bandwidth")],
            y_label: "MB/s",
        },
    ];
    for SuiteEntry {
        name,
        run,
        series,
        y_label,
    } in runs
    {
        let r = run(&o, rmx_linux::rank::loop_config(), LoopConfig::default());
        println!("{}", r.table());
        let write = |file: String, body: String| {
            std::fs::write(out.join(&file), body).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write(format!("{name}.json"), r.json())?;
        r.svg(&out.join(format!("{name}.svg")), series, y_label)?;
        if name == "bw" {
            r.svg(
                &out.join("msgrate.svg"),
                &[("msg_per_s", "rmx messages/s")],
                "messages/s",
            )?;
        }
        md.push_str(&format!(
            "## {name}\n\n```\n{}```\n\n![{name}]({name}.svg)\n\n",
            r.table()
        ));
    }
    std::fs::write(out.join("report.md"), md)
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report written to {}/report.md", out.display());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Info { json } => {
            info(json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Pingpong(a)) => opts(&a).map(|o| {
            emit(
                &bench::pingpong::run(&o, rmx_linux::rank::loop_config(), LoopConfig::default()),
                a.json,
            )
        }),
        Cmd::Bench(BenchCmd::Bw(a)) => opts(&a).map(|o| {
            emit(
                &bench::bw::run(&o, rmx_linux::rank::loop_config(), LoopConfig::default()),
                a.json,
            )
        }),
        Cmd::Bench(BenchCmd::Suite { out, iters }) => suite(&out, iters),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmx: {e}");
            ExitCode::from(2)
        }
    }
}
