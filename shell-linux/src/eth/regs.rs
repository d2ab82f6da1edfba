//! An `eth` port's registrations: the ranges its sends may read, by key.
//! A frame names memory by address and key; the port reads only memory a
//! live registration of that key covers. Through rmx.ko a user buffer's
//! registration also holds the module region covering it, so a frame's
//! data can be sent from the region's pinned pages.

use rmx_core::{PostError, RegError};

use crate::kmod::Desc;
use crate::transport::Sge;

/// One registered range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    pub addr: usize,
    pub len: usize,
    /// The module region holding the range, and the range's offset in it.
    pub region: Option<(Desc, u64)>,
    /// The module could not send from the region: the port copies the
    /// range's bytes itself for the rest of the registration.
    pub copied: bool,
}

/// Registrations by key − 1 (key 0 names none).
#[derive(Default)]
pub struct Regs {
    slots: Vec<Option<Reg>>,
    free: Vec<u32>,
}

impl Regs {
    /// Registers `reg`: its key.
    pub fn add(&mut self, reg: Reg) -> Result<u32, RegError> {
        reg.addr.checked_add(reg.len).ok_or(RegError::NoResources)?;
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None if self.slots.len() < u32::MAX as usize - 1 => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => return Err(RegError::NoResources),
        };
        self.slots[i] = Some(reg);
        Ok(i as u32 + 1)
    }

    /// The live registration of `key`.
    pub fn get(&self, key: u32) -> Option<Reg> {
        (key as usize)
            .checked_sub(1)
            .and_then(|i| self.slots.get(i))
            .copied()
            .flatten()
    }

    /// Ends the registration of `key` if it is of `[addr, addr + len)`:
    /// the registration ended, `None` (nothing done) for any other.
    pub fn remove(&mut self, key: u32, addr: usize, len: usize) -> Option<Reg> {
        let reg = self.get(key).filter(|r| r.addr == addr && r.len == len)?;
        self.slots[key as usize - 1] = None;
        self.free.push(key - 1);
        Some(reg)
    }

    /// Checks that every entry lies inside the registration its key names:
    /// the bytes they hold together.
    pub fn check(&self, sges: &[Sge]) -> Result<usize, PostError> {
        let mut total = 0usize;
        for s in sges {
            let reg = self.get(s.key).ok_or(PostError::Access)?;
            let end = s.addr.checked_add(s.len).ok_or(PostError::Access)?;
            if s.addr < reg.addr || end > reg.addr + reg.len {
                return Err(PostError::Access);
            }
            total = total.checked_add(s.len).ok_or(PostError::Access)?;
        }
        Ok(total)
    }

    /// Sends from `key`'s range are copied by the port from now on.
    pub fn copy_from_now(&mut self, key: u32) {
        if let Some(Some(r)) = (key as usize)
            .checked_sub(1)
            .and_then(|i| self.slots.get_mut(i))
        {
            r.copied = true;
        }
    }

    /// Where `s` (checked) lies in a module region: its descriptor and
    /// offset, if its registration holds one it sends from.
    pub fn region_of(&self, s: &Sge) -> Option<(Desc, u64)> {
        let reg = self.get(s.key).filter(|r| !r.copied)?;
        let (d, base) = reg.region?;
        let inside = s.addr.checked_sub(reg.addr)? as u64;
        Some((d, base.checked_add(inside)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(addr: usize, len: usize, key: u32) -> Sge {
        Sge { addr, len, key }
    }

    #[test]
    fn an_entry_must_lie_inside_its_keys_live_registration() {
        let mut r = Regs::default();
        let k = r
            .add(Reg {
                addr: 1000,
                len: 100,
                region: None,
                copied: false,
            })
            .unwrap();
        assert_eq!(r.check(&[sge(1000, 100, k), sge(1050, 10, k)]), Ok(110));
        assert_eq!(r.check(&[sge(1050, 51, k)]), Err(PostError::Access));
        assert_eq!(r.check(&[sge(999, 1, k)]), Err(PostError::Access));
        assert_eq!(r.check(&[sge(1000, 1, 0)]), Err(PostError::Access));
        assert_eq!(r.check(&[sge(1000, 1, k + 1)]), Err(PostError::Access));
        assert_eq!(
            r.check(&[sge(usize::MAX, 2, k)]),
            Err(PostError::Access),
            "an end past the address space"
        );
        assert_eq!(r.remove(k, 1000, 99), None, "not this registration");
        assert!(r.remove(k, 1000, 100).is_some());
        assert_eq!(r.check(&[sge(1000, 1, k)]), Err(PostError::Access));
        assert_eq!(r.remove(k, 1000, 100), None, "ended once");
        assert_eq!(
            r.add(Reg {
                addr: usize::MAX,
                len: 1,
                region: None,
                copied: false,
            }),
            Err(RegError::NoResources)
        );
    }

    #[test]
    fn an_entry_is_found_in_its_registrations_region() {
        let mut r = Regs::default();
        let plain = r
            .add(Reg {
                addr: 0,
                len: 10,
                region: None,
                copied: false,
            })
            .unwrap();
        let k = r
            .add(Reg {
                addr: 5000,
                len: 3000,
                region: Some((Desc(7), 904)),
                copied: false,
            })
            .unwrap();
        assert_eq!(r.region_of(&sge(5100, 10, k)), Some((Desc(7), 1004)));
        assert_eq!(r.region_of(&sge(0, 10, plain)), None);
        assert_eq!(r.region_of(&sge(5100, 10, 99)), None);
        r.copy_from_now(k);
        assert_eq!(r.region_of(&sge(5100, 10, k)), None, "copied from now on");
        assert_eq!(r.get(k).unwrap().region, Some((Desc(7), 904)), "still held");
        r.copy_from_now(0);
        r.copy_from_now(99);
    }
}
