//! `rmx bench pin`: the Open-MX paper's Table 1 — the base and per-page
//! cost of pinning plus unpinning 1 … 4096 pages — through rmx.ko
//! (`RMX_PIN` of a declared region, then `RMX_UNPIN`), beside
//! `mlock`/`munlock` and, on a device transport, its registration
//! (`ibv_reg_mr`/`ibv_dereg_mr`: pinning plus the device's translation
//! table). Each figure is the median of `iters` timed rounds on memory
//! already faulted in; the fit `base + pages × per_page` is least squares
//! over every size, and GB/s is a page's bytes over its per-page time.
//!
//! Also the cost of telling, before a send, whether a cached region is
//! still valid: one load from the page the module maps, an ioctl that
//! asks the module (`RMX_PIN` on a region pinned whole), and the
//! userfaultfd monitor's check (settle, then drain an empty queue).

use serde_json::{json, Value};

use super::report::{Column, Report};
use super::Opts;
use crate::anon::AnonMap;
use crate::calibrate::Registrar;
use crate::clock::now_ns;
use crate::kmod::cache::{Mode, RegionCache};
use crate::kmod::Device;
use crate::reuse::PAGE;

/// Pages per row of the table: 1 … `max`, powers of two.
pub fn pages(max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |p| p.checked_mul(2))
        .take_while(|&p| p <= max)
        .collect()
}

/// How pages are pinned and unpinned (or, `Send`, a send of the region
/// through the module's region cache in a mode).
pub enum Method<'a> {
    Module(&'a Device),
    Mlock,
    Register(&'a mut Registrar),
    Send(&'a Device, Mode),
}

impl Method<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Method::Module(_) => "rmx.ko",
            Method::Mlock => "mlock",
            Method::Register(r) => match r.name() {
                "verbs" => "ibv_reg_mr",
                other => other,
            },
            Method::Send(_, Mode::Decoupled) => "send (decoupled)",
            Method::Send(_, Mode::Synchronous) => "send (pin+unpin each)",
        }
    }

    /// Nanoseconds of one pin and unpin of `len` bytes at `addr` (mapped
    /// and faulted in), per round: `rounds` of them, after one warm-up.
    fn time(&mut self, addr: usize, len: usize, rounds: usize) -> Result<Vec<u64>, String> {
        let mut times = Vec::with_capacity(rounds);
        match self {
            Method::Module(dev) => {
                let seg = rmx_kernel::Segment {
                    addr: addr as u64,
                    len: len as u64,
                };
                // SAFETY: the benchmark's own mapping, never written by
                // the module (pin and unpin only).
                let r = unsafe { dev.declare(&[seg]) }.map_err(|e| format!("RMX_DECLARE: {e}"))?;
                let one = || -> Result<u64, String> {
                    let t0 = now_ns();
                    dev.pin(r, true).map_err(|e| format!("RMX_PIN: {e}"))?;
                    dev.unpin(r).map_err(|e| format!("RMX_UNPIN: {e}"))?;
                    Ok(now_ns() - t0)
                };
                let timed = one().and_then(|_| (0..rounds).map(|_| one()).collect());
                let _ = dev.undeclare(r);
                times = timed?;
            }
            Method::Mlock => {
                let one = || -> Result<u64, String> {
                    let t0 = now_ns();
                    // SAFETY: locking and unlocking the benchmark's own mapping.
                    if unsafe { libc::mlock(addr as *const libc::c_void, len) } != 0 {
                        return Err(format!(
                            "mlock: {} (raise RLIMIT_MEMLOCK: ulimit -l)",
                            std::io::Error::last_os_error()
                        ));
                    }
                    // SAFETY: as above.
                    unsafe { libc::munlock(addr as *const libc::c_void, len) };
                    Ok(now_ns() - t0)
                };
                one()?;
                for _ in 0..rounds {
                    times.push(one()?);
                }
            }
            Method::Send(dev, mode) => {
                let mut cache = RegionCache::new(&**dev, *mode, 1).map_err(|e| e.to_string())?;
                let mut out = vec![0u8; len];
                let mut one = || -> Result<u64, String> {
                    let t0 = now_ns();
                    // SAFETY: the benchmark's own mapping, only read.
                    unsafe { cache.read(addr as u64, &mut out) }
                        .map_err(|e| format!("RMX_READ: {e}"))?;
                    Ok(now_ns() - t0)
                };
                one()?;
                for _ in 0..rounds {
                    times.push(one()?);
                }
            }
            Method::Register(reg) => {
                let mut one = || {
                    let t0 = now_ns();
                    // SAFETY: the benchmark's mapping outlives the
                    // registration, and nothing else names it.
                    unsafe { reg.cycle(addr, len) };
                    now_ns() - t0
                };
                one();
                times = (0..rounds).map(|_| one()).collect();
            }
        }
        Ok(times)
    }
}

/// `base + per × pages` by least squares over `(pages, ns)`.
pub fn fit(points: &[(usize, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x as f64, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
        let dx = x as f64 - mx;
        (a + dx * (y - my), b + dx * dx)
    });
    let per = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - per * mx, per)
}

