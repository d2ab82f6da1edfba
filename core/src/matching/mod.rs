//! MPI matching: the posted-receive queue and the unexpected-message queue.
//!
//! Both queues keep arrival order, and both searches take the first match, which
//! is what gives MPI's non-overtaking rule: two messages from one source in one
//! context match receives in the order they were sent, because the transport
//! delivers them to [`Matcher::arrive`] in that order.
//!
//! Matching does not slow with peers: entries are binned by (source, context)
//! in a hash table, as MPICH and Open MPI do. An arrival searches only its own
//! bin of receives posted for its source, plus the list of ANY_SOURCE
//! receives; the older of the two first matches wins, by the order the
//! receives were posted. A receive for one source searches only that
//! source's bin of unexpected messages; an ANY_SOURCE receive walks the
//! unexpected messages in arrival order. A receive for one source posted
//! while no other is waits apart, ahead of the bins (it is the oldest):
//! most receives are posted one at a time, and then an arrival compares
//! one pattern and a post hashes nothing.

mod lists;

pub use lists::Slot;
use lists::{Ends, Entries, Via, NIL};

/// Which source a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Any,
    Rank(u16),
}

/// Which tag a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagSel {
    Any,
    Tag(u32),
}

/// The matching information a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub src: u16,
    pub tag: u32,
    pub context: u16,
}

/// The matching information a receive asks for. The context never takes a wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub source: Source,
    pub tag: TagSel,
    pub context: u16,
}

impl Pattern {
    /// Does a message with envelope `e` satisfy this receive?
    pub fn matches(&self, e: &Envelope) -> bool {
        self.context == e.context
            && match self.source {
                Source::Any => true,
                Source::Rank(r) => r == e.src,
            }
            && match self.tag {
                TagSel::Any => true,
                TagSel::Tag(t) => t == e.tag,
            }
    }
}

/// A queue has no room; the caller holds on to what it tried to add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFull;

/// The bin of `(src, context)` among `n` bins: a multiplicative hash
/// scaled to `0..n` without a division.
#[inline]
fn bin(src: u16, context: u16, n: usize) -> usize {
    let key = (src as u32) | (context as u32) << 16;
    let h = key.wrapping_mul(0x9E37_79B1) ^ (key >> 15);
    ((h.wrapping_mul(0x85EB_CA6B) as u64 * n as u64) >> 32) as usize
}

/// The two MPI queues, in tables the caller supplies: `SP` of
/// [`Slot<Pattern, P>`] for posted receives (each carrying a `P`), `SU` of
/// [`Slot<Envelope, U>`] for unexpected messages (each carrying a `U`).
/// Each table's length is its queue's capacity (and its number of bins).
#[derive(Debug)]
pub struct Matcher<P, U, SP, SU> {
    /// A receive for one source posted while no other was: older than
    /// every receive in `posted`, and, as most receives are posted one at
    /// a time, the only one. It counts against `posted`'s capacity.
    lone: Option<(Pattern, P)>,
    /// Receives, those for one source binned by (source, context).
    posted: Entries<Pattern, P, SP>,
    /// ANY_SOURCE receives, oldest first.
    wildcards: Ends,
    /// Unexpected messages, binned by (source, context).
    unexpected: Entries<Envelope, U, SU>,
    /// Every unexpected message, oldest first (for ANY_SOURCE receives).
    arrivals: Ends,
}

