//! The header C programs build against is generated from the source:
//! one that drifted from the code fails here. `RMX_BLESS=1 cargo test
//! -p rmx-capi --test header` writes the current one.

#[test]
fn the_checked_in_header_is_the_generated_one() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("the header generates")
        .write(&mut generated);
    let path = format!("{dir}/include/rmx.h");
    if std::env::var_os("RMX_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("header written");
        return;
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(
        have == generated,
        "capi/include/rmx.h is not what the source generates: run `RMX_BLESS=1 cargo test -p rmx-capi --test header` and commit it"
    );
}
