//! A reliable connection's posts in order, for a port whose device reports
//! a completion only for signalled posts (verbs RC with selective
//! signalling, a kernel driver's queue pair).
//!
//! The [`Port`](crate::Port) contract says an unsignalled send completes
//! when a later signalled post to the same peer does, reported before it.
//! A connection completes in order, so a completion names every post before
//! it as done too: each post goes to the device with its place in this
//! order as its id, and the ledger maps a completion back to the posts it
//! ends. An error completion ends only its own post: a device that fails
//! a connection reports every outstanding post with an entry of its own.
//!
//! The ring is storage the port supplies, sized to its send queue's depth.

use rmx_core::{WcResult, WorkId};

/// A post not yet completed: the id the core gave it, and whether the
/// device reports it with an entry of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Post {
    pub wr_id: u64,
    pub signalled: bool,
}

/// The core's id for `count` successful inline sends to `peer` completed
/// in a row: one [`WorkId::Inlines`] for a run, as the
/// [`Port`](crate::Port) contract allows (the core frees their send
/// entries at once), a plain [`WorkId::Inline`] for one.
fn inline_run(peer: u16, count: u32) -> u64 {
    match count {
        1 => WorkId::Inline(peer).wr_id(),
        count => WorkId::Inlines { peer, count }.wr_id(),
    }
}

/// One connection's outstanding posts, oldest first, in a ring of
/// `B`'s length; the oldest went to the device as id [`Ledger::head`].
pub struct Ledger<B> {
    ring: B,
    /// Device id of the oldest outstanding post, and its place in the ring.
    head: u64,
    first: usize,
    len: usize,
    /// Signalled posts outstanding.
    awaited: u32,
}

impl<B: AsRef<[Post]> + AsMut<[Post]>> Ledger<B> {
    /// An empty ledger over `ring`; ids start at zero.
    pub fn new(ring: B) -> Ledger<B> {
        Ledger {
            ring,
            head: 0,
            first: 0,
            len: 0,
            awaited: 0,
        }
    }

    /// Outstanding posts.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// No room for another post: the send queue is full.
    pub fn is_full(&self) -> bool {
        self.len >= self.ring.as_ref().len()
    }

    /// Signalled posts outstanding: while there are none, nothing the
    /// device does will report the unsignalled ones.
    pub fn awaited(&self) -> u32 {
        self.awaited
    }

    /// The device id of the oldest outstanding post.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The device id the next post goes with.
    pub fn next_id(&self) -> u64 {
        self.head.wrapping_add(self.len as u64)
    }

    /// The newest post is unsignalled: only a later signalled post will
    /// complete it (a port posts one before its connection goes).
    pub fn quiet_tail(&self) -> bool {
        self.len > 0 && !self.at(self.len - 1).signalled
    }

    /// The ring slot of the `i`th oldest post (`i` at most the ring's
    /// length, `first` below it: one wrap at most, no division).
    fn slot(&self, i: usize) -> usize {
        let (n, s) = (self.ring.as_ref().len(), self.first + i);
        if s >= n {
            s - n
        } else {
            s
        }
    }

    fn at(&self, i: usize) -> Post {
        self.ring.as_ref()[self.slot(i)]
    }

    /// Records `post` as gone to the device: its device id, or `None` if
    /// the ring is full (the port refuses the post as busy first).
    // Once per post: inlined into the port's post.
    #[inline(always)]
    pub fn note(&mut self, post: Post) -> Option<u64> {
        if self.is_full() {
            return None;
        }
        let id = self.next_id();
        let s = self.slot(self.len);
        self.ring.as_mut()[s] = post;
        self.len += 1;
        self.awaited += u32::from(post.signalled);
        Some(id)
    }

