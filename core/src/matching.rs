//! MPI matching: the posted-receive queue and the unexpected-message queue.
//!
//! Both queues keep arrival order, and both searches take the first match, which
//! is what gives MPI's non-overtaking rule: two messages from one source in one
//! context match receives in the order they were sent, because the transport
//! delivers them to [`Matcher::arrive`] in that order.

use heapless::Vec;

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

/// The two MPI queues with fixed capacities. `P` is what a posted receive
/// carries, `U` what an unexpected message carries.
#[derive(Debug)]
pub struct Matcher<P, U, const NP: usize, const NU: usize> {
    posted: Vec<(Pattern, P), NP>,
    unexpected: Vec<(Envelope, U), NU>,
}

impl<P, U, const NP: usize, const NU: usize> Default for Matcher<P, U, NP, NU> {
    fn default() -> Self {
        Matcher {
            posted: Vec::new(),
            unexpected: Vec::new(),
        }
    }
}

impl<P, U, const NP: usize, const NU: usize> Matcher<P, U, NP, NU> {
    /// A message arrived: removes and returns the oldest posted receive it matches.
    /// `None` means the caller must keep the message as unexpected.
    pub fn arrive(&mut self, env: &Envelope) -> Option<P> {
        let i = self.posted.iter().position(|(p, _)| p.matches(env))?;
        Some(self.posted.remove(i).1)
    }

    /// Keeps a message nobody has asked for yet, after all earlier ones.
    pub fn push_unexpected(&mut self, env: Envelope, u: U) -> Result<(), (Envelope, U)> {
        self.unexpected.push((env, u))
    }

    /// A receive is posted: removes and returns the oldest unexpected message it matches.
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
        let i = self.unexpected.iter().position(|(e, _)| pat.matches(e))?;
        Some(self.unexpected.remove(i))
    }

    /// Queues a receive after all earlier ones. Call only after
    /// [`take_unexpected`](Self::take_unexpected) found nothing.
    pub fn post(&mut self, pat: Pattern, p: P) -> Result<(), QueueFull> {
        self.posted.push((pat, p)).map_err(|_| QueueFull)
    }

    /// Removes the first posted receive `which` selects (cancel).
    pub fn remove_posted(&mut self, which: impl Fn(&P) -> bool) -> Option<P> {
        let i = self.posted.iter().position(|(_, p)| which(p))?;
        Some(self.posted.remove(i).1)
    }

    /// Is the unexpected queue out of room?
    pub fn unexpected_full(&self) -> bool {
        self.unexpected.is_full()
    }

    /// Is there room for one more posted receive?
    pub fn posted_full(&self) -> bool {
        self.posted.is_full()
    }

    /// Number of posted receives and unexpected messages.
    pub fn lens(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
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

    fn pat(source: Source, tag: TagSel) -> Pattern {
        Pattern {
            source,
            tag,
            context: 0,
        }
    }

    #[test]
    fn oldest_posted_receive_wins() {
        let mut m: Matcher<u32, u32, 4, 4> = Matcher::default();
        m.post(pat(Source::Any, TagSel::Any), 1).unwrap();
        m.post(pat(Source::Rank(2), TagSel::Tag(5)), 2).unwrap();
        assert_eq!(m.arrive(&env(2, 5)), Some(1));
        assert_eq!(m.arrive(&env(2, 5)), Some(2));
        assert_eq!(m.arrive(&env(2, 5)), None);
    }

    #[test]
    fn unexpected_messages_keep_order_and_respect_wildcards() {
        let mut m: Matcher<u32, u32, 4, 4> = Matcher::default();
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
        let mut m: Matcher<u32, u32, 4, 4> = Matcher::default();
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
        let mut m: Matcher<u32, u32, 1, 1> = Matcher::default();
        m.post(pat(Source::Any, TagSel::Any), 1).unwrap();
        assert_eq!(m.post(pat(Source::Any, TagSel::Any), 2), Err(QueueFull));
        m.push_unexpected(env(0, 0), 1).unwrap();
        assert_eq!(m.push_unexpected(env(0, 1), 2), Err((env(0, 1), 2)));
        assert_eq!(m.remove_posted(|&p| p == 1), Some(1));
        assert_eq!(m.lens(), (0, 1));
    }
}
