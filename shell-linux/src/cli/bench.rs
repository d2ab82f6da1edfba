//! The benchmark commands beyond the suite's own: collectives, fences, overlap and progress, message rate.

use rmx_core::onesided::Design;
use rmx_linux::bench::{self};
use rmx_linux::job::Net;
use rmx_linux::lab::TempLab;

use super::*;

/// The most ranks `bench collectives` runs as threads of one process.
pub(crate) const RANKS_LIMIT: u16 = 64;

/// The most ranks a `--sim` run simulates: each holds a whole endpoint
/// (a thousand ranks take about 1.5 GB).
pub(crate) const SIM_RANKS_LIMIT: u16 = 4096;

/// The most window memory a `--sim` fence run holds, over all its ranks.
pub(crate) const SIM_WINDOWS_LIMIT: usize = 4 << 30;

/// Timed runs of each row in virtual time, unless `--iters` says: a
/// perfect network repeats itself, so two show the steady state.
pub(crate) const SIM_ITERS: u64 = 2;

/// A `--sim` run's options: one untimed run first unless `--warmup` says.
pub(crate) fn sim_warmup(a: &BenchArgs, o: bench::Opts) -> bench::Opts {
    bench::Opts {
        warmup: a.warmup.unwrap_or(1),
        ..o
    }
}

/// Group sizes 2, 4, 8, … below `ranks`, and `ranks`: threads of this
/// process, or (`sim`) ranks of the model.
pub(crate) fn group_sizes(ranks: Option<u16>, default: u16, sim: bool) -> Result<Vec<u16>, String> {
    let (ranks, limit) = match sim {
        true => (ranks.unwrap_or(1024), SIM_RANKS_LIMIT),
        false => (ranks.unwrap_or(default), RANKS_LIMIT),
    };
    if !(2..=limit).contains(&ranks) {
        let why = if sim {
            "every simulated rank holds a whole endpoint (a thousand take about 1.5 GB)"
        } else {
            "the ranks are threads of this process; --sim models larger groups"
        };
        return Err(format!(
            "--ranks must be between 2 and {limit} (got {ranks}): {why}"
        ));
    }
    let mut sizes: Vec<u16> = (1..16)
        .map(|k| 1u16 << k)
        .take_while(|&n| n < ranks)
        .collect();
    sizes.push(ranks);
    Ok(sizes)
}

/// The network of a benchmark whose ranks are threads of this process:
/// on eth they share one interface, which must be named.
pub(crate) fn threads_network(a: &BenchArgs, what: &str) -> Result<(Net, Option<TempLab>), String> {
    a.net
        .threads_share(&a.transport)
        .map_err(|how| format!("{what} on {} needs {how}", a.transport))?;
    network(a, false)
}

/// `rmx bench collectives`.
pub(crate) fn collectives(a: &BenchArgs, ranks: Option<u16>, sim: bool) -> Result<(), String> {
    let o = opts_iters(a, (0, 0), if sim { SIM_ITERS } else { 1000 })?;
    let sizes = group_sizes(ranks, 8, sim)?;
    if sim {
        let o = sim_warmup(a, o);
        emit(
            &bench::sim::collectives_report(&o, bench_config(a), &sizes)?,
            a.json,
        );
        return Ok(());
    }
    let (net, _lab) = threads_network(a, "collectives")?;
    let r = bench::collectives::run(&o, bench_config(a), &sizes, |_| net.clone());
    emit(&r, a.json);
    Ok(())
}

