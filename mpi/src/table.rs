//! Handles rmx gives out (communicators, requests, windows): indices
//! into a table, offset past the ABI's predefined values, so that a
//! handle is looked up, never dereferenced, and a forged or stale one is
//! an error rather than a wild pointer.

use crate::abi::{Handle, PREDEFINED_END};

/// The objects of one kind, each named by a handle.
pub struct Table<T> {
    base: Handle,
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

/// The span of handle values each kind owns.
const SPAN: Handle = 1 << 32;

impl<T> Table<T> {
    /// A table whose handles are `kind`'s span (1, 2, …).
    pub fn new(kind: usize) -> Table<T> {
        const _: () = assert!(SPAN > PREDEFINED_END);
        Table {
            base: kind * SPAN,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Keeps `v`: its handle.
    pub fn insert(&mut self, v: T) -> Handle {
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                self.slots.len() - 1
            }
        };
        self.base + i
    }

    fn index(&self, h: Handle) -> Option<usize> {
        let i = h.checked_sub(self.base)?;
        (i < self.slots.len()).then_some(i)
    }

    pub fn get(&self, h: Handle) -> Option<&T> {
        self.slots[self.index(h)?].as_ref()
    }

    pub fn get_mut(&mut self, h: Handle) -> Option<&mut T> {
        let i = self.index(h)?;
        self.slots[i].as_mut()
    }

    /// Takes the object `h` names out; its handle may be given again.
    pub fn remove(&mut self, h: Handle) -> Option<T> {
        let i = self.index(h)?;
        let v = self.slots[i].take()?;
        self.free.push(i);
        Some(v)
    }

    /// Every object held, to change in place.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Every object, taken out.
    pub fn drain(&mut self) -> Vec<T> {
        self.free.clear();
        std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_stale_and_predefined_handles_name_nothing() {
        let mut t = Table::new(2);
        let a = t.insert("a");
        assert!(a > PREDEFINED_END);
        assert_eq!(t.get(a), Some(&"a"));
        for h in [0, 0x101, a + 1, a - 1, usize::MAX] {
            assert_eq!(t.get(h), None, "{h:#x}");
        }
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.get(a), None);
        assert_eq!(t.remove(a), None);
        assert_eq!(Table::<u8>::new(1).get(a), None, "another kind's handle");
    }
}
