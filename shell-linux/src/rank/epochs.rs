//! The core's one-sided epochs a rank keeps for its windows, by window
//! number: its progress round hands them their RDMA completions and
//! immediates.

use rmx_core::onesided::{Epoch, Target};

/// The core's epochs of a rank's windows, by window number (numbers are
/// given in order, so a table indexed by them stays as long as the
/// windows a rank ever made, and a lookup on the data path costs an index).
#[derive(Default)]
pub(crate) struct Epochs(Vec<Option<Epoch<Vec<Target>>>>);

impl Epochs {
    pub(crate) fn get_mut(&mut self, id: u16) -> Option<&mut Epoch<Vec<Target>>> {
        self.0.get_mut(id as usize)?.as_mut()
    }

    pub(crate) fn insert(&mut self, id: u16, e: Epoch<Vec<Target>>) {
        let i = id as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i] = Some(e);
    }

    pub(crate) fn remove(&mut self, id: u16) {
        if let Some(e) = self.0.get_mut(id as usize) {
            *e = None;
        }
    }
}

impl rmx_driver::Windows for Epochs {
    fn on_completion(
        &mut self,
        window: u16,
        work: rmx_core::WorkId,
        result: rmx_core::WcResult,
    ) -> bool {
        self.get_mut(window)
            .is_some_and(|e| e.on_completion(work, result))
    }

    fn on_immediate(&mut self, window: u16, imm: u32) {
        if let Some(e) = self.get_mut(window) {
            e.on_immediate(imm);
        }
    }
}
