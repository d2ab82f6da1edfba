//! Memory named across the wire: the key a registration carries, a peer's
//! buffer as its address and key, and how an access to it ended. Kept
//! apart from [`crate::nic`] because packets carry them ([`crate::wire`]).

/// A registration of user memory: the key the NIC checks (verbs' lkey).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemKey(pub u32);

/// Memory of a peer, named by the address and key it sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    pub addr: u64,
    pub key: MemKey,
}

/// How an RDMA operation ended, as its completion reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaError {
    /// A key or bound check failed on either side; nothing defined was moved.
    Access,
    /// The connection failed.
    Down,
}
