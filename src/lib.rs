//! ginbench: benchmarks for the communication Mixture-of-Experts models live on.
//!
//! Layers, bottom up: `nccl` and `cuda` (FFI and safe wrappers), `bootstrap` (MPI or threads),
//! `harness` (timing, checking, sizes, watchdog), the benchmarks (`alltoall`), and `report`
//! (table, JSON, CSV), which never touches CUDA.
pub mod alltoall;
pub mod bootstrap;
pub mod cuda;
pub mod driver;
pub mod dtype;
pub mod environment;
pub mod ep;
pub mod error;
pub mod gin_backend;
pub mod gin_transport;
pub mod harness;
pub mod nccl;
pub mod profile;
pub mod report;
pub mod results;
