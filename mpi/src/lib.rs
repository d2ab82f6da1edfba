//! `libmpi_abi.so.1`: a subset of MPI 5.0 on its standard ABI, over rmx.
//!
//! A program compiled once against the standard ABI's `mpi.h` (for
//! example with MPICH's `mpicc_abi`) runs on this library unchanged: the
//! loader takes whichever `libmpi_abi.so.1` it finds first. Handles are
//! the ABI's (predefined ones are its small constants; rmx's own are
//! table indices far above them, looked up, never dereferenced).
//!
//! Each process is one rank of a job a launcher started (hydra's
//! `mpiexec`, Open MPI's `mpirun`, Slurm's `srun`), on the transport
//! `RMX_TRANSPORT` names. Every function of the standard ABI exists;
//! those outside the subset return `MPI_ERR_UNSUPPORTED_OPERATION`
//! naming themselves, through the communicator's error handler (fatal by
//! default, as MPI's is).

#![allow(non_snake_case, non_camel_case_types, clippy::missing_safety_doc)]

pub mod abi;
pub mod args;
pub mod coll;
pub mod comm;
pub mod comms;
pub mod completion;
pub mod convert;
pub mod datatype;
pub mod env;
pub mod error;
pub mod p2p;
pub mod reduce;
pub mod request;
pub mod sched;
pub mod state;
pub mod table;
pub mod unsupported;
pub mod window;
pub mod words;
