//! A transport is its module and one line in the registry: `late` (built
//! with the feature `test-transport`, a module of its own and one line in
//! `transport/registry.rs`) is known to every command that treats
//! transports apart, from its entry alone.
//!
//! `cargo test -p rmx-linux --features test-transport --test one_line_transport`

#![cfg(feature = "test-transport")]

use std::process::Command;

mod common;

fn rmx(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rmx"))
        .args(args)
        .output()
        .expect("run rmx");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    (out.status.success(), text(out.stdout), text(out.stderr))
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn the_registry_lists_it_and_info_says_what_it_offers() {
    let _w = common::watchdog("info", 300);
    let (ok, out, err) = rmx(&["info", "--json"]);
    assert!(ok, "{err}");
    let v = json(&out);
    let names: Vec<&str> = v["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"late"), "{names:?}");
    assert_eq!(names[0], "loop", "the default stays first");
    // Its fence designs follow from the caps its entry declares (the loop
    // NIC's): all four.
    let designs = &v["config"]["fence_designs"];
    assert_eq!(designs["late"], designs["loop"], "{designs}");
    assert_eq!(designs["late"].as_array().unwrap().len(), 4, "{designs}");
    assert_eq!(designs["eth"].as_array().unwrap().len(), 1, "{designs}");

    let (ok, text, err) = rmx(&["info"]);
    assert!(ok, "{err}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("late") && l.contains("available")),
        "{text}"
    );
    let fences = text
        .lines()
        .find(|l| l.contains("fence designs"))
        .expect("a fence line");
    assert!(fences.contains("late"), "{fences}");
}

#[test]
fn transport_takes_it_with_its_own_option_and_refuses_that_option_elsewhere() {
    let _w = common::watchdog("options", 300);
    let (ok, out, err) = rmx(&[
        "bench",
        "pingpong",
        "--transport",
        "late",
        "--late-ns",
        "2000",
        "--min-size",
        "8",
        "--max-size",
        "64",
        "--iters",
        "200",
        "--warmup",
        "20",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["transport"], "late");
    assert_eq!(v["config"]["nic"]["max_delay_ns"], 2000, "{}", v["config"]);
    // The floor its entry names (memory between threads) is measured.
    for r in v["results"].as_array().unwrap() {
        assert!(r["latency_us"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["floor_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    let (ok, _, err) = rmx(&["bench", "pingpong", "--late-ns", "5"]);
    assert!(!ok);
    assert!(
        err.contains("--late-ns applies to --transport late only"),
        "{err}"
    );
    let (ok, _, err) = rmx(&["bench", "pingpong", "--transport", "nosuch"]);
    assert!(!ok);
    let known = err.split("choose one of: ").nth(1).expect("the choices");
    assert!(known.contains("late"), "{err}");
}

#[test]
fn the_suite_runs_what_its_caps_call_for() {
    let _w = common::watchdog("suite", 600);
    let dir = std::env::temp_dir().join(format!("rmx-late-suite-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    // Lossy runs are for lossy transports; late's entry is reliable.
    let (ok, _, err) = rmx(&[
        "bench",
        "suite",
        "--transport",
        "late",
        "--only",
        "lossy",
        "--out",
        d,
    ]);
    assert!(!ok);
    assert!(
        err.contains("--only lossy: not for this transport"),
        "{err}"
    );
    assert!(err.contains("memory"), "{err}");
    let (ok, _, err) = rmx(&[
        "bench",
        "suite",
        "--transport",
        "late",
        "--only",
        "memory",
        "--out",
        d,
    ]);
    assert!(ok, "{err}");
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(md.starts_with("# rmx benchmark report: late"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_and_the_memory_model_follow_its_entry() {
    let _w = common::watchdog("calibrate", 600);
    // Not a device: it registers as the loop NIC does.
    let (ok, out, err) = rmx(&["calibrate", "--transport", "late", "--dry-run", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["config"]["registration"], "loop");
    // The model knows loop's connections and measures devices'; late is
    // neither, and is told which are.
    let (ok, _, err) = rmx(&["model", "memory", "--transport", "late", "--procs", "64"]);
    assert!(!ok);
    assert!(err.contains("--transport late"), "{err}");
    assert!(err.contains("choose loop or verbs"), "{err}");
}
