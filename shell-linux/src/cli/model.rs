//! `rmx model memory`: the memory a job needs, by rmx's model beside the paper's figures.

use std::path::PathBuf;

use rmx_linux::bench::{self, report::Report, Opts};
use rmx_linux::loopnic::LoopConfig;
use serde_json::json;

use super::*;

/// Bytes per connection a device's provider maps, by send depth.
pub(crate) type Measured = Vec<(u16, (u64, u64))>;

pub(crate) fn memory(
    procs: u64,
    wqes: Option<u16>,
    rx_buffers: Option<u32>,
    json_out: bool,
    plot: Option<PathBuf>,
    transport: &str,
    opts: &rmx_linux::transport::registry::Options,
) -> Result<(), String> {
    if procs == 0 || wqes == Some(0) || rx_buffers == Some(0) {
        return Err("--procs, --wqes and --rx-buffers must be at least 1".into());
    }
    if rx_buffers.is_some_and(|b| b > RX_BUFFERS_LIMIT) {
        return Err(format!(
            "--rx-buffers is above {RX_BUFFERS_LIMIT}: a pool that large is not a per-process cost anyone runs"
        ));
    }
    if procs > PROCS_LIMIT {
        return Err(format!(
            "--procs {procs} is above {PROCS_LIMIT}, the most ranks a job can have (ranks are 16-bit)"
        ));
    }
    let mut nic = LoopConfig::default();
    if let Some(b) = rx_buffers {
        nic.srq_depth = b as usize;
    }
    let all: Vec<u16> = rmx_linux::model::PAPER_TABLE2.iter().map(|t| t.0).collect();
    let wqes = wqes.map_or(all, |w| vec![w]);
    use rmx_linux::transport::registry::{find, TRANSPORTS};
    let entry = find(transport)?;
    let model = &TRANSPORTS[0];
    let measured = match entry {
        t if t.device => {
            let (net, _) = opts.open(t.name, false)?;
            measured_on(&net, &wqes, json_out)?
        }
        t if t.name == model.name => Vec::new(),
        t => {
            let devices: Vec<&str> = TRANSPORTS
                .iter()
                .filter(|t| t.device)
                .map(|t| t.name)
                .collect();
            return Err(format!(
                "--transport {}: the model knows {}'s connections and measures a device's ({}); choose {} or {}",
                t.name,
                model.name,
                devices.join(", "),
                model.name,
                devices.join(" or ")
            ));
        }
    };
    let device = |w: u16| measured.iter().find(|m| m.0 == w).map(|m| m.1);
    let r = memory_report(procs, &wqes, nic, &device, entry.name, json_out);
    if let Some(p) = plot {
        memory_plot(&r, &p)?;
    }
    emit(&r, json_out);
    Ok(())
}

/// What a connection of `net` costs at each of `wqes` send depths,
/// measured where `net`'s transport is on a device; nothing measured
/// elsewhere.
pub(crate) fn measured_on(
    net: &rmx_linux::job::Net,
    wqes: &[u16],
    quiet: bool,
) -> Result<Measured, String> {
    if !net.entry().device {
        return Ok(Vec::new());
    }
    if !quiet {
        eprintln!("rmx: measuring connections on the device...");
    }
    wqes.iter()
        .filter_map(|&w| net.connection_bytes(w).map(|m| m.map(|b| (w, b))))
        .collect()
}

/// The connection-memory model for job sizes up to `procs`; `device(w)`:
/// the measured bytes per connection at `w` entries of transport
/// `device_of`'s device (the report is the model's own, the default
/// transport's, where nothing was measured).
pub(crate) fn memory_report(
    procs: u64,
    wqes: &[u16],
    nic: LoopConfig,
    device: &dyn Fn(u16) -> Option<(u64, u64)>,
    device_of: &str,
    quiet: bool,
) -> Report {
    use rmx_linux::model;
    let cfg = rmx_linux::rank::loop_config();
    let rows = model::rows(
        &model::job_sizes(procs),
        wqes,
        cfg.eager_threshold,
        &nic,
        device,
    );
    let measured = wqes.iter().any(|&w| device(w).is_some());
    let transport = match measured {
        true => device_of,
        false => rmx_linux::transport::registry::TRANSPORTS[0].name,
    };
    let o = Opts::tool_on(transport, quiet);
    let config = json!({
        "transport": transport,
        "rx_buffers": nic.srq_depth,
        "eager_threshold": cfg.eager_threshold,
        "wqe_bytes": model::WQE_BYTES,
        "nic": nic,
    });
    let mut columns = vec![
        bench::report::Column::new("wqes", "wqes", 0),
        bench::report::Column::new("per_connection_bytes", "per_conn_B", 0),
    ];
    if measured {
        columns.push(bench::report::Column::new(
            "provider_qp_bytes",
            "provider_qp_B",
            0,
        ));
    }
    Report::new(
        "model memory",
        &o,
        config,
        rows,
        [
            columns,
            vec![
                bench::report::Column::new("per_process_bytes", "per_process_B", 0),
                bench::report::Column::new("paper_per_connection_bytes", "paper_conn_B", 0),
                bench::report::Column::new("paper_per_process_bytes", "paper_process_B", 0),
                bench::report::Column::new("shared_bytes", "shared_B", 0),
                bench::report::Column::new("dominant", "dominant_term", 0),
            ],
        ]
        .concat(),
    )
    .keyed_by("procs", "processes (fully connected)")
}

/// Per-process bytes against job size: rmx's curves and the paper's.
pub(crate) fn memory_plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let mut r = r.clone();
    for row in r.results.iter_mut() {
        let w = row["wqes"].clone();
        row["rmx"] = json!(format!("rmx, {w} WQEs"));
        row["paper"] = json!(format!("MVAPICH (paper), {w} WQEs"));
    }
    let (mut both, mut labels) = r.pivot("rmx", "per_process_bytes");
    let (paper, paper_labels) = r.pivot("paper", "paper_per_process_bytes");
    for (row, p) in both.results.iter_mut().zip(&paper.results) {
        for l in &paper_labels {
            row[l.as_str()] = p[l.as_str()].clone();
        }
    }
    labels.extend(paper_labels);
    let series: Vec<(&str, &str)> = labels.iter().map(|l| (l.as_str(), l.as_str())).collect();
    both.svg(path, &series, "bytes per process")
}
