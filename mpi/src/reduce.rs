//! The predefined reductions on the predefined datatypes, element by
//! element on bytes in the machine's order (every rank of a job runs on
//! one architecture). Integer sums and products wrap, as C's unsigned
//! arithmetic does and as every MPI does in practice.

use crate::abi::*;
use crate::datatype::{Elem, Pair, Type};

/// Why a reduction cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a predefined reduction.
    NoOp,
    /// A predefined reduction this datatype does not take (or rmx does not offer).
    NotFor,
}

/// Whether `op` can combine elements of `ty` (checked before anything is sent).
pub fn check(op: Handle, ty: Type) -> Result<(), Refused> {
    let class = class(op).ok_or(Refused::NoOp)?;
    let ok = match (class, ty.elem) {
        (_, Elem::Opaque) => false,
        (Class::Loc, e) => matches!(e, Elem::Pair(_)),
        (_, Elem::Pair(_)) => false,
        (Class::Arith, Elem::Byte | Elem::Bool) => false,
        (Class::Order, Elem::Byte | Elem::Bool | Elem::C32 | Elem::C64) => false,
        (Class::Logic, Elem::F32 | Elem::F64 | Elem::C32 | Elem::C64 | Elem::Byte) => false,
        (Class::Bits, Elem::F32 | Elem::F64 | Elem::C32 | Elem::C64 | Elem::Bool) => false,
        // MPI_REPLACE and MPI_NO_OP are one-sided operations' only.
        (Class::Replace, _) => false,
        _ => true,
    };
    ok.then_some(()).ok_or(Refused::NotFor)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Arith,
    Order,
    Logic,
    Bits,
    /// `MPI_MINLOC`, `MPI_MAXLOC`: value-index pairs only.
    Loc,
    Replace,
}

fn class(op: Handle) -> Option<Class> {
    Some(match op {
        MPI_SUM | MPI_PROD => Class::Arith,
        MPI_MIN | MPI_MAX => Class::Order,
        MPI_LAND | MPI_LOR | MPI_LXOR => Class::Logic,
        MPI_BAND | MPI_BOR | MPI_BXOR => Class::Bits,
        MPI_MINLOC | MPI_MAXLOC => Class::Loc,
        MPI_REPLACE | MPI_NO_OP => Class::Replace,
        _ => return None,
    })
}

/// `acc[i] = other[i] op acc[i]` for every element; `op` and `ty` passed
/// [`check`], and both slices hold whole elements of the same count.
pub fn apply(op: Handle, ty: Type, acc: &mut [u8], other: &[u8]) {
    debug_assert_eq!(acc.len(), other.len());
    macro_rules! each {
        ($t:ty, $f:expr) => {{
            const N: usize = std::mem::size_of::<$t>();
            for (a, b) in acc.chunks_exact_mut(N).zip(other.chunks_exact(N)) {
                let x = <$t>::from_ne_bytes(a.try_into().expect("element"));
                let y = <$t>::from_ne_bytes(b.try_into().expect("element"));
                let f: fn($t, $t) -> $t = $f;
                a.copy_from_slice(&f(y, x).to_ne_bytes());
            }
        }};
    }
    macro_rules! int {
        ($t:ty) => {
            match op {
                MPI_SUM => each!($t, |y, x| y.wrapping_add(x)),
                MPI_PROD => each!($t, |y, x| y.wrapping_mul(x)),
                MPI_MIN => each!($t, |y, x| y.min(x)),
                MPI_MAX => each!($t, |y, x| y.max(x)),
                MPI_LAND => each!($t, |y, x| ((y != 0) && (x != 0)) as $t),
                MPI_LOR => each!($t, |y, x| ((y != 0) || (x != 0)) as $t),
                MPI_LXOR => each!($t, |y, x| ((y != 0) != (x != 0)) as $t),
                MPI_BAND => each!($t, |y, x| y & x),
                MPI_BOR => each!($t, |y, x| y | x),
                MPI_BXOR => each!($t, |y, x| y ^ x),
                _ => unreachable!("checked"),
            }
        };
    }
    macro_rules! float {
        ($t:ty) => {
            match op {
                MPI_SUM => each!($t, |y, x| y + x),
                MPI_PROD => each!($t, |y, x| y * x),
                MPI_MIN => each!($t, |y, x| y.min(x)),
                MPI_MAX => each!($t, |y, x| y.max(x)),
                _ => unreachable!("checked"),
            }
        };
    }
    macro_rules! complex {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            for (a, b) in acc.chunks_exact_mut(2 * N).zip(other.chunks_exact(2 * N)) {
                let get = |s: &[u8], i: usize| {
                    <$t>::from_ne_bytes(s[i * N..(i + 1) * N].try_into().expect("part"))
                };
                let (xr, xi, yr, yi) = (get(a, 0), get(a, 1), get(b, 0), get(b, 1));
                let (r, i) = match op {
                    MPI_SUM => (yr + xr, yi + xi),
                    MPI_PROD => (yr * xr - yi * xi, yr * xi + yi * xr),
                    _ => unreachable!("checked"),
                };
                a[..N].copy_from_slice(&r.to_ne_bytes());
                a[N..].copy_from_slice(&i.to_ne_bytes());
            }
        }};
    }
    match ty.elem {
        Elem::I8 => int!(i8),
        Elem::U8 | Elem::Byte => int!(u8),
        Elem::I16 => int!(i16),
        Elem::U16 => int!(u16),
        Elem::I32 => int!(i32),
        Elem::U32 => int!(u32),
        Elem::I64 => int!(i64),
        Elem::U64 => int!(u64),
        Elem::Bool => match ty.size {
            1 => int!(u8),
            2 => int!(u16),
            4 => int!(u32),
            _ => int!(u64),
        },
        Elem::F32 => float!(f32),
        Elem::F64 => float!(f64),
        Elem::C32 => complex!(f32),
        Elem::C64 => complex!(f64),
        Elem::Pair(p) => locate(op == MPI_MAXLOC, p, ty.size, acc, other),
        Elem::Opaque => unreachable!("checked"),
    }
}