    /// The device completed device id `id` with `result`: hands `done`
    /// every post up to it, oldest first, each before it successful (an
    /// unsignalled post completed by a later one) and `id`'s with
    /// `result`. How many of them were signalled; `None` for an id not
    /// outstanding (a stray or repeated completion), which changes nothing.
    pub fn complete(
        &mut self,
        id: u64,
        result: WcResult,
        mut done: impl FnMut(Post, WcResult),
    ) -> Option<u32> {
        let k = id.wrapping_sub(self.head);
        if k >= self.len as u64 {
            return None;
        }
        // Below `len`, itself at most the ring's length.
        let k = k as usize;
        let mut signalled = 0;
        for i in 0..=k {
            let p = self.at(i);
            signalled += u32::from(p.signalled);
            done(p, if i == k { result } else { Ok(()) });
        }
        self.first = self.slot(k + 1);
        self.len -= k + 1;
        self.head = self.head.wrapping_add(k as u64 + 1);
        self.awaited -= signalled;
        Some(signalled)
    }

    /// [`complete`](Self::complete) on the connection to `peer`, handing
    /// `done` the core's ids: a run of successful inline sends goes as one
    /// completion (a `WorkId::Inlines`, or a `WorkId::Inline` for one),
    /// before whatever ends it.
    // Once per send completion polled: inlined into the port's poll.
    #[inline(always)]
    pub fn complete_runs(
        &mut self,
        id: u64,
        result: WcResult,
        peer: u16,
        mut done: impl FnMut(u64, WcResult),
    ) -> Option<u32> {
        let inline = WorkId::Inline(peer).wr_id();
        let mut run = 0u32;
        let taken = self.complete(id, result, |p, r| {
            let more = p.wr_id == inline && r.is_ok();
            if run > 0 && (!more || run == u32::MAX) {
                done(inline_run(peer, run), Ok(()));
                run = 0;
            }
            match more {
                true => run += 1,
                false => done(p.wr_id, r),
            }
        });
        if run > 0 {
            done(inline_run(peer, run), Ok(()));
        }
        taken
    }

