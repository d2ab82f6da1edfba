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

/// A protection domain: a table of regions. Keys carry a generation in their
/// low byte, so a key of a deregistered region never names its successor.
#[derive(Debug, Default)]
pub struct Pd {
    regions: RwLock<Vec<Option<Region>>>,
    /// Bumped by every registration change; validates [`KeyCache`] entries.
    version: AtomicU64,
}

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
        if addr < self.addr || end > self.addr + self.len {
            return Err(KeyError::OutOfBounds);
        }
        if self.access & need != need {
            return Err(KeyError::Access);
        }
        Ok(())
    }
}

/// A registration handle: the key is both lkey and rkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    pub addr: usize,
    pub len: usize,
    pub key: u32,
}

impl Pd {
    /// Registers `[addr, addr+len)` with `access` rights.
    pub fn register(&self, addr: usize, len: usize, access: u8) -> Mr {
        let mut t = self.regions.write().unwrap_or_else(|e| e.into_inner());
        let idx = t.iter().position(Option::is_none).unwrap_or_else(|| {
            t.push(None);
            t.len() - 1
        });
        // Generation from the slot's reuse count, kept in the key's low byte.
        static GEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let gen = GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & 0xff;
        let key = ((idx as u32) << 8) | gen;
        t[idx] = Some(Region {
            addr,
            len,
            access,
            key,
        });
        self.version.fetch_add(1, Ordering::Release);
        Mr { addr, len, key }
    }

    /// Removes a region; later accesses with its key fail with `BadKey`.
    pub fn deregister(&self, mr: Mr) -> Result<(), KeyError> {
        let mut t = self.regions.write().unwrap_or_else(|e| e.into_inner());
        match t.get_mut((mr.key >> 8) as usize) {
            Some(slot @ Some(_)) if slot.map(|r| r.key) == Some(mr.key) => {
                *slot = None;
                self.version.fetch_add(1, Ordering::Release);
                Ok(())
            }
            _ => Err(KeyError::BadKey),
        }
    }

    fn lookup(&self, key: u32) -> Result<Region, KeyError> {
        let t = self.regions.read().unwrap_or_else(|e| e.into_inner());
        t.get((key >> 8) as usize)
            .copied()
            .flatten()
            .filter(|r| r.key == key)
            .ok_or(KeyError::BadKey)
    }

    /// Checks that `key` covers `[addr, addr+len)` with the `need` rights
    /// (0 for a local read, which every region allows).
    pub fn check(&self, key: u32, addr: usize, len: usize, need: u8) -> Result<(), KeyError> {
        self.lookup(key)?.covers(addr, len, need)
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

    #[test]
    fn keys_check_bounds_rights_and_staleness() {
        let pd = Pd::default();
        let mr = pd.register(0x1000, 0x100, access::REMOTE_READ);
        assert_eq!(pd.check(mr.key, 0x1000, 0x100, access::REMOTE_READ), Ok(()));
        assert_eq!(pd.check(mr.key, 0x10ff, 2, 0), Err(KeyError::OutOfBounds));
        assert_eq!(pd.check(mr.key, 0xfff, 1, 0), Err(KeyError::OutOfBounds));
        assert_eq!(
            pd.check(mr.key, 0x1000, 1, access::REMOTE_WRITE),
            Err(KeyError::Access)
        );
        assert_eq!(
            pd.check(mr.key ^ 0x100, 0x1000, 1, 0),
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
        let again = pd.register(0x1000, 0x100, 0);
        assert_ne!(again.key, mr.key, "a stale key never names the new region");
        assert_eq!(pd.deregister(mr), Err(KeyError::BadKey));
    }
}
