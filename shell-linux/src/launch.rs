//! One rank per process: the launcher's process-management interface
//! (PMI-1 or PMIx) as the job's bootstrap, shared by every transport.

use std::sync::{Arc, Mutex};

use crate::pmi::Pmi;
use crate::transport::SetupError;

/// One rank per process, bootstrapped through the launcher's PMI server.
#[derive(Clone)]
pub struct Launch {
    /// `None` once finalized.
    pmi: Arc<Mutex<Option<Pmi>>>,
    rank: u16,
    size: u16,
    /// "PMI" (PMI-1) or "PMIx", as reports show it.
    protocol: &'static str,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {} ({})", self.rank, self.size, self.protocol)
    }
}

impl Launch {
    pub fn new(pmi: Pmi) -> Launch {
        Launch {
            rank: pmi.rank(),
            size: pmi.size(),
            protocol: pmi.protocol(),
            pmi: Arc::new(Mutex::new(Some(pmi))),
        }
    }

    /// Tells the launcher this rank is done (once; later calls do nothing).
    pub fn finalize(&self) -> Result<(), SetupError> {
        match lock(&self.pmi).take() {
            Some(p) => p.finalize().map_err(|e| SetupError::Pmi(e.to_string())),
            None => Ok(()),
        }
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut Pmi) -> Result<R, crate::pmi::PmiError>,
    ) -> Result<R, SetupError> {
        match lock(&self.pmi).as_mut() {
            Some(p) => f(p).map_err(|e| SetupError::Pmi(e.to_string())),
            None => Err(SetupError::Finalized),
        }
    }

    pub fn rank(&self) -> u16 {
        self.rank
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    /// Every rank's value of `what`, this one's being `mine`.
    pub(crate) fn exchange(&self, what: &str, mine: &str) -> Result<Vec<String>, SetupError> {
        self.with(|p| p.exchange(what, mine))
    }

    /// The launcher's barrier.
    pub(crate) fn barrier(&self) -> Result<(), SetupError> {
        self.with(|p| p.barrier())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
