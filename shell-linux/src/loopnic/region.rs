//! Memory regions and keys of one protection domain, checked on every access.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Access rights of a region (verbs' `IBV_ACCESS_*` subset).
pub mod access {
    pub const LOCAL_WRITE: u8 = 1;
    pub const REMOTE_WRITE: u8 = 2;
    pub const REMOTE_READ: u8 = 4;
}

/// A registered region as the NIC sees it.
#[derive(Clone, Copy, Debug)]
struct Region {
    addr: usize,
    len: usize,
    access: u8,
    key: u32,
}

/// Why an access was refused; no memory was touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// No live region has this key.
    BadKey,
    /// The range is not inside the region.
    OutOfBounds,
    /// The region does not grant this access.
    Access,
}

/// A protection domain: a table of regions. A key is a slot index (high 16
/// bits) and that slot's generation (low 16 bits, from 1). A slot's
/// generation only grows and a slot whose generation is spent is never used
/// again, so no key is ever handed out twice: a key of a deregistered region
/// can never name another one. The price is a finite supply, 2^32 - 2^16
/// registrations per domain; after that registration fails.
#[derive(Debug, Default)]
pub struct Pd {
    table: RwLock<Table>,
    /// Bumped by every registration change; validates [`KeyCache`] entries.
    version: AtomicU64,
}

#[derive(Debug, Default)]
struct Table {
    /// Per slot: its latest generation, and the region if live.
    slots: Vec<(u16, Option<Region>)>,
    /// Free slots with generations left, least recently freed first, so a
    /// register/deregister loop spreads over every free slot.
    free: std::collections::VecDeque<u32>,
}

impl Table {
    /// The live region `key` names.
    fn find(&self, key: u32) -> Result<Region, KeyError> {
        self.slots
            .get((key >> 16) as usize)
            .and_then(|s| s.1)
            .filter(|r| r.key == key)
            .ok_or(KeyError::BadKey)
    }
}

/// Slots a domain can have: the index must fit the key's high 16 bits.
const MAX_SLOTS: usize = 1 << 16;