impl<P, U, SP, SU> Matcher<P, U, SP, SU>
where
    SP: AsRef<[Slot<Pattern, P>]> + AsMut<[Slot<Pattern, P>]>,
    SU: AsRef<[Slot<Envelope, U>]> + AsMut<[Slot<Envelope, U>]>,
{
    /// Empty queues in `posted` and `unexpected` (whatever they held is
    /// forgotten).
    pub fn new(posted: SP, unexpected: SU) -> Self {
        Matcher {
            lone: None,
            posted: Entries::new(posted),
            wildcards: Ends::EMPTY,
            unexpected: Entries::new(unexpected),
            arrivals: Ends::EMPTY,
        }
    }

    /// A message arrived: removes and returns the oldest posted receive it matches.
    /// `None` means the caller must keep the message as unexpected.
    // Matching every arrival: inlined into the endpoint's one caller.
    #[inline(always)]
    pub fn arrive(&mut self, env: &Envelope) -> Option<P> {
        // The lone receive is the oldest: if it matches, it wins.
        if self.lone.as_ref().is_some_and(|(pat, _)| pat.matches(env)) {
            return self.lone.take().map(|(_, p)| p);
        }
        if self.posted.len() == 0 {
            return None;
        }
        self.arrive_listed(env)
    }

    /// [`arrive`](Self::arrive) past the lone receive: the oldest match in
    /// the bin of `env`'s source or among the ANY_SOURCE receives.
    #[inline(never)]
    fn arrive_listed(&mut self, env: &Envelope) -> Option<P> {
        let first = |m: &Self, mut i: u16, via: Via| {
            while i != NIL {
                if m.posted.key(i).is_some_and(|p| p.matches(env)) {
                    return Some(i);
                }
                i = m.posted.next(i, via);
            }
            None
        };
        // Entries are live, so there are bins.
        let b = bin(env.src, env.context, self.posted.capacity()) as u16;
        let specific = first(self, self.posted.bin_head(b), Via::Bin);
        let wild = first(self, self.wildcards.head(), Via::Order);
        let i = match (specific, wild) {
            (Some(s), Some(w)) if self.posted.older(w, s) => w,
            (Some(s), _) => s,
            (None, w) => w?,
        };
        self.take_posted(i)
    }

    /// Keeps a message nobody has asked for yet, after all earlier ones.
    #[inline]
    pub fn push_unexpected(&mut self, env: Envelope, u: U) -> Result<(), (Envelope, U)> {
        let b = bin(env.src, env.context, self.unexpected.capacity()) as u16;
        let i = self.unexpected.add(env, u, b)?;
        self.unexpected.push_bin(b, i);
        self.unexpected.push_back(&mut self.arrivals, i, Via::Order);
        Ok(())
    }

    /// A receive is posted: removes and returns the oldest unexpected message it matches.
    // Every receive looks here first: inlined into the post.
    #[inline(always)]
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
        let i = self.oldest_unexpected(pat)?;
        self.unexpected.unlink_bin(i);
        self.unexpected.unlink(&mut self.arrivals, i, Via::Order);
        self.unexpected.remove(i)
    }

    /// The oldest unexpected message `pat` matches, left in place (a
    /// probe: the receive posted next with the same pattern takes it).
    pub fn peek_unexpected(&self, pat: &Pattern) -> Option<(&Envelope, &U)> {
        let i = self.oldest_unexpected(pat)?;
        self.unexpected.get(i)
    }

    /// Where the oldest unexpected message `pat` matches lies.
    #[inline]
    fn oldest_unexpected(&self, pat: &Pattern) -> Option<u16> {
        if self.unexpected.len() == 0 {
            return None;
        }
        let n = self.unexpected.capacity();
        let (mut i, via) = match pat.source {
            Source::Rank(r) => (
                self.unexpected.bin_head(bin(r, pat.context, n) as u16),
                Via::Bin,
            ),
            Source::Any => (self.arrivals.head(), Via::Order),
        };
        while i != NIL {
            if self.unexpected.key(i).is_some_and(|e| pat.matches(e)) {
                return Some(i);
            }
            i = self.unexpected.next(i, via);
        }
        None
    }

    /// Queues a receive after all earlier ones. Call only after
    /// [`take_unexpected`](Self::take_unexpected) found nothing.
    #[inline]
    pub fn post(&mut self, pat: Pattern, p: P) -> Result<(), QueueFull> {
        let alone = self.lone.is_none() && self.posted.len() == 0;
        if alone && matches!(pat.source, Source::Rank(_)) && self.posted.capacity() > 0 {
            self.lone = Some((pat, p));
            return Ok(());
        }
        if self.posted_full() {
            return Err(QueueFull);
        }
        match pat.source {
            Source::Rank(r) => {
                let b = bin(r, pat.context, self.posted.capacity()) as u16;
                let i = self.posted.add(pat, p, b).map_err(|_| QueueFull)?;
                self.posted.push_bin(b, i);
            }
            Source::Any => {
                let i = self.posted.add(pat, p, 0).map_err(|_| QueueFull)?;
                self.posted.push_back(&mut self.wildcards, i, Via::Order);
            }
        }
        Ok(())
    }

    /// Removes the first posted receive `which` selects (cancel).
    pub fn remove_posted(&mut self, which: impl Fn(&P) -> bool) -> Option<P> {
        if self.lone.as_ref().is_some_and(|(_, p)| which(p)) {
            return self.lone.take().map(|(_, p)| p);
        }
        let i = self.posted.find(which)?;
        self.take_posted(i)
    }

    /// Whether any receive for any source is posted.
    pub fn any_posted(&self) -> bool {
        self.wildcards.head() != NIL
    }

    /// Removes the oldest receive posted for any source (no peer is left).
    pub fn remove_posted_any(&mut self) -> Option<P> {
        let i = self.wildcards.head();
        if i == NIL {
            return None;
        }
        self.take_posted(i)
    }

    /// Removes the oldest receive posted for `src` alone (the peer failed).
    pub fn remove_posted_from(&mut self, src: u16) -> Option<P> {
        if self
            .lone
            .as_ref()
            .is_some_and(|(pat, _)| pat.source == Source::Rank(src))
        {
            return self.lone.take().map(|(_, p)| p);
        }
        let i = self.posted.find_key(|k| k.source == Source::Rank(src))?;
        self.take_posted(i)
    }

    /// Unlinks posted receive `i` from its bin or the wildcard list and frees it.
    #[inline]
    fn take_posted(&mut self, i: u16) -> Option<P> {
        match self.posted.key(i)?.source {
            Source::Rank(_) => self.posted.unlink_bin(i),
            Source::Any => self.posted.unlink(&mut self.wildcards, i, Via::Order),
        }
        self.posted.remove(i).map(|(_, p)| p)
    }

    /// Is the unexpected queue out of room?
    pub fn unexpected_full(&self) -> bool {
        self.unexpected.is_full()
    }

    /// How many more unexpected messages can be kept.
    pub fn unexpected_room(&self) -> usize {
        self.unexpected.capacity() - self.unexpected.len()
    }

    /// Is there room for one more posted receive?
    pub fn posted_full(&self) -> bool {
        self.posted_len() >= self.posted.capacity()
    }

    fn posted_len(&self) -> usize {
        self.posted.len() + usize::from(self.lone.is_some())
    }

    /// Number of posted receives and unexpected messages.
    pub fn lens(&self) -> (usize, usize) {
        (self.posted_len(), self.unexpected.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(src: u16, tag: u32) -> Envelope {
        Envelope {
            src,
            tag,
            context: 0,
        }
    }

    type Array<K, const N: usize> = [Slot<K, u32>; N];

    /// Queues of `P` and `U` entries, in arrays.
    fn matcher<const P: usize, const U: usize>(
    ) -> Matcher<u32, u32, Array<Pattern, P>, Array<Envelope, U>> {
        Matcher::new([Slot::FREE; P], [Slot::FREE; U])
    }

    fn pat(source: Source, tag: TagSel) -> Pattern {
        Pattern {
            source,
            tag,
            context: 0,
        }
    }

    #[test]
    fn oldest_posted_receive_wins() {
        let mut m = matcher::<4, 4>();
        m.post(pat(Source::Any, TagSel::Any), 1).unwrap();
        m.post(pat(Source::Rank(2), TagSel::Tag(5)), 2).unwrap();
        assert_eq!(m.arrive(&env(2, 5)), Some(1));
        assert_eq!(m.arrive(&env(2, 5)), Some(2));
        assert_eq!(m.arrive(&env(2, 5)), None);
    }

    /// A receive posted alone is kept apart from the lists, and stays the
    /// oldest: it wins over receives posted after it, counts against the
    /// capacity, and is found by cancel and by a peer's failure.
    #[test]
    fn a_receive_posted_alone_stays_the_oldest() {
        let mut m = matcher::<3, 4>();
        m.post(pat(Source::Rank(1), TagSel::Tag(5)), 1).unwrap();
        m.post(pat(Source::Any, TagSel::Tag(5)), 2).unwrap();
        m.post(pat(Source::Rank(1), TagSel::Tag(5)), 3).unwrap();
        assert_eq!(m.post(pat(Source::Rank(2), TagSel::Any), 4), Err(QueueFull));
        assert_eq!(m.lens(), (3, 0));
        assert_eq!(m.arrive(&env(1, 5)), Some(1));
        assert_eq!(m.arrive(&env(1, 5)), Some(2));
        // Lists not empty: the next receive queues behind the one left.
        m.post(pat(Source::Rank(1), TagSel::Tag(5)), 5).unwrap();
        assert_eq!(m.arrive(&env(1, 5)), Some(3));
        assert_eq!(m.arrive(&env(1, 5)), Some(5));
        assert_eq!(m.lens(), (0, 0));
        m.post(pat(Source::Rank(1), TagSel::Tag(5)), 6).unwrap();
        assert_eq!(m.arrive(&env(1, 6)), None, "another tag");
        assert_eq!(m.remove_posted(|&p| p == 6), Some(6));
        m.post(pat(Source::Rank(1), TagSel::Tag(5)), 7).unwrap();
        assert_eq!(m.remove_posted_from(2), None);
        assert_eq!(m.remove_posted_from(1), Some(7));
        assert_eq!(m.lens(), (0, 0));
    }

    #[test]
    fn unexpected_messages_keep_order_and_respect_wildcards() {
        let mut m = matcher::<4, 4>();
        m.push_unexpected(env(1, 7), 10).unwrap();
        m.push_unexpected(env(2, 8), 20).unwrap();
        m.push_unexpected(env(1, 7), 30).unwrap();
        assert_eq!(
            m.take_unexpected(&pat(Source::Rank(2), TagSel::Any)),
            Some((env(2, 8), 20))
        );
        assert_eq!(
            m.take_unexpected(&pat(Source::Any, TagSel::Tag(7))),
            Some((env(1, 7), 10))
        );
        assert_eq!(
            m.take_unexpected(&pat(Source::Any, TagSel::Tag(7))),
            Some((env(1, 7), 30))
        );
    }

    #[test]
    fn context_never_matches_across() {
        let mut m = matcher::<4, 4>();
        m.post(
            Pattern {
                source: Source::Any,
                tag: TagSel::Any,
                context: 1,
            },
            1,
        )
        .unwrap();
        assert_eq!(m.arrive(&env(0, 0)), None);
    }

    #[test]
    fn full_queues_refuse_and_hand_back() {
        let mut m = matcher::<1, 1>();
        m.post(pat(Source::Any, TagSel::Any), 1).unwrap();
        assert_eq!(m.post(pat(Source::Any, TagSel::Any), 2), Err(QueueFull));
        m.push_unexpected(env(0, 0), 1).unwrap();
        assert_eq!(m.push_unexpected(env(0, 1), 2), Err((env(0, 1), 2)));
        assert_eq!(m.remove_posted(|&p| p == 1), Some(1));
        assert_eq!(m.lens(), (0, 1));
    }
}
