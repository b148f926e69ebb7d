//! Alltoall: the implementations (one file each) and the benchmark that sweeps them.
pub mod bench;
pub mod host;
pub mod registry;

use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::dtype::Dtype;
use crate::error::Result;
use crate::nccl::{Comm, DevMem, Registration};
use registry::ImplInfo;

/// One rank's resources, shared by every implementation.
pub struct Rank<'a> {
    pub boot: &'a dyn Bootstrap,
    pub gpu: Gpu,
    pub comm: Comm,
    pub send: DevMem,
    pub recv: DevMem,
    pub reg: Registration,
    pub dtype: Dtype,
}

/// An alltoall implementation, set up for one rank.
pub trait Impl {
    /// Enqueue one alltoall of `count` elements per peer, from `send` to `recv` (device
    /// addresses inside the rank's buffers; equal for in-place), on the rank's stream.
    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()>;
}

/// Set `info` up on this rank (collective: every rank calls it for the same impl).
pub fn make(info: &ImplInfo, _r: &Rank) -> Result<Box<dyn Impl>> {
    match info.name {
        "host" => Ok(Box::new(host::Host)),
        other => Err(crate::error::Error::internal(format!(
            "implementation '{other}' is registered but not built"
        ))),
    }
}
