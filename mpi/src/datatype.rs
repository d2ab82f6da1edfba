//! The predefined datatypes: every one the standard ABI names, each
//! contiguous, with its size, its name and what a reduction sees in it.
//! Derived datatypes are not offered (their constructors say so).

use crate::abi::Handle;

/// What one element is to a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// A C or Fortran logical: zero is false.
    Bool,
    /// Raw bytes (`MPI_BYTE`, `MPI_PACKED`): bitwise reductions only.
    Byte,
    /// Complex numbers of two `f32` or `f64`.
    C32,
    C64,
    /// A value and its index, for `MPI_MINLOC` and `MPI_MAXLOC`.
    Pair(Pair),
    /// Types with no reduction here (long double, half precision).
    Opaque,
}

/// The value-index pairs of C and Fortran, as laid out on x86-64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pair {
    /// `{ float; int; }`
    FloatInt,
    /// `{ double; int; }` (16 bytes with padding)
    DoubleInt,
    /// `{ long; int; }` (16 bytes with padding)
    LongInt,
    /// `{ int; int; }`, and Fortran's `2INTEGER`
    TwoInt,
    /// `{ short; int; }` (the int at byte 4)
    ShortInt,
    /// Fortran's `2REAL`: two floats
    TwoFloat,
    /// Fortran's `2DOUBLE_PRECISION`: two doubles
    TwoDouble,
}

/// A predefined datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Type {
    pub handle: Handle,
    pub name: &'static str,
    pub size: usize,
    pub elem: Elem,
}

const fn t(handle: Handle, name: &'static str, size: usize, elem: Elem) -> Type {
    Type {
        handle,
        name,
        size,
        elem,
    }
}

use Elem::*;

