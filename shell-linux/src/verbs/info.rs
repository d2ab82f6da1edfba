//! What `rmx info` says of verbs: the devices, and on the first what a
//! connection costs, measured (16 connected queue pairs).

#[cfg(feature = "verbs")]
use serde_json::json;

use crate::transport::Info;

/// The devices and, on the first, a connection's bytes at `wqes` send
/// entries; `null` in a build without verbs.
pub(super) fn info(wqes: u16) -> Info {
    #[cfg(feature = "verbs")]
    {
        let json = measured(wqes);
        let lines = match &json["devices"] {
            serde_json::Value::Array(d) if d.is_empty() => {
                vec![
                    "verbs: no RDMA device (`rdma link add rxe0 type rxe netdev IF` makes one)"
                        .into(),
                ]
            }
            serde_json::Value::Array(d) => {
                let names: Vec<&str> = d.iter().filter_map(|n| n.as_str()).collect();
                let mut l = vec![format!("verbs: devices {}", names.join(", "))];
                if json.get("per_connection_bytes").is_some() {
                    l.push(format!(
                        "  per connection    {} bytes on {} ({wqes} send entries: the provider maps {} per queue pair, the port keeps {}), measured",
                        json["per_connection_bytes"], json["device"], json["provider_qp_bytes"], json["port_connection_bytes"]
                    ));
                }
                l
            }
            _ => Vec::new(),
        };
        Info { json, lines }
    }
    #[cfg(not(feature = "verbs"))]
    {
        let _ = wqes;
        Info {
            json: serde_json::Value::Null,
            lines: vec!["verbs: not in this build (--features verbs)".into()],
        }
    }
}

#[cfg(feature = "verbs")]
fn measured(wqes: u16) -> serde_json::Value {
    use super::{device, footprint, Select, VerbsPort};
    use crate::loopnic::LoopConfig;
    let devices = device::names();
    let Some(first) = devices.first().cloned() else {
        return json!({ "devices": devices });
    };
    let sel = Select {
        device: Some(first.clone()),
        ..Select::default()
    };
    let cfg = crate::rank::loop_config();
    let core = crate::model::Costs::of(wqes, cfg.eager_threshold, &LoopConfig::default());
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
