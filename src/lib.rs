//! ginbench: benchmarks for the communication Mixture-of-Experts models live on.
//!
//! Layers, bottom up: `nccl` and `cuda` (FFI and safe wrappers), `bootstrap` (MPI or threads),
//! `harness` (timing, checking, sizes, watchdog), the benchmarks (`alltoall`), and `report`
//! (table, JSON, CSV), which never touches CUDA.
pub mod alltoall;
pub mod bootstrap;
pub mod cli;
pub mod cuda;
pub mod dtype;
pub mod envinfo;
pub mod ep;
pub mod error;
pub mod gin;
pub mod harness;
pub mod nccl;
pub mod profile;
pub mod report;
pub mod sysinfo;
