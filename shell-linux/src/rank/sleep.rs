//! Sleeping outside rmx, as a runtime with an event loop of its own does
//! (`ucp_worker_get_efd` and `ucp_worker_arm`): a descriptor that turns
//! readable when the rank has work, and an arm that says whether the
//! caller may sleep on it now, and for how long at most.

use std::os::fd::RawFd;
use std::time::Duration;

use super::Rank;
use crate::transport::Transport;

/// What [`Rank::arm`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Armed {
    /// Work came in meanwhile (and was taken): progress again, don't sleep.
    Pending,
    /// Sleep on [`Rank::sleep_fd`] until it turns readable, or at most
    /// this long (`None`: no timer of the core is due), then progress.
    Sleep(Option<Duration>),
}

impl<T: Transport + 'static> Rank<T> {
    /// A descriptor that turns readable when an event comes after
    /// [`arm`](Self::arm): a packet or a completion for this rank. For
    /// `poll(2)` or an `epoll` set; owned by the rank (closed when its
    /// port ends). A progress thread, if on, takes events too.
    pub fn sleep_fd(&self) -> std::io::Result<RawFd> {
        self.events.fd()
    }

    /// Prepares a sleep on [`sleep_fd`](Self::sleep_fd): lowers it, asks
    /// the port for an event on the next packet (solicited or not), and
    /// moves the rank on once, so that nothing that came before the arm
    /// is slept through.
    pub fn arm(&mut self) -> Armed {
        self.events.clear();
        self.events.arm();
        let (n, next) = self.with(|d| (d.progress(), d.timers()));
        match next {
            _ if n > 0 => Armed::Pending,
            Some(0) => Armed::Pending,
            next => Armed::Sleep(next.map(Duration::from_nanos)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{self, Net};
    use crate::loopnic::LoopConfig;
    use crate::rank::loop_config;
    use rmx_core::{Source, TagSel};

    /// Polls `fd` for up to `ms`: whether it turned readable.
    fn readable(fd: RawFd, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call.
        unsafe { libc::poll(&mut p, 1, ms) > 0 }
    }

    /// A rank armed with nothing to do sleeps until its peer's message
    /// turns the descriptor readable; armed with a message waiting, it is
    /// told to progress instead.
    #[test]
    fn an_armed_rank_sleeps_on_its_descriptor_until_a_message_comes() {
        job::run(2, loop_config(), &Net::Loop(LoopConfig::default()), |r| {
            if r.rank() == 0 {
                r.barrier().unwrap();
                std::thread::sleep(Duration::from_millis(50));
                r.send(1, 3, b"wake").unwrap();
                r.barrier().unwrap();
                return;
            }
            let fd = r.sleep_fd().unwrap();
            assert_eq!(fd, r.sleep_fd().unwrap(), "one descriptor");
            let mut buf = [0u8; 8];
            // SAFETY: `buf` outlives the request, which ends below.
            let mut q =
                unsafe { r.irecv_raw(Source::Rank(0), TagSel::Tag(3), buf.as_mut_ptr(), 8) }
                    .unwrap();
            r.barrier().unwrap();
            let mut woke = false;
            let q = loop {
                if let Armed::Sleep(t) = r.arm() {
                    let ms = t.map_or(10_000, |t| t.as_millis().clamp(1, 10_000) as i32);
                    woke |= readable(fd, ms);
                }
                match r.test(q) {
                    Ok(st) => break st,
                    Err(again) => q = again,
                }
            };
            assert_eq!(q.len, 4);
            assert!(woke, "the descriptor turned readable for the message");
            r.barrier().unwrap();
        });
    }
}
