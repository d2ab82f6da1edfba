//! The small-message workload whose cost the `small_message` benchmark
//! counts: two ranks driven from one thread, on one `loop` fabric or (with
//! the feature `verbs`) on the `verbs` port over a device that exists only
//! in this process (`fake_verbs`), so every
//! instruction between a send's post and its receive's completion runs on
//! that thread, in the same order each time, and callgrind's count repeats
//! exactly whatever else the machine is doing.
//!
//! It goes through the public API an application uses ([`Rank`]), so the
//! count covers every layer: the rank's call, the core's `isend`, matching,
//! the driver's adapter, the port's post, the progress round and the
//! receive buffer's repost. `post`, `send` and `finish` are kept out of
//! line so that callgrind counts each piece of a round trip on its own
//! (`cost/layers` reports them).

use std::hint::black_box;

use rmx_core::{Coalesce, Config, Source, Status, TagSel};
use rmx_linux::loopnic::{Fabric, LoopConfig, Port};
use rmx_linux::rank::{loop_config, Rank, Req};
use rmx_linux::transport::Transport;

#[cfg(feature = "verbs")]
pub mod fake_verbs;
#[cfg(feature = "verbs")]
mod verbs;

/// Bytes of each message: the size the latency of a transport is quoted at.
pub const SIZE: usize = 8;

/// The tag of every message.
const TAG: u32 = 7;

/// Round trips in a measurement: a multiple of every period on the path
/// (one signalled inline send in 5, receives told to senders every 16
/// packets), so that each costs its share.
pub const ROUNDS: usize = 80;

/// Messages in a window of the message-rate workload, as osu_mbw_mr and
/// `rmx bench msgrate` send them.
pub const WINDOW: usize = 64;

/// Round trips run before a measurement, so connections, tables and the
/// receive ring are in the state a long ping-pong keeps them in.
const WARM: usize = 64;

/// Two ranks of one fabric, each with its message buffers. Every receive
/// posted into a buffer completes within [`round_trip`](Pair::round_trip),
/// while the pair is borrowed, so no receive outlives a call.
pub struct Pair<T: Transport + 'static = Port> {
    a: Rank<T>,
    b: Rank<T>,
    out: Box<[u8; SIZE]>,
    back: Box<[u8; SIZE]>,
    at_a: Box<[u8; SIZE]>,
    at_b: Box<[u8; SIZE]>,
    /// Rank 1's receive buffers of a window.
    win: Box<[[u8; SIZE]; WINDOW]>,
}

impl Pair {
    /// Two warm ranks on the default `loop` fabric.
    pub fn warm() -> Pair {
        Pair::warm_with(loop_config())
    }

    /// Two warm ranks configured as `rmx bench msgrate --wqes 10
    /// --coalesce off` runs them (the configuration measured beside the
    /// shared-memory MPIs). Run a [`window`](Pair::window) before
    /// counting one: the first picks the copy routines, once a process.
    pub fn warm_rate() -> Pair {
        Pair::warm_with(Config {
            send_wqes: 10,
            coalesce: Coalesce::Off,
            ..loop_config()
        })
    }

    fn warm_with(cfg: Config) -> Pair {
        let fabric = Fabric::new(2, LoopConfig::default()).expect("default loop fabric");
        let rank = |r| Rank::new(fabric.port(r), 2, cfg).expect("loop rank");
        Pair::warmed(rank(0), rank(1))
    }
}

impl<T: Transport + 'static> Pair<T> {
    /// Ranks 0 and 1, warmed.
    fn warmed(a: Rank<T>, b: Rank<T>) -> Pair<T> {
        let mut pair = Pair {
            a,
            b,
            out: Box::new([1; SIZE]),
            back: Box::new([2; SIZE]),
            at_a: Box::new([0; SIZE]),
            at_b: Box::new([0; SIZE]),
            win: Box::new([[0; SIZE]; WINDOW]),
        };
        for _ in 0..WARM {
            pair.round_trip();
        }
        pair
    }

    /// One ping-pong round trip as OSU's latency test runs it: each side
    /// posts its receive, then the other sends and waits for its send.
    pub fn round_trip(&mut self) {
        let at_b = post(&mut self.b, &mut self.at_b, 0);
        send(&mut self.a, 1, &self.out);
        finish(&mut self.b, at_b);
        let at_a = post(&mut self.a, &mut self.at_a, 1);
        send(&mut self.b, 0, &self.back);
        finish(&mut self.a, at_a);
        assert_eq!(self.at_b, self.out, "rank 1 received other bytes");
        assert_eq!(self.at_a, self.back, "rank 0 received other bytes");
    }

    /// One window of the message-rate workload as `rmx bench msgrate`
    /// runs it: rank 1 posts [`WINDOW`] receives, rank 0 starts as many
    /// sends and completes each, rank 1 completes each receive, then
    /// answers with a message rank 0 waits for. The two ranks share this
    /// thread, so each completes its requests by testing them and, while
    /// one is pending, driving both ranks (a send may wait in the core
    /// for the receiver's credit, a receive for that send). Every call on
    /// a rank goes through a function of its side, so that the count
    /// splits the window between the sender and the receiver.
    pub fn window(&mut self) {
        let ack = post(&mut self.a, &mut self.at_a, 1);
        let mut recvs = [const { None }; WINDOW];
        for (q, buf) in recvs.iter_mut().zip(self.win.iter_mut()) {
            *q = Some(post(&mut self.b, buf, 0));
        }
        let mut sends = [const { None }; WINDOW];
        for q in sends.iter_mut() {
            *q = Some(start(&mut self.a, 1, &self.out));
        }
        for mut q in sends.into_iter().flatten() {
            while let Err(pending) = test_sender(&mut self.a, q) {
                q = pending;
                drive_sender(&mut self.a);
                drive_receiver(&mut self.b);
            }
        }
        for mut q in recvs.into_iter().flatten() {
            let st = loop {
                match test_receiver(&mut self.b, q) {
                    Ok(st) => break st,
                    Err(pending) => q = pending,
                }
                drive_receiver(&mut self.b);
                drive_sender(&mut self.a);
            };
            assert_eq!(st.len as usize, SIZE, "a whole message");
        }
        send(&mut self.b, 0, &self.back);
        finish(&mut self.a, ack);
        assert!(
            self.win.iter().all(|m| m == &*self.out),
            "rank 1 received other bytes"
        );
        assert_eq!(self.at_a, self.back, "rank 0 received other bytes");
    }

    /// One progress round of rank 0 that finds nothing: what a waiter
    /// spins on between messages.
    pub fn idle_round(&mut self) -> usize {
        self.a.progress()
    }
}

