//! What every benchmark command sets up from its arguments: the transport and its network (a lab, a launcher's PMI), the options, and where the report goes.

use rmx_linux::bench::{report::Report, Opts};
use rmx_linux::job::Net;
use rmx_linux::lab::TempLab;

use super::*;

/// The largest eager message: where the benchmarks' sizes end by default.
pub(crate) const EAGER_END: usize = 8192;

/// Where sizes end with a rendezvous selected.
pub(crate) const RNDV_END: usize = 4 << 20;

/// The largest size a benchmark accepts (a window of 64 buffers of it is allocated).
pub(crate) const SIZE_LIMIT: usize = 64 << 20;

/// The largest `--medium-max`.
pub(crate) const MEDIUM_LIMIT: u32 = 1 << 20;

/// The core's configuration for a benchmark: the default with what its
/// options change.
pub(crate) fn bench_config(a: &BenchArgs) -> rmx_core::Config {
    let base = rmx_linux::rank::loop_config();
    rmx_core::Config {
        medium_max: a.medium_max.or(base.medium_max),
        cq_moderation: a.cq_mod.unwrap_or(base.cq_moderation),
        ..base
    }
}

/// The most repetitions a benchmark takes: buffers of results are sized by it.
pub(crate) const ITERS_LIMIT: u64 = 1_000_000_000;

/// The most buffers `bench spectrum` takes (buffer i is sent i times, so the
/// run grows with the square of it).
pub(crate) const BUFFERS_LIMIT: usize = 10_000;

/// The largest job `model memory` describes: ranks are 16-bit.
pub(crate) const PROCS_LIMIT: u64 = 1 << 16;

/// The largest receive pool `rmx model memory` models (16 GiB of 8 KiB buffers).
pub(crate) const RX_BUFFERS_LIMIT: u32 = 1 << 21;

pub(crate) fn check_iters(iters: u64) -> Result<(), String> {
    if iters == 0 || iters > ITERS_LIMIT {
        return Err(format!(
            "--iters must be between 1 and {ITERS_LIMIT} (got {iters})"
        ));
    }
    Ok(())
}

/// The run's options; `sizes` are the benchmark's default smallest and
/// largest sizes.
pub(crate) fn opts(a: &BenchArgs, sizes: (usize, usize)) -> Result<Opts, String> {
    opts_iters(a, sizes, 10_000)
}

/// [`opts`] with the benchmark's default iteration count.
pub(crate) fn opts_iters(a: &BenchArgs, sizes: (usize, usize), iters: u64) -> Result<Opts, String> {
    rmx_linux::transport::registry::find(&a.transport)?;
    let min_size = a.min_size.unwrap_or(sizes.0);
    let max_size = a.max_size.unwrap_or(sizes.1);
    if min_size > max_size {
        return Err(format!(
            "--min-size {min_size} is larger than --max-size {max_size}"
        ));
    }
    if max_size > SIZE_LIMIT {
        return Err(format!(
            "--max-size {max_size} is above the benchmarks' limit of {SIZE_LIMIT} bytes"
        ));
    }
    if let Some(m) = a.medium_max.filter(|&m| m > MEDIUM_LIMIT) {
        return Err(format!(
            "--medium-max {m} is above {MEDIUM_LIMIT}: fragments are copied through the receive pool; larger messages belong to a rendezvous"
        ));
    }
    let iters = a.iters.unwrap_or(iters);
    check_iters(iters)?;
    let warmup = a.warmup.unwrap_or(iters / 10);
    if warmup > ITERS_LIMIT {
        return Err(format!(
            "--warmup {warmup} is above the limit of {ITERS_LIMIT}"
        ));
    }
    Ok(Opts {
        transport: a.transport.clone(),
        min_size,
        max_size,
        iters,
        warmup,
        eager_reuse: None,
        quiet: a.json,
    })
}

pub(crate) fn two_ranks(started: &str) -> String {
    format!("this benchmark has 2 ranks, the launcher started {started}: use mpiexec.hydra -n 2")
}

/// The network a benchmark runs on, and the lab made for it (removed when
/// dropped). `launchable`: the benchmark also runs as one rank per process
/// under a PMI launcher (`mpiexec -n 2 rmx bench …`).
pub(crate) fn network(a: &BenchArgs, launchable: bool) -> Result<(Net, Option<TempLab>), String> {
    // Checked before PMI is touched: a rank that connected and then left
    // makes the launcher kill the others at once, message or not.
    let launched = rmx_linux::pmi::launched();
    if launched {
        if !launchable {
            return Err("this benchmark runs its ranks as threads of one process; start it without a launcher (pingpong, msgrate and bw run under a launcher)".into());
        }
        // PMI_SIZE is set in PMI_FD mode; with PMI_PORT the size comes
        // with the handshake and is checked below.
        if let Ok(size) = std::env::var("PMI_SIZE") {
            if size.trim() != "2" {
                return Err(two_ranks(size.trim()));
            }
        }
    }
    let (net, lab) = a.net.open(&a.transport, launched)?;
    if let Some(l) = net.launch() {
        if l.size() != 2 {
            return Err(two_ranks(&l.size().to_string()));
        }
    }
    Ok((net, lab))
}

/// The calibration zero-copy runs with, once the monitor it needs is up.
pub(crate) fn reuse_ready() -> Result<rmx_linux::reuse::Calibration, String> {
    rmx_linux::monitor::Monitor::global()
        .map_err(|e| format!("zero-copy eager sends need the invalidation monitor: {e}"))?;
    let (cal, saved) = rmx_linux::reuse::Calibration::load()?;
    if !saved {
        eprintln!("rmx: using default cost figures; run `rmx calibrate` to measure this machine's");
    }
    Ok(cal)
}

/// Under a launcher only rank 0 shows progress.
pub(crate) fn quiet_off_rank0(o: Opts, net: &Net) -> Opts {
    match net.launch() {
        Some(l) if l.rank() != 0 => Opts { quiet: true, ..o },
        _ => o,
    }
}

/// Prints the report, on rank 0 only when a launcher started the ranks,
/// and tells the launcher this rank is done.
pub(crate) fn emit_rank0(net: &Net, r: &Report, json: bool) -> Result<(), String> {
    match net.launch() {
        Some(l) => {
            if l.rank() == 0 {
                emit(r, json);
            }
            l.finalize().map_err(String::from)
        }
        None => {
            emit(r, json);
            Ok(())
        }
    }
}

pub(crate) fn emit(r: &Report, json: bool) {
    if json {
        println!("{}", r.json());
    } else {
        print!("{}", r.table());
    }
}
