//! The standard ABI's conversions of handles to and from `int` (for
//! Fortran and tools), and address arithmetic: the functions of the ABI
//! that return something other than an error code.

use std::ffi::c_int;

use crate::abi::{Handle, PREDEFINED_END};

/// Bits of an `int` that carry a table index; the kind of handle sits above.
const INDEX_BITS: u32 = 24;

/// A handle as an `int`: predefined ones keep their value, rmx's own
/// carry their kind and index (`-1` for one past 2^24 objects).
pub fn to_int(h: Handle) -> c_int {
    if h < PREDEFINED_END {
        return h as c_int;
    }
    let (kind, index) = (h >> 32, h & 0xffff_ffff);
    if kind == 0 || kind > 0x7f || index >> INDEX_BITS != 0 {
        return -1;
    }
    ((kind << INDEX_BITS) | index) as c_int
}

/// The handle an `int` from [`to_int`] stands for.
pub fn from_int(i: c_int) -> Handle {
    let i = i as u32 as usize;
    if i < PREDEFINED_END {
        return i;
    }
    ((i >> INDEX_BITS) << 32) | (i & ((1 << INDEX_BITS) - 1))
}

macro_rules! conversions {
    ($($to:ident $from:ident)*) => {$(
        /// A handle as an `int`.
        #[no_mangle]
        pub extern "C" fn $to(h: Handle) -> c_int {
            to_int(h)
        }

        /// The handle an `int` stands for.
        #[no_mangle]
        pub extern "C" fn $from(i: c_int) -> Handle {
            from_int(i)
        }
    )*};
}

conversions! {
    MPI_Comm_toint MPI_Comm_fromint
    MPI_Errhandler_toint MPI_Errhandler_fromint
    MPI_File_toint MPI_File_fromint
    MPI_Group_toint MPI_Group_fromint
    MPI_Info_toint MPI_Info_fromint
    MPI_Message_toint MPI_Message_fromint
    MPI_Op_toint MPI_Op_fromint
    MPI_Request_toint MPI_Request_fromint
    MPI_Session_toint MPI_Session_fromint
    MPI_Type_toint MPI_Type_fromint
    MPI_Win_toint MPI_Win_fromint
}

/// `base + disp`, as an address.
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

/// `a - b`, as addresses.
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Table;

    #[test]
    fn handles_go_to_int_and_back() {
        let mut t = Table::new(2);
        t.insert(());
        let h = t.insert(());
        for h in [0x101, 0x180, 0, h] {
            assert_eq!(from_int(to_int(h)), h, "{h:#x}");
        }
        assert_eq!(to_int(0x101), 0x101);
        assert_eq!(to_int((2 << 32) | (1 << 24)), -1);
    }
}
