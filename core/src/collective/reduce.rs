//! Reductions on integer elements, for allreduce, reduce_scatter and
//! accumulate. Elements are in the byte order of the machine (every rank of
//! a job runs on one architecture). Floating-point reductions are the
//! shell's: the core has no floats.

/// An integer element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
}

impl Int {
    /// Every type, in the order the wire numbers them (0 u8 … 7 i64).
    pub const ALL: [Int; 8] = [
        Int::U8,
        Int::U16,
        Int::U32,
        Int::U64,
        Int::I8,
        Int::I16,
        Int::I32,
        Int::I64,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Int::U8 | Int::I8 => 1,
            Int::U16 | Int::I16 => 2,
            Int::U32 | Int::I32 => 4,
            Int::U64 | Int::I64 => 8,
        }
    }
}

/// How two elements combine. All but `Replace` are commutative and
/// associative, so any order of combination gives one result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Wrapping sum.
    Sum,
    Min,
    Max,
    BitAnd,
    BitOr,
    BitXor,
    /// The other element replaces this one (accumulate's MPI_REPLACE).
    Replace,
}

impl Op {
    /// Every operation, in the order the wire numbers them (0 sum … 6 replace).
    pub const ALL: [Op; 7] = [
        Op::Sum,
        Op::Min,
        Op::Max,
        Op::BitAnd,
        Op::BitOr,
        Op::BitXor,
        Op::Replace,
    ];
}

/// Why a reduction was refused; nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceError {
    /// The two buffers differ in length.
    Lengths { acc: usize, other: usize },
    /// The length is not a whole number of elements.
    Misaligned { len: usize, size: usize },
}

macro_rules! combine {
    ($t:ty, $op:expr, $acc:expr, $other:expr) => {{
        const N: usize = core::mem::size_of::<$t>();
        for (a, b) in $acc.chunks_exact_mut(N).zip($other.chunks_exact(N)) {
            let mut x = [0u8; N];
            x.copy_from_slice(a);
            let mut y = [0u8; N];
            y.copy_from_slice(b);
            let (x, y) = (<$t>::from_ne_bytes(x), <$t>::from_ne_bytes(y));
            let r = match $op {
                Op::Sum => x.wrapping_add(y),
                Op::Min => x.min(y),
                Op::Max => x.max(y),
                Op::BitAnd => x & y,
                Op::BitOr => x | y,
                Op::BitXor => x ^ y,
                Op::Replace => y,
            };
            a.copy_from_slice(&r.to_ne_bytes());
        }
    }};
}

/// `acc[i] = acc[i] op other[i]` for every element.
pub fn reduce(op: Op, ty: Int, acc: &mut [u8], other: &[u8]) -> Result<(), ReduceError> {
    if acc.len() != other.len() {
        return Err(ReduceError::Lengths {
            acc: acc.len(),
            other: other.len(),
        });
    }
    if !acc.len().is_multiple_of(ty.size()) {
        return Err(ReduceError::Misaligned {
            len: acc.len(),
            size: ty.size(),
        });
    }
    match ty {
        Int::U8 => combine!(u8, op, acc, other),
        Int::U16 => combine!(u16, op, acc, other),
        Int::U32 => combine!(u32, op, acc, other),
        Int::U64 => combine!(u64, op, acc, other),
        Int::I8 => combine!(i8, op, acc, other),
        Int::I16 => combine!(i16, op, acc, other),
        Int::I32 => combine!(i32, op, acc, other),
        Int::I64 => combine!(i64, op, acc, other),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i32s(v: &[i32]) -> [u8; 12] {
        let mut b = [0u8; 12];
        for (c, x) in b.chunks_exact_mut(4).zip(v) {
            c.copy_from_slice(&x.to_ne_bytes());
        }
        b
    }

    #[test]
    fn each_op_combines_elementwise() {
        let (a, b) = ([5, -3, i32::MAX], [2, 7, 1]);
        for (op, want) in [
            (Op::Sum, [7, 4, i32::MIN]),
            (Op::Min, [2, -3, 1]),
            (Op::Max, [5, 7, i32::MAX]),
            (Op::BitAnd, [5 & 2, -3 & 7, i32::MAX & 1]),
            (Op::BitOr, [5 | 2, -3 | 7, i32::MAX]),
            (Op::BitXor, [5 ^ 2, -3 ^ 7, i32::MAX ^ 1]),
            (Op::Replace, [2, 7, 1]),
        ] {
            let mut acc = i32s(&a);
            reduce(op, Int::I32, &mut acc, &i32s(&b)).unwrap();
            assert_eq!(acc, i32s(&want), "{op:?}");
        }
        // Unsigned minimum differs from signed.
        let mut acc = [0xFFu8, 1];
        reduce(Op::Min, Int::U8, &mut acc, &[1, 0xFF]).unwrap();
        assert_eq!(acc, [1, 1]);
        let mut acc = [0xFFu8, 1];
        reduce(Op::Min, Int::I8, &mut acc, &[1, 0xFF]).unwrap();
        assert_eq!(acc, [0xFF, 0xFF]);
    }

    #[test]
    fn bad_lengths_are_refused_and_change_nothing() {
        let mut acc = [1u8; 6];
        assert_eq!(
            reduce(Op::Sum, Int::U32, &mut acc, &[1; 6]),
            Err(ReduceError::Misaligned { len: 6, size: 4 })
        );
        assert_eq!(
            reduce(Op::Sum, Int::U16, &mut acc, &[1; 4]),
            Err(ReduceError::Lengths { acc: 6, other: 4 })
        );
        assert_eq!(acc, [1u8; 6]);
    }
}
