//! The receive pool: one registered region cut into equal buffers, every
//! one posted to the shared receive queue until a packet fills it, then
//! held (readable) until the core hands it back. A few are kept back
//! (spare) and posted once the queue runs low.

use std::ptr;

use ibverbs_sys as ib;

use super::device::Device;

pub struct Pool {
    base: *mut u8,
    bytes: usize,
    size: usize,
    mr: *mut ib::ibv_mr,
    bufs: Vec<Buf>,
    /// Buffers never posted yet, kept for when the queue runs low.
    spare: Vec<u32>,
}

/// Where one buffer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buf {
    /// On the shared receive queue.
    Posted,
    /// Filled with a packet of this many bytes, not yet handed back.
    Held(u32),
    /// Kept back, never posted.
    Spare,
}

impl Pool {
    /// `n + spare` buffers of `size` bytes, registered on `dev`; `n`
    /// posted.
    pub fn new(dev: &Device, n: u32, spare: u32, size: u32) -> Result<Pool, String> {
        let posted = n;
        let (n, size) = (n as usize + spare as usize, size as usize);
        let bytes = n
            .checked_mul(size)
            .filter(|&b| b > 0)
            .ok_or_else(|| format!("a receive pool of {n} buffers of {size} bytes"))?;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "a receive pool of {bytes} bytes: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut pool = Pool {
            base: base.cast(),
            bytes,
            size,
            mr: ptr::null_mut(),
            bufs: vec![Buf::Spare; n],
            spare: (posted..n as u32).rev().collect(),
        };
        // SAFETY: the mapping lives until the pool drops, after the MR.
        pool.mr = unsafe {
            ib::ibv_reg_mr(
                dev.pd,
                base,
                bytes,
                ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32,
            )
        };
        if pool.mr.is_null() {
            return Err(format!(
                "ibv_reg_mr of the receive pool ({bytes} bytes): {} (raise `ulimit -l`)",
                std::io::Error::last_os_error()
            ));
        }
        for b in 0..posted {
            pool.post(dev, b)?;
        }
        Ok(pool)
    }

    /// Posts every spare buffer; how many.
    pub fn post_spare(&mut self, dev: &Device) -> u32 {
        let mut n = 0;
        while let Some(b) = self.spare.pop() {
            if self.post(dev, b).is_err() {
                self.spare.push(b);
                break;
            }
            n += 1;
        }
        n
    }

    /// Posts buffer `buf` to the shared receive queue.
    fn post(&mut self, dev: &Device, buf: u32) -> Result<(), String> {
        let mut sge = ib::ibv_sge {
            addr: self.base as u64 + buf as u64 * self.size as u64,
            length: self.size as u32,
            // SAFETY: the MR lives as long as the pool.
            lkey: unsafe { (*self.mr).lkey },
        };
        let mut wr = ib::ibv_recv_wr {
            wr_id: buf as u64,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the provider's op on this device's SRQ; the buffer is
        // inside the registered pool and no longer read by anyone.
        let rc = unsafe {
            match (*dev.ctx).ops.post_srq_recv {
                Some(f) => f(dev.srq, &mut wr, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        match rc {
            0 => {
                self.bufs[buf as usize] = Buf::Posted;
                Ok(())
            }
            e => Err(format!(
                "ibv_post_srq_recv: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Buffer `buf` now holds a packet of `len` bytes.
    pub fn filled(&mut self, buf: u32, len: u32) -> bool {
        match self.bufs.get_mut(buf as usize) {
            Some(h @ Buf::Posted) if len as usize <= self.size => {
                *h = Buf::Held(len);
                true
            }
            _ => false,
        }
    }

    pub fn bytes(&self, buf: u32) -> Option<&[u8]> {
        let Buf::Held(len) = *self.bufs.get(buf as usize)? else {
            return None;
        };
        let len = len as usize;
        // SAFETY: a held buffer lies inside the mapping and the device
        // writes it no more until it is posted again; `len <= size`.
        Some(unsafe { std::slice::from_raw_parts(self.base.add(buf as usize * self.size), len) })
    }

    /// Posts a held buffer again; `false` for one not held.
    pub fn repost(&mut self, dev: &Device, buf: u32) -> bool {
        match self.bufs.get(buf as usize) {
            Some(Buf::Held(_)) => self.post(dev, buf).is_ok(),
            _ => false,
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: registered once here and mapped once; the shared receive
        // queue's buffers are no longer written once the queue pairs are
        // gone (the port drops them first).
        unsafe {
            if !self.mr.is_null() {
                ib::ibv_dereg_mr(self.mr);
            }
            libc::munmap(self.base.cast(), self.bytes);
        }
    }
}
