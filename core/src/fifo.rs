//! Lists threaded through a table the caller owns (the peer table, the
//! bounce slots, requests, matching entries, held buffers): each entry keeps
//! one `next` link per list it can be on, so a list costs its ends and
//! grows with the table. [`Fifo`] keeps order; [`Stack`] is a free list.

/// End of a list.
pub(crate) const NIL: u16 = u16::MAX;

/// An entry that can be on `N` lists at once.
pub(crate) trait Node {
    fn next(&self, list: usize) -> u16;
    fn set_next(&mut self, list: usize, next: u16);
}

/// One list: its ends and length. `list` names which of each entry's links
/// it uses; an entry is on a given list at most once (the caller's rule).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fifo {
    head: u16,
    tail: u16,
    len: u16,
}

impl Fifo {
    pub const EMPTY: Fifo = Fifo {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    pub fn head(&self) -> Option<u16> {
        (self.head != NIL).then_some(self.head)
    }

    pub fn tail(&self) -> Option<u16> {
        (self.tail != NIL).then_some(self.tail)
    }

    pub fn push_back<T: Node>(&mut self, nodes: &mut [T], list: usize, i: u16) {
        nodes[i as usize].set_next(list, NIL);
        match self.tail() {
            None => self.head = i,
            Some(t) => nodes[t as usize].set_next(list, i),
        }
        self.tail = i;
        self.len += 1;
    }

    pub fn pop_front<T: Node>(&mut self, nodes: &[T], list: usize) -> Option<u16> {
        let i = self.head()?;
        self.head = nodes[i as usize].next(list);
        if self.head == NIL {
            self.tail = NIL;
        }
        self.len -= 1;
        Some(i)
    }

    /// The entries in order.
    pub fn iter<'a, T: Node>(&self, nodes: &'a [T], list: usize) -> impl Iterator<Item = u16> + 'a {
        let mut at = self.head;
        core::iter::from_fn(move || {
            let i = at;
            (i != NIL).then(|| {
                at = nodes[i as usize].next(list);
                i
            })
        })
    }
}

/// A last-in-first-out list: the free entries of a table. The entry freed
/// last is taken first, while it is still in cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stack {
    head: u16,
    len: u16,
}

impl Stack {
    /// Every entry of `nodes` (the first `NIL` of them), entry 0 on top.
    pub fn full<T: Node>(nodes: &mut [T], list: usize) -> Stack {
        let n = nodes.len().min(NIL as usize);
        for (i, e) in nodes[..n].iter_mut().enumerate() {
            e.set_next(list, if i + 1 < n { i as u16 + 1 } else { NIL });
        }
        Stack {
            head: if n > 0 { 0 } else { NIL },
            len: n as u16,
        }
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    #[inline]
    pub fn pop<T: Node>(&mut self, nodes: &[T], list: usize) -> Option<u16> {
        let i = (self.head != NIL).then_some(self.head)?;
        self.head = nodes[i as usize].next(list);
        self.len -= 1;
        Some(i)
    }

    /// Puts entry `i` on top; the caller makes sure it is not on the stack.
    #[inline]
    pub fn push<T: Node>(&mut self, nodes: &mut [T], list: usize, i: u16) {
        nodes[i as usize].set_next(list, self.head);
        self.head = i;
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct N([u16; 2]);
    impl Node for N {
        fn next(&self, l: usize) -> u16 {
            self.0[l]
        }
        fn set_next(&mut self, l: usize, n: u16) {
            self.0[l] = n;
        }
    }

    #[test]
    fn two_lists_through_one_table_keep_their_order() {
        let mut t = [N([NIL; 2]); 4];
        let (mut a, mut b) = (Fifo::EMPTY, Fifo::EMPTY);
        a.push_back(&mut t, 0, 2);
        a.push_back(&mut t, 0, 0);
        b.push_back(&mut t, 1, 0);
        a.push_back(&mut t, 0, 3);
        assert_eq!(a.iter(&t, 0).collect::<heapless::Vec<u16, 4>>(), [2, 0, 3]);
        assert_eq!(b.iter(&t, 1).collect::<heapless::Vec<u16, 4>>(), [0]);
        assert_eq!((a.head(), a.tail(), a.len()), (Some(2), Some(3), 3));
        assert_eq!(a.pop_front(&t, 0), Some(2));
        assert_eq!(a.pop_front(&t, 0), Some(0));
        a.push_back(&mut t, 0, 1);
        assert_eq!((a.pop_front(&t, 0), a.pop_front(&t, 0)), (Some(3), Some(1)));
        assert!(a.is_empty() && a.pop_front(&t, 0).is_none() && a.tail().is_none());
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn a_stack_gives_back_the_entry_freed_last() {
        let mut t = [N([NIL; 2]); 3];
        let mut s = Stack::full(&mut t, 1);
        assert_eq!((s.len(), s.pop(&t, 1), s.pop(&t, 1)), (3, Some(0), Some(1)));
        s.push(&mut t, 1, 0);
        assert_eq!(
            (s.pop(&t, 1), s.pop(&t, 1), s.pop(&t, 1)),
            (Some(0), Some(2), None)
        );
        assert!(s.is_empty() && Stack::full::<N>(&mut [], 0).is_empty());
    }
}
