use super::*;

/// The module's header, compiled by the C compiler, gives the numbers
/// this side uses.
#[test]
fn ioctl_numbers_agree_with_the_modules_header() {
    let dir = std::env::temp_dir().join(format!("rmx-uapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let header = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shell-kernel/module/rmx_uapi.h"
    );
    let src = dir.join("uapi.c");
    std::fs::write(
        &src,
        format!(
            "#include <stdio.h>\n#include \"{header}\"\nint main(void) {{ printf(\"%u %u %u %u %u %u %u %zu %zu %zu %u %u %u %zu %zu %u %zu\", \
             (unsigned)RMX_UNPIN, (unsigned)RMX_DECLARE, (unsigned)RMX_UNDECLARE, (unsigned)RMX_PIN, (unsigned)RMX_READ, \
             (unsigned)RMX_WRITE, RMX_PIN_ALL, sizeof(struct rmx_segment), sizeof(struct rmx_pin), \
             sizeof(struct rmx_copy), (unsigned)RMX_BIND, (unsigned)RMX_SEND, (unsigned)RMX_RECV, \
             sizeof(struct rmx_bind), sizeof(struct rmx_frame), (unsigned)RMX_SEND_REGION, \
             sizeof(struct rmx_send_region)); return 0; }}\n"
        ),
    )
    .unwrap();
    let exe = dir.join("uapi");
    let cc = std::process::Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status();
    match cc {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("skipped: no C compiler with Linux headers ({other:?}): apt-get install gcc linux-libc-dev");
            return;
        }
    }
    let out = std::process::Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let got = String::from_utf8(out.stdout).unwrap();
    let want = format!(
        "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
        ioctl::UNPIN,
        ioctl::DECLARE,
        ioctl::UNDECLARE,
        ioctl::PIN,
        ioctl::READ,
        ioctl::WRITE_TO,
        ioctl::PIN_ALL,
        SEGMENT_LEN,
        std::mem::size_of::<Pin>(),
        std::mem::size_of::<Copy>(),
        ioctl::BIND,
        ioctl::SEND,
        ioctl::RECV,
        std::mem::size_of::<frames::BindArg>(),
        std::mem::size_of::<frames::FrameArg>(),
        ioctl::SEND_REGION,
        std::mem::size_of::<frames::RegionFrameArg>()
    );
    assert_eq!(got, want);
}

#[test]
fn without_the_module_opening_says_what_to_load() {
    let e = Device::open_at("/nonexistent/rmx")
        .err()
        .expect("no device there");
    assert!(e.to_string().contains("rmx.ko"), "{e}");
}
