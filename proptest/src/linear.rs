//! The matching queues as plain ordered lists searched front to back: the
//! reference the binned [`rmx_core::matching::Matcher`] is checked and
//! measured against.

use rmx_core::matching::{Envelope, Pattern, Source};

/// Posted receives and unexpected messages, each in arrival order.
pub struct LinearMatcher<P, U> {
    posted: Vec<(Pattern, P)>,
    unexpected: Vec<(Envelope, U)>,
}

impl<P, U> Default for LinearMatcher<P, U> {
    fn default() -> Self {
        LinearMatcher {
            posted: Vec::new(),
            unexpected: Vec::new(),
        }
    }
}

impl<P, U> LinearMatcher<P, U> {
    /// The oldest posted receive `env` matches, removed.
    pub fn arrive(&mut self, env: &Envelope) -> Option<P> {
        let i = self.posted.iter().position(|(p, _)| p.matches(env))?;
        Some(self.posted.remove(i).1)
    }

    pub fn push_unexpected(&mut self, env: Envelope, u: U) {
        self.unexpected.push((env, u));
    }

    /// The oldest unexpected message `pat` matches, removed.
    pub fn take_unexpected(&mut self, pat: &Pattern) -> Option<(Envelope, U)> {
        let i = self.unexpected.iter().position(|(e, _)| pat.matches(e))?;
        Some(self.unexpected.remove(i))
    }

    pub fn post(&mut self, pat: Pattern, p: P) {
        self.posted.push((pat, p));
    }

    pub fn remove_posted(&mut self, which: impl Fn(&P) -> bool) -> Option<P> {
        let i = self.posted.iter().position(|(_, p)| which(p))?;
        Some(self.posted.remove(i).1)
    }

    /// The oldest receive posted for `src` alone, removed.
    pub fn remove_posted_from(&mut self, src: u16) -> Option<P> {
        let i = self
            .posted
            .iter()
            .position(|(p, _)| p.source == Source::Rank(src))?;
        Some(self.posted.remove(i).1)
    }

    /// The oldest receive posted for any source, removed.
    pub fn remove_posted_any(&mut self) -> Option<P> {
        let i = self
            .posted
            .iter()
            .position(|(p, _)| p.source == Source::Any)?;
        Some(self.posted.remove(i).1)
    }

    pub fn lens(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }
}
