//! An in-memory [`Nic`]: vectors for every memory object, an outbox for posts.

use rmx_core::wire::HEADER_LEN;
use rmx_core::{Loc, Nic, PostError, Posted, RxBuf, SlotId, UserBuf};

/// Memory and posts of one simulated rank.
pub struct MemNic {
    pub slots: Vec<Vec<u8>>,
    pub rx: Vec<Option<Vec<u8>>>,
    pub user: Vec<Vec<u8>>,
    pub unexp: Vec<Vec<u8>>,
    /// Packets posted and not yet taken by the network: (destination, bytes).
    pub outbox: Vec<(u16, Vec<u8>)>,
    /// Reject posts with `Busy` while set.
    pub busy: bool,
    /// Report posted sends as completing later (`Posted::Later`).
    pub later: bool,
    /// Accept inline sends (else the trait's default: unsupported).
    pub inline: bool,
    pub inline_sent: usize,
    /// Every receive buffer handed back, in order.
    pub reposted: Vec<u32>,
}

impl MemNic {
    pub fn new(slots: usize, slot_size: usize, unexpected: usize, eager: usize) -> MemNic {
        MemNic {
            slots: vec![vec![0; slot_size]; slots],
            rx: Vec::new(),
            user: Vec::new(),
            unexp: vec![vec![0; eager]; unexpected],
            outbox: Vec::new(),
            busy: false,
            later: false,
            inline: false,
            inline_sent: 0,
            reposted: Vec::new(),
        }
    }

    /// A user buffer holding `bytes`.
    pub fn user_buf(&mut self, bytes: Vec<u8>) -> UserBuf {
        self.user.push(bytes);
        UserBuf(self.user.len() as u32 - 1)
    }

    /// Places a packet in a receive buffer.
    pub fn deliver(&mut self, bytes: Vec<u8>) -> RxBuf {
        if let Some(i) = self.rx.iter().position(Option::is_none) {
            self.rx[i] = Some(bytes);
            return RxBuf(i as u32);
        }
        self.rx.push(Some(bytes));
        RxBuf(self.rx.len() as u32 - 1)
    }

    fn place(&mut self, l: Loc) -> (&mut [u8], usize) {
        match l {
            Loc::Slot(s, o) => (&mut self.slots[s.0 as usize], o as usize),
            Loc::Rx(b, o) => (
                self.rx[b.0 as usize].as_mut().expect("rx buffer in use"),
                o as usize,
            ),
            Loc::User(b, o) => (&mut self.user[b.0 as usize], o as usize),
            Loc::Unexpected(i, o) => (&mut self.unexp[i as usize], o as usize),
        }
    }
}

impl Nic for MemNic {
    fn slot_mut(&mut self, slot: SlotId) -> &mut [u8] {
        &mut self.slots[slot.0 as usize]
    }
    fn rx(&self, buf: RxBuf) -> &[u8] {
        self.rx[buf.0 as usize]
            .as_deref()
            .expect("rx buffer in use")
    }
    fn copy(&mut self, dst: Loc, src: Loc, len: usize) {
        let (v, o) = self.place(src);
        let data = v[o..o + len].to_vec();
        let (v, o) = self.place(dst);
        v[o..o + len].copy_from_slice(&data);
    }
    fn post_send(&mut self, peer: u16, slot: SlotId, len: usize) -> Result<Posted, PostError> {
        if self.busy {
            return Err(PostError::Busy);
        }
        let bytes = self.slots[slot.0 as usize][..len].to_vec();
        self.outbox.push((peer, bytes));
        Ok(if self.later {
            Posted::Later
        } else {
            Posted::Done
        })
    }
    fn repost(&mut self, buf: RxBuf) {
        self.rx[buf.0 as usize] = None;
        self.reposted.push(buf.0);
    }
    fn send_inline(
        &mut self,
        peer: u16,
        header: &[u8; HEADER_LEN],
        payload: Loc,
        len: usize,
    ) -> Result<(), PostError> {
        if !self.inline {
            return Err(PostError::Unsupported);
        }
        if self.busy {
            return Err(PostError::Busy);
        }
        let (v, o) = self.place(payload);
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&v[o..o + len]);
        self.outbox.push((peer, bytes));
        self.inline_sent += 1;
        Ok(())
    }
}
