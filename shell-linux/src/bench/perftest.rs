//! perftest as an anchor: the device's own floor, measured by the tools
//! RDMA users know (`ib_send_lat`, `ib_write_lat`, `ib_send_bw`, `ib_write_bw`) on the same
//! device in the same run, so that rmx's verbs figures read as ratios to
//! what raw verbs reach there. Each run is perftest's usual pair, a server
//! and a client on this host.

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
}

impl Tool {
    pub fn program(self) -> &'static str {
        match self {
            Tool::SendLat => "ib_send_lat",
            Tool::WriteLat => "ib_write_lat",
            Tool::SendBw => "ib_send_bw",
            Tool::WriteBw => "ib_write_bw",
        }
    }
}

/// Where perftest runs: the device rmx measured on.
#[derive(Clone, Debug)]
pub struct Perftest {
    pub device: String,
    pub gid_index: Option<u8>,
}

/// How long one server-client pair may take (TCG guests are slow).
const DEADLINE: Duration = Duration::from_secs(120);

impl Perftest {
    /// Whether perftest is installed (`apt-get install perftest`).
    pub fn installed() -> bool {
        which(Tool::SendLat.program())
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
        // A port of this process's own: two suites on one host do not meet.
        let port = (20_000 + std::process::id() % 20_000).to_string();
        let mut args: Vec<String> = ["-d", &self.device, "-s", &size.to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["-n".into(), iters.max(5).to_string(), "-F".into()]);
        args.extend(["-p".into(), port]);
        if let Some(g) = self.gid_index {
            args.extend(["-x".into(), g.to_string()]);
        }
        let mut server = Command::new(prog)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{prog}: {e} (apt-get install perftest)"))?;
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
        parse(&text).ok_or_else(|| format!("{prog}: no result row in:\n{text}"))
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
}
