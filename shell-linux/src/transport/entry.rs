//! A transport's line in the registry, as the transport itself declares
//! it: here in the seam, so that transports name it without importing the
//! registry that lists them.

/// One transport: its name on command lines and in reports, a line about
/// it, whether this build carries it, and what its benchmarks' floor is
/// (the legend of the floor's curve).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub built: bool,
    pub floor: &'static str,
}

/// What verbs can do before a port knows its device (the limits come with
/// the port): every RDMA operation the core uses. Here, not in the verbs
/// module, so that a build without verbs still says what it would carry.
pub const VERBS_CAPS: rmx_core::Caps = rmx_core::Caps {
    rdma_write: true,
    rdma_read: true,
    write_imm: true,
    max_transfer: 0,
    inline_max: 0,
    send_queue: 0,
    rx_buffers: 0,
    mtu: 0,
    lossy: false,
    cheap_gather: false,
};
