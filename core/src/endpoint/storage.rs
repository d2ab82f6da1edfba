//! Where an endpoint keeps its tables. The embedder supplies them when it
//! creates the endpoint, sized from the job (as smoltcp takes its sockets'
//! buffers), so one build serves a 2-rank and an 8192-rank job and the core
//! never allocates.
//!
//! A [`Storage`] names the container of every table: [`Slices`] borrows
//! them (static arrays, memory a kernel allocated), [`Fixed`] holds arrays
//! of one length, and a shell with a heap implements [`Alloc`] for `Vec`
//! (`rmx_sim::heap::Heap`, which every shell with threads uses).

use core::marker::PhantomData;

use crate::config::{ConfigError, TableName};

pub use super::Peer;
pub use super::{HoldEntry, PostedEntry, SlotEntry, UnexpectedEntry, WorkEntry};
pub use crate::request::RequestEntry;

/// A family of containers, one per table of the endpoint.
pub trait Storage {
    /// A table of `E`s: its length is the table's capacity.
    type Table<E: Copy + 'static>: AsRef<[E]> + AsMut<[E]>;
}

/// A [`Storage`] that can make its own tables.
pub trait Alloc: Storage {
    /// A table of `len` copies of `fill`.
    fn table<E: Copy + 'static>(len: usize, fill: E) -> Self::Table<E>;
}

/// Tables borrowed for `'a`.
pub struct Slices<'a>(PhantomData<&'a mut ()>);

impl<'a> Storage for Slices<'a> {
    type Table<E: Copy + 'static> = &'a mut [E];
}

/// Tables held in arrays of `N` entries each (tests and small fixed jobs).
pub struct Fixed<const N: usize>;

impl<const N: usize> Storage for Fixed<N> {
    type Table<E: Copy + 'static> = [E; N];
}

impl<const N: usize> Alloc for Fixed<N> {
    /// `len` is ignored: every table has `N` entries.
    fn table<E: Copy + 'static>(_len: usize, fill: E) -> [E; N] {
        [fill; N]
    }
}

/// The most entries a table may have: its entries are named by `u16`, and
/// `u16::MAX` ends a list.
pub const MAX_TABLE: usize = u16::MAX as usize;

/// How many entries each table has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Ranks of the job (at most).
    pub peers: usize,
    /// Receives posted and not yet matched.
    pub posted: usize,
    /// Messages arrived and not yet asked for; credits never exceed it.
    pub unexpected: usize,
    /// Receive buffers kept for unexpected messages: at most the receive pool.
    pub holds: usize,
    /// Send bounce slots (the shell's registered send buffers).
    pub slots: usize,
    /// Requests pending at once (sends, receives, transfers); the work
    /// table is as long.
    pub requests: usize,
}

impl Sizes {
    /// Sizes an MPI job of `ranks` runs well with under `cfg`: 1024
    /// posted receives, as many unexpected messages and held buffers as the
    /// larger of 1024 and the receive pool (credits never exceed either),
    /// 256 send bounce slots, 2048 pending requests.
    pub const fn for_job(ranks: u16, cfg: &crate::Config) -> Sizes {
        let unexpected = if cfg.rx_buffers as usize > 1024 {
            cfg.rx_buffers as usize
        } else {
            1024
        };
        let unexpected = if unexpected > MAX_TABLE {
            MAX_TABLE
        } else {
            unexpected
        };
        Sizes {
            peers: ranks as usize,
            posted: 1024,
            unexpected,
            holds: unexpected,
            slots: 256,
            requests: 2048,
        }
    }

    /// Every table's length within its bounds.
    pub fn check(&self) -> Result<(), ConfigError> {
        let each = [
            (TableName::Peers, self.peers, 1),
            (TableName::Posted, self.posted, 0),
            (TableName::Unexpected, self.unexpected, 1),
            (TableName::Holds, self.holds, 1),
            (TableName::Slots, self.slots, 2),
            (TableName::Requests, self.requests, 0),
        ];
        for (table, len, min) in each {
            if len < min || len > MAX_TABLE {
                return Err(ConfigError::TableSize {
                    table,
                    min,
                    max: MAX_TABLE,
                });
            }
        }
        Ok(())
    }

    /// Bytes of every table but the peer table.
    pub const fn shared_bytes(&self) -> usize {
        use core::mem::size_of;
        self.posted * size_of::<PostedEntry>()
            + self.unexpected * size_of::<UnexpectedEntry>()
            + self.holds * size_of::<HoldEntry>()
            + self.slots * size_of::<SlotEntry>()
            + self.requests * (size_of::<RequestEntry>() + size_of::<WorkEntry>())
    }
}

/// The endpoint's tables, each in its own container of `S`.
pub struct Tables<S: Storage> {
    pub peers: S::Table<Peer>,
    pub posted: S::Table<PostedEntry>,
    pub unexpected: S::Table<UnexpectedEntry>,
    pub holds: S::Table<HoldEntry>,
    pub slots: S::Table<SlotEntry>,
    pub requests: S::Table<RequestEntry>,
    /// What each request carries (as long as `requests`).
    pub work: S::Table<WorkEntry>,
}

impl<S: Alloc> Tables<S> {
    /// Tables of `sizes`, every entry unused.
    pub fn new(sizes: &Sizes) -> Self {
        Tables {
            peers: S::table(sizes.peers, Peer::UNUSED),
            posted: S::table(sizes.posted, PostedEntry::FREE),
            unexpected: S::table(sizes.unexpected, UnexpectedEntry::FREE),
            holds: S::table(sizes.holds, HoldEntry::UNUSED),
            slots: S::table(sizes.slots, SlotEntry::UNUSED),
            requests: S::table(sizes.requests, RequestEntry::UNUSED),
            work: S::table(sizes.requests, WorkEntry::UNUSED),
        }
    }
}

impl<S: Storage> Tables<S> {
    /// The tables' lengths.
    pub fn sizes(&self) -> Sizes {
        Sizes {
            peers: self.peers.as_ref().len(),
            posted: self.posted.as_ref().len(),
            unexpected: self.unexpected.as_ref().len(),
            holds: self.holds.as_ref().len(),
            slots: self.slots.as_ref().len(),
            requests: self.requests.as_ref().len(),
        }
    }
}
