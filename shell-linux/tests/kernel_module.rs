//! rmx.ko in the test VM: the module is built for the guest's kernel
//! (`shell-kernel/module/build`), loaded, and the `kguest_` tests below
//! (`kguest`: regions; `kframes`: frames through the kernel;
//! `kregion_frames`: frames whose data the module takes from a region; `kjobs`:
//! whole jobs over eth with `--frames module`) run in the
//! guest against `/dev/rmx`, with a C program for what Rust's
//! allocator would disturb (brk, malloc); then every pinned page must be
//! back and the module must unload. Skips with the reason where the VM,
//! the kernel's headers or nightly Rust are missing.

mod vm;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The pinned-page limit the guest loads the module with: small, so that
/// the limit test passes it with a few regions.
const LIMIT: usize = 256;

/// The C program that reallocates at the same address, built on the host.
fn c_program() -> PathBuf {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shell-kernel/module");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rmx_same_address");
    let st = Command::new("cc")
        .args(["-O1", "-Wall", "-Werror", "-I", dir, "-o"])
        .arg(&exe)
        .arg(Path::new(dir).join("test/same_address.c"))
        .status()
        .expect("cc runs");
    assert!(st.success(), "same_address.c builds");
    exe
}

/// The guest tests in this binary.
const GUEST_TESTS: usize = 20;

#[test]
fn in_the_test_vm_the_module_keeps_every_region_correct() {
    let Some((k, ko)) = vm::rmx_ko::kernel_and_module() else {
        return;
    };
    let c = c_program();
    let ep_test = ko.with_file_name("rmx_ep_test.ko");
    let exe = std::env::current_exe().expect("this test's binary");
    let script = format!(
        "insmod {ko} pin_limit={LIMIT} || exit 91
{exe} kguest_ --nocapture --test-threads 1; echo GUEST-RC=$?
{c}; echo C-RC=$?
insmod {ep_test} && echo EP-TEST=loaded && rmmod rmx_ep_test
echo PINNED=$(cat /sys/module/rmx/parameters/pinned_pages)
echo REGION-BYTES=$(cat /sys/module/rmx/parameters/region_bytes)
rmmod rmx && echo UNLOADED
dmesg | grep -E 'WARNING|BUG|Call Trace|rmx' | sed 's/^/DMESG: /'
",
        ko = vm::in_guest(&ko),
        exe = vm::in_guest(&exe),
        c = vm::in_guest(&c),
        ep_test = vm::in_guest(&ep_test),
    );
    let out = k
        .run(&vm::Job {
            files: &[&ko, &exe, &c, &ep_test],
            system: &[],
            modules: &["veth"],
            script: &script,
            timeout: Duration::from_secs(420),
        })
        .expect("the guest ran");
    let con = &out.console;
    eprintln!("{con}");
    assert_eq!(out.status, Some(0), "guest console:\n{con}");
    assert!(
        con.contains("GUEST-RC=0"),
        "every guest test passed:\n{con}"
    );
    assert!(
        con.contains(&format!("test result: ok. {GUEST_TESTS} passed")),
        "all {GUEST_TESTS} ran:\n{con}"
    );
    assert!(
        !con.contains("skipped:"),
        "none skipped in the guest:\n{con}"
    );
    assert!(
        con.contains("C-RC=0"),
        "the C program's checks passed:\n{con}"
    );
    assert!(
        con.contains("EP-TEST=loaded") && con.contains("rmx_ep_test: embedded: ok"),
        "the embedded endpoint's suite passed in the kernel:\n{con}"
    );
    assert!(con.contains("PINNED=0"), "every page given back:\n{con}");
    assert!(
        con.contains("UNLOADED"),
        "the module unloads after its users:\n{con}"
    );
    for bad in ["WARNING", "BUG", "Call Trace"] {
        assert!(
            !con.lines().any(|l| l.contains("DMESG:") && l.contains(bad)),
            "the kernel complained ({bad}):\n{con}"
        );
    }
}

#[path = "kernel_module/kguest.rs"]
mod kguest;

#[path = "kernel_module/kframes.rs"]
mod kframes;

#[path = "kernel_module/kjobs.rs"]
mod kjobs;

#[path = "kernel_module/kregion_frames.rs"]
mod kregion_frames;
