//! The transports this shell was built with, as one type: what the job
//! runner and the benchmarks hold, so that no rank or benchmark code is
//! written once per transport. A match per call, no allocation; an embedder
//! with one transport uses its port type directly.

use rmx_core::{Caps, PostError, RegError};

use super::{Completion, Counters, Events, Faulty, Mr, Recv, Transport, Work};
use crate::eth::EthPort;
use crate::loopnic::Port;

/// A port of any transport of this shell. One per rank, made once: the
/// variants stay inline, since a box would put an indirection on every
/// post and poll.
#[allow(clippy::large_enum_variant)]
pub enum AnyPort {
    Loop(Port),
    Eth(EthPort),
    /// Any of them with faults injected (tests and lossy benchmarks only:
    /// the box costs an indirection).
    Faulty(Box<Faulty<AnyPort>>),
}

impl AnyPort {
    /// This port with `faults` injected on receive, if there are any.
    pub fn with_faults(self, faults: super::Faults) -> AnyPort {
        if faults.any() {
            AnyPort::Faulty(Box::new(Faulty::new(self, faults)))
        } else {
            self
        }
    }

    /// The `eth` port beneath any decorator, if this is one.
    pub fn eth(&self) -> Option<&EthPort> {
        match self {
            AnyPort::Eth(p) => Some(p),
            AnyPort::Faulty(f) => f.inner().eth(),
            AnyPort::Loop(_) => None,
        }
    }
}

impl From<Port> for AnyPort {
    fn from(p: Port) -> AnyPort {
        AnyPort::Loop(p)
    }
}

impl From<EthPort> for AnyPort {
    fn from(p: EthPort) -> AnyPort {
        AnyPort::Eth(p)
    }
}

/// A boxed port as the reference it was matched by, shared or not.
trait Unbox {
    type Port;
    fn unbox(self) -> Self::Port;
}

impl<'a, T> Unbox for &'a Box<T> {
    type Port = &'a T;
    fn unbox(self) -> &'a T {
        self
    }
}

impl<'a, T> Unbox for &'a mut Box<T> {
    type Port = &'a mut T;
    fn unbox(self) -> &'a mut T {
        self
    }
}

/// Calls `$call` on whichever port this is.
macro_rules! each {
    ($self:expr, $p:ident => $call:expr) => {
        match $self {
            AnyPort::Loop($p) => $call,
            AnyPort::Eth($p) => $call,
            AnyPort::Faulty(b) => {
                let $p = Unbox::unbox(b);
                $call
            }
        }
    };
}

impl rmx_driver::Port for AnyPort {
    fn caps(&self) -> Caps {
        each!(self, p => rmx_driver::Port::caps(p))
    }

    unsafe fn register(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the port's.
        each!(self, p => unsafe { rmx_driver::Port::register(p, addr, len) })
    }

    unsafe fn register_user(&mut self, addr: usize, len: usize) -> Result<Mr, RegError> {
        // SAFETY: the caller's contract is the port's.
        each!(self, p => unsafe { rmx_driver::Port::register_user(p, addr, len) })
    }

    fn deregister(&mut self, mr: Mr) {
        each!(self, p => rmx_driver::Port::deregister(p, mr))
    }

    #[inline]
    fn post(
        &mut self,
        peer: u16,
        wr_id: u64,
        work: Work<'_>,
    ) -> Result<Option<Completion>, PostError> {
        each!(self, p => rmx_driver::Port::post(p, peer, wr_id, work))
    }

    #[inline]
    fn doorbell(&mut self) {
        each!(self, p => rmx_driver::Port::doorbell(p))
    }

    fn poll_recv(&mut self) -> Option<Recv> {
        each!(self, p => rmx_driver::Port::poll_recv(p))
    }

    #[inline]
    fn rx_bytes(&self, buf: u32) -> Option<&[u8]> {
        each!(self, p => rmx_driver::Port::rx_bytes(p, buf))
    }

    #[inline]
    fn repost(&mut self, buf: u32) -> bool {
        each!(self, p => rmx_driver::Port::repost(p, buf))
    }

    #[inline]
    fn poll_cq(&mut self, out: &mut [Completion]) -> usize {
        each!(self, p => rmx_driver::Port::poll_cq(p, out))
    }

    fn drain(&mut self) {
        each!(self, p => rmx_driver::Port::drain(p))
    }
}

impl Transport for AnyPort {
    #[inline]
    fn rank(&self) -> u16 {
        each!(self, p => p.rank())
    }

    fn events(&self) -> Events {
        each!(self, p => Transport::events(p))
    }

    #[inline]
    fn busy(&self) -> bool {
        each!(self, p => Transport::busy(p))
    }

    fn counters(&self) -> Counters {
        each!(self, p => Transport::counters(p))
    }
}
