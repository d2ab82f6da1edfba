//! `rmx info`: what this build can do, its transports and the copy routines it chose.

use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::CoreEndpoint;
use serde_json::json;

use rmx_linux::transport::registry::{Entry, TRANSPORTS};
use rmx_linux::transport::Info;

pub(crate) fn info(json_out: bool) {
    let cfg = rmx_linux::rank::loop_config();
    let nic = LoopConfig::default();
    let costs = rmx_linux::model::Costs::of(cfg.send_wqes, cfg.eager_threshold, &nic);
    let mut doc = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "cores": rmx_linux::clock::cores(),
        "transports": TRANSPORTS.iter().map(|t| json!({"name": t.name, "available": t.built, "about": t.about})).collect::<Vec<_>>(),
        "config": {
            "eager_threshold": cfg.eager_threshold,
            "medium_max": rmx_core::config::MEDIUM_MAX,
            "keepalive_ns": cfg.keepalive_ns,
            "peer_timeout_ns": cfg.peer_timeout_ns,
            "fence_designs": TRANSPORTS.iter().map(|t| (t.name.to_string(), json!(designs(t)))).collect::<serde_json::Map<_, _>>(),
            "credits": cfg.credits,
            "credit_return": cfg.credit_return,
            "rx_buffers": nic.srq_depth,
            "rx_reserve": cfg.rx_reserve,
            "send_wqes": cfg.send_wqes,
            "coalesce": format!("{:?}", cfg.coalesce),
            "header_cache": cfg.header_cache,
            "header_bytes": rmx_core::wire::HEADER_LEN,
            "wire_version": rmx_core::wire::VERSION,
            "loop": nic,
        },
        "endpoint_bytes": costs.core_fixed,
        "peer_bytes": CoreEndpoint::PEER_BYTES,
        "per_connection_bytes": costs.per_connection(),
        "shared_bytes": costs.shared(),
        "receive_pool_bytes": costs.receive_pool,
        "send_slot_bytes": costs.send_slots,
        "core_fixed_bytes": costs.core_fixed,
        "dominant": costs.dominant(),
        "reuse_bytes": rmx_linux::reuse::policy_bytes(),
        "copy": copy_choice_json(),
    });
    let told: Vec<(&Entry, Info)> = TRANSPORTS
        .iter()
        .filter_map(|t| t.info.map(|info| (t, info(cfg.send_wqes))))
        .collect();
    for (t, i) in &told {
        doc[t.name] = i.json.clone();
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return;
    }
    println!(
        "rmx {}  ({} cores)",
        env!("CARGO_PKG_VERSION"),
        doc["cores"]
    );
    println!("transports:");
    for &Entry {
        name: n,
        built: a,
        about: d,
        ..
    } in TRANSPORTS
    {
        println!(
            "  {n:<6} {:<12} {d}",
            if a { "available" } else { "unavailable" }
        );
    }
    println!("configuration:");
    println!("  eager threshold   {} bytes", cfg.eager_threshold);
    let no_rdma: Vec<&str> = TRANSPORTS
        .iter()
        .filter(|t| !t.caps.rdma_write)
        .map(|t| t.name)
        .collect();
    println!(
        "  medium messages   up to {} bytes as fragments on transports without RDMA ({})",
        rmx_core::config::MEDIUM_MAX,
        no_rdma.join(", ")
    );
    println!("  fence designs     {}", fence_line());
    println!(
        "  liveness          a peer awaited and silent for {} ms is pinged; lossy transports give it up after {} ms without any answer, reliable ones (verbs) when the ping's connection fails (pings back off to {} ms)",
        cfg.keepalive_ns / 1_000_000,
        cfg.peer_timeout_ns / 1_000_000,
        cfg.peer_timeout_ns / 1_000_000
    );
    println!(
        "  credits           a share of the {}-buffer receive pool per peer, up to {} more lent on request (returned after {})",
        nic.srq_depth, cfg.credits, cfg.credit_return
    );
    println!(
        "  send entries      {} per connection, coalescing {:?}, header cache {}",
        cfg.send_wqes,
        cfg.coalesce,
        if cfg.header_cache { "on" } else { "off" }
    );
    println!(
        "  header            {} bytes, wire version {}",
        rmx_core::wire::HEADER_LEN,
        rmx_core::wire::VERSION
    );
    println!(
        "  loop NIC          SRQ {} x {} B, SQ depth {}, inline up to {} B",
        nic.srq_depth, nic.buf_size, nic.sq_depth, nic.inline_max
    );
    println!("memory (core, from the types):");
    println!("  endpoint_bytes    {}", costs.core_fixed);
    println!("  peer_bytes        {}", CoreEndpoint::PEER_BYTES);
    println!(
        "  per connection    {} bytes (peer state, {} send entries, NIC state; dominant: {})",
        costs.per_connection(),
        cfg.send_wqes,
        costs.dominant()
    );
    println!(
        "  shared            {} bytes (receive pool {}, send slots {}, endpoint {})",
        costs.shared(),
        costs.receive_pool,
        costs.send_slots,
        costs.core_fixed
    );
    println!(
        "  reuse_bytes       {} (zero-copy tracker storage, per rank, outside the endpoint)",
        rmx_linux::reuse::policy_bytes()
    );
    for line in told.iter().flat_map(|(_, i)| &i.lines) {
        println!("{line}");
    }
    let e = rmx_linux::copy::engine();
    println!(
        "copy engine ({}; up to 32 bytes inline):",
        match e.origin() {
            rmx_linux::copy::Origin::Calibration => "from the saved calibration",
            rmx_linux::copy::Origin::Measured =>
                "measured at start-up; `rmx calibrate` measures longer",
        }
    );
    for (k, (lo, hi, r)) in copy_classes().into_iter().enumerate() {
        let last = k + 1 == rmx_linux::copy::CLASSES;
        let upto = if last {
            "and above".to_string()
        } else {
            format!("to {}", human(hi))
        };
        println!("  {:>8} {:<11} {}", human(lo), upto, r.name());
    }
}

