//! rmx.ko built for the guest's kernel by `shell-kernel/module/build`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// rmx.ko for `k`'s kernel, or `None` with the reason printed (no headers
/// for it, no nightly Rust with rust-src); a module that fails to build
/// panics with the build's errors.
#[allow(dead_code)]
pub fn build(k: &super::Kernel) -> Option<PathBuf> {
    let rel = k.release();
    let kdir = Path::new("/lib/modules").join(&rel).join("build");
    if !kdir.join("Makefile").exists() {
        eprintln!(
            "skipped: no build tree for the guest's kernel: apt-get install linux-headers-{rel}"
        );
        return None;
    }
    // One folder per process: two test binaries may build at once.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kmod-{}", std::process::id()));
    let build = concat!(env!("CARGO_MANIFEST_DIR"), "/../shell-kernel/module/build");
    let o = Command::new(build)
        .arg(&kdir)
        .arg(&out)
        .output()
        .expect("the module's build script runs");
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(0) => Some(out.join("rmx.ko")),
        Some(2) => {
            eprintln!("skipped: {}", err.trim());
            None
        }
        _ => panic!("rmx.ko did not build:\n{err}"),
    }
}

/// The guest's kernel and rmx.ko built for it, or `None` with the reason
/// printed.
#[allow(dead_code)]
pub fn kernel_and_module() -> Option<(super::Kernel, PathBuf)> {
    let k = match super::kernel() {
        Ok(k) => k,
        Err(super::Skip(why)) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let ko = build(&k)?;
    Some((k, ko))
}
