//! Alltoall: the implementations (one file each) and the benchmark that sweeps them.
pub mod auto;
pub mod bench;
pub mod ce;
pub mod cli;
pub mod gin;
pub mod host;
pub mod nvl;
pub mod registry;

use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::gin_transport::GinRequest;
use crate::nccl::{ffi, Comm, DevMem, Registration};

/// One rank's resources, shared by every implementation.
pub struct Rank<'a> {
    pub boot: &'a dyn Bootstrap,
    pub gpu: &'a Gpu,
    pub comm: &'a Comm,
    pub send: DevMem,
    pub recv: DevMem,
    pub reg: Registration,
    pub dtype: Dtype,
    /// `-V`: CTAs for device kernels, 0 = the impl's default.
    pub ctas: u32,
    /// GIN across these ranks, as NCCL answered (probed on a communicator of its own).
    pub gin: crate::results::Gin,
    /// `--emulate-nodes N`: virtual nodes for gin-emu / hybrid-emu.
    pub emulate_nodes: Option<usize>,
    /// What gin and hybrid ask of their device communicators (`--gin-*`).
    pub gin_request: GinRequest,
}

impl Rank<'_> {
    /// The symmetric window holding device address `ptr`, and the offset of `ptr` in it.
    pub fn window(&self, ptr: u64) -> Result<(ffi::ncclWindow_t, u64)> {
        let Registration::Windows(sw, rw) = self.reg else {
            return Err(Error::internal("device impl without symmetric windows (-R 2)"));
        };
        if (self.send.ptr..self.send.ptr + self.send.bytes as u64).contains(&ptr) {
            Ok((sw, ptr - self.send.ptr))
        } else {
            Ok((rw, ptr - self.recv.ptr))
        }
    }
}

/// What an impl does with in-place (send buffer = receive buffer).
#[derive(Debug, Clone, PartialEq)]
pub enum InPlace {
    /// Runs in place and is checked.
    Checked,
    /// Timed but not checked, for the reason given.
    Unchecked(&'static str),
    /// Not run, for the reason given.
    Unsupported(&'static str),
}

/// An alltoall implementation, set up for one rank.
pub trait Impl {
    /// Enqueue one alltoall of `count` elements per peer, from `send` to `recv` (device
    /// addresses inside the rank's buffers; equal for in-place), on the rank's stream.
    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()>;

    /// Why `bytes_per_peer` cannot run (None: it can).
    fn unsupported(&self, _bytes_per_peer: u64) -> Option<String> {
        None
    }

    fn in_place(&self, bytes_per_peer: u64) -> InPlace;

    /// The impl that runs `bytes_per_peer` for this one (`auto`: the one it picks); None: itself.
    fn ran(&self, _bytes_per_peer: u64, _in_place: bool) -> Option<&'static str> {
        None
    }

    /// The GIN contexts NCCL granted its device communicator (None: it does not use NCCL's GIN).
    fn gin_contexts(&self) -> Option<u32> {
        None
    }
}
