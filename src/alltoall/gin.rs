//! `gin` (-D 3), `hybrid` (-D 4) and their emulated forms `gin-emu` (-D 9), `hybrid-emu` (-D 10).
//! One protocol (src/kernels/gin.cu) on two transports: NCCL's GIN, or GIN emulated over NVLink
//! between virtual nodes of one host (`--emulate-nodes N`), so the protocol is verified on every
//! NIC-less GPU host before it runs on EFA or InfiniBand.
use super::{Impl, InPlace, Rank};
use crate::error::Result;
use crate::gin_transport::GinTransport;
use crate::nccl::compat::{self, DevComm};
use crate::nccl::SymBuffer;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

/// Default CTAs: each takes a slice of every block, with its own signal and GIN context.
const DEFAULT_CTAS: u32 = 32;

pub struct GinA2a {
    func: CudaFunction,
    ctas: u32,
    /// Ranks per virtual node (emulation).
    node_size: i32,
    /// The emulated transport's signal words: one u64 per CTA on every rank. Dropped before
    /// `dev` (field order).
    signals: Option<SymBuffer>,
    dev: DevComm,
}

impl GinA2a {
    /// Collective. Skips (inner Err) where the transport is missing: no GIN for the real kinds,
    /// no `--emulate-nodes` or no single NVLink domain for the emulated ones.
    pub fn new(kind: GinTransport, r: &Rank) -> Result<std::result::Result<GinA2a, String>> {
        let ctas = if r.ctas > 0 { r.ctas } else { DEFAULT_CTAS };
        let mut reqs = compat::requirements();
        let n = r.boot.size();
        let node_size = match kind.node_size(n, r.comm.lsa_size(), r.emulate_nodes, &r.gin, &r.gin_request, &mut reqs) {
            Ok(size) => size as i32,
            Err(why) => return Ok(Err(why)),
        };
        if kind.emulated() {
            reqs.lsaBarrierCount = ctas as i32;
        } else {
            reqs.barrierCount = ctas as i32;
            reqs.ginSignalCount = ctas as i32;
        }
        let dev = DevComm::create(r.comm, &reqs)?;
        if !kind.emulated() {
            // The barriers count from their signals' values, read before any peer signals.
            let f = r.gpu.function("gin", "gb_gin_setup")?;
            let raw: &crate::nccl::ffi::ncclDevComm = &dev.raw;
            let n = ctas as i32;
            let mut l = r.gpu.stream.launch_builder(&f);
            l.arg(raw).arg(&n);
            let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            unsafe { l.launch(one) }?;
            r.gpu.stream.synchronize()?;
            r.boot.barrier();
        }
        let signals =
            if kind.emulated() { Some(SymBuffer::new(r.comm, ctas as usize * 8, &r.gpu.stream)?) } else { None };
        Ok(Ok(GinA2a { func: r.gpu.function("gin", &format!("gb_{}", kind.symbol()))?, ctas, node_size, signals, dev }))
    }
}

impl Impl for GinA2a {
    fn in_place(&self, _: u64) -> InPlace {
        InPlace::Unsupported("puts land in peers' buffers while those peers may not have sent the blocks there yet")
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        let (sw, so) = r.window(send)?;
        let (rw, ro) = r.window(recv)?;
        let (sw, rw) = (sw as u64, rw as u64);
        let bytes = count * r.dtype.size();
        let cfg = crate::cuda::grid(self.ctas, 0);
        let mut b = r.gpu.stream.launch_builder(&self.func);
        b.arg(&sw).arg(&so).arg(&rw).arg(&ro).arg(&bytes);
        let sig;
        if let Some(s) = &self.signals {
            sig = s.win as u64;
            b.arg(&sig).arg(&self.node_size);
        }
        b.arg(&self.dev.raw);
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    fn gin_contexts(&self) -> Option<u32> {
        // The emulated transport (signal words of its own) asks NCCL for no GIN.
        self.signals.is_none().then(|| self.dev.gin_context_count())
    }
}
