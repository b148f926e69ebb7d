//! `nvl-ce` (-D 8): every block copied by the copy engines (one stream per peer, so the copies run
//! concurrently) straight into the peer's receive window, between two LSA barriers.
use super::{Impl, InPlace, Rank};
use crate::error::Result;
use crate::nccl::compat::{self, DevComm};
use cudarc::driver::{result, sys, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

pub struct Ce {
    barrier: CudaFunction,
    /// Base of each peer's copy of the receive window, in this GPU's address space.
    recv_base: Vec<u64>,
    streams: Vec<Arc<CudaStream>>,
    fork: CudaEvent,
    joins: Vec<CudaEvent>,
    dev: DevComm,
}

impl Ce {
    /// Collective. Skips (inner Err) unless every rank is in one LSA team.
    pub fn new(r: &Rank) -> Result<std::result::Result<Ce, String>> {
        if let Some(why) = r.comm.not_one_lsa_team() {
            return Ok(Err(why));
        }
        let n = r.boot.size();
        let mut reqs = compat::requirements();
        reqs.lsaBarrierCount = 1;
        let dev = DevComm::create(r.comm, &reqs)?;
        let crate::nccl::Registration::Windows(_, recv_win) = r.reg else {
            return Err(crate::error::Error::internal("nvl-ce without symmetric windows"));
        };
        let mut bases = r.gpu.stream.alloc_zeros::<u64>(n)?;
        let f = r.gpu.function("ce", "gb_lsa_pointers")?;
        let mut b = r.gpu.stream.launch_builder(&f);
        let (win, nn) = (recv_win as u64, n as i32);
        b.arg(&win).arg(&nn).arg(&mut bases);
        unsafe { b.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
        let recv_base = r.gpu.stream.clone_dtoh(&bases)?;
        let streams = (0..n).map(|_| r.gpu.ctx.new_stream()).collect::<std::result::Result<Vec<_>, _>>()?;
        let ev = || r.gpu.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING));
        let joins = (0..n).map(|_| ev()).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Ok(Ce { barrier: r.gpu.function("ce", "gb_lsa_barrier")?, recv_base, streams, fork: ev()?, joins, dev }))
    }

    fn barrier(&self, r: &Rank) -> Result<()> {
        let mut b = r.gpu.stream.launch_builder(&self.barrier);
        b.arg(&self.dev.raw);
        unsafe { b.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
        Ok(())
    }
}

impl Impl for Ce {
    fn in_place(&self, _: u64) -> InPlace {
        InPlace::Unsupported("a peer's copy may overwrite a block before this rank has copied it out")
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        let (me, n) = (r.boot.rank() as u64, r.boot.size() as u64);
        let bytes = count * r.dtype.size();
        let recv_off = recv - r.recv.ptr;
        self.barrier(r)?;
        if bytes > 0 {
            self.fork.record(&r.gpu.stream)?;
            for p in 0..n {
                let s = &self.streams[p as usize];
                s.wait(&self.fork)?;
                let dst = self.recv_base[p as usize] + recv_off + me * bytes;
                unsafe { result::memcpy_dtod_async(dst, send + p * bytes, bytes as usize, s.cu_stream()) }?;
                self.joins[p as usize].record(s)?;
                r.gpu.stream.wait(&self.joins[p as usize])?;
            }
        }
        self.barrier(r)
    }
}

impl Drop for Ce {
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = s.synchronize();
        }
    }
}
