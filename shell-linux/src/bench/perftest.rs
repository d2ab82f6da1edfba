//! perftest as an anchor: the device's own floor, measured by the tools
//! RDMA users know (`ib_send_lat`, `ib_write_lat`, `ib_send_bw`, `ib_write_bw`) on the same
//! device in the same run, so that rmx's verbs figures read as ratios to
//! what raw verbs reach there; and UCX's `ucx_perftest`, the transport
//! layer other runtimes embed, on the same queue pairs. Each run is the
//! tools' usual pair, a server and a client on this host.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A perftest program and the figure rmx compares with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// Send/receive latency: `t_avg[usec]`, one way (half a round trip).
    SendLat,
    /// RDMA write latency, the device's floor: `t_avg[usec]`, one way.
    WriteLat,
    /// Send/receive streaming: `MsgRate[Mpps]`, `BW average[MB/sec]`.
    SendBw,
    /// RDMA write streaming: `BW average[MB/sec]`.
    WriteBw,
    /// UCX's active-message latency over its `rc_verbs` transport (UCT,
    /// the layer under UCP's tag matching): `average[usec]`, one way.
    /// UCP's own `tag_lat` needs a datagram transport to wire up RC, and
    /// UCX's `ud_verbs` aborts on rxe; this is UCX on the same device.
    UcxAmLat,
}

impl Tool {
    pub fn program(self) -> &'static str {
        match self {
            Tool::SendLat => "ib_send_lat",
            Tool::WriteLat => "ib_write_lat",
            Tool::SendBw => "ib_send_bw",
            Tool::WriteBw => "ib_write_bw",
            Tool::UcxAmLat => "ucx_perftest",
        }
    }

    /// The messages the tool measures: UCX's active messages carry an
    /// 8-byte header inside the message; its short ones are inline
    /// sends, its copied ones one segment.
    pub fn sizes(self) -> std::ops::RangeInclusive<usize> {
        match self {
            Tool::UcxAmLat => 8..=UCX_BCOPY_MAX,
            _ => 0..=usize::MAX,
        }
    }
}

/// UCX sends active messages up to this size inline (`-D short`).
const UCX_SHORT_MAX: usize = 64;
/// And up to this one copied into one segment (`-D bcopy`, rc_verbs'
/// default segment of 8 KiB less its header).
const UCX_BCOPY_MAX: usize = 8000;

/// Where perftest runs: the device rmx measured on.
#[derive(Clone, Debug)]
pub struct Perftest {
    pub device: String,
    /// The device's port (UCX names a device `name:port`).
    pub port: u8,
    pub gid_index: Option<u8>,
}

/// How long one server-client pair may take (TCG guests are slow).
const DEADLINE: Duration = Duration::from_secs(120);

impl Perftest {
    /// perftest on `device`.
    pub fn on(device: crate::transport::Device) -> Perftest {
        Perftest {
            device: device.name,
            port: device.port,
            gid_index: device.gid_index,
        }
    }

    /// Whether perftest is installed (`apt-get install perftest`).
    pub fn installed() -> bool {
        Self::has(Tool::SendLat)
    }

    /// Whether `tool` is installed (perftest, or `ucx-utils` for UCX).
    pub fn has(tool: Tool) -> bool {
        which(tool.program())
    }

    /// The arguments both sides of `tool`'s pair take.
    fn args(&self, tool: Tool, size: usize, iters: u64, port: &str) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        let mut push = |a: &[&str]| args.extend(a.iter().map(|s| s.to_string()));
        let layout = if size <= UCX_SHORT_MAX {
            "short"
        } else {
            "bcopy"
        };
        let (size, iters) = (size.to_string(), iters.max(5).to_string());
        match tool {
            Tool::UcxAmLat => {
                let dev = format!("{}:{}", self.device, self.port);
                push(&["-t", "am_lat", "-x", "rc_verbs", "-d", &dev, "-D", layout]);
                push(&["-s", &size, "-n", &iters, "-p", port]);
            }
            _ => {
                push(&[
                    "-d",
                    &self.device,
                    "-s",
                    &size,
                    "-n",
                    &iters,
                    "-F",
                    "-p",
                    port,
                ]);
                if let Some(g) = self.gid_index {
                    push(&["-x", &g.to_string()]);
                }
            }
        }
        args
    }

    /// Runs `tool` at `size` bytes for `iters` iterations; the columns of
    /// the row it printed, by perftest's header names.
    pub fn run(
        &self,
        tool: Tool,
        size: usize,
        iters: u64,
    ) -> Result<BTreeMap<String, f64>, String> {
        let prog = tool.program();
        if !tool.sizes().contains(&size) {
            let (lo, hi) = tool.sizes().into_inner();
            return Err(format!("{prog} measures messages of {lo} to {hi} B"));
        }
        // A port of this process's own: two suites on one host do not meet.
        let port = (20_000 + std::process::id() % 20_000).to_string();
        let args = self.args(tool, size, iters, &port);
        let mut server = Command::new(prog)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{prog}: {e} (apt-get install perftest ucx-utils)"))?;
        let start = Instant::now();
        // The server listens once it has opened the device: the client
        // tries until it is let in.
        let out = loop {
            let out = Command::new(prog)
                .args(&args)
                .arg("127.0.0.1")
                .output()
                .map_err(|e| format!("{prog}: {e}"))?;
            let done = out.status.success() || start.elapsed() > DEADLINE;
            if done || matches!(server.try_wait(), Ok(Some(_))) {
                break out;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let _ = server.kill();
        let _ = server.wait();
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{prog} -s {size} failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let row = match tool {
            Tool::UcxAmLat => parse_ucx(&text),
            _ => parse(&text),
        };
        row.ok_or_else(|| format!("{prog}: no result row in:\n{text}"))
    }
}

fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// The first result row of perftest's output by its header's names.
/// Header names may hold a space (`99% percentile[usec]`, `BW
/// average[MB/sec]`): a word with no unit joins the next one.
pub fn parse(text: &str) -> Option<BTreeMap<String, f64>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    let header = lines.next()?;
    let mut names = Vec::new();
    let mut pending = String::new();
    for w in header.split_whitespace() {
        if !pending.is_empty() {
            pending.push(' ');
        }
        pending.push_str(w);
        if w.starts_with('#') || w.contains('[') {
            names.push(std::mem::take(&mut pending));
        }
    }
    let row = lines.find_map(|l| {
        let v: Vec<f64> = l.split_whitespace().map_while(|w| w.parse().ok()).collect();
        (v.len() == names.len()).then_some(v)
    })?;
    Some(names.into_iter().zip(row).collect())
}