/// The designs `--design` names, among those the network's transport
/// carries (every design in the model).
pub(crate) fn designs(design: &str, net: Option<&Net>) -> Result<Vec<Design>, String> {
    let runnable = net.map_or(Design::ALL.to_vec(), Net::designs);
    let names = || {
        runnable
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match design {
        "all" => Ok(runnable),
        d => match Design::parse(d) {
            Some(d) if runnable.contains(&d) => Ok(vec![d]),
            Some(d) => Err(format!(
                "--design {} needs RDMA, which this transport lacks: it carries {}; see every design modelled with --sim",
                d.name(),
                names()
            )),
            None => Err(format!("unknown --design {d}: choose def, naive, opt, ri or all")),
        },
    }
}

/// `rmx bench fence`.
pub(crate) fn fence(
    a: &BenchArgs,
    design: &str,
    pattern: &str,
    ranks: Option<u16>,
    sim: bool,
) -> Result<(), String> {
    let patterns: Vec<&str> = match pattern {
        "all" => bench::fence::PATTERNS.to_vec(),
        p if bench::fence::PATTERNS.contains(&p) => vec![p],
        p => {
            return Err(format!(
                "unknown --pattern {p}: choose zero, single, neighbours, halo4, halo8 or all"
            ))
        }
    };
    let o = opts_iters(a, (16, 16384), if sim { SIM_ITERS } else { 1000 })?;
    if o.max_size > 1 << 20 {
        return Err(format!(
            "--max-size {} is above 1 MiB: every rank's window holds 8 puts of it",
            o.max_size
        ));
    }
    let sizes = group_sizes(ranks, 4, sim)?;
    if sim {
        // Each simulated rank holds its window, the bytes it puts from, and
        // the reference's copy: eight puts of the largest size each.
        let most = sizes.last().copied().unwrap_or(2) as usize;
        let bytes = most * 3 * 8 * o.max_size.max(16);
        if bytes > SIM_WINDOWS_LIMIT {
            return Err(format!(
                "--sim with {most} ranks and --max-size {} needs {} MiB of windows (above {} MiB): give fewer --ranks or a smaller --max-size",
                o.max_size,
                bytes >> 20,
                SIM_WINDOWS_LIMIT >> 20
            ));
        }
        let designs = designs(design, None)?;
        let r = bench::sim::fence_report(
            &sim_warmup(a, o),
            bench_config(a),
            &designs,
            &patterns,
            &sizes,
        )?;
        emit(&r, a.json);
        return Ok(());
    }
    let (net, _lab) = threads_network(a, "fence")?;
    let designs = designs(design, Some(&net))?;
    let r = bench::fence::run(&o, bench_config(a), &sizes, &designs, &patterns, &net);
    emit(&r, a.json);
    Ok(())
}

/// `overlap` or `progress`, by their shared options.
pub(crate) fn overlap_or_progress(a: &OverlapArgs, progress: bool) -> Result<(), String> {
    let o = opts_iters(&a.args, (1, 1 << 20), 100)?;
    let side = match a.side {
        SideSel::Send => bench::Side::Send,
        SideSel::Recv => bench::Side::Recv,
    };
    let variants = RndvSel::protocols(a.rndv);
    let threads = match a.progress_thread {
        None => vec![false, true],
        Some(t) => vec![t == OnOff::On],
    };
    let cfg = bench_config(&a.args);
    let (net, _lab) = network(&a.args, false)?;
    let nic = &net;
    let r = if progress {
        bench::progress::run(&o, cfg, nic, side, &variants, &threads)
    } else {
        bench::overlap::run(&o, cfg, nic, side, &variants, &threads)
    };
    emit(&r, a.args.json);
    Ok(())
}

/// The configurations a `bw`/`msgrate` run compares.
pub(crate) fn setups(a: &RateArgs) -> Result<Vec<bench::rate::Setup>, String> {
    use bench::rate::Setup;
    if a.wqes == Some(0) {
        return Err("--wqes must be at least 1 (a connection needs a send entry)".into());
    }
    let base: Vec<Setup> = match (a.wqes, a.coalesce) {
        // Large messages: the rendezvous compared, with the default queue.
        (None, None) if a.rndv.is_some() => {
            vec![Setup::new(rmx_linux::rank::loop_config().send_wqes, true)]
        }
        (None, None) => Setup::PAPER.to_vec(),
        (w, c) => {
            let ws = w.map_or(vec![200, 10, 5], |w| vec![w]);
            let cs = c.map_or(vec![false, true], |c| vec![c == OnOff::On]);
            ws.iter()
                .flat_map(|&w| cs.iter().map(move |&c| Setup::new(w, c)))
                .collect()
        }
    };
    let caches: &[bool] = match a.header_cache {
        OnOffBoth::On => &[true],
        OnOffBoth::Off => &[false],
        OnOffBoth::Both => &[true, false],
    };
    let after = a.coalesce_after;
    if let Some(n) = after {
        if n == 0 || a.wqes.is_some_and(|w| n > w) {
            return Err("--coalesce-after must be between 1 and --wqes".into());
        }
    }
    let variants: Vec<Option<rmx_core::Protocol>> = match a.rndv {
        None => vec![None],
        sel => RndvSel::protocols(sel).into_iter().map(Some).collect(),
    };
    let base: Vec<Setup> = base
        .into_iter()
        .flat_map(|s| variants.iter().map(move |&p| Setup { rndv: p, ..s }))
        .collect();
    // The marker exists only in packed sends: without coalescing, one run.
    let out = base
        .into_iter()
        .flat_map(|s| {
            let hs: &[bool] = if s.coalesce { caches } else { &caches[..1] };
            hs.iter().map(move |&h| Setup {
                header_cache: h,
                after: if s.coalesce { after } else { None },
                ..s
            })
        })
        .collect();
    Ok(out)
}

pub(crate) fn rate(name: &str, a: &RateArgs) -> Result<(), String> {
    let sizes = if a.header_cache == OnOffBoth::Both {
        (8, 512)
    } else if a.rndv.is_some() {
        (1, RNDV_END)
    } else {
        (1, EAGER_END)
    };
    let o = opts(&a.args, sizes)?;
    let setups = setups(a)?;
    let (net, _lab) = network(&a.args, true)?;
    let o = quiet_off_rank0(o, &net);
    let r = bench::rate::run(name, &o, bench_config(&a.args), &net, &setups);
    emit_rank0(&net, &r, a.args.json)
}
