//! `rmx bench pin`: Table 1 of the Open-MX paper, and the validity check's cost.

use std::path::Path;

use rmx_linux::bench::pin::{self, Method};
use rmx_linux::bench::report::{Column, Report};
use rmx_linux::bench::Opts;
use rmx_linux::kmod::cache::Mode;
use rmx_linux::kmod::Device;

/// The largest region measured: 4 GiB of pages.
const MAX_PAGES: usize = 1 << 20;

pub(crate) fn pin(
    json_out: bool,
    iters: u64,
    max_pages: usize,
    plot: Option<&Path>,
    transport: &str,
    net: &rmx_linux::transport::registry::Options,
) -> Result<(), String> {
    if !(1..=MAX_PAGES).contains(&max_pages) {
        return Err(format!(
            "--max-pages must be between 1 and {MAX_PAGES} (got {max_pages})"
        ));
    }
    if !(1..=1_000_000).contains(&iters) {
        return Err(format!(
            "--iters must be between 1 and 1000000 (got {iters})"
        ));
    }
    let dev = match Device::open() {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("rmx: {e}: the rmx.ko rows are left out");
            None
        }
    };
    let mut reg = match rmx_linux::transport::registry::find(transport)? {
        t if t.device => Some(rmx_linux::calibrate::Registrar::of(
            &net.open(t.name, false)?.0,
        )?),
        _ => None,
    };
    let mut methods = Vec::new();
    if let Some(d) = &dev {
        methods.push(Method::Module(d));
        methods.push(Method::Send(d, Mode::Decoupled));
        methods.push(Method::Send(d, Mode::Synchronous));
    }
    methods.push(Method::Mlock);
    if let Some(r) = reg.as_mut() {
        methods.push(Method::Register(r));
    }
    let o = Opts {
        iters,
        ..Opts::tool_on(transport, json_out)
    };
    let (r, fits) = pin::run(&o, &mut methods, max_pages)?;
    let checks = pin::validity(dev.as_ref(), 90_000)?;
    let validity = Report::new(
        "validity check",
        &Opts::tool_on(transport, json_out),
        serde_json::json!({"region_pages": 16}),
        checks,
        vec![Column::new("ns", "ns", 1)],
    )
    .keyed_by("check", "");
    if let Some(p) = plot {
        pin::plot(&r, p)?;
    }
    if json_out {
        let mut doc: serde_json::Value = serde_json::from_str(&r.json()).expect("json");
        doc["fit"] = fits;
        doc["validity"] = serde_json::from_str::<serde_json::Value>(&validity.json())
            .expect("json")["results"]
            .clone();
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        print!("{}", r.table());
        println!();
        print!("{}", pin::fit_report(&o, &fits).table());
        println!();
        print!("{}", validity.table());
    }
    Ok(())
}