/// `MPI_MAXLOC` (`max`) or `MPI_MINLOC` on pairs of `size` bytes: the
/// larger (smaller) value with its index; on a tie the smaller index.
fn locate(max: bool, p: Pair, size: usize, acc: &mut [u8], other: &[u8]) {
    macro_rules! pairs {
        ($v:ty, $i:ty, $at:expr) => {{
            const V: usize = std::mem::size_of::<$v>();
            const I: usize = std::mem::size_of::<$i>();
            for (a, b) in acc.chunks_exact_mut(size).zip(other.chunks_exact(size)) {
                let value = |s: &[u8]| <$v>::from_ne_bytes(s[..V].try_into().expect("value"));
                let index = |s: &[u8]| <$i>::from_ne_bytes(s[$at..$at + I].try_into().expect("index"));
                let (x, y) = (value(a), value(b));
                let better = if max { y > x } else { y < x };
                if better {
                    a.copy_from_slice(b);
                } else if y == x && index(b) < index(a) {
                    a[$at..$at + I].copy_from_slice(&b[$at..$at + I]);
                }
            }
        }};
    }
    match p {
        Pair::FloatInt => pairs!(f32, i32, 4),
        Pair::DoubleInt => pairs!(f64, i32, 8),
        Pair::LongInt => pairs!(i64, i32, 8),
        Pair::TwoInt => pairs!(i32, i32, 4),
        Pair::ShortInt => pairs!(i16, i32, 4),
        Pair::TwoFloat => pairs!(f32, f32, 4),
        Pair::TwoDouble => pairs!(f64, f64, 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::lookup;

    fn bytes<T: Copy, const N: usize>(v: [T; N]) -> Vec<u8> {
        // SAFETY: plain numbers, read as their bytes.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(&v)) }
            .to_vec()
    }

    #[test]
    fn char_sum_wraps_and_double_min_max_sum_combine() {
        let ch = lookup(0x243).unwrap();
        let mut acc = bytes([100i8, -3]);
        apply(MPI_SUM, ch, &mut acc, &bytes([100i8, 1]));
        assert_eq!(acc, bytes([-56i8, -2]));
        let d = lookup(0x214).unwrap();
        for (op, want) in [(MPI_SUM, 3.5), (MPI_MIN, 1.0), (MPI_MAX, 2.5)] {
            let mut acc = bytes([1.0f64]);
            apply(op, d, &mut acc, &bytes([2.5f64]));
            assert_eq!(acc, bytes([want]));
        }
    }

    #[test]
    fn refuses_what_a_type_does_not_take() {
        let d = lookup(0x214).unwrap();
        assert_eq!(check(MPI_BXOR, d), Err(Refused::NotFor));
        assert_eq!(check(MPI_MAXLOC, lookup(0x229).unwrap()), Ok(()));
        assert_eq!(
            check(MPI_MAXLOC, lookup(0x209).unwrap()),
            Err(Refused::NotFor)
        );
        assert_eq!(check(MPI_SUM, lookup(0x229).unwrap()), Err(Refused::NotFor));
        assert_eq!(
            check(MPI_MINLOC, lookup(0x22d).unwrap()),
            Err(Refused::NotFor)
        );
        assert_eq!(check(0x1234, d), Err(Refused::NoOp));
        assert_eq!(check(MPI_BOR, lookup(0x247).unwrap()), Ok(()));
        assert_eq!(check(MPI_REPLACE, d), Err(Refused::NotFor));
        assert_eq!(check(MPI_SUM, lookup(0x247).unwrap()), Err(Refused::NotFor));
    }

    #[test]
    fn maxloc_and_minloc_keep_the_value_and_the_lower_index_on_a_tie() {
        let di = lookup(0x229).unwrap();
        let pair = |v: f64, i: i32| {
            let mut b = bytes([v]);
            b.extend_from_slice(&i.to_ne_bytes());
            b.extend_from_slice(&[0; 4]);
            b
        };
        let mut acc = [pair(1.0, 3), pair(2.0, 5), pair(4.0, 1)].concat();
        let other = [pair(2.0, 0), pair(2.0, 2), pair(-1.0, 0)].concat();
        apply(MPI_MAXLOC, di, &mut acc, &other);
        assert_eq!(acc, [pair(2.0, 0), pair(2.0, 2), pair(4.0, 1)].concat());
        let si = lookup(0x22c).unwrap();
        let short = |v: i16, i: i32| [bytes([v]), vec![0; 2], i.to_ne_bytes().to_vec()].concat();
        let mut acc = short(5, 9);
        apply(MPI_MINLOC, si, &mut acc, &short(5, 4));
        assert_eq!(acc, short(5, 4));
        apply(MPI_MINLOC, si, &mut acc, &short(-7, 8));
        assert_eq!(acc, short(-7, 8));
    }

    #[test]
    fn complex_product_multiplies() {
        let z = lookup(0x216).unwrap();
        let mut acc = bytes([1.0f64, 2.0]);
        apply(MPI_PROD, z, &mut acc, &bytes([3.0f64, 4.0]));
        assert_eq!(acc, bytes([-5.0f64, 10.0]));
    }
}
