//! A simulated rank's request: the core's handle and the buffer of the
//! rank's own that holds its bytes.

use rmx_core::{Request, UserBuf};

/// One of the rank's requests and the buffer holding its bytes.
#[derive(Debug)]
pub struct Req {
    pub req: Request,
    pub(crate) buf: UserBuf,
}
