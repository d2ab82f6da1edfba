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
mod args;
mod coll;
mod comm;
mod comms;
mod completion;
mod convert;
mod datatype;
mod env;
mod error;
mod p2p;
mod reduce;
mod request;
mod sched;
mod state;
mod table;
mod unsupported;
mod window;
mod words;
