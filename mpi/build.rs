//! The library's SONAME is the standard ABI's (`libmpi_abi.so.1`), so a
//! program built against any implementation of it loads this one.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
}
