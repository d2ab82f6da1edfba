//! Checks of the arguments C passes: buffers, counts and datatypes, tags,
//! and the pointers results are written through.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::datatype::{self, Type};
use crate::error::{Error, Result};

/// The largest tag rmx carries (`MPI_TAG_UB`).
pub const TAG_UB: c_int = c_int::MAX;

/// `count` elements of `datatype`: the type and their bytes.
pub fn elements(count: c_int, datatype: Handle) -> Result<(Type, usize)> {
    let ty = datatype::lookup(datatype).ok_or_else(|| {
        Error::new(
            MPI_ERR_TYPE,
            format!(
                "{datatype:#x} is no predefined datatype (derived datatypes are not supported)"
            ),
        )
    })?;
    let n = usize::try_from(count)
        .map_err(|_| Error::new(MPI_ERR_COUNT, format!("count {count} is negative")))?;
    let len = n
        .checked_mul(ty.size)
        .ok_or_else(|| Error::new(MPI_ERR_COUNT, format!("{count} elements overflow")))?;
    Ok((ty, len))
}

/// A buffer of `len` bytes: null only when empty.
pub fn buffer(buf: *const c_void, len: usize) -> Result<*const u8> {
    if buf.is_null() && len > 0 {
        return Err(Error::new(
            MPI_ERR_BUFFER,
            format!("the buffer is null but holds {len} bytes"),
        ));
    }
    if len > u32::MAX as usize {
        return Err(Error::new(
            MPI_ERR_COUNT,
            format!("{len} bytes is more than one message carries (4 GiB)"),
        ));
    }
    Ok(if buf.is_null() {
        std::ptr::NonNull::<u8>::dangling().as_ptr()
    } else {
        buf.cast()
    })
}

/// A tag a message is sent with.
pub fn send_tag(tag: c_int) -> Result<u32> {
    u32::try_from(tag).map_err(|_| {
        Error::new(
            MPI_ERR_TAG,
            format!("tag {tag} is negative (0 … MPI_TAG_UB)"),
        )
    })
}

/// A tag a receive asks for: `None` is any.
pub fn recv_tag(tag: c_int) -> Result<Option<u32>> {
    match tag {
        MPI_ANY_TAG => Ok(None),
        t => send_tag(t).map(Some),
    }
}

/// Where a result goes: a reference, or an argument error naming it.
///
/// # Safety
/// `p` is null or points to a writable `T`, unused elsewhere meanwhile.
pub unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }.ok_or_else(|| Error::arg(format!("{what} is null")))
}

/// Writes `s` (as much as fits `cap` bytes with its NUL) to `out` and its
/// length to `len`.
///
/// # Safety
/// `out` is null or names `cap` writable bytes; `len` is null or writable.
pub unsafe fn string(
    s: &str,
    out: *mut std::ffi::c_char,
    cap: usize,
    len: *mut c_int,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let len = unsafe { self::out(len, "resultlen") }?;
    if out.is_null() {
        return Err(Error::arg("the string buffer is null"));
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: `n + 1 <= cap` bytes at `out` (the caller's contract).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
    *len = n as c_int;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_counts_types_buffers_and_tags_are_typed_errors() {
        assert_eq!(elements(-1, 0x209).unwrap_err().class, MPI_ERR_COUNT);
        assert_eq!(elements(1, 0x200).unwrap_err().class, MPI_ERR_TYPE);
        assert_eq!(elements(3, 0x214).unwrap().1, 24);
        assert_eq!(
            buffer(std::ptr::null(), 1).unwrap_err().class,
            MPI_ERR_BUFFER
        );
        assert!(buffer(std::ptr::null(), 0).is_ok());
        assert_eq!(send_tag(-2).unwrap_err().class, MPI_ERR_TAG);
        assert_eq!(recv_tag(MPI_ANY_TAG), Ok(None));
        assert_eq!(recv_tag(-7).unwrap_err().class, MPI_ERR_TAG);
    }
}
