//! `rmx info`: what this build can do, its transports and the copy routines it chose.

use rmx_core::onesided::Design;
use rmx_linux::job::Net;
use rmx_linux::loopnic::LoopConfig;
use rmx_linux::rank::CoreEndpoint;
use serde_json::json;

use rmx_linux::transport::registry::{Entry, TRANSPORTS};

pub(crate) fn info(json_out: bool) {
    let cfg = rmx_linux::rank::loop_config();
    let nic = LoopConfig::default();
    let costs = rmx_linux::model::Costs::of(cfg.send_wqes, cfg.eager_threshold, &nic);
    let doc = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "cores": rmx_linux::clock::cores(),
        "transports": TRANSPORTS.iter().map(|t| json!({"name": t.name, "available": t.built, "about": t.about})).collect::<Vec<_>>(),
        "config": {
            "eager_threshold": cfg.eager_threshold,
            "medium_max": rmx_core::config::MEDIUM_MAX,
            "keepalive_ns": cfg.keepalive_ns,
            "peer_timeout_ns": cfg.peer_timeout_ns,
            "fence_designs": {
                "loop": Net::Loop(Default::default()).designs().iter().map(|d| d.name()).collect::<Vec<_>>(),
                "eth": Design::ALL.iter().filter(|d| d.offered(&rmx_linux::eth::CAPS)).map(|d| d.name()).collect::<Vec<_>>(),
                "verbs": Design::ALL.iter().filter(|d| d.offered(&rmx_linux::transport::registry::VERBS_CAPS)).map(|d| d.name()).collect::<Vec<_>>(),
            },
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
        "verbs": verbs_json(cfg.send_wqes),
        "copy": copy_choice_json(),
    });
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
    println!(
        "  medium messages   up to {} bytes as fragments on transports without RDMA (eth)",
        rmx_core::config::MEDIUM_MAX
    );
    println!("  fence designs     def, naive, opt, ri on loop and verbs (RDMA, write with immediate); def on eth (no RDMA)");
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
    match &doc["verbs"]["devices"] {
        serde_json::Value::Array(d) if d.is_empty() => {
            println!("verbs: no RDMA device (`rdma link add rxe0 type rxe netdev IF` makes one)")
        }
        serde_json::Value::Array(d) => {
            let v = &doc["verbs"];
            let names: Vec<&str> = d.iter().filter_map(|n| n.as_str()).collect();
            println!("verbs: devices {}", names.join(", "));
            println!(
                "  per connection    {} bytes on {} ({} send entries: the provider maps {} per queue pair, the port keeps {}), measured",
                v["per_connection_bytes"], v["device"], cfg.send_wqes, v["provider_qp_bytes"], v["port_connection_bytes"]
            );
        }
        _ => println!("verbs: not in this build (--features verbs)"),
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

/// The verbs devices, and on the first what a connection costs at
/// `wqes` send entries, measured (16 connected queue pairs); `null` in a
/// build without verbs.
fn verbs_json(wqes: u16) -> serde_json::Value {
    #[cfg(feature = "verbs")]
    {
        use rmx_linux::verbs::{device, footprint, Select, VerbsPort};
        let devices = device::names();
        let Some(first) = devices.first().cloned() else {
            return json!({ "devices": devices });
        };
        let sel = Select {
            device: Some(first.clone()),
            ..Select::default()
        };
        let cfg = rmx_linux::rank::loop_config();
        let core = rmx_linux::model::Costs::of(wqes, cfg.eager_threshold, &LoopConfig::default());
        match footprint::measure(&sel, wqes as u32, 16) {
            Ok(q) => {
                let port = VerbsPort::connection_bytes(wqes as u32) as u64;
                let c = core.on_device(q.mapped, port);
                json!({
                    "devices": devices,
                    "device": first,
                    "send_wqes": wqes,
                    "provider_qp_bytes": q.mapped,
                    "provider_qp_resident_bytes": q.resident,
                    "port_connection_bytes": port,
                    "per_connection_bytes": c.per_connection(),
                })
            }
            Err(e) => json!({ "devices": devices, "device": first, "error": e }),
        }
    }
    #[cfg(not(feature = "verbs"))]
    {
        let _ = wqes;
        serde_json::Value::Null
    }
}
