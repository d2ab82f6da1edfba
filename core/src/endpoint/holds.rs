//! Receive buffers kept for unexpected eager messages. A message nobody has
//! asked for stays in the shared-pool buffer it arrived in, as MVAPICH keeps
//! unexpected vbufs; the buffer goes back to the pool when the last message
//! held in it has been received (a packed packet may hold several).

use heapless::Vec;

use crate::nic::RxBuf;

/// Up to `N` held buffers with their counts of messages still held.
pub(crate) struct Holds<const N: usize> {
    bufs: [RxBuf; N],
    refs: [u16; N],
    free: Vec<u16, N>,
}

impl<const N: usize> Holds<N> {
    pub fn new() -> Self {
        let mut free = Vec::new();
        for i in (0..N.min(u16::MAX as usize) as u16).rev() {
            let _ = free.push(i);
        }
        Holds {
            bufs: [RxBuf(0); N],
            refs: [0; N],
            free,
        }
    }

    /// Buffers held now.
    pub fn len(&self) -> usize {
        N.min(u16::MAX as usize) - self.free.len()
    }

    /// Whether one more buffer can be held.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// One more message held in `buf`; `current` is the hold already made
    /// for the packet being handled, if any. `None`: no room.
    pub fn hold(&mut self, buf: RxBuf, current: &mut Option<u16>) -> Option<u16> {
        let h = match *current {
            Some(h) => h,
            None => {
                let h = self.free.pop()?;
                self.bufs[h as usize] = buf;
                self.refs[h as usize] = 0;
                *current = Some(h);
                h
            }
        };
        self.refs[h as usize] = self.refs[h as usize].saturating_add(1);
        Some(h)
    }

    /// The buffer behind hold `h`.
    pub fn buf(&self, h: u16) -> RxBuf {
        self.bufs[h as usize]
    }

    /// A message held in `h` was received; the buffer, once none is left in it.
    pub fn release(&mut self, h: u16) -> Option<RxBuf> {
        let r = &mut self.refs[h as usize];
        *r = r.saturating_sub(1);
        if *r > 0 {
            return None;
        }
        let _ = self.free.push(h);
        Some(self.bufs[h as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_returns_with_its_last_message() {
        let mut h: Holds<2> = Holds::new();
        let mut cur = None;
        let a = h.hold(RxBuf(7), &mut cur).unwrap();
        let b = h.hold(RxBuf(7), &mut cur).unwrap();
        assert_eq!(a, b, "two messages of one packet share a hold");
        let mut cur2 = None;
        let c = h.hold(RxBuf(9), &mut cur2).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h.hold(RxBuf(11), &mut None).is_none(), "no room");
        assert_eq!(h.release(a), None);
        assert_eq!(h.release(b), Some(RxBuf(7)));
        assert_eq!(h.release(c), Some(RxBuf(9)));
        assert_eq!(h.len(), 0);
    }
}
