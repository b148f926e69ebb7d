//! Interference: a foreground expert-parallel or alltoall operation against a background
//! collective (a data-parallel all-reduce) on another communicator and stream, each alone and
//! both together, in EP × DP process-group layouts with per-communicator isolation knobs.
pub mod background;
pub mod bench;
pub mod cli;
pub mod layout;
pub mod measure;