/// The copy engine's classes: (smallest, largest, routine).
pub(crate) fn copy_classes() -> Vec<(usize, usize, rmx_linux::copy::Routine)> {
    use rmx_linux::copy::{class_size, engine};
    engine()
        .routines()
        .iter()
        .enumerate()
        .map(|(c, &r)| {
            let lo = if c == 0 { 33 } else { class_size(c - 1) + 1 };
            (lo, class_size(c), r)
        })
        .collect()
}

pub(crate) fn copy_choice_json() -> serde_json::Value {
    let e = rmx_linux::copy::engine();
    json!({
        "origin": format!("{:?}", e.origin()).to_lowercase(),
        "inline_up_to": 32,
        "classes": copy_classes().into_iter().map(|(lo, hi, r)| json!({"from": lo, "to": hi, "routine": r.name()})).collect::<Vec<_>>(),
    })
}

/// `n` bytes as the tables print sizes (B, KiB, MiB).
pub(crate) fn human(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// The names of the fence designs transport `t` offers.
fn designs(t: &Entry) -> Vec<&'static str> {
    t.designs().iter().map(|d| d.name()).collect()
}

/// Which fence designs run on which transports, transports offering the
/// same designs named together.
fn fence_line() -> String {
    let mut groups: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for t in TRANSPORTS {
        let d = designs(t);
        match groups.iter_mut().find(|g| g.0 == d) {
            Some(g) => g.1.push(t.name),
            None => groups.push((d, vec![t.name])),
        }
    }
    groups
        .iter()
        .map(|(d, ts)| format!("{} on {}", d.join(", "), ts.join(" and ")))
        .collect::<Vec<_>>()
        .join("; ")
}
