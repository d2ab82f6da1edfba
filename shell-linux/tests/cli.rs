//! The `rmx` command line as users and scripts call it.

use std::process::Command;

fn rmx(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rmx"))
        .args(args)
        .output()
        .expect("run rmx");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
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
    let (code, out, _) = rmx(&["info"]);
    assert_eq!(code, 0);
    assert!(out.contains("endpoint_bytes") && out.contains("peer_bytes"));
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
    let r = &v["results"][0];
    assert_eq!(r["size"], 8);
    let rate = r["msg_per_s"].as_f64().unwrap();
    let mbs = r["mb_per_s"].as_f64().unwrap();
    assert!((mbs - rate * 8.0 / 1e6).abs() < 1e-6 * mbs.max(1.0));
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
    let (code, _, err) = rmx(&["bench", "pingpong", "--transport", "eth"]);
    assert_eq!(code, 2);
    assert!(err.contains("--transport loop"), "{err}");
    let (code, _, err) = rmx(&["bench", "bw", "--max-size", "65536"]);
    assert_eq!(code, 2);
    assert!(err.contains("eager threshold"), "{err}");
    let (code, _, err) = rmx(&["bench", "pingpong", "--transport", "carrier-pigeon"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown transport"), "{err}");
    let (code, _, err) = rmx(&["bench", "pingpong", "--min-size", "64", "--max-size", "8"]);
    assert_eq!(code, 2);
    assert!(err.contains("larger than --max-size"), "{err}");
    let (code, _, err) = rmx(&["bench", "bw", "--iters", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--iters must be at least 1"), "{err}");
}

#[test]
fn suite_writes_a_report_with_plots() {
    let dir = std::env::temp_dir().join(format!("rmx-suite-{}", std::process::id()));
    let (code, out, err) = rmx(&[
        "bench",
        "suite",
        "--out",
        dir.to_str().unwrap(),
        "--iters",
        "200",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pingpong") && out.contains("bw"));
    for f in [
        "report.md",
        "pingpong.json",
        "pingpong.svg",
        "bw.json",
        "bw.svg",
        "msgrate.svg",
    ] {
        let p = dir.join(f);
        let len = std::fs::metadata(&p)
            .unwrap_or_else(|_| panic!("{f} missing"))
            .len();
        assert!(len > 100, "{f} is nearly empty");
    }
    let svg = std::fs::read_to_string(dir.join("pingpong.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("floor"));
    std::fs::remove_dir_all(dir).ok();
}