/// Every predefined datatype of the standard ABI (x86-64 Linux sizes).
pub const TYPES: &[Type] = &[
    t(0x201, "MPI_AINT", 8, I64),
    t(0x202, "MPI_COUNT", 8, I64),
    t(0x203, "MPI_OFFSET", 8, I64),
    t(0x207, "MPI_PACKED", 1, Byte),
    t(0x208, "MPI_SHORT", 2, I16),
    t(0x209, "MPI_INT", 4, I32),
    t(0x20a, "MPI_LONG", 8, I64),
    t(0x20b, "MPI_LONG_LONG", 8, I64),
    t(0x20c, "MPI_UNSIGNED_SHORT", 2, U16),
    t(0x20d, "MPI_UNSIGNED", 4, U32),
    t(0x20e, "MPI_UNSIGNED_LONG", 8, U64),
    t(0x20f, "MPI_UNSIGNED_LONG_LONG", 8, U64),
    t(0x210, "MPI_FLOAT", 4, F32),
    t(0x212, "MPI_C_FLOAT_COMPLEX", 8, C32),
    t(0x213, "MPI_CXX_FLOAT_COMPLEX", 8, C32),
    t(0x214, "MPI_DOUBLE", 8, F64),
    t(0x216, "MPI_C_DOUBLE_COMPLEX", 16, C64),
    t(0x217, "MPI_CXX_DOUBLE_COMPLEX", 16, C64),
    t(0x218, "MPI_LOGICAL", 4, Bool),
    t(0x219, "MPI_INTEGER", 4, I32),
    t(0x21a, "MPI_REAL", 4, F32),
    t(0x21b, "MPI_COMPLEX", 8, C32),
    t(0x21c, "MPI_DOUBLE_PRECISION", 8, F64),
    t(0x21d, "MPI_DOUBLE_COMPLEX", 16, C64),
    t(0x21e, "MPI_CHARACTER", 1, Byte),
    t(0x220, "MPI_LONG_DOUBLE", 16, Opaque),
    t(0x224, "MPI_C_LONG_DOUBLE_COMPLEX", 32, Opaque),
    t(0x225, "MPI_CXX_LONG_DOUBLE_COMPLEX", 32, Opaque),
    t(0x228, "MPI_FLOAT_INT", 8, Pair(Pair::FloatInt)),
    t(0x229, "MPI_DOUBLE_INT", 16, Pair(Pair::DoubleInt)),
    t(0x22a, "MPI_LONG_INT", 16, Pair(Pair::LongInt)),
    t(0x22b, "MPI_2INT", 8, Pair(Pair::TwoInt)),
    t(0x22c, "MPI_SHORT_INT", 8, Pair(Pair::ShortInt)),
    t(0x22d, "MPI_LONG_DOUBLE_INT", 32, Opaque),
    t(0x230, "MPI_2REAL", 8, Pair(Pair::TwoFloat)),
    t(0x231, "MPI_2DOUBLE_PRECISION", 16, Pair(Pair::TwoDouble)),
    t(0x232, "MPI_2INTEGER", 8, Pair(Pair::TwoInt)),
    t(0x238, "MPI_C_BOOL", 1, Bool),
    t(0x239, "MPI_CXX_BOOL", 1, Bool),
    t(0x23c, "MPI_WCHAR", 4, Opaque),
    t(0x240, "MPI_INT8_T", 1, I8),
    t(0x241, "MPI_UINT8_T", 1, U8),
    t(0x243, "MPI_CHAR", 1, I8),
    t(0x244, "MPI_SIGNED_CHAR", 1, I8),
    t(0x245, "MPI_UNSIGNED_CHAR", 1, U8),
    t(0x247, "MPI_BYTE", 1, Byte),
    t(0x248, "MPI_INT16_T", 2, I16),
    t(0x249, "MPI_UINT16_T", 2, U16),
    t(0x250, "MPI_INT32_T", 4, I32),
    t(0x251, "MPI_UINT32_T", 4, U32),
    t(0x258, "MPI_INT64_T", 8, I64),
    t(0x259, "MPI_UINT64_T", 8, U64),
    t(0x2c0, "MPI_LOGICAL1", 1, Bool),
    t(0x2c1, "MPI_INTEGER1", 1, I8),
    t(0x2c8, "MPI_LOGICAL2", 2, Bool),
    t(0x2c9, "MPI_INTEGER2", 2, I16),
    t(0x2ca, "MPI_REAL2", 2, Opaque),
    t(0x2d0, "MPI_LOGICAL4", 4, Bool),
    t(0x2d1, "MPI_INTEGER4", 4, I32),
    t(0x2d2, "MPI_REAL4", 4, F32),
    t(0x2d3, "MPI_COMPLEX4", 4, Opaque),
    t(0x2d8, "MPI_LOGICAL8", 8, Bool),
    t(0x2d9, "MPI_INTEGER8", 8, I64),
    t(0x2da, "MPI_REAL8", 8, F64),
    t(0x2db, "MPI_COMPLEX8", 8, C32),
    t(0x2e0, "MPI_LOGICAL16", 16, Opaque),
    t(0x2e1, "MPI_INTEGER16", 16, Opaque),
    t(0x2e2, "MPI_REAL16", 16, Opaque),
    t(0x2e3, "MPI_COMPLEX16", 16, C64),
    t(0x2eb, "MPI_COMPLEX32", 32, Opaque),
];

/// The predefined datatype `h` names, if any.
pub fn lookup(h: Handle) -> Option<Type> {
    TYPES.iter().copied().find(|t| t.handle == h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_distinct_and_in_the_datatype_range() {
        for (i, a) in TYPES.iter().enumerate() {
            assert!((0x200..0x300).contains(&a.handle), "{}", a.name);
            assert!(TYPES[i + 1..].iter().all(|b| b.handle != a.handle));
        }
        assert_eq!(lookup(0x243).map(|t| t.name), Some("MPI_CHAR"));
        assert_eq!(lookup(0x200), None, "MPI_DATATYPE_NULL is no type");
    }
}
