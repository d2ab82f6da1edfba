//! Why a call on a context failed, and the errno the module returns.

/// Why a call on a context failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A descriptor never given out, undeclared since, or another
    /// context's (`EBADF`).
    BadDescriptor,
    /// Segments none or too many, a segment empty, one whose end
    /// overflows, or one reaching kernel addresses (`EINVAL`).
    Invalid,
    /// Every slot of the context's table is declared (`ENOSPC`).
    Full,
    /// A communication still uses the region (`EBUSY`).
    Busy,
    /// Pinning failed with this errno (the range is not mapped, or not
    /// writable): the communication fails; the region stays declared.
    Pin(i32),
    /// Pinning would pass the pinned-page limit and no region can give
    /// pages back now (`ENOMEM`).
    Limit,
    /// The context was inherited across `fork`: reopen the device (`EIO`).
    Forked,
}

impl Error {
    /// The (positive) errno for userspace.
    pub fn errno(self) -> i32 {
        match self {
            Error::BadDescriptor => 9,
            Error::Invalid => 22,
            Error::Full => 28,
            Error::Busy => 16,
            Error::Pin(e) => e.checked_abs().unwrap_or(i32::MAX).max(1),
            Error::Limit => 12,
            Error::Forked => 5,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::BadDescriptor => f.write_str("no such region in this context"),
            Error::Invalid => f.write_str("invalid segments"),
            Error::Full => f.write_str("the context's region table is full"),
            Error::Busy => f.write_str("a communication still uses the region"),
            Error::Pin(e) => write!(f, "pinning failed (errno {e})"),
            Error::Limit => f.write_str("the pinned-page limit is reached"),
            Error::Forked => f.write_str("context inherited across fork: reopen the device"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_is_a_positive_errno_even_from_an_absurd_pin_result() {
        for e in [i32::MIN, -14, 0, 14, i32::MAX] {
            assert!(Error::Pin(e).errno() > 0, "{e}");
        }
        assert_eq!(Error::Pin(-14).errno(), 14);
    }
}
