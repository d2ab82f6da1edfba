//! The `rmx` command line as users and scripts call it.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rmx(args: &[&str]) -> (i32, String, String) {
    rmx_env(args, &[])
}

/// The longest any command here may run: a hang fails its test instead of
/// stalling the whole run.
const DEADLINE: Duration = Duration::from_secs(600);

fn rmx_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmx"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rmx");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for rmx") {
            break st;
        }
        if t0.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "rmx {} still ran after {DEADLINE:?}: killed",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        out.join().unwrap(),
        err.join().unwrap(),
    )
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn info_reports_memory_figures() {
    let (code, out, _) = rmx(&["info", "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    let peer = v["peer_bytes"].as_u64().unwrap();
    assert!(peer > 0 && peer <= 1024, "peer_bytes {peer}");
    assert!(v["endpoint_bytes"].as_u64().unwrap() > peer);
    assert_eq!(v["transports"][0]["name"], "loop");
    let classes = v["copy"]["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 17);
    assert_eq!(classes[0]["from"], 33, "up to 32 bytes are copied inline");
    assert!(classes.iter().all(|c| c["routine"].is_string()));
    let designs = &v["config"]["fence_designs"];
    assert_eq!(
        designs["loop"],
        serde_json::json!(["def", "naive", "opt", "ri"])
    );
    assert_eq!(designs["eth"], serde_json::json!(["def"]), "no RDMA on eth");
    let (code, out, _) = rmx(&["info"]);
    assert_eq!(code, 0);
    assert!(out.contains("endpoint_bytes") && out.contains("peer_bytes"));
    assert!(out.contains("copy engine"), "{out}");
}

#[test]
fn pingpong_json_has_the_documented_shape() {
    let (code, out, _) = rmx(&[
        "bench",
        "pingpong",
        "--min-size",
        "1",
        "--max-size",
        "64",
        "--iters",
        "200",
        "--warmup",
        "20",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["benchmark"], "pingpong");
    assert_eq!(v["transport"], "loop");
    assert!(v["cores"].as_u64().unwrap() >= 1);
    assert_eq!(v["config"]["iters"], 200);
    let rows = v["results"].as_array().unwrap();
    let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, vec![1, 2, 4, 8, 16, 32, 64]);
    for r in rows {
        assert!(r["latency_us"].as_f64().unwrap() > 0.0);
        assert!(r["floor_us"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bw_json_has_rates() {
    let (code, out, _) = rmx(&[
        "bench",
        "bw",
        "--min-size",
        "8",
        "--max-size",
        "8",
        "--iters",
        "1000",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["benchmark"], "bw");
    let rows = v["results"].as_array().unwrap();
    let configs: Vec<(u64, bool)> = rows
        .iter()
        .map(|r| {
            (
                r["wqes"].as_u64().unwrap(),
                r["coalesce"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        configs,
        vec![(200, false), (5, false), (5, true), (10, true)],
        "the paper's four configurations by default"
    );
    for r in rows {
        assert_eq!(r["size"], 8);
        let rate = r["msg_per_s"].as_f64().unwrap();
        let mbs = r["mb_per_s"].as_f64().unwrap();
        assert!(rate > 0.0);
        assert!((mbs - rate * 8.0 / 1e6).abs() < 1e-6 * mbs.max(1.0));
    }
}

/// `--rndv all` runs the three protocols side by side, one thread driving a
/// rank of each in turn: sizes where the receiver's FINs fill its send queue
/// and its ACK waits behind them.
#[test]
fn bw_compares_the_three_rendezvous_side_by_side() {
    let (code, out, err) = rmx(&[
        "bench",
        "bw",
        "--rndv",
        "all",
        "--min-size",
        "16384",
        "--max-size",
        "65536",
        "--iters",
        "200",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows: Vec<(u64, String)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["mb_per_s"].as_f64().unwrap() > 0.0);
            (
                r["size"].as_u64().unwrap(),
                r["rndv"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for size in [16384u64, 32768, 65536] {
        for p in ["rput", "rget", "pull"] {
            want.push((size, p.to_string()));
        }
    }
    assert_eq!(rows, want);
}

#[test]
fn msgrate_runs_the_chosen_configuration_and_header_cache_comparison() {
    let small = ["--iters", "1000", "--json"];
    let (code, out, err) = rmx(&[
        &[
            "bench",
            "msgrate",
            "--wqes",
            "3",
            "--coalesce",
            "on",
            "--max-size",
            "4",
        ][..],
        &small,
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["benchmark"], "msgrate");
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "sizes 1, 2, 4 under one configuration");
    for r in rows {
        assert_eq!(
            (r["wqes"].as_u64(), r["coalesce"].as_bool()),
            (Some(3), Some(true))
        );
        assert!(r["msgs_per_packet"].as_f64().unwrap() > 1.0, "packed: {r}");
    }
    let (code, out, err) = rmx(&[
        &[
            "bench",
            "msgrate",
            "--header-cache",
            "both",
            "--wqes",
            "5",
            "--coalesce",
            "on",
        ][..],
        &small,
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows = v["results"].as_array().unwrap();
    let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(
        sizes,
        vec![8, 8, 16, 16, 32, 32, 64, 64, 128, 128, 256, 256, 512, 512]
    );
    let caches: Vec<bool> = rows
        .iter()
        .map(|r| r["header_cache"].as_bool().unwrap())
        .collect();
    assert_eq!(&caches[..2], &[true, false]);
    let (code, _, err) = rmx(&["bench", "msgrate", "--wqes", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--wqes must be at least 1"), "{err}");
    for after in ["0", "6"] {
        let (code, _, err) = rmx(&["bench", "msgrate", "--wqes", "5", "--coalesce-after", after]);
        assert_eq!(code, 2, "--coalesce-after {after}");
        assert!(err.contains("between 1 and --wqes"), "{err}");
    }
}

#[test]
fn memory_model_has_rmx_and_paper_figures() {
    let (code, out, err) = rmx(&[
        "model", "memory", "--procs", "8192", "--wqes", "200", "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 14, "1, 2, 4 ... 8192");
    let last = rows.last().unwrap();
    assert_eq!(
        (last["procs"].as_u64(), last["wqes"].as_u64()),
        (Some(8192), Some(200))
    );
    let conn = last["per_connection_bytes"].as_u64().unwrap();
    let shared = last["shared_bytes"].as_u64().unwrap();
    assert_eq!(
        last["per_process_bytes"].as_u64().unwrap(),
        shared + 8191 * conn
    );
    let paper = last["paper_per_process_bytes"].as_u64().unwrap();
    assert!(
        (1_000_000_000..1_200_000_000).contains(&paper),
        "~1 GB: {paper}"
    );
    let terms: u64 = [
        "peer_state_bytes",
        "send_entry_bytes",
        "nic_connection_bytes",
    ]
    .iter()
    .map(|k| last[*k].as_u64().unwrap())
    .sum();
    assert_eq!(terms, conn);
    let (code, out, _) = rmx(&["model", "memory", "--procs", "4", "--wqes", "7", "--json"]);
    assert_eq!(code, 0);
    assert!(
        json(&out)["results"][0]["paper_per_connection_bytes"].is_null(),
        "no paper figure for 7"
    );
    let pools: u64 = ["receive_pool_bytes", "send_slot_bytes", "core_fixed_bytes"]
        .iter()
        .map(|k| last[*k].as_u64().unwrap())
        .sum();
    assert_eq!(pools, shared);
    // The scale target at 8192 processes with the default 10 entries.
    let (code, out, _) = rmx(&[
        "model", "memory", "--procs", "8192", "--wqes", "10", "--json",
    ]);
    assert_eq!(code, 0);
    let doc = json(&out);
    let at = doc["results"].as_array().unwrap().last().unwrap().clone();
    assert!(at["per_connection_bytes"].as_u64().unwrap() <= 900, "{at}");
    assert!(
        at["per_process_bytes"].as_u64().unwrap() <= 12_000_000,
        "{at}"
    );
    // A bigger pool costs the process, not the connection.
    let (_, big, _) = rmx(&[
        "model",
        "memory",
        "--procs",
        "8192",
        "--wqes",
        "10",
        "--rx-buffers",
        "1024",
        "--json",
    ]);
    let big = json(&big)["results"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(big["per_connection_bytes"], at["per_connection_bytes"]);
    assert_eq!(
        big["receive_pool_bytes"].as_u64().unwrap(),
        4 * at["receive_pool_bytes"].as_u64().unwrap()
    );
    let (code, _, err) = rmx(&["model", "memory", "--procs", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("at least 1"), "{err}");
    let (code, _, err) = rmx(&["model", "memory", "--rx-buffers", "99999999"]);
    assert_eq!(code, 2);
    assert!(err.contains("--rx-buffers"), "{err}");
}

#[test]
fn table_output_is_aligned() {
    let (code, out, _) = rmx(&[
        "bench",
        "pingpong",
        "--max-size",
        "1024",
        "--iters",
        "50",
        "--warmup",
        "5",
    ]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().skip(1).collect();
    let w = lines[0].len();
    assert!(lines.iter().all(|l| l.len() == w), "ragged table:\n{out}");
}

#[test]
fn errors_say_what_to_do() {
    let (code, _, err) = rmx(&["bench", "pingpong", "--transport", "verbs"]);
    assert_eq!(code, 2);
    assert!(err.contains("--transport loop"), "{err}");
    let (code, _, err) = rmx(&["bench", "pingpong", "--loss", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--transport eth only"), "{err}");
    let (code, _, err) = rmx(&[
        "bench",
        "msgrate",
        "--transport",
        "eth",
        "--iface",
        "lo",
        "--loss",
        "250",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("percentage from 0 to 100"), "{err}");
    let (code, _, err) = rmx(&[
        "bench",
        "pingpong",
        "--transport",
        "eth",
        "--iface",
        "rmx-no-such-if",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot open interface"), "{err}");
    let (code, _, err) = rmx(&["bench", "bw", "--max-size", "1000000000"]);
    assert_eq!(code, 2);
    assert!(err.contains("above the benchmarks' limit"), "{err}");
    let (code, _, err) = rmx(&["bench", "pingpong", "--transport", "carrier-pigeon"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown transport"), "{err}");
    let (code, _, err) = rmx(&["bench", "pingpong", "--min-size", "64", "--max-size", "8"]);
    assert_eq!(code, 2);
    assert!(err.contains("larger than --max-size"), "{err}");
    let (code, _, err) = rmx(&["bench", "bw", "--iters", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--iters must be between 1 and"), "{err}");
    let (code, _, err) = rmx(&[
        "bench",
        "pingpong",
        "--transport",
        "eth",
        "--iface",
        "lo",
        "--pinning",
        "synchronous",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("give it with --frames module"), "{err}");
}

/// Absurd values get a sentence and exit code 2: none may loop until
/// memory runs out, panic, or print wrapped figures.
#[test]
fn absurd_values_are_refused_with_a_clear_error() {
    let max = u64::MAX.to_string();
    for (args, says) in [
        (vec!["model", "memory", "--procs", max.as_str()], "--procs"),
        (
            vec!["model", "memory", "--procs", "65537"],
            "ranks are 16-bit",
        ),
        (
            vec!["bench", "spectrum", "--buffers", "100000000000"],
            "--buffers must be between 1 and",
        ),
        (
            vec!["bench", "pingpong", "--iters", max.as_str()],
            "--iters must be between 1 and",
        ),
        (
            vec![
                "bench",
                "progress",
                "--side",
                "recv",
                "--iters",
                max.as_str(),
            ],
            "--iters",
        ),
        (
            vec![
                "bench",
                "pingpong",
                "--iters",
                "10",
                "--warmup",
                max.as_str(),
            ],
            "--warmup",
        ),
        (vec!["bench", "suite", "--iters", "0"], "--iters"),
        (
            vec!["bench", "suite", "--only", "pingpong,bogus"],
            "--only bogus is not a member",
        ),
        (
            vec!["bench", "suite", "--only", "lossy"],
            "--only lossy: not for this transport",
        ),
        (
            vec!["bench", "pingpong", "--medium-max", "4294967295"],
            "--medium-max 4294967295 is above",
        ),
        (vec!["bench", "bw", "--medium-max=-1"], "--medium-max"),
    ] {
        let (code, out, err) = rmx(&args);
        assert_eq!(code, 2, "rmx {}: {out}{err}", args.join(" "));
        assert!(err.contains(says), "rmx {}: {err}", args.join(" "));
        assert!(!err.contains("panicked"), "{err}");
    }
    // The largest job the model takes prints figures that did not wrap.
    let (code, out, err) = rmx(&[
        "model", "memory", "--procs", "65536", "--wqes", "5", "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out)["results"].as_array().unwrap().clone();
    let last = rows.last().unwrap();
    assert_eq!(last["procs"], 65536);
    let per_conn = last["per_connection_bytes"].as_u64().unwrap();
    assert_eq!(
        last["per_process_bytes"].as_u64().unwrap(),
        last["shared_bytes"].as_u64().unwrap() + 65535 * per_conn
    );
}

/// A calibration path that is no regular file (a device that never ends)
/// is refused without reading it; a calibration with extreme figures runs
/// (the cost model saturates).
#[test]
fn calibration_files_are_read_with_bounds() {
    let (code, _, err) = rmx_env(
        SHORT_ZERO_COPY_PINGPONG,
        &[("RMX_CALIBRATION", "/dev/zero")],
    );
    if monitor_refused(code, &err) {
        return;
    }
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/dev/zero: not a regular file"), "{err}");
    let (_dir, path) = cal_path("extreme");
    let rows: Vec<String> = [8u32, 64, 4096, 8192]
        .iter()
        .map(|s| format!(r#"{{"size": {s}, "copy_ns": 1, "reg_ns": 4294967295}}"#))
        .collect();
    std::fs::write(
        &path,
        format!(
            r#"{{"lookup_ns": 0, "speculate_permille": 4294967295, "rows": [{}]}}"#,
            rows.join(",")
        ),
    )
    .unwrap();
    let (code, out, err) = rmx_env(
        &[
            "bench",
            "pingpong",
            "--eager-reuse",
            "on",
            "--min-size",
            "4096",
            "--max-size",
            "8192",
            "--iters",
            "20",
            "--json",
        ],
        &[("RMX_CALIBRATION", path.as_str())],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["results"].as_array().unwrap().len(), 2);
}

/// `rmx bench suite --out DIR` plus `args`, into a folder the suite makes
/// inside a scratch folder (the first value, which removes both).
fn suite_into(name: &str, args: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let scratch = scratch(name);
    let dir = scratch.path().join("report");
    let mut all = vec!["bench", "suite", "--out", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, out, err) = rmx(&all);
    assert_eq!(code, 0, "{err}");
    (scratch, dir, out)
}

#[test]
fn suite_writes_a_report_with_plots() {
    let (_scratch, dir, out) = suite_into("suite", &["--iters", "200", "--sim-ranks", "64"]);
    assert!(out.contains("pingpong") && out.contains("msgrate"));
    for f in [
        "report.md",
        "pingpong.json",
        "pingpong.svg",
        "msgrate.json",
        "msgrate.svg",
        "bw.svg",
        "header-cache.json",
        "header-cache.svg",
        "memory.json",
        "memory.svg",
        "pingpong-rndv.json",
        "pingpong-rndv.svg",
        "bw-rndv.svg",
        "overlap-send.json",
        "overlap-recv.svg",
        "progress-send.svg",
        "progress-recv.json",
        "collectives.json",
        "collectives.svg",
        "fence.json",
        "fence.svg",
        "fence-overlap.json",
        "fence-overlap.svg",
        "collectives-sim.svg",
        "fence-sim-zero.svg",
        "fence-sim-neighbours.svg",
    ] {
        let p = dir.join(f);
        let len = std::fs::metadata(&p)
            .unwrap_or_else(|_| panic!("{f} missing"))
            .len();
        assert!(len > 100, "{f} is nearly empty");
    }
    let svg = std::fs::read_to_string(dir.join("pingpong.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("floor"));
    let svg = std::fs::read_to_string(dir.join("msgrate.svg")).unwrap();
    assert!(svg.contains("5 WQEs + coalescing") && svg.contains("200 WQEs"));
    let svg = std::fs::read_to_string(dir.join("fence-overlap.svg")).unwrap();
    assert!(["def", "naive", "opt", "ri"]
        .iter()
        .all(|d| svg.contains(d)));
    // Every plot the report shows was drawn.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for l in md.lines().filter_map(|l| l.strip_prefix("![")) {
        let f = l.split_once("](").unwrap().1.trim_end_matches(')');
        assert!(dir.join(f).exists(), "report.md shows {f}, never drawn");
    }
}

#[test]
fn suite_runs_only_the_members_named() {
    let (_scratch, dir, out) = suite_into(
        "suite-only",
        &["--iters", "100", "--only", "header-cache,memory"],
    );
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let want = [
        "header-cache.json",
        "header-cache.svg",
        "memory.json",
        "memory.svg",
        "report.md",
    ];
    assert_eq!(files, want, "{out}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## header-cache") && md.contains("## memory"));
    assert!(!md.contains("## pingpong"), "{md}");
}

/// A ping-pong that loads the calibration (zero-copy eager sends on).
const SHORT_ZERO_COPY_PINGPONG: &[&str] = &[
    "bench",
    "pingpong",
    "--eager-reuse",
    "on",
    "--max-size",
    "8",
    "--iters",
    "10",
];

/// A calibration file path private to one test, in a folder removed when
/// the first value drops.
fn cal_path(name: &str) -> (tempfile::TempDir, String) {
    let d = scratch(name);
    let path = d.path().join("calibration.json").display().to_string();
    (d, path)
}

/// A folder of one test's own, removed however the test ends.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("rmx-cli-{name}-"))
        .tempdir()
        .expect("a scratch folder")
}

/// Zero-copy needs the invalidation monitor (userfaultfd); skip where it is refused.
fn monitor_refused(code: i32, err: &str) -> bool {
    if code == 2 && err.contains("invalidation monitor") {
        eprintln!("skipped: {}", err.trim());
        return true;
    }
    false
}

#[test]
fn calibrate_prints_table_2_and_saves_what_the_endpoint_uses() {
    let (_dir, path) = cal_path("calibrate");
    let (code, out, err) = rmx_env(&["calibrate", "--json"], &[("RMX_CALIBRATION", &path)]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["benchmark"], "calibrate");
    let rows = v["results"].as_array().unwrap();
    let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(
        sizes,
        vec![16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    );
    for r in rows {
        let (c, reg, v) = (
            r["copy_ns"].as_u64().unwrap(),
            r["reg_ns"].as_u64().unwrap(),
            r["lookup_ns"].as_u64().unwrap(),
        );
        assert!(reg > 0, "registration costs something: {r}");
        match r["min_reuse"].as_u64() {
            None => assert!(c <= v, "disabled only where V >= C: {r}"),
            Some(n) => assert_eq!(n, reg / (c - v) + 1, "inequality 3: {r}"),
        }
    }
    let saved = json(&std::fs::read_to_string(&path).expect("saved"));
    assert_eq!(saved["rows"].as_array().unwrap().len(), 10);
    // Every copy routine's speed per class, the fastest chosen and saved.
    let copy = v["copy"]["results"].as_array().unwrap();
    assert_eq!(copy.len(), 17, "64 B to 4 MiB");
    for (k, r) in copy.iter().enumerate() {
        assert_eq!(r["size"].as_u64().unwrap(), 64 << k);
        let speed = |name: &str| r[name].as_f64().unwrap_or(0.0);
        assert!(speed("memcpy") > 0.0, "{r}");
        let chosen = r["chosen"].as_str().unwrap();
        for name in ["memcpy", "sse2", "avx2", "rep_movsb", "non_temporal"] {
            assert!(speed(chosen) >= speed(name), "{chosen} is the fastest: {r}");
        }
    }
    assert_eq!(saved["copy"].as_array().unwrap().len(), 17);
    // The next process takes its routines from the file.
    let (code, out, _) = rmx_env(&["info", "--json"], &[("RMX_CALIBRATION", &path)]);
    assert_eq!(code, 0);
    let info = json(&out);
    assert_eq!(info["copy"]["origin"], "calibration");
    let used: Vec<&str> = info["copy"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["routine"].as_str().unwrap())
        .collect();
    let chosen: Vec<&str> = copy.iter().map(|r| r["chosen"].as_str().unwrap()).collect();
    assert_eq!(used, chosen);
    // A damaged file is refused with what to do.
    std::fs::write(&path, "{").unwrap();
    let (code, _, err) = rmx_env(SHORT_ZERO_COPY_PINGPONG, &[("RMX_CALIBRATION", &path)]);
    if !monitor_refused(code, &err) {
        assert_eq!(code, 2);
        assert!(err.contains("rmx calibrate"), "{err}");
    }
}

#[test]
fn eager_reuse_and_spectrum_report_the_documented_rows() {
    let (_dir, path) = cal_path("absent");
    let env = [("RMX_CALIBRATION", path.as_str())];
    let (code, out, err) = rmx_env(
        &[
            "bench",
            "eager-reuse",
            "--min-size",
            "1024",
            "--iters",
            "300",
            "--warmup",
            "100",
            "--json",
        ],
        &env,
    );
    if monitor_refused(code, &err) {
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("rmx calibrate"),
        "says the figures are defaults: {err}"
    );
    let v = json(&out);
    assert_eq!(v["benchmark"], "eager-reuse");
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        for k in [
            "copy_us",
            "zero_copy_us",
            "improvement_pct",
            "theoretical_pct",
        ] {
            assert!(r[k].is_number(), "{k} in {r}");
        }
    }
    let (code, out, err) = rmx_env(
        &[
            "bench",
            "spectrum",
            "--buffers",
            "12",
            "--min-size",
            "4096",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let layouts: Vec<(u64, String)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["improvement_pct"].is_number());
            (
                r["size"].as_u64().unwrap(),
                r["layout"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        layouts,
        [
            (4096, "packed"),
            (4096, "paged"),
            (8192, "packed"),
            (8192, "paged")
        ]
        .map(|(s, l)| (s, l.to_string()))
    );
    let (code, out, err) = rmx_env(
        &[
            "bench",
            "pingpong",
            "--eager-reuse",
            "on",
            "--min-size",
            "4096",
            "--iters",
            "100",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["config"]["eager_reuse"], true);
    let (code, _, err) = rmx(&["bench", "spectrum", "--buffers", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--buffers"), "{err}");
}

#[test]
fn lab_refuses_absurd_values_with_what_to_change() {
    for (args, says) in [
        (&["lab", "up", "--ranks", "1"][..], "--ranks"),
        (&["lab", "up", "--ranks", "70000"][..], "ranks"),
        (&["lab", "up", "--mtu", "10"][..], "--mtu"),
        (&["lab", "up", "--loss", "250"][..], "--loss"),
        (&["lab", "up", "--reorder", "5"][..], "--delay"),
    ] {
        let (code, _, err) = rmx(args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (code, out, _) = rmx(&["lab", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("up") && out.contains("down") && out.contains("status"));
}

#[test]
fn lab_exec_without_a_lab_says_how_to_make_one() {
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    match listed {
        Ok(l) if l.lines().any(|n| n.starts_with("rmx0")) => {
            eprintln!("skipped: a lab is up on this machine");
            return;
        }
        Err(e) => {
            eprintln!("skipped: no ip command ({e})");
            return;
        }
        Ok(_) => {}
    }
    let (code, _, err) = rmx(&["lab", "exec", "--", "true"]);
    assert_eq!(code, 2);
    assert!(err.contains("rmx lab up"), "{err}");
    let (code, _, err) = rmx(&["lab", "exec"]);
    assert_ne!(code, 0, "a command is required");
    assert!(err.contains("CMD"), "{err}");
}

/// `--medium-max` reaches the core and the report says which it was.
#[test]
fn medium_max_is_taken_and_reported() {
    let base = [
        "bench",
        "pingpong",
        "--min-size",
        "16384",
        "--max-size",
        "16384",
    ];
    let (code, out, err) = rmx(&[
        &base[..],
        &["--iters", "20", "--json", "--medium-max", "32768"],
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["config"]["medium_max"], 32768);
    assert_eq!(doc["results"][0]["size"], 16384);
    let (code, out, err) = rmx(&[&base[..], &["--iters", "20", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        json(&out)["config"]["medium_max"].is_null(),
        "the transport's choice"
    );
}

/// `bench collectives`: rows per collective and group size in the
/// documented fields; bad group sizes and eth without an interface refused.
#[test]
fn collectives_json_has_the_documented_shape() {
    let (code, out, err) = rmx(&[
        "bench",
        "collectives",
        "--ranks",
        "3",
        "--iters",
        "20",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["benchmark"], "collectives");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "four collectives at 2 and 3 ranks");
    for row in rows {
        assert!(row["latency_us"].as_f64().is_some_and(|v| v > 0.0), "{row}");
        assert!(row["ranks"] == 2 || row["ranks"] == 3);
        assert!(row["collective"].is_string() && row["size"].is_u64());
    }
    for (args, says) in [
        (
            vec!["bench", "collectives", "--ranks", "1"],
            "--ranks must be between 2",
        ),
        (
            vec!["bench", "collectives", "--ranks", "65535"],
            "--ranks must be between 2",
        ),
        (
            vec!["bench", "collectives", "--transport", "eth"],
            "needs --iface IF",
        ),
    ] {
        let (code, _, err) = rmx(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(says), "{err}");
    }
}

/// `bench fence`: the barrier reference and a row per pattern in the
/// documented fields, for every design `loop` offers; bad values refused.
#[test]
fn fence_json_has_the_documented_shape() {
    let (code, out, err) = rmx(&[
        "bench",
        "fence",
        "--ranks",
        "2",
        "--iters",
        "20",
        "--max-size",
        "32",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["benchmark"], "fence");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows[0]["design"], "barrier");
    // barrier, then per design zero, single, neighbours, halo4 and halo8
    // at 16 and 32 B.
    assert_eq!(rows.len(), 1 + 4 * 7, "{rows:?}");
    for (i, d) in ["def", "naive", "opt", "ri"].iter().enumerate() {
        assert!(
            rows[1 + 7 * i..8 + 7 * i].iter().all(|r| r["design"] == *d),
            "{d}"
        );
    }
    for row in &rows[1..] {
        let halo = row["pattern"].as_str().unwrap().starts_with("halo");
        let key = if halo { "iteration_us" } else { "fence_us" };
        assert!(row[key].as_f64().is_some_and(|v| v > 0.0), "{row}");
    }
    for (args, says) in [
        (vec!["bench", "fence", "--design", "x"], "unknown --design"),
        (
            vec!["bench", "fence", "--pattern", "x"],
            "unknown --pattern",
        ),
        (
            vec!["bench", "fence", "--ranks", "0"],
            "--ranks must be between 2",
        ),
        (
            vec!["bench", "fence", "--max-size", "4194304"],
            "above 1 MiB",
        ),
    ] {
        let (code, _, err) = rmx(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(says), "{err}");
    }
}

/// `bench fence-overlap`: a row per size with l0 and the overlap ratio.
#[test]
fn fence_overlap_json_has_the_documented_shape() {
    let (code, out, err) = rmx(&[
        "bench",
        "fence-overlap",
        "--iters",
        "5",
        "--min-size",
        "64",
        "--max-size",
        "128",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["benchmark"], "fence-overlap");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 4, "two sizes, four designs");
    for row in rows {
        assert!(row["l0_us"].as_f64().is_some_and(|v| v > 0.0), "{row}");
        assert!(row["overlap_ratio"].is_f64(), "{row}");
    }
    let (code, out, err) = rmx(&[
        "bench",
        "fence-overlap",
        "--design",
        "ri",
        "--iters",
        "3",
        "--max-size",
        "64",
        "--min-size",
        "64",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out)["results"].as_array().unwrap().clone();
    assert!(rows.len() == 1 && rows[0]["design"] == "ri", "{rows:?}");
    let (code, _, err) = rmx(&["bench", "fence-overlap", "--design", "fast"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown --design"), "{err}");
}

/// `--sim`: the collectives and all four fence designs to 256 ranks run
/// by simulated ranks (rmx-sim's own tests go to 1024), rows marked as
/// modelled.
#[test]
fn sim_runs_collectives_and_every_fence_design_to_hundreds_of_ranks() {
    let (code, out, err) = rmx(&["bench", "collectives", "--sim", "--ranks", "256", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out)["results"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 4 * 8, "4 collectives at 2 .. 256 ranks");
    assert!(rows.iter().all(|r| r["model"] == true));
    let (code, out, err) = rmx(&[
        "bench",
        "fence",
        "--sim",
        "--pattern",
        "neighbours",
        "--ranks",
        "256",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out)["results"].as_array().unwrap().clone();
    let at = |d: &str, n: u64| {
        rows.iter()
            .find(|r| r["design"] == d && r["ranks"] == n)
            .and_then(|r| r["fence_us"].as_f64())
            .unwrap()
    };
    for d in ["def", "naive", "opt", "ri"] {
        assert!(at(d, 256) > at(d, 2), "{d} grows with the group");
    }
    assert!(at("ri", 256) < at("opt", 256) && at("opt", 256) < at("naive", 256));
    let (code, _, err) = rmx(&["bench", "fence", "--sim", "--ranks", "65535"]);
    assert_eq!(code, 2);
    assert!(err.contains("--ranks must be between 2 and 4096"), "{err}");
    // A thousand ranks of 8 MiB windows, three copies each: refused, not
    // swapped to death.
    let (code, _, err) = rmx(&["bench", "fence", "--sim", "--max-size", "1048576"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("give fewer --ranks or a smaller --max-size"),
        "{err}"
    );
}

/// `RMX_CALIBRATION` naming a FIFO nobody writes (before: every command,
/// `rmx info` included, hung at start-up in the open) is not read: `info`
/// runs with measured figures, and a command that needs the calibration
/// says the path is no regular file.
#[test]
fn a_calibration_path_that_is_a_fifo_hangs_nothing() {
    let (_dir, path) = cal_path("fifo");
    let _ = std::fs::remove_file(&path);
    let c = std::ffi::CString::new(path.clone()).unwrap();
    // SAFETY: a valid C string; mkfifo(3) only creates the node.
    let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {path}");
    let t0 = Instant::now();
    let (code, out, err) = rmx_env(&["info", "--json"], &[("RMX_CALIBRATION", &path)]);
    assert_eq!(code, 0, "{err}");
    json(&out);
    let (code, _, err) = rmx_env(SHORT_ZERO_COPY_PINGPONG, &[("RMX_CALIBRATION", &path)]);
    if !monitor_refused(code, &err) {
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let _ = std::fs::remove_file(&path);
}

/// Every benchmark has its own one-line description in `rmx bench --help`
/// (before, `fence` had none and `fence-overlap` showed both).
#[test]
fn every_benchmark_has_its_own_description() {
    let (code, out, err) = rmx(&["bench", "--help"]);
    assert_eq!(code, 0, "{err}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    assert!(
        line("fence").contains("Time per epoch closed by a fence"),
        "{out}"
    );
    let overlap = line("fence-overlap");
    assert!(overlap.contains("Overlap of a put"), "{overlap}");
    assert!(!overlap.contains("Time per epoch"), "{overlap}");
    for l in out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
    {
        if l.trim().is_empty() {
            break;
        }
        assert!(l.trim().split_once(' ').is_some(), "no description: {l}");
    }
}

/// Started by a launcher that offers neither PMI-1 nor PMIx (Open MPI's
/// mpirun without PMIx, a multi-task Slurm step without pmi2 or pmix),
/// rmx says which launchers work and exits 2 (before, each process ran
/// the whole job alone on `lo` and a rank thread panicked); a one-task
/// Slurm step is a plain command.
#[test]
fn a_launcher_without_pmi_is_named_and_refused() {
    let bench = ["bench", "pingpong", "--max-size", "8", "--iters", "10"];
    for (var, value) in [("OMPI_COMM_WORLD_SIZE", "2"), ("SLURM_STEP_NUM_TASKS", "2")] {
        let (code, _, err) = rmx_env(&bench, &[(var, value)]);
        assert_eq!(code, 2, "{var}: {err}");
        assert!(err.contains(var) && err.contains("mpiexec.hydra"), "{err}");
        assert!(
            err.contains("mpirun") && err.contains("--mpi=pmix"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    let (code, _, err) = rmx_env(&["info"], &[("SLURM_STEP_NUM_TASKS", "1")]);
    assert_eq!(code, 0, "{err}");
}

/// A PMIx environment is a launch: threads-only benchmarks and the loop
/// transport are refused as under PMI-1, and a PMIx server that does not
/// answer (here none at all) is one line naming PMIx's refusal, exit 2,
/// whether or not the PMIx library is installed.
#[test]
fn a_pmix_launch_without_its_server_fails_with_one_line() {
    let pmix = [("PMIX_RANK", "0"), ("RUST_BACKTRACE", "0")];
    let bench = ["bench", "pingpong", "--max-size", "8", "--iters", "10"];
    let (code, _, err) = rmx_env(&bench, &pmix);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--transport eth --iface"), "{err}");
    if !raw_on_lo() {
        return;
    }
    let eth = [&bench[..], &["--transport", "eth", "--iface", "lo"]].concat();
    let (code, _, err) = rmx_env(&eth, &pmix);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("PMIx"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

/// A job whose network drops every frame stops with one line naming the
/// rank and the cause, and exit 1 (it is no bad input): before, both rank
/// threads panicked, blamed the floor's socket, and rmx exited 101.
#[test]
fn a_network_that_drops_everything_ends_the_job_with_one_line() {
    if !raw_on_lo() {
        return;
    }
    let (code, _, err) = rmx_env(
        &[
            "bench",
            "pingpong",
            "--transport",
            "eth",
            "--iface",
            "lo",
            "--loss",
            "100",
            "--max-size",
            "8",
        ],
        &[("RUST_BACKTRACE", "0")],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rmx: rank ") && err.contains("stopped answering"),
        "{err}"
    );
}

/// Whether raw frames can be sent on `lo` here (root or CAP_NET_RAW).
fn raw_on_lo() -> bool {
    let ok = rmx_linux::eth::RawSocket::open("lo", rmx_core::wire::frame::ETHERTYPE, false).is_ok();
    if !ok {
        eprintln!("skipped: raw sockets on lo need root or CAP_NET_RAW");
    }
    ok
}

/// The README's lossy example: with 5% of frames dropped, the benchmark
/// runs to its end, floor phases included (a peer stays answered while
/// the other measures its bare-frame floor). Before failure became a
/// time without any answer, 10 runs of 10 gave a live peer up.
#[test]
fn a_lossy_pingpong_runs_to_its_end() {
    if !raw_on_lo() {
        return;
    }
    let (code, out, err) = rmx_env(
        &[
            "bench",
            "pingpong",
            "--transport",
            "eth",
            "--iface",
            "lo",
            "--loss",
            "5",
            "--max-size",
            "65536",
            "--iters",
            "2000",
            "--json",
        ],
        &[("RUST_BACKTRACE", "0")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["results"].as_array().map(Vec::len), Some(17));
}

/// msgrate and bw alternate their four setups in slices on a lossy wire:
/// each runs to its end. Before, a slice ended once its sends had left:
/// a lost final packet waited for a retransmission from a rank its
/// thread no longer drove while the peer waited in the next setup, and a
/// live peer was given up (0 of 9 passed at 1, 2 and 5% loss).
#[test]
fn lossy_msgrate_and_bw_run_to_their_end() {
    if !raw_on_lo() {
        return;
    }
    for (bench, loss) in [("msgrate", "1"), ("bw", "5")] {
        let (code, out, err) = rmx_env(
            &[
                "bench",
                bench,
                "--transport",
                "eth",
                "--iface",
                "lo",
                "--loss",
                loss,
                "--max-size",
                "4096",
                "--json",
            ],
            &[("RUST_BACKTRACE", "0")],
        );
        assert_eq!(code, 0, "{bench} --loss {loss}: {err}");
        // 13 sizes (1 B … 4 KiB) under the four setups.
        let rows = json(&out)["results"].as_array().map(Vec::len);
        assert_eq!(rows, Some(13 * 4), "{bench} --loss {loss}");
    }
}

/// Both cores busy with other work: the eth benchmarks give no live peer
/// up (before, a rank declared its peer failed after 0.65 s without an
/// answer, and a loaded host's scheduler gave it that).
#[test]
fn benchmarks_on_a_busy_host_give_no_live_peer_up() {
    if !raw_on_lo() {
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let runs = [
        vec![
            "bench",
            "pingpong",
            "--transport",
            "eth",
            "--iface",
            "lo",
            "--iters",
            "200",
        ],
        vec![
            "bench",
            "msgrate",
            "--transport",
            "eth",
            "--iface",
            "lo",
            "--iters",
            "200",
            "--max-size",
            "65536",
        ],
    ];
    let codes: Vec<_> = runs
        .iter()
        .map(|a| rmx_env(a, &[("RUST_BACKTRACE", "0")]))
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.into_iter().for_each(|b| b.join().unwrap());
    for (a, (code, _, err)) in runs.iter().zip(codes) {
        assert_eq!(code, 0, "{a:?}: {err}");
    }
}

/// Runs `rmx bench pingpong` over eth on lo as rank 0 of 2 under a
/// launcher that is the test itself, serving PMI-1 on the socket it hands
/// over as `PMI_FD`: it answers the handshake and puts, then hangs up at
/// the exchange's barrier, or with `peer` answers the barrier and gives
/// `peer` as rank 1's every value. Exit code, standard error, and what
/// the rank asked.
fn under_fake_launcher(peer: Option<&str>) -> (Option<i32>, String, Vec<String>) {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmx"));
    cmd.args(["bench", "pingpong", "--transport", "eth", "--iface", "lo"])
        .args(["--max-size", "8"])
        .env("PMI_FD", fd.to_string())
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "2")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure only calls fcntl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // The rank inherits its end of the socket, as from hydra.
            if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("run rmx");
    drop(theirs);
    let mut lines = BufReader::new(ours.try_clone().unwrap());
    let mut w = ours;
    let mut asked = Vec::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        asked.push(line.trim().to_string());
        let reply = match (line.split_whitespace().next().unwrap_or(""), peer) {
            ("cmd=init", _) => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into(),
            ("cmd=get_maxes", _) => {
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n".into()
            }
            ("cmd=get_my_kvsname", _) => "cmd=my_kvsname kvsname=kvs_0\n".into(),
            ("cmd=put", _) => "cmd=put_result rc=0 msg=success\n".into(),
            ("cmd=barrier_in", Some(_)) => "cmd=barrier_out\n".to_string(),
            // Rank 0 asks only for rank 1's values.
            ("cmd=get", Some(p)) => format!("cmd=get_result rc=0 msg=success value={p}\n"),
            // The exchange's barrier: the launcher goes away.
            _ => break,
        };
        if w.write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
    drop((lines, w));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("rmx still ran: {asked:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err, asked)
}

/// A launcher that hangs up after the PMI handshake, in the middle of the
/// job's address exchange: the rank says so in one line naming itself and
/// the cause, and exits 1.
#[test]
fn a_launcher_that_hangs_up_after_the_handshake_ends_the_rank_with_one_line() {
    if !raw_on_lo() {
        return;
    }
    let (code, err, asked) = under_fake_launcher(None);
    assert!(
        asked.iter().any(|l| l.starts_with("cmd=put")),
        "the handshake was done and the exchange begun: {asked:?}"
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rmx: rank 0: ") && err.contains("PMI"),
        "{err}"
    );
}

/// A peer's address that is not hex is named as such, and an address of
/// the wrong length as no eth address; either way the rank is named once
/// ("rmx: rank 0: rank 0: ..." before).
#[test]
fn a_bad_peer_address_is_named_in_one_line_naming_the_rank_once() {
    if !raw_on_lo() {
        return;
    }
    for (value, want) in [
        ("zz", "is not hex"),
        ("abcd", "rank 1 has no eth address (2 bytes)"),
    ] {
        let (code, err, asked) = under_fake_launcher(Some(value));
        assert_eq!(code, Some(1), "{value}: {err} {asked:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("rmx: rank 0: rank 1"), "{value}: {err}");
        assert!(err.contains(want), "{value}: {err}");
        assert!(!err.contains("could not open its port"), "{err}");
    }
}
