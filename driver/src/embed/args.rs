//! The checks of a C caller's arguments every embedded entry point
//! shares (and librmx's other calls too): buffers, ranks, selections.

use core::ffi::{c_int, c_void};

use rmx_core::{Source, TagSel};

use super::EmbedError;

/// A receive from any rank.
pub const ANY_SOURCE: c_int = -1;
/// A receive of any tag.
pub const ANY_TAG: i64 = -1;

/// `len` bytes at `p`: null only when empty (then a dangling, aligned
/// pointer), never past the address space.
pub fn bytes(p: *const c_void, len: usize) -> Result<*const u8, EmbedError> {
    match (p.is_null(), len) {
        (true, 0) => Ok(core::ptr::NonNull::<u8>::dangling().as_ptr()),
        (true, _) => Err(EmbedError::Arg("a buffer is null but not empty")),
        (false, _) if isize::try_from(len).is_err() => {
            Err(EmbedError::Arg("a length past the address space"))
        }
        (false, _) => Ok(p.cast()),
    }
}

/// `dest` as a rank of a job of `size`.
pub fn peer(size: u16, dest: c_int) -> Result<u16, EmbedError> {
    u16::try_from(dest)
        .ok()
        .filter(|&d| d < size)
        .ok_or(EmbedError::Arg("a rank that is not one of the job's"))
}

/// A receive's selection: `src` a rank or `ANY_SOURCE`, `tag` 0 … 2^32 − 1
/// or `ANY_TAG`.
pub fn selection(size: u16, src: c_int, tag: i64) -> Result<(Source, TagSel), EmbedError> {
    let tag = match tag {
        ANY_TAG => TagSel::Any,
        t => TagSel::Tag(
            u32::try_from(t).map_err(|_| EmbedError::Arg("a tag neither 0 … 2^32 − 1 nor any"))?,
        ),
    };
    let src = match src {
        ANY_SOURCE => Source::Any,
        s => Source::Rank(peer(size, s)?),
    };
    Ok((src, tag))
}
