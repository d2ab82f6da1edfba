//! `rmx calibrate`: measures registration and copy costs and saves what the endpoint uses.

use rmx_linux::bench::{self, report::Report, Opts};
use serde_json::json;

/// Every copy candidate's GB/s per size class, and the routine chosen.
pub(crate) fn copy_report(cal: &rmx_linux::reuse::Calibration, o: &Opts) -> Report {
    use rmx_linux::copy::Routine;
    // The routines this process started with (measured quickly at start-up,
    // or from the file): how far each is from this run's fastest.
    let in_use = rmx_linux::copy::engine().routines();
    let results = cal
        .copy
        .iter()
        .zip(in_use)
        .map(|(row, used)| {
            let mut v = json!({"size": row.size, "chosen": row.routine, "in_use": used.name()});
            for (k, mbps) in &row.mb_per_s {
                v[k.as_str()] = json!(*mbps as f64 / 1000.0);
            }
            let speed = |name: &str| row.mb_per_s.get(name).copied().unwrap_or(0) as f64;
            let best = speed(&row.routine).max(1.0);
            v["in_use_pct"] = json!((100.0 * speed(used.name()) / best).round());
            v
        })
        .collect();
    let measured = |r: &Routine| {
        cal.copy
            .iter()
            .any(|row| row.mb_per_s.contains_key(r.name()))
    };
    let mut columns: Vec<bench::report::Column> = Routine::ALL
        .iter()
        .filter(|r| measured(r))
        .map(|r| bench::report::Column::new(r.name(), r.name(), 1))
        .collect();
    columns.push(bench::report::Column::new("chosen", "chosen", 0));
    columns.push(bench::report::Column::new("in_use", "in_use", 0));
    columns.push(bench::report::Column::new("in_use_pct", "in_use_pct", 0));
    Report::new(
        "calibrate copy (GB/s per candidate)",
        o,
        json!({"inline_up_to": 32}),
        results,
        columns,
    )
}

pub(crate) fn calibrate(
    json_out: bool,
    dry_run: bool,
    transport: &str,
    opts: &rmx_linux::transport::registry::Options,
) -> Result<(), String> {
    // A transport on no device registers as the loop NIC does (or not at
    // all: eth's buffers are copied by the kernel).
    let mut reg = match rmx_linux::transport::registry::find(transport)? {
        t if t.device => rmx_linux::calibrate::Registrar::of(&opts.open(t.name, false)?.0)?,
        _ => rmx_linux::calibrate::Registrar::loop_nic(),
    };
    if !json_out {
        eprintln!(
            "rmx: calibrating, registering with {} (a few seconds)...",
            reg.name()
        );
    }
    let cal = rmx_linux::calibrate::measure(&mut reg);
    let model = cal.model()?;
    let results = cal
        .rows
        .iter()
        .map(|r| {
            json!({
                "size": r.size,
                "copy_ns": r.copy_ns,
                "reg_ns": r.reg_ns,
                "lookup_ns": cal.lookup_ns,
                "min_reuse": model.min_reuse(r.size),
                "register_after": model.threshold(r.size),
            })
        })
        .collect();
    let o = Opts::tool_on(reg.name(), json_out);
    let config = json!({
        "registration": reg.name(),
        "speculate_permille": cal.speculate_permille,
        "monitor": rmx_linux::monitor::Monitor::global().is_ok(),
    });
    let r = Report::new(
        "calibrate",
        &o,
        config,
        results,
        vec![
            bench::report::Column::new("copy_ns", "copy_ns", 0),
            bench::report::Column::new("reg_ns", "reg_ns", 0),
            bench::report::Column::new("lookup_ns", "lookup_ns", 0),
            bench::report::Column::new("min_reuse", "min_reuse", 0),
            bench::report::Column::new("register_after", "register_after", 0),
        ],
    );
    let copy = copy_report(&cal, &o);
    if json_out {
        let mut doc: serde_json::Value = serde_json::from_str(&r.json()).expect("json");
        doc["copy"] = serde_json::from_str(&copy.json()).expect("json");
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        print!("{}", r.table());
        print!("{}", copy.table());
    }
    if !dry_run {
        let p = cal.save()?;
        if !json_out {
            eprintln!("rmx: saved to {}", p.display());
        }
    }
    Ok(())
}
