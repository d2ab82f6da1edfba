//! How a request ended, as C reads it: rmx-driver's, which the Linux
//! module's endpoints report too.

pub use rmx_driver::embed::rmx_status_t;
