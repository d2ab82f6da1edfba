//! Logging without std: `log` or `defmt`, behind mutually exclusive features,
//! silent by default (the macro expands to nothing). Arguments are integers,
//! which both backends format with `{}`.

macro_rules! debug {
    ($($arg:tt)*) => {{
        #[cfg(feature = "log")]
        ::log::debug!($($arg)*);
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg)*);
    }};
}

pub(crate) use debug;
