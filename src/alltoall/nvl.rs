//! `nvl-simple` (-D 1), `nvl` (-D 2), `nvl-ll` (-D 5) and `nvl-pull` (-D 7): alltoall over NVLink through NCCL's
//! device API. Kernels in src/kernels/nvl.cu.
use super::{Impl, InPlace, Rank};
use crate::error::Result;
use crate::nccl::{compat, compat::DevComm, SymBuffer};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

/// Threads per CTA; src/kernels/device_compat.cuh's GB_THREADS.
const THREADS: u32 = 512;

/// nvl-ll staging capacity per source rank and buffer; it carries 8 data bytes per 16, so the
/// largest block per peer is half of it.
const LL_CAP: u64 = 128 << 10;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Simple,
    Vector,
    Pull,
    LowLatency,
}

impl Kind {
    fn kernel(self) -> &'static str {
        match self {
            Kind::Simple => "gb_nvl_simple",
            Kind::Vector => "gb_nvl",
            Kind::Pull => "gb_nvl_pull",
            Kind::LowLatency => "gb_nvl_ll",
        }
    }
    /// Default CTAs (-V 0), tuned on 4×H200 (results/h200x4/README.md): the push kernel gains
    /// up to 2 GB per rank from 32 to 128 CTAs (340 -> 356 GB/s busbw); nvl-ll is flat from 2 to
    /// 16 CTAs up to 8 KB and needs 16 to stay near 4 µs at 32-128 KB.
    fn default_ctas(self) -> u32 {
        match self {
            Kind::Simple => 16,
            Kind::Vector | Kind::Pull => 128,
            Kind::LowLatency => 16,
        }
    }
}

/// nvl-ll's staging window and per-CTA launch counters.
struct Staging {
    buf: SymBuffer,
    epochs: CudaSlice<u32>,
    epochs_ptr: u64,
}

pub struct Nvl {
    kind: Kind,
    func: CudaFunction,
    ctas: u32,
    // Dropped before `dev`: field order.
    ll: Option<Staging>,
    dev: DevComm,
}

impl Nvl {
    /// Collective. Skips (inner Err) unless every rank is in one LSA team.
    pub fn new(kind: Kind, r: &Rank) -> Result<std::result::Result<Nvl, String>> {
        if let Some(why) = r.not_one_lsa_team() {
            return Ok(Err(why));
        }
        let n = r.boot.size();
        let ctas = if r.ctas > 0 { r.ctas } else { kind.default_ctas() };
        let mut reqs = compat::requirements();
        // One LSA barrier per CTA (the LL kernel has none, but a devComm needs no barrier to exist).
        reqs.lsaBarrierCount = if kind == Kind::LowLatency { 0 } else { ctas as i32 };
        let dev = DevComm::create(r.comm, &reqs)?;
        let ll = if kind == Kind::LowLatency {
            let buf = SymBuffer::new(r.comm, (2 * n as u64 * LL_CAP) as usize, &r.gpu.stream)?;
            let epochs = r.gpu.stream.alloc_zeros::<u32>(ctas as usize)?;
            let epochs_ptr = {
                let (p, _sync) = epochs.device_ptr(&r.gpu.stream);
                p
            };
            r.gpu.stream.synchronize()?;
            Some(Staging { buf, epochs, epochs_ptr })
        } else {
            None
        };
        Ok(Ok(Nvl { kind, func: r.gpu.function("nvl", kind.kernel())?, ctas, ll, dev }))
    }

    /// Largest block per peer nvl-ll carries.
    pub fn ll_max_bytes_per_peer() -> u64 {
        LL_CAP / 2
    }
}

impl Impl for Nvl {
    fn unsupported(&self, bytes_per_peer: u64) -> Option<String> {
        (self.kind == Kind::LowLatency && bytes_per_peer > Self::ll_max_bytes_per_peer()).then(|| {
            format!("nvl-ll carries at most {} bytes per peer (use nvl or auto above)", Self::ll_max_bytes_per_peer())
        })
    }

    fn in_place(&self, _: u64) -> InPlace {
        match self.kind {
            Kind::LowLatency => InPlace::Checked,
            Kind::Pull => InPlace::Unsupported("peers read blocks that this rank's own pulls overwrite"),
            _ => InPlace::Unsupported(
                "push kernels store into peers' buffers while those peers may not have sent the blocks there yet",
            ),
        }
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        let (sw, so) = r.window(send)?;
        let (rw, ro) = r.window(recv)?;
        let (sw, rw) = (sw as u64, rw as u64);
        let bytes = count * r.dtype.size();
        let cfg = LaunchConfig { grid_dim: (self.ctas, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let mut b = r.gpu.stream.launch_builder(&self.func);
        b.arg(&sw).arg(&so).arg(&rw).arg(&ro).arg(&bytes);
        let ll_args;
        if let Some(ll) = &self.ll {
            ll_args = (ll.buf.win as u64, LL_CAP, ll.epochs_ptr);
            b.arg(&ll_args.0).arg(&ll_args.1).arg(&ll_args.2);
        }
        b.arg(&self.dev.raw);
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

impl Drop for Nvl {
    fn drop(&mut self) {
        // Launches must be complete before the staging window and devComm go away.
        let _ = self.ll.as_ref().map(|l| l.epochs.stream().synchronize());
    }
}
