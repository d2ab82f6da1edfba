//! A rank's requests as C holds them: 64-bit handles (a slot and its
//! generation), so that a handle already ended, another rank's, or made
//! up is refused instead of naming whatever took its slot.

use rmx_linux::collective::CollReq;
use rmx_linux::rank::Req;

/// A request C may hold: 0 is none.
pub type rmx_request_t = u64;

/// The handle no request has (`RMX_REQUEST_NULL`).
pub const RMX_REQUEST_NULL: rmx_request_t = 0;

/// What a live request is.
pub(crate) enum Live {
    /// A receive, or a send of so many bytes.
    Msg(Req, Option<usize>),
    /// A collective, and where its result goes: `len` bytes of the
    /// request's data from `at` (its own until then) to `out`.
    Coll {
        req: CollReq,
        at: usize,
        out: *mut u8,
        len: usize,
    },
    /// A window's fence, started.
    Fence(Box<crate::held::Fencing>),
}

struct Slot<L> {
    generation: u32,
    live: Option<L>,
}

/// The live requests of one rank ([`Live`]s).
pub(crate) struct Requests<L = Live> {
    slots: Vec<Slot<L>>,
    free: Vec<u32>,
}

impl<L> Default for Requests<L> {
    fn default() -> Self {
        Requests {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<L> Requests<L> {
    /// Keeps `live`; its handle.
    pub(crate) fn insert(&mut self, live: L) -> rmx_request_t {
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                self.slots.push(Slot {
                    generation: 1,
                    live: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[at as usize];
        s.live = Some(live);
        (u64::from(s.generation) << 32) | (u64::from(at) + 1)
    }

    /// Takes the request `h` names out (to test it; [`put_back`] if it
    /// goes on), or `None` if `h` names no live request.
    ///
    /// [`put_back`]: Self::put_back
    pub(crate) fn take(&mut self, h: rmx_request_t) -> Option<L> {
        let (generation, at) = ((h >> 32) as u32, (h & 0xffff_ffff) as usize);
        let s = self.slots.get_mut(at.checked_sub(1)?)?;
        if s.generation != generation {
            return None;
        }
        let live = s.live.take()?;
        // Ended, unless put back: the slot's next request has a new handle.
        s.generation = s.generation.wrapping_add(1).max(1);
        self.free.push((at - 1) as u32);
        Some(live)
    }

    /// Keeps `live` again, taken by the last [`take`](Self::take) and not
    /// ended; its handle, unchanged.
    pub(crate) fn put_back(&mut self, h: rmx_request_t, live: L) -> rmx_request_t {
        let at = (h & 0xffff_ffff) as usize - 1;
        // `take` freed the slot last; nothing was inserted since.
        let freed = self.free.pop();
        assert_eq!(freed, Some(at as u32), "put back right after take");
        let s = &mut self.slots[at];
        s.generation = (h >> 32) as u32;
        s.live = Some(live);
        h
    }

    /// Takes every live request out (a rank that ends).
    pub(crate) fn drain(&mut self) -> Vec<L> {
        let live: Vec<L> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.live.take())
            .collect();
        self.slots.clear();
        self.free.clear();
        live
    }

    /// Requests still live.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle names its request until the request ends; afterwards,
    /// and for a handle made up or of a slot reused, nothing.
    #[test]
    fn stale_and_forged_handles_name_nothing() {
        let mut t = Requests::<u8>::default();
        let a = t.insert(7);
        assert_ne!(a, RMX_REQUEST_NULL);
        let live = t.take(a).expect("live");
        assert_eq!(t.put_back(a, live), a);
        assert!(t.take(a).is_some());
        assert!(t.take(a).is_none(), "ended");
        let b = t.insert(7);
        assert_ne!(a, b, "the slot's next request has a new handle");
        assert!(t.take(a).is_none());
        for forged in [RMX_REQUEST_NULL, u64::MAX, b + 1, b ^ (1 << 32), 1 << 32] {
            assert!(t.take(forged).is_none(), "{forged:x}");
        }
        assert_eq!(t.len(), 1);
        assert!(t.take(b).is_some());
        assert_eq!(t.len(), 0);
    }
}