/// Registration refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// Every key of the domain has been used once (keys are never reused).
    KeysExhausted,
    /// The range wraps past the end of the address space.
    BadRange,
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::KeysExhausted => f.write_str("every memory key of the domain was used"),
            RegisterError::BadRange => f.write_str("the range wraps past the end of memory"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// A port's cache of the last few regions it checked, valid while the
/// domain's version is unchanged: a steady stream of sends gathering from a
/// bounce-slot arena and a registered user buffer then costs one shared load
/// per entry instead of a lock.
#[derive(Debug, Default)]
pub struct KeyCache {
    hits: [Option<(u64, Region)>; 4],
    next: usize,
}

impl Region {
    fn covers(&self, addr: usize, len: usize, need: u8) -> Result<(), KeyError> {
        let end = addr.checked_add(len).ok_or(KeyError::OutOfBounds)?;
        // A region never wraps: `register` refuses such a range.
        if addr < self.addr || end > self.addr + self.len {
            return Err(KeyError::OutOfBounds);
        }
        if self.access & need != need {
            return Err(KeyError::Access);
        }
        Ok(())
    }
}

/// A registration handle: on `loop` the key is both lkey and rkey.
pub use crate::transport::Mr;

impl Pd {
    /// Registers `[addr, addr+len)` with `access` rights: operations through
    /// the key then read (and, with the rights, write) that memory, from
    /// this thread or the NIC's.
    ///
    /// # Safety
    /// The range must be memory the caller may let the NIC access, valid and
    /// not otherwise borrowed in a way its accesses would violate, until the
    /// region is deregistered and every operation that named it completed.
    pub unsafe fn register(
        &self,
        addr: usize,
        len: usize,
        access: u8,
    ) -> Result<Mr, RegisterError> {
        addr.checked_add(len).ok_or(RegisterError::BadRange)?;
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let idx = match t.free.pop_front() {
            Some(i) => i as usize,
            None if t.slots.len() < MAX_SLOTS => {
                t.slots.push((0, None));
                t.slots.len() - 1
            }
            None => return Err(RegisterError::KeysExhausted),
        };
        let slot = &mut t.slots[idx];
        slot.0 += 1;
        let key = (idx as u32) << 16 | slot.0 as u32;
        slot.1 = Some(Region {
            addr,
            len,
            access,
            key,
        });
        self.version.fetch_add(1, Ordering::Release);
        Ok(Mr { addr, len, key })
    }

    /// Removes a region; later accesses with its key fail with `BadKey`.
    pub fn deregister(&self, mr: Mr) -> Result<(), KeyError> {
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let idx = (mr.key >> 16) as usize;
        match t.slots.get_mut(idx) {
            Some((gen, slot @ Some(_))) if slot.map(|r| r.key) == Some(mr.key) => {
                *slot = None;
                // A spent generation retires the slot for good.
                let reusable = *gen < u16::MAX;
                self.version.fetch_add(1, Ordering::Release);
                if reusable {
                    t.free.push_back(idx as u32);
                }
                Ok(())
            }
            _ => Err(KeyError::BadKey),
        }
    }

    fn lookup(&self, key: u32) -> Result<Region, KeyError> {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        t.find(key)
    }

    /// Checks that `key` covers `[addr, addr+len)` with the `need` rights
    /// (0 for a local read, which every region allows).
    pub fn check(&self, key: u32, addr: usize, len: usize, need: u8) -> Result<(), KeyError> {
        self.lookup(key)?.covers(addr, len, need)
    }

    /// Runs `copy` if `key` covers `[addr, addr+len)` with the `need`
    /// rights, holding the table while it runs: a deregistration waits
    /// for a copy under way, and no copy starts after it. A remote access
    /// is checked here, when it moves bytes, not only when it was posted:
    /// the owner may have deregistered (and freed) the memory since.
    pub fn access(
        &self,
        key: u32,
        addr: usize,
        len: usize,
        need: u8,
        copy: &mut dyn FnMut(),
    ) -> Result<(), KeyError> {
        let t = self.table.read().unwrap_or_else(|e| e.into_inner());
        t.find(key)?.covers(addr, len, need)?;
        copy();
        Ok(())
    }

    /// [`check`](Self::check) through a port's one-entry cache.
    #[inline]
    pub fn check_cached(
        &self,
        cache: &mut KeyCache,
        key: u32,
        addr: usize,
        len: usize,
        need: u8,
    ) -> Result<(), KeyError> {
        let v = self.version.load(Ordering::Acquire);
        for (cv, r) in cache.hits.iter().flatten() {
            if *cv == v && r.key == key {
                return r.covers(addr, len, need);
            }
        }
        let r = self.lookup(key)?;
        cache.hits[cache.next] = Some((v, r));
        cache.next = (cache.next + 1) % cache.hits.len();
        r.covers(addr, len, need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registers a range nothing accesses: key bookkeeping only.
    fn reg(pd: &Pd, addr: usize, len: usize, access: u8) -> Result<Mr, RegisterError> {
        // SAFETY: no operation ever names these ranges.
        unsafe { pd.register(addr, len, access) }
    }

    #[test]
    fn keys_check_bounds_rights_and_staleness() {
        let pd = Pd::default();
        let mr = reg(&pd, 0x1000, 0x100, access::REMOTE_READ).unwrap();
        assert_eq!(pd.check(mr.key, 0x1000, 0x100, access::REMOTE_READ), Ok(()));
        assert_eq!(pd.check(mr.key, 0x10ff, 2, 0), Err(KeyError::OutOfBounds));
        assert_eq!(pd.check(mr.key, 0xfff, 1, 0), Err(KeyError::OutOfBounds));
        assert_eq!(
            pd.check(mr.key, usize::MAX, 2, 0),
            Err(KeyError::OutOfBounds)
        );
        assert_eq!(
            pd.check(mr.key, 0x1000, 1, access::REMOTE_WRITE),
            Err(KeyError::Access)
        );
        assert_eq!(
            pd.check(mr.key ^ 0x10000, 0x1000, 1, 0),
            Err(KeyError::BadKey)
        );
        let mut cache = KeyCache::default();
        assert_eq!(pd.check_cached(&mut cache, mr.key, 0x1000, 1, 0), Ok(()));
        pd.deregister(mr).unwrap();
        assert_eq!(pd.check(mr.key, 0x1000, 1, 0), Err(KeyError::BadKey));
        assert_eq!(
            pd.check_cached(&mut cache, mr.key, 0x1000, 1, 0),
            Err(KeyError::BadKey),
            "a cached check must see the deregistration"
        );
        let again = reg(&pd, 0x1000, 0x100, 0).unwrap();
        assert_ne!(again.key, mr.key, "a stale key never names the new region");
        assert_eq!(pd.deregister(mr), Err(KeyError::BadKey));
        assert_eq!(reg(&pd, usize::MAX - 4, 8, 0), Err(RegisterError::BadRange));
    }

    /// Keys once carried 8 bits of a global counter: after 256
    /// registrations a stale key named a new region again.
    #[test]
    fn a_stale_key_is_never_accepted_however_many_registrations_follow() {
        let pd = Pd::default();
        let first = reg(&pd, 0x1000, 0x100, 0).unwrap();
        pd.deregister(first).unwrap();
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(first.key));
        // One slot reused past its whole generation space, then more.
        for i in 0..70_000u32 {
            let mr = reg(&pd, 0x1000, 0x100, 0).unwrap();
            assert!(
                seen.insert(mr.key),
                "key {:#x} handed out twice at {i}",
                mr.key
            );
            assert_eq!(pd.check(first.key, 0x1000, 1, 0), Err(KeyError::BadKey));
            pd.deregister(mr).unwrap();
        }
        let t = pd.table.read().unwrap();
        assert!(t.slots.len() >= 2, "a spent slot was retired");
        assert!(t.slots[0].0 == u16::MAX && !t.free.contains(&0));
    }

    #[test]
    fn a_domain_whose_keys_are_spent_refuses_to_register() {
        let pd = Pd::default();
        {
            let mut t = pd.table.write().unwrap();
            t.slots = vec![(u16::MAX, None); MAX_SLOTS];
        }
        assert_eq!(reg(&pd, 0x1000, 1, 0), Err(RegisterError::KeysExhausted));
    }
}
