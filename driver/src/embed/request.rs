//! A request of an embedded endpoint as its tasks hold it: the core's
//! handle and the user-buffer handle of the bytes it names.

use rmx_core::{Request, UserBuf};

/// A request and the handle of the bytes it names (none once it ended
/// during the call).
#[derive(Debug)]
pub struct EpReq {
    pub(crate) req: Request,
    pub(crate) buf: Option<UserBuf>,
}
