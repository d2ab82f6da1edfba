//! `cfg(unoptimised)` for a build without optimisation (the debug test
//! run), where the longest simulations are cut short or left out; a build
//! with debug assertions may still be optimised (the `ci` profile).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(unoptimised)");
    if std::env::var("OPT_LEVEL").as_deref() == Ok("0") {
        println!("cargo::rustc-cfg=unoptimised");
    }
}
