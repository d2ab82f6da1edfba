//! Floating-point accumulates, applied here: the core carries and checks
//! them (type, alignment, bounds) but has no floating point of its own.
//! Sum, min and max follow Rust's `f32`/`f64` (min and max prefer a
//! number to a NaN, which `MPI_MIN`/`MPI_MAX` leave open).

use rmx_core::collective::Op;
use rmx_core::onesided::Float;

/// Combines `other` into `acc`, element by element; `false` (nothing
/// changed) if the lengths differ or are not whole elements, or the
/// operation is not one floats have.
pub fn reduce(op: Op, ty: Float, acc: &mut [u8], other: &[u8]) -> bool {
    let n = ty.size();
    if acc.len() != other.len() || !acc.len().is_multiple_of(n) || !Float::allows(op) {
        return false;
    }
    // One body for both widths: the same operations on f32 or f64.
    macro_rules! combine {
        ($t:ty) => {
            for (a, b) in acc.chunks_exact_mut(n).zip(other.chunks_exact(n)) {
                let x = <$t>::from_ne_bytes(a.try_into().expect("one element"));
                let y = <$t>::from_ne_bytes(b.try_into().expect("one element"));
                let v = match op {
                    Op::Sum => x + y,
                    Op::Min => x.min(y),
                    Op::Max => x.max(y),
                    _ => y,
                };
                a.copy_from_slice(&v.to_ne_bytes());
            }
        };
    }
    match ty {
        Float::F32 => combine!(f32),
        Float::F64 => combine!(f64),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn each_operation_combines_elementwise_and_bad_shapes_change_nothing() {
        let mut acc = f64s(&[1.5, -2.0, 3.0]);
        assert!(reduce(
            Op::Sum,
            Float::F64,
            &mut acc,
            &f64s(&[0.25, 1.0, -3.0])
        ));
        assert_eq!(acc, f64s(&[1.75, -1.0, 0.0]));
        assert!(reduce(
            Op::Max,
            Float::F64,
            &mut acc,
            &f64s(&[f64::NAN, -5.0, 2.0])
        ));
        assert_eq!(acc, f64s(&[1.75, -1.0, 2.0]));
        assert!(reduce(
            Op::Replace,
            Float::F64,
            &mut acc,
            &f64s(&[9.0, 9.0, 9.0])
        ));
        assert_eq!(acc, f64s(&[9.0; 3]));
        let mut one = 2.5f32.to_ne_bytes().to_vec();
        assert!(reduce(
            Op::Min,
            Float::F32,
            &mut one,
            &(-1.0f32).to_ne_bytes()
        ));
        assert_eq!(one, (-1.0f32).to_ne_bytes());
        let before = acc.clone();
        assert!(!reduce(Op::BitXor, Float::F64, &mut acc, &f64s(&[1.0; 3])));
        assert!(!reduce(Op::Sum, Float::F64, &mut acc, &f64s(&[1.0; 2])));
        assert!(!reduce(Op::Sum, Float::F32, &mut acc[..6], &[0; 6]));
        assert_eq!(acc, before);
    }
}
