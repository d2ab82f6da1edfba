//! One context: the regions of one open of the device, and the requests
//! userspace makes of them decoded from the bytes the glue copied in.

use core::sync::atomic::AtomicU32;

use rmx_kernel::request::{self, Declare};
use rmx_kernel::{Desc, Error, Kernel, Regions, Slot};

/// Regions one context may declare at once (Open-MX's table has as many).
pub const SLOTS: usize = 256;

/// Words of the page userspace maps: the pinned count, then one
/// generation per slot.
pub const SHARED_WORDS: usize = SLOTS + 1;

/// One open of the device.
pub struct Ctx<'a> {
    pub regions: Regions<&'a mut [Slot], &'a [AtomicU32]>,
}

impl<'a> Ctx<'a> {
    /// A context over `slots` ([`SLOTS`] of them) publishing to `shared`
    /// (at least [`SHARED_WORDS`]), holding at most `limit` pages pinned;
    /// its descriptors seeded by `seed` (the glue numbers its contexts).
    pub fn new(
        slots: &'a mut [Slot],
        shared: &'a [AtomicU32],
        limit: u64,
        seed: u16,
    ) -> Result<Self, Error> {
        Ok(Ctx {
            regions: Regions::new(slots, shared, limit)?.seeded(seed),
        })
    }

    /// The bytes of segments a declaration's argument `arg` asks the glue
    /// to copy in.
    pub fn declare_len(arg: &[u8]) -> Result<usize, Error> {
        Ok(Declare::decode(arg)?.bytes())
    }

    /// Declares the region `arg` and the segments copied in (`segs`) name.
    pub fn declare<K: Kernel>(
        &mut self,
        k: &mut K,
        arg: &[u8],
        segs: &[u8],
    ) -> Result<Desc, Error> {
        let d = Declare::decode(arg)?;
        let segments = request::segments(d, segs)?;
        self.regions.declare(k, &segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_kernel::mock::Mock;
    use rmx_kernel::request::encode_segments;
    use rmx_kernel::{Segment, PAGE};

    extern crate std;
    use std::vec::Vec;

    #[test]
    fn a_declaration_decoded_from_user_bytes_names_its_region() {
        let mut slots: Vec<Slot> = (0..SLOTS).map(|_| Slot::default()).collect();
        let shared: Vec<AtomicU32> = (0..SHARED_WORDS).map(|_| AtomicU32::new(0)).collect();
        let mut c = Ctx::new(&mut slots, &shared, 64, 7).unwrap();
        let mut k = Mock::default();
        let segs = [Segment {
            addr: 0x10_0000,
            len: 3 * PAGE,
        }];
        let arg = Declare {
            count: 1,
            segments: 0x7000,
        }
        .encode();
        assert_eq!(Ctx::declare_len(&arg), Ok(16));
        assert_eq!(Ctx::declare_len(&arg[..8]), Err(Error::Invalid));
        let mut buf = [0u8; 16];
        encode_segments(&segs, &mut buf).unwrap();
        let d = c.declare(&mut k, &arg, &buf).unwrap();
        assert_eq!(c.regions.region(d).unwrap().pages(), 3);
        assert_eq!(k.watched.get(&d.slot()), Some(&(0x10_0000, 3 * PAGE)));
        assert_eq!(c.declare(&mut k, &arg, &buf[..8]), Err(Error::Invalid));
        let mut more: Vec<Slot> = (0..=SLOTS).map(|_| Slot::default()).collect();
        assert!(
            Ctx::new(&mut more, &shared, 1, 0).is_err(),
            "a word per slot"
        );
    }
}
