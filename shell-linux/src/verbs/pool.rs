//! The receive pool: one registered region cut into equal buffers, every
//! one posted to the shared receive queue until a packet fills it, then
//! held (readable) until the core hands it back. A few are kept back
//! (spare) and posted once the queue runs low. Buffers handed back go to
//! the queue a few at a time, in one linked list: a post is a lock and
//! a doorbell in the provider, paid once per batch instead of per packet.

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
    /// Buffers handed back, waiting for the next batched post.
    back: Vec<u32>,
    /// How many handed back make a post: a sixteenth of the posted
    /// buffers, 1 … [`REPOST_BATCH`], so a small pool waits for none.
    batch: usize,
    /// Buffers on the queue now. Below four batches, a buffer handed
    /// back is posted at once: the queue never runs dry while buffers
    /// wait (a sender meeting an empty queue is refused, and rxe gives a
    /// connection up after a few such refusals).
    posted: usize,
    /// A repost's work requests and gather entries, kept rather than
    /// built (and zeroed) on the stack for each post.
    wrs: Box<[ib::ibv_recv_wr; REPOST_BATCH]>,
    sges: Box<[ib::ibv_sge; REPOST_BATCH]>,
}

/// The most buffers one repost carries.
pub const REPOST_BATCH: usize = 16;

/// Where one buffer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buf {
    /// On the shared receive queue.
    Posted,
    /// Filled with a packet of this many bytes, not yet handed back.
    Held(u32),
    /// Handed back, waiting to be posted with the next batch.
    Back,
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
            back: Vec::with_capacity(REPOST_BATCH),
            batch: (posted as usize / 16).clamp(1, REPOST_BATCH),
            posted: 0,
            wrs: Box::new(
                [ib::ibv_recv_wr {
                    wr_id: 0,
                    next: ptr::null_mut(),
                    sg_list: ptr::null_mut(),
                    num_sge: 1,
                }; REPOST_BATCH],
            ),
            sges: Box::new([ib::ibv_sge::default(); REPOST_BATCH]),
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
        match self.post_list(dev, &[buf]) {
            (1, _) => Ok(()),
            (_, e) => Err(format!(
                "ibv_post_srq_recv: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Posts `bufs` (at most [`REPOST_BATCH`]) in one linked list: how many
    /// the queue took (the first ones; the provider stops at the first it
    /// refuses), and its error code if it refused one.
    fn post_list(&mut self, dev: &Device, bufs: &[u32]) -> (usize, i32) {
        let n = bufs.len().min(REPOST_BATCH);
        if n == 0 {
            return (0, 0);
        }
        // SAFETY: the MR lives as long as the pool.
        let lkey = unsafe { (*self.mr).lkey };
        for (i, &b) in bufs[..n].iter().enumerate() {
            self.wrs[i].wr_id = b as u64;
            self.sges[i] = ib::ibv_sge {
                addr: self.base as u64 + b as u64 * self.size as u64,
                length: self.size as u32,
                lkey,
            };
        }
        // Linked through raw pointers taken once both arrays are filled.
        let (w, g) = (self.wrs.as_mut_ptr(), self.sges.as_mut_ptr());
        for i in 0..n {
            // SAFETY: i and i + 1 < n <= REPOST_BATCH are inside both arrays.
            unsafe {
                (*w.add(i)).sg_list = g.add(i);
                (*w.add(i)).next = match i + 1 < n {
                    true => w.add(i + 1),
                    false => ptr::null_mut(),
                };
            }
        }
        let mut bad: *mut ib::ibv_recv_wr = ptr::null_mut();
        // SAFETY: the provider's op on this device's SRQ, with a list of
        // `n` requests that live through the call; every buffer is inside
        // the registered pool and no longer read by anyone.
        let rc = unsafe {
            match (*dev.ctx).ops.post_srq_recv {
                Some(f) => f(dev.srq, w, &mut bad),
                None => libc::EOPNOTSUPP,
            }
        };
        let posted = match rc {
            0 => n,
            // SAFETY: the provider names a request of the list, or none.
            _ if !bad.is_null() => (unsafe { bad.offset_from(w) }).clamp(0, n as isize) as usize,
            _ => 0,
        };
        for &b in &bufs[..posted] {
            self.bufs[b as usize] = Buf::Posted;
        }
        self.posted += posted;
        (posted, rc)
    }

    /// Posts the buffers handed back and not yet posted; how many.
    pub fn flush(&mut self, dev: &Device) -> usize {
        let mut back = std::mem::take(&mut self.back);
        let (n, _) = self.post_list(dev, &back);
        back.drain(..n);
        self.back = back;
        n
    }

    /// Buffer `buf` now holds a packet of `len` bytes.
    pub fn filled(&mut self, buf: u32, len: u32) -> bool {
        match self.bufs.get_mut(buf as usize) {
            Some(h @ Buf::Posted) if len as usize <= self.size => {
                *h = Buf::Held(len);
                self.posted = self.posted.saturating_sub(1);
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

    /// Takes a held buffer back, for the next batched post; `false` for
    /// one not held.
    pub fn repost(&mut self, dev: &Device, buf: u32) -> bool {
        match self.bufs.get(buf as usize) {
            Some(Buf::Held(_)) => {
                self.bufs[buf as usize] = Buf::Back;
                self.back.push(buf);
                if self.back.len() >= self.batch || self.posted < 4 * self.batch {
                    self.flush(dev);
                }
                true
            }
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