    /// The posts from device id `id` on never reached the device (a
    /// batch it refused part way): hands each to `done`, oldest first, and
    /// forgets them. How many were signalled.
    pub fn unpost_from(&mut self, id: u64, mut done: impl FnMut(Post)) -> u32 {
        let k = id.wrapping_sub(self.head);
        if k >= self.len as u64 {
            return 0;
        }
        let mut signalled = 0;
        for i in k as usize..self.len {
            let p = self.at(i);
            signalled += u32::from(p.signalled);
            self.awaited -= u32::from(p.signalled);
            done(p);
        }
        self.len = k as usize;
        signalled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_core::RdmaError;

    /// Completions handed out, decoded.
    struct Got {
        seen: [(Option<WorkId>, WcResult); 8],
        n: usize,
    }

    impl Default for Got {
        fn default() -> Got {
            Got {
                seen: [(None, Ok(())); 8],
                n: 0,
            }
        }
    }

    impl Got {
        fn push(&mut self, id: u64, r: WcResult) {
            self.seen[self.n] = (WorkId::from_wr_id(id), r);
            self.n += 1;
        }

        fn seen(&self) -> &[(Option<WorkId>, WcResult)] {
            &self.seen[..self.n]
        }
    }

    #[test]
    fn a_run_of_inline_sends_to_one_peer_completes_as_one() {
        let inline = |peer| Post {
            wr_id: WorkId::Inline(peer).wr_id(),
            signalled: false,
        };
        let msg = Post {
            wr_id: WorkId::Rdma(9).wr_id(),
            signalled: true,
        };
        let mut l = Ledger::new([Post::default(); 8]);
        // Three inline sends, a message, one inline (another peer's id,
        // which no run takes), two inline, the last one signalled.
        for p in [inline(3), inline(3), inline(3), msg, inline(4), inline(3)] {
            l.note(p).unwrap();
        }
        let last = l
            .note(Post {
                signalled: true,
                ..inline(3)
            })
            .unwrap();
        let mut got = Got::default();
        let taken = l.complete_runs(last, Ok(()), 3, |id, r| got.push(id, r));
        assert_eq!(taken, Some(2));
        assert_eq!(
            got.seen(),
            [
                (Some(WorkId::Inlines { peer: 3, count: 3 }), Ok(())),
                (Some(WorkId::Rdma(9)), Ok(())),
                (Some(WorkId::Inline(4)), Ok(())),
                (Some(WorkId::Inlines { peer: 3, count: 2 }), Ok(())),
            ]
        );
        assert!(l.is_empty() && l.awaited() == 0);
        // A failed inline send ends the run before it, alone.
        for _ in 0..3 {
            l.note(inline(3)).unwrap();
        }
        let mut got = Got::default();
        let taken = l.complete_runs(l.next_id() - 1, Err(RdmaError::Down), 3, |id, r| {
            got.push(id, r)
        });
        assert_eq!(taken, Some(0));
        assert_eq!(
            got.seen(),
            [
                (Some(WorkId::Inlines { peer: 3, count: 2 }), Ok(())),
                (Some(WorkId::Inline(3)), Err(RdmaError::Down)),
            ]
        );
    }

    fn post(wr_id: u64, signalled: bool) -> Post {
        Post { wr_id, signalled }
    }

    #[test]
    fn a_completion_ends_every_post_before_it_and_a_stray_one_nothing() {
        let mut l = Ledger::new([Post::default(); 4]);
        assert_eq!(l.note(post(10, false)), Some(0));
        assert_eq!(l.note(post(11, false)), Some(1));
        assert_eq!(l.note(post(12, true)), Some(2));
        assert!(!l.quiet_tail());
        assert_eq!(l.note(post(13, false)), Some(3));
        assert!(l.is_full() && l.quiet_tail());
        assert_eq!(l.note(post(14, true)), None, "full");
        assert_eq!(l.awaited(), 1);
        let mut got = [(0, Ok(())); 4];
        let mut n = 0;
        let r = l.complete(2, Err(RdmaError::Access), |p, r| {
            got[n] = (p.wr_id, r);
            n += 1;
        });
        assert_eq!(r, Some(1));
        assert_eq!(
            got[..n],
            [(10, Ok(())), (11, Ok(())), (12, Err(RdmaError::Access))]
        );
        // Repeated or never posted: nothing.
        assert_eq!(l.complete(2, Ok(()), |_, _| panic!("taken")), None);
        assert_eq!(l.complete(9, Ok(()), |_, _| panic!("taken")), None);
        assert_eq!((l.len(), l.head(), l.next_id(), l.awaited()), (1, 3, 4, 0));
    }

    #[test]
    fn the_ring_wraps_and_ids_keep_counting() {
        let mut l = Ledger::new([Post::default(); 3]);
        for round in 0..10u64 {
            let a = l.note(post(2 * round, false)).unwrap();
            let b = l.note(post(2 * round + 1, true)).unwrap();
            assert_eq!((a, b), (2 * round, 2 * round + 1));
            let mut ids = [0; 2];
            let mut n = 0;
            assert_eq!(
                l.complete(b, Ok(()), |p, _| {
                    ids[n] = p.wr_id;
                    n += 1
                }),
                Some(1)
            );
            assert_eq!(ids, [2 * round, 2 * round + 1]);
            assert!(l.is_empty());
        }
    }

    #[test]
    fn posts_a_device_refused_are_forgotten_from_the_first_refused_on() {
        let mut l = Ledger::new([Post::default(); 8]);
        for i in 0..5 {
            l.note(post(100 + i, i % 2 == 0)).unwrap();
        }
        let mut ids = [0; 8];
        let mut n = 0;
        let signalled = l.unpost_from(2, |p| {
            ids[n] = p.wr_id;
            n += 1;
        });
        assert_eq!((&ids[..n], signalled), (&[102, 103, 104][..], 2));
        assert_eq!((l.len(), l.next_id(), l.awaited()), (2, 2, 1));
        assert_eq!(l.unpost_from(7, |_| panic!("none")), 0);
        // The next post takes the first refused one's id.
        assert_eq!(l.note(post(200, true)), Some(2));
    }
}
