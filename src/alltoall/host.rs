//! `host` (-D 0): NCCL's own alltoall, `ncclAlltoAll`.
use super::{Impl, InPlace, Rank};
use crate::error::Result;

pub struct Host;

impl Impl for Host {
    // Timed as nccl-tests does, not checked: NCCL does not define in-place alltoall (a peer's
    // block may land before this rank has sent the block it overwrites).
    fn in_place(&self, _: u64) -> InPlace {
        InPlace::Unchecked("not checked: NCCL does not define in-place alltoall (timed as nccl-tests does)")
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        let dt = crate::nccl::datatype(r.dtype);
        unsafe { r.comm.alltoall(send as *const _, recv as *mut _, count as usize, dt, r.gpu.raw_stream()) }
    }
}
