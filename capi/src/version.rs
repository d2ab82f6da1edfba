//! The API version: the header's is passed in by `rmx_init` (an inline
//! function in the header), and the library refuses a header newer than
//! itself, as `ucp_init` does; a program built against an older header of
//! the same major version runs.

use crate::errors::{Error, RMX_ERR_VERSION};

/// Changed when a function or type changes incompatibly.
pub const RMX_API_MAJOR: u32 = 0;
/// Raised when functions are added.
pub const RMX_API_MINOR: u32 = 2;
// rmx-driver's, which the Linux module's endpoints check too.
const _: () = assert!(
    RMX_API_MAJOR == rmx_driver::embed::API_MAJOR && RMX_API_MINOR == rmx_driver::embed::API_MINOR
);
/// The version this header describes: major in the high 16 bits.
pub const RMX_API_VERSION: u32 = (RMX_API_MAJOR << 16) | RMX_API_MINOR;

/// The library's API version (as `RMX_API_VERSION`).
#[no_mangle]
pub extern "C" fn rmx_api_version() -> u32 {
    RMX_API_VERSION
}

/// Refuses a header of another major version, or newer than the library.
pub(crate) fn check(header: u32) -> Result<(), Error> {
    rmx_driver::embed::calls::version(header).map_err(|_| refused_of(header))
}

/// The refusal of a header's version, in words that say what to do.
fn refused_of(header: u32) -> Error {
    let (major, minor) = (header >> 16, header & 0xffff);
    Error::new(
        RMX_ERR_VERSION,
        format!(
            "the program was built with rmx.h {major}.{minor}; this librmx is {RMX_API_MAJOR}.{RMX_API_MINOR}: rebuild it against this library's header or load a newer librmx"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_minor_runs_a_newer_or_another_major_does_not() {
        assert!(check(RMX_API_VERSION).is_ok());
        assert!(check(RMX_API_MAJOR << 16).is_ok());
        assert_eq!(
            check(RMX_API_VERSION + 1).unwrap_err().code,
            RMX_ERR_VERSION
        );
        assert_eq!(
            check((RMX_API_MAJOR + 1) << 16).unwrap_err().code,
            RMX_ERR_VERSION
        );
    }
}
