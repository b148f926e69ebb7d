//! ginbench: benchmarks for the communication Mixture-of-Experts models live on.
//!
//! Layers, bottom up: `nccl` and `cuda` (FFI and safe wrappers), `bootstrap` (MPI or threads),
//! `harness` (timing, checking, sizes, watchdog), `results` (the typed results document),
//! `environment` (what the machine is), `gin_transport` / `gin_backend` (how GIN runs), the one run
//! driver (`driver`), the benchmarks (`alltoall`, `ep`, and `interference`, which runs either of
//! them against a background collective), and `report` (table, JSON, CSV, compare,
//! side-by-side reports), which never touches CUDA. `console` writes to stdout and stderr without
//! panicking.
pub mod alltoall;
pub mod bootstrap;
pub mod ceiling;
pub mod console;
pub mod cuda;
pub mod driver;
pub mod dtype;
pub mod environment;
pub mod ep;
pub mod error;
pub mod gin_backend;
pub mod gin_transport;
pub mod harness;
pub mod interference;
pub mod nccl;
pub mod profile;
pub mod report;
pub mod results;
