//! `nvl-simple` (-D 1), `nvl` (-D 2), `nvl-ll` (-D 5), `nvl-pull` (-D 7) and `nvl-ll128` (-D 11): alltoall
//! over NVLink through NCCL's device API. Kernels in src/kernels/nvl.cu.
use super::{Impl, InPlace, Rank};
use crate::cuda::{config, Gpu, THREADS};
use crate::error::Result;
use crate::nccl::{compat, compat::DevComm, SymBuffer};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

/// nvl-ll staging capacity per source rank and buffer; it carries 8 data bytes per 16, so the
/// largest block per peer is half of it.
const LL_CAP: u64 = 128 << 10;

/// nvl-ll128 moves a block in items of packs, each pack's payload in its staging bytes
/// (src/kernels/config.h).
const LL128_ITEM_DATA: u64 = (config::GB_LL128_UNROLL * config::GB_LL128_PACK_DATA) as u64;
const LL128_ITEM_STAGING: u64 = (config::GB_LL128_UNROLL * config::GB_LL128_PACK) as u64;
/// Largest block per peer nvl-ll128 carries: 8 MB per rank on 2 GPUs, 16 MB on 4.
const LL128_MAX_BYTES_PER_PEER: u64 = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Simple,
    Vector,
    Pull,
    LowLatency,
    LowLatency128,
}

impl Kind {
    fn kernel(self) -> &'static str {
        match self {
            Kind::Simple => "gb_nvl_simple",
            Kind::Vector => "gb_nvl",
            Kind::Pull => "gb_nvl_pull",
            Kind::LowLatency => "gb_nvl_ll",
            Kind::LowLatency128 => "gb_nvl_ll128",
        }
    }
    /// Default CTAs (-V 0), tuned on 4×H200 (results/h200x4/README.md): the push kernel gains
    /// up to 2 GB per rank from 32 to 128 CTAs (340 -> 356 GB/s busbw); nvl-ll is flat from 2 to
    /// 16 CTAs up to 8 KB and needs 16 to stay near 4 µs at 32-128 KB. nvl-ll128 on 2×H200
    /// (results/h200x2/ll128/): 64 CTAs lose 1-2 µs to 128 at 2-8 MB per rank, 256 gain < 1 µs
    /// at 8 MB and lose as much below 1 MB.
    fn default_ctas(self) -> u32 {
        match self {
            Kind::Simple => 16,
            Kind::Vector | Kind::Pull => 128,
            Kind::LowLatency => 16,
            Kind::LowLatency128 => 128,
        }
    }

    /// Staging bytes per source rank and buffer (None: the kernel has barriers, no staging).
    fn staging_cap(self) -> Option<u64> {
        match self {
            Kind::LowLatency => Some(LL_CAP),
            Kind::LowLatency128 => Some(LL128_MAX_BYTES_PER_PEER.div_ceil(LL128_ITEM_DATA) * LL128_ITEM_STAGING),
            _ => None,
        }
    }

    /// Largest block per peer the kernel carries.
    pub fn max_bytes_per_peer(self) -> u64 {
        match self {
            Kind::LowLatency => LL_CAP / 2,
            Kind::LowLatency128 => LL128_MAX_BYTES_PER_PEER,
            _ => u64::MAX,
        }
    }
}

/// The most CTAs of `kind` this GPU runs at once: a grid of nvl-ll or nvl-ll128 larger than that
/// never finishes, as a CTA may wait on data another CTA of a peer sends, and the CTAs not yet
/// running would wait for those that are, which wait for them.
pub fn most_resident(gpu: &Gpu, kind: Kind) -> Result<u32> {
    let per_sm =
        gpu.function("nvl", kind.kernel())?.occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)?;
    Ok(per_sm * gpu.sm_count()?)
}

/// nvl-ll's and nvl-ll128's staging window and per-CTA launch counters.
struct Staging {
    buf: SymBuffer,
    cap: u64,
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
        if let Some(why) = r.comm.not_one_lsa_team() {
            return Ok(Err(why));
        }
        let n = r.boot.size();
        let ctas = match (r.ctas, kind.staging_cap()) {
            (0, None) => kind.default_ctas(),
            // The LL kernels wait on peers' CTAs: by default at most one CTA per SM, all resident.
            (0, Some(_)) => kind.default_ctas().min(r.gpu.sm_count()?),
            (v, _) => v,
        };
        let mut reqs = compat::requirements();
        // One LSA barrier per CTA (the LL kernels have none, but a devComm needs no barrier to exist).
        reqs.lsaBarrierCount = if kind.staging_cap().is_some() { 0 } else { ctas as i32 };
        let dev = DevComm::create(r.comm, &reqs)?;
        let ll = if let Some(cap) = kind.staging_cap() {
            let buf = SymBuffer::new(r.comm, (2 * n as u64 * cap) as usize, &r.gpu.stream)?;
            let epochs = r.gpu.stream.alloc_zeros::<u32>(ctas as usize)?;
            let epochs_ptr = {
                let (p, _sync) = epochs.device_ptr(&r.gpu.stream);
                p
            };
            r.gpu.stream.synchronize()?;
            Some(Staging { buf, cap, epochs, epochs_ptr })
        } else {
            None
        };
        Ok(Ok(Nvl { kind, func: r.gpu.function("nvl", kind.kernel())?, ctas, ll, dev }))
    }
}

impl Impl for Nvl {
    fn unsupported(&self, bytes_per_peer: u64) -> Option<String> {
        let max = self.kind.max_bytes_per_peer();
        (bytes_per_peer > max)
            .then(|| format!("this impl carries at most {max} bytes per peer (use nvl or auto above)"))
    }

    fn in_place(&self, _: u64) -> InPlace {
        match self.kind {
            Kind::LowLatency | Kind::LowLatency128 => InPlace::Checked,
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
            ll_args = (ll.buf.win as u64, ll.cap, ll.epochs_ptr);
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
