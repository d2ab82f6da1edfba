//! `rmx`: information, benchmarks and the benchmark suite of the rmx transport.

use std::process::ExitCode;

use clap::Parser;
use rmx_linux::bench::{self};
use rmx_linux::say::say;

mod cli;

use cli::*;

fn main() -> ExitCode {
    let cli = Cli::parse();
    one_line_panics();
    if let Some(why) = rmx_linux::pmi::foreign_launcher() {
        // Each process would run the whole job alone, and the copies
        // would take each other's frames: refuse before anything starts.
        say(why);
        return ExitCode::from(2);
    }
    rmx_linux::pmi::ignore_launcher_notice();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli)));
    let code = match result {
        Ok(Ok(())) => return ExitCode::SUCCESS,
        // A failure while running (a peer, the transport, the launcher),
        // not bad input.
        Err(_) => {
            if let Some(why) = first_stop() {
                say(why);
            }
            1
        }
        Ok(Err(e)) => {
            say(e);
            2
        }
    };
    if rmx_linux::pmi::env_rank().is_some() {
        // A launcher kills the other ranks once one exits, and may drop
        // what they still had to say: give it time to pass this on first.
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    ExitCode::from(code)
}

/// Why each thread stopped, in the order they first did: the latest
/// reason per thread (a rank that stops on a failed peer says so last).
static STOPPED: std::sync::Mutex<Vec<(std::thread::ThreadId, String)>> =
    std::sync::Mutex::new(Vec::new());

/// A failure while running (a rank's thread or this process stopping on a
/// failed peer, transport or launcher) becomes one line, `rmx: rank R:
/// why`, printed by [`first_stop`]; with `RUST_BACKTRACE` the full
/// report comes first.
fn one_line_panics() {
    let full = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    let report = std::panic::take_hook();
    let pmi_rank = rmx_linux::pmi::env_rank();
    std::panic::set_hook(Box::new(move |info| {
        if full {
            report(info);
        }
        let msg = rmx_linux::say::panic_words(info.payload());
        let thread = std::thread::current();
        let rank = pmi_rank
            .as_deref()
            .map(|r| format!("rank {r}"))
            .or_else(|| {
                thread
                    .name()
                    .filter(|n| n.starts_with("rank "))
                    .map(String::from)
            });
        let line = match rank {
            // Printed already: nothing left to say.
            _ if info.payload().is::<rmx_linux::job::Said>() => String::new(),
            Some(r) => rmx_linux::say::for_rank(&r, msg),
            None => msg.to_string(),
        };
        let mut stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
        match stopped.iter_mut().find(|(t, _)| *t == thread.id()) {
            Some(s) => s.1 = line,
            None => stopped.push((thread.id(), line)),
        }
    }));
}

/// Why the first thread that stopped did, unless it said so itself.
fn first_stop() -> Option<String> {
    let stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
    stopped
        .first()
        .map(|(_, why)| why.clone())
        .filter(|why| !why.is_empty())
}

/// Runs the command: `Err` is bad input (said, exit 2).
fn run(cli: Cli) -> Result<(), String> {
    // The copy routines are chosen before anything is timed.
    match cli.cmd {
        Cmd::Info { json } => {
            info(json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Pingpong {
            args: a,
            eager_reuse,
            rndv,
        }) => {
            let end = if rndv.is_some() { RNDV_END } else { EAGER_END };
            opts(&a, (1, end)).and_then(|mut o| {
                if eager_reuse == OnOff::On {
                    o.eager_reuse = Some(reuse_ready()?);
                }
                let variants = rndv.map_or(vec![], |s| RndvSel::protocols(Some(s)));
                let (net, _lab) = network(&a, true)?;
                let o = quiet_off_rank0(o, &net);
                let r = bench::pingpong::run(&o, bench_config(&a), &net, &variants);
                emit_rank0(&net, &r, a.json)
            })
        }
        Cmd::Bench(BenchCmd::Overlap(a)) => overlap_or_progress(&a, false),
        Cmd::Bench(BenchCmd::Progress(a)) => overlap_or_progress(&a, true),
        Cmd::Bench(BenchCmd::EagerReuse(a)) => opts(&a, (128, EAGER_END)).and_then(|o| {
            let cal = reuse_ready()?;
            let (net, _lab) = network(&a, false)?;
            emit(
                &bench::eager_reuse::run(&o, bench_config(&a), &net, &cal),
                a.json,
            );
            Ok(())
        }),
        Cmd::Bench(BenchCmd::Bw(a)) => rate("bw", &a),
        Cmd::Bench(BenchCmd::Collectives {
            args: a,
            ranks,
            sim,
        }) => collectives(&a, ranks, sim),
        Cmd::Bench(BenchCmd::Fence {
            args: a,
            design,
            pattern,
            ranks,
            sim,
        }) => fence(&a, &design, &pattern, ranks, sim),
        Cmd::Bench(BenchCmd::FenceOverlap { args: a, design }) => {
            (|| {
                let o = opts_iters(&a, (1, 1 << 20), 100)?;
                if o.max_size > 1 << 26 {
                    return Err(format!("--max-size {} is above 64 MiB", o.max_size));
                }
                let (net, _lab) = threads_network(&a, "fence-overlap")?;
                let designs = designs(&design, Some(&net))?;
                let r = bench::fence::overlap(&o, bench_config(&a), &designs, &net);
                emit(&r, a.json);
                Ok(())
            })()
        }
        Cmd::Bench(BenchCmd::Msgrate(a)) => rate("msgrate", &a),
        Cmd::Model(ModelCmd::Memory {
            procs,
            wqes,
            rx_buffers,
            json,
            plot,
            transport,
            net,
        }) => memory(procs, wqes, rx_buffers, json, plot, &transport, &net),
        Cmd::Bench(BenchCmd::Suite {
            out,
            iters,
            transport,
            net,
            sim_ranks,
            only,
        }) => suite(&out, iters, &transport, net, sim_ranks, &only),
        Cmd::Calibrate {
            json,
            dry_run,
            transport,
            net,
        } => calibrate(json, dry_run, &transport, &net),
        Cmd::Lab(cmd) => lab(cmd),
        Cmd::Bench(BenchCmd::Pin {
            json,
            iters,
            max_pages,
            plot,
            transport,
            net,
        }) => pin(json, iters, max_pages, plot.as_deref(), &transport, &net),
        Cmd::Bench(BenchCmd::Spectrum {
            args: a,
            buffers,
            plot,
        }) => opts(&a, (128, EAGER_END)).and_then(|o| {
            if buffers == 0 || buffers > BUFFERS_LIMIT {
                return Err(format!(
                    "--buffers must be between 1 and {BUFFERS_LIMIT} (got {buffers}): buffer i is sent i times"
                ));
            }
            let cal = reuse_ready()?;
            let (net, _lab) = network(&a, false)?;
            let r = bench::spectrum::run(&o, bench_config(&a), &net, &cal, buffers);
            if let Some(p) = plot {
                bench::spectrum::plot(&r, &p)?;
            }
            emit(&r, a.json);
            Ok(())
        }),
    }
}