/// Posts a receive into `buf`, a buffer of the pair.
#[inline(never)]
fn post<T: Transport + 'static>(rank: &mut Rank<T>, buf: &mut [u8; SIZE], from: u16) -> Req {
    // SAFETY: `round_trip` waits for the request before it returns, while
    // it holds the pair (and so `buf`) borrowed, and touches `buf` only
    // after that wait.
    unsafe { rank.irecv_raw(Source::Rank(from), TagSel::Tag(TAG), buf.as_mut_ptr(), SIZE) }
        .expect("receive posted")
}

#[inline(never)]
fn send<T: Transport + 'static>(rank: &mut Rank<T>, to: u16, data: &[u8; SIZE]) {
    // SAFETY: waited for before `data`'s borrow ends.
    let req = unsafe { rank.isend_raw(to, TAG, data.as_ptr(), SIZE) }.expect("send posted");
    rank.wait(req);
}

/// Starts a send, as a window of non-blocking sends does.
#[inline(never)]
fn start<T: Transport + 'static>(rank: &mut Rank<T>, to: u16, data: &[u8; SIZE]) -> Req {
    // SAFETY: `window` completes the request before `data`'s borrow ends.
    unsafe { rank.isend_raw(to, TAG, data.as_ptr(), SIZE) }.expect("send started")
}

/// The side of the message-rate window a call is made for.
#[derive(Clone, Copy, Debug)]
enum Side {
    Sender,
    Receiver,
}

// One function per side and call, so that callgrind counts each side's
// share of the window apart. Their bodies differ (a value only the
// optimiser sees), so that the linker does not fold each pair into one.

/// One progress round of the sending rank.
#[inline(never)]
fn drive_sender<T: Transport + 'static>(rank: &mut Rank<T>) -> usize {
    black_box(Side::Sender);
    rank.progress()
}

/// One progress round of the receiving rank.
#[inline(never)]
fn drive_receiver<T: Transport + 'static>(rank: &mut Rank<T>) -> usize {
    black_box(Side::Receiver);
    rank.progress()
}

/// Tests a request of the sending rank.
#[inline(never)]
fn test_sender<T: Transport + 'static>(rank: &mut Rank<T>, req: Req) -> Result<Status, Req> {
    black_box(Side::Sender);
    rank.test(req)
}

/// Tests a request of the receiving rank.
#[inline(never)]
fn test_receiver<T: Transport + 'static>(rank: &mut Rank<T>, req: Req) -> Result<Status, Req> {
    black_box(Side::Receiver);
    rank.test(req)
}

/// Waits for `req` (progress until it completes), as a blocking receive
/// does.
#[inline(never)]
fn finish<T: Transport + 'static>(rank: &mut Rank<T>, req: Req) {
    let st = rank.wait(req);
    assert_eq!(st.len as usize, SIZE, "a whole message");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round trip moves the bytes of both messages, nothing is
    /// left over, and every completion the port reported named sends the
    /// core had in flight (a run of inline sends counted as one, too).
    fn moves_the_bytes_of_both_messages<T: Transport + 'static>(mut pair: Pair<T>) {
        for i in 0..(2 * ROUNDS) as u8 {
            *pair.out = [i; SIZE];
            *pair.back = [!i; SIZE];
            pair.round_trip();
            assert_eq!(*pair.at_b, [i; SIZE]);
            assert_eq!(*pair.at_a, [!i; SIZE]);
        }
        assert_eq!(pair.idle_round(), 0, "nothing left to take");
        for r in [&pair.a, &pair.b] {
            assert_eq!(r.stats().unknown_completions, 0);
        }
    }

    /// Every window delivers every message, and leaves nothing behind.
    #[test]
    fn every_window_delivers_every_message() {
        let mut pair = Pair::warm_rate();
        for i in 0..8u8 {
            *pair.out = [i; SIZE];
            *pair.win = [[!i; SIZE]; WINDOW];
            pair.window();
            assert!(pair.win.iter().all(|m| *m == [i; SIZE]));
        }
        assert_eq!(pair.idle_round(), 0, "nothing left to take");
    }

    #[test]
    fn every_round_trip_moves_the_bytes_of_both_messages() {
        moves_the_bytes_of_both_messages(Pair::warm());
    }

    #[cfg(feature = "verbs")]
    #[test]
    fn the_verbs_port_moves_the_bytes_of_both_messages_over_the_fake_device() {
        moves_the_bytes_of_both_messages(Pair::warm_verbs());
    }
}