/// The `Final:` row of `ucx_perftest`'s table, by the names of its
/// latency columns (`50.0%ile[usec]`, `average[usec]`, `overall[usec]`)
/// and `iterations`.
pub fn parse_ucx(text: &str) -> Option<BTreeMap<String, f64>> {
    let row = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Final:"))?;
    let v: Vec<f64> = row
        .split_whitespace()
        .map_while(|w| w.parse().ok())
        .collect();
    let names = [
        "iterations",
        "50.0%ile[usec]",
        "average[usec]",
        "overall[usec]",
    ];
    (v.len() >= names.len()).then(|| names.iter().map(|n| n.to_string()).zip(v).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAT: &str = "
---------------------------------------------------------------------------------------
                    Send Latency Test
 Dual-port       : OFF		Device         : rxe0
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 8       5000          9.93           1029.61      11.45               12.71          15.03           20.84                   303.72  
---------------------------------------------------------------------------------------
";

    const BW: &str = "
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 8          20000            0.34               0.34   		   0.042081
---------------------------------------------------------------------------------------
";

    #[test]
    fn perftest_rows_are_read_by_their_header_names() {
        let lat = parse(LAT).expect("a row");
        assert_eq!(lat["#bytes"], 8.0);
        assert_eq!(lat["t_avg[usec]"], 12.71);
        assert_eq!(lat["99.9% percentile[usec]"], 303.72);
        let bw = parse(BW).expect("a row");
        assert_eq!(bw["MsgRate[Mpps]"], 0.042081);
        assert_eq!(bw["BW average[MB/sec]"], 0.34);
        assert_eq!(parse("no table here"), None);
        // A row short of the header's columns is not a result.
        assert_eq!(parse(" #bytes #iterations    t_avg[usec]\n 8 5000\n"), None);
    }

    const UCX: &str = "
+--------------+--------------+------------------------------+---------------------+-----------------------+
|              |              |        latency (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
Final:                  5000     16.000    26.875    26.875        0.28       0.28       37210       37210
";

    #[test]
    fn ucx_perftest_final_rows_are_read_by_latency_column() {
        let r = parse_ucx(UCX).expect("a row");
        assert_eq!(r["iterations"], 5000.0);
        assert_eq!(r["50.0%ile[usec]"], 16.0);
        assert_eq!(r["average[usec]"], 26.875);
        // An aborted run prints the header and no final row.
        let head = UCX.lines().take(6).collect::<Vec<_>>().join("\n");
        assert_eq!(parse_ucx(&head), None);
        assert_eq!(parse_ucx("Final: 5000 16.0\n"), None);
    }

    #[test]
    fn ucx_sends_short_messages_inline_and_longer_ones_copied() {
        let p = Perftest {
            device: "rxe0".into(),
            port: 1,
            gid_index: Some(1),
        };
        let a = p.args(Tool::UcxAmLat, 8, 100, "20001").join(" ");
        assert_eq!(
            a,
            "-t am_lat -x rc_verbs -d rxe0:1 -D short -s 8 -n 100 -p 20001"
        );
        let a = p.args(Tool::UcxAmLat, 4096, 100, "20001").join(" ");
        assert!(a.contains("-D bcopy -s 4096"), "{a}");
        let a = p.args(Tool::SendLat, 8, 2, "20001").join(" ");
        assert_eq!(a, "-d rxe0 -s 8 -n 5 -F -p 20001 -x 1");
        assert!(p.run(Tool::UcxAmLat, UCX_BCOPY_MAX + 1, 10).is_err());
        assert!(p.run(Tool::UcxAmLat, 4, 10).is_err(), "below its header");
    }
}