/// Table 1 for every method, and the fit of each.
pub fn run(
    opts: &Opts,
    methods: &mut [Method],
    max_pages: usize,
) -> Result<(Report, Value), String> {
    let sizes = pages(max_pages);
    let area = AnonMap::try_new(max_pages * PAGE as usize).map_err(|e| format!("mmap: {e}"))?;
    let pb = opts.progress("pin", sizes.len() * methods.len());
    let mut results = Vec::new();
    let mut fits = serde_json::Map::new();
    for m in methods.iter_mut() {
        let mut points = Vec::new();
        for &p in &sizes {
            let mut times = m.time(area.addr(), p * PAGE as usize, opts.iters.max(1) as usize)?;
            let ns = super::median(&mut times);
            points.push((p, ns as f64));
            results.push(json!({
                "method": m.name(),
                "pages": p,
                "pin_unpin_us": ns as f64 / 1e3,
            }));
            pb.inc(1);
        }
        let (base, per) = fit(&points);
        fits.insert(
            m.name().into(),
            json!({
                "base_us": base / 1e3,
                "ns_per_page": per,
                "gb_per_s": if per > 0.0 { PAGE as f64 / per } else { 0.0 },
            }),
        );
    }
    pb.finish_and_clear();
    let config = json!({
        "iters": opts.iters,
        "max_pages": max_pages,
        "page_bytes": PAGE,
        "statistic": "median",
    });
    let r = Report::new(
        "pin",
        opts,
        config,
        results,
        vec![
            Column::new("method", "method", 0),
            Column::new("pin_unpin_us", "pin+unpin_us", 2),
        ],
    )
    .keyed_by("pages", "pages");
    Ok((r, Value::Object(fits)))
}

/// The fits as a table: Table 1's columns, a row per method.
pub fn fit_report(opts: &Opts, fits: &Value) -> Report {
    let rows = fits
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, f)| {
            let mut row = f.clone();
            row["method"] = json!(name);
            row
        })
        .collect();
    Report::new(
        "pin fit (base + pages x per_page)",
        opts,
        json!({"fit": "least squares"}),
        rows,
        vec![
            Column::new("base_us", "base_us", 2),
            Column::new("ns_per_page", "ns/page", 1),
            Column::new("gb_per_s", "GB/s", 2),
        ],
    )
    .keyed_by("method", "")
}

/// Nanoseconds per validity check of a pinned, cached region, by each way
/// of checking: `checks` in all, timed as calibration times a call.
pub fn validity(dev: Option<&Device>, checks: u64) -> Result<Vec<Value>, String> {
    let area = AnonMap::try_new(16 * PAGE as usize).map_err(|e| format!("mmap: {e}"))?;
    let per = |f: &mut dyn FnMut() -> bool| -> f64 {
        crate::calibrate::per_call(checks, || {
            assert!(std::hint::black_box(f()), "the region stayed valid")
        })
    };
    let mut rows = Vec::new();
    if let Some(dev) = dev {
        let seg = rmx_kernel::Segment {
            addr: area.addr() as u64,
            len: area.len() as u64,
        };
        // SAFETY: the benchmark's own mapping, pinned only.
        let r = unsafe { dev.declare(&[seg]) }.map_err(|e| format!("RMX_DECLARE: {e}"))?;
        dev.pin(r, true).map_err(|e| format!("RMX_PIN: {e}"))?;
        let seen = dev.generation(r);
        rows.push(json!({"check": "generation load (rmx.ko)", "ns": per(&mut || dev.generation(r) == seen)}));
        rows.push(json!({"check": "ioctl (RMX_PIN, rmx.ko)", "ns": per(&mut || dev.pin(r, false).unwrap_or(false))}));
        let _ = dev.undeclare(r);
    }
    match crate::monitor::Monitor::global() {
        Ok(m) => {
            m.watch(area.addr() as u64, area.len() as u64)
                .map_err(|e| format!("userfaultfd: {e}"))?;
            let q = m.subscribe();
            rows.push(
                json!({"check": "userfaultfd monitor (settle, drain)", "ns": per(&mut || {
                    m.settle();
                    let mut any = false;
                    q.drain(|_| any = true);
                    !any
                })}),
            );
            m.unsubscribe(&q);
        }
        Err(why) => eprintln!("rmx: no userfaultfd monitor here ({why}): its check is left out"),
    }
    Ok(rows)
}

/// pin+unpin time against pages, one curve per method (log-log).
pub fn plot(r: &Report, path: &std::path::Path) -> Result<(), String> {
    let (curves, names) = r.pivot("method", "pin_unpin_us");
    let series: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), n.as_str())).collect();
    curves.svg(path, &series, "pin + unpin (us)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_line_and_sizes_are_powers_of_two() {
        let pts: Vec<(usize, f64)> = pages(4096)
            .iter()
            .map(|&p| (p, 2000.0 + 150.0 * p as f64))
            .collect();
        let (b, per) = fit(&pts);
        assert!(
            (b - 2000.0).abs() < 1e-6 && (per - 150.0).abs() < 1e-9,
            "{b} {per}"
        );
        assert_eq!(pages(4096).len(), 13);
        assert_eq!(pages(0), Vec::<usize>::new());
        assert_eq!(pages(usize::MAX).len(), 64);
        assert_eq!(fit(&[(4, 10.0)]), (10.0, 0.0), "one point: no slope");
    }

    #[test]
    fn mlock_rows_and_their_fit_come_out_for_every_size() {
        let opts = Opts {
            iters: 3,
            ..Opts::tool(true)
        };
        let (r, fits) = match run(&opts, &mut [Method::Mlock], 8) {
            Ok(x) => x,
            Err(e) if e.contains("RLIMIT_MEMLOCK") => {
                eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(r.rows().len(), 4);
        assert!(r
            .rows()
            .iter()
            .all(|x| x["pin_unpin_us"].as_f64().unwrap() > 0.0));
        assert!(fits["mlock"]["base_us"].is_f64());
    }
}
