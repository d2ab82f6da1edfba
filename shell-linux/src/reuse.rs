//! Zero-copy eager sends in this shell: the calibrated cost figures, where
//! they are kept, and the policy each rank builds from them.

use std::path::PathBuf;

use rmx_core::reuse::{
    Adaptation, CostModel, CostPoint, FrequentBuffers, RegCache, Tracked, Tracker,
};
use serde::{Deserialize, Serialize};

/// Calibrated sizes the cost model holds.
pub const POINTS: usize = 16;
/// Registrations each rank keeps (lazily deregistered beyond this).
pub const REGISTRATIONS: usize = 256;
/// Buckets of the reuse tracker: 2^20, as in the paper.
pub const BUCKETS: usize = 1 << 20;
/// Send buffers the tracker can count.
pub const TRACKED: usize = 1 << 16;
/// The unit of registration.
pub const PAGE: u64 = 4096;

/// The policy a rank runs: tracker, cost model and registration cache.
pub type ShellReuse = FrequentBuffers<Vec<u32>, Vec<Tracked>, POINTS, REGISTRATIONS>;

/// Heap bytes of one rank's zero-copy policy: the tracker's buckets and
/// arena. The rest of the policy (cost model, registration cache) lives
/// inside the endpoint and is counted in its fixed bytes.
pub fn policy_bytes() -> usize {
    BUCKETS * 4 + TRACKED * std::mem::size_of::<Tracked>()
}

/// One calibrated size (JSON row of `rmx calibrate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub size: u32,
    pub copy_ns: u32,
    pub reg_ns: u32,
}

/// One size class of the copy engine: the routine chosen and every
/// candidate's speed (MB/s), as `rmx calibrate` measured them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyRow {
    pub size: u64,
    pub routine: String,
    pub mb_per_s: std::collections::BTreeMap<String, u32>,
}

/// The figures the cost model uses, as `rmx calibrate` saves them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    /// Lookup overhead V: tracker and cache lookup of a frequent buffer.
    pub lookup_ns: u32,
    /// Register at this fraction of n_min, per mille (the paper: 250).
    pub speculate_permille: u32,
    pub rows: Vec<Row>,
    /// The copy engine's classes (absent in files of older versions).
    #[serde(default)]
    pub copy: Vec<CopyRow>,
}

impl Default for Calibration {
    /// Figures measured by `rmx calibrate` on a 2-core AMD EPYC VM; used until
    /// this machine is calibrated.
    fn default() -> Self {
        let rows = [
            (16, 1, 1_853),
            (32, 1, 1_842),
            (64, 1, 1_843),
            (128, 3, 1_832),
            (256, 2, 1_853),
            (512, 3, 1_833),
            (1024, 8, 1_843),
            (2048, 14, 1_853),
            (4096, 31, 2_254),
            (8192, 55, 2_244),
        ]
        .map(|(size, copy_ns, reg_ns)| Row {
            size,
            copy_ns,
            reg_ns,
        })
        .to_vec();
        Calibration {
            lookup_ns: 10,
            speculate_permille: 250,
            rows,
            copy: Vec::new(),
        }
    }
}

/// The largest calibration file read: a few hundred bytes per size.
const CALIBRATION_LIMIT: u64 = 1 << 20;

/// The text of `path` if it is at most `limit` bytes (`None`: longer).
/// Only a regular file is read: the open does not wait (a FIFO would block
/// it until a writer came) and anything else, a FIFO, a device or a
/// directory, is an `InvalidInput` error.
fn read_limited(path: &std::path::Path, limit: u64) -> std::io::Result<Option<String>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut s = String::new();
    f.take(limit + 1).read_to_string(&mut s)?;
    Ok((s.len() as u64 <= limit).then_some(s))
}

impl Calibration {
    /// Where calibration is kept: `$RMX_CALIBRATION`, else
    /// `$XDG_CONFIG_HOME/rmx/calibration.json`, else `~/.config/rmx/calibration.json`.
    pub fn path() -> PathBuf {
        if let Some(p) = std::env::var_os("RMX_CALIBRATION") {
            return PathBuf::from(p);
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("rmx").join("calibration.json")
    }

    /// The saved calibration, or the defaults if there is none. A file that
    /// exists but cannot be used is an error (say which and how to fix it).
    pub fn load() -> Result<(Calibration, bool), String> {
        let p = Self::path();
        match read_limited(&p, CALIBRATION_LIMIT) {
            Ok(Some(s)) => {
                let c: Calibration = serde_json::from_str(&s).map_err(|e| {
                    format!(
                        "{} is not a calibration ({e}); run `rmx calibrate` again or delete it",
                        p.display()
                    )
                })?;
                c.model().map_err(|e| format!("{}: {e}", p.display()))?;
                Ok((c, true))
            }
            Ok(None) => Err(format!(
                "{} is larger than a calibration can be ({CALIBRATION_LIMIT} bytes); point RMX_CALIBRATION at the file `rmx calibrate` wrote, or delete it",
                p.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok((Calibration::default(), false))
            }
            Err(e) => Err(format!("cannot read {}: {e}", p.display())),
        }
    }

    pub fn save(&self) -> Result<PathBuf, String> {
        let p = Self::path();
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let s = serde_json::to_string_pretty(self).expect("serializable");
        std::fs::write(&p, s).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(p)
    }

    /// The core's cost model from these figures.
    pub fn model(&self) -> Result<CostModel<POINTS>, String> {
        let pts: Vec<CostPoint> = self
            .rows
            .iter()
            .map(|r| CostPoint {
                size: r.size,
                copy_ns: r.copy_ns,
                reg_ns: r.reg_ns,
            })
            .collect();
        CostModel::new(&pts, self.lookup_ns, self.speculate_permille)
            .map_err(|e| format!("unusable calibration: {e:?}"))
    }

    /// A rank's policy: a 2^20-bucket tracker on the heap, this cost model,
    /// and a page-granular registration cache.
    pub fn policy(&self) -> Result<ShellReuse, String> {
        let tracker = Tracker::new(
            vec![0u32; BUCKETS],
            vec![Tracked::default(); TRACKED],
            Adaptation::default(),
        )
        .map_err(|e| format!("tracker: {e:?}"))?;
        let cache = RegCache::new(PAGE).map_err(|e| format!("cache: {e:?}"))?;
        Ok(FrequentBuffers::new(tracker, self.model()?, cache))
    }
}
