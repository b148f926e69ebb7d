//! CUDA through cudarc's driver API (dynamically loaded): one `Gpu` per rank, with its stream
//! and the kernels that build.rs compiled into fatbins and embedded in the binary.
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use std::collections::HashMap;
use std::sync::Arc;

/// The constants the kernels and this side share, from src/kernels/config.h.
pub mod config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

/// Is a CUDA driver (libcuda.so) loadable here? Checked before any cudarc call, which would
/// otherwise panic.
pub fn driver_present() -> bool {
    unsafe { sys::is_culib_present() }
}

fn require_driver() -> Result<()> {
    if driver_present() {
        Ok(())
    } else {
        Err(Error::env(
            "no CUDA driver: libcuda.so.1 cannot be loaded (no NVIDIA GPU or driver on this machine)",
            "run on a machine with NVIDIA GPUs and their driver",
        ))
    }
}

pub fn device_count() -> Result<usize> {
    require_driver()?;
    cudarc::driver::result::init()?;
    Ok(CudaContext::device_count()? as usize)
}

/// The PCI bus id of visible GPU `ordinal` ("00000000:06:00.0" style), without creating a
/// context: it names one physical GPU whatever CUDA_VISIBLE_DEVICES each process was given.
pub fn pci_bus_id_of(ordinal: usize) -> Result<String> {
    let mut dev = 0;
    unsafe { sys::cuDeviceGet(&mut dev, ordinal as i32) }.result()?;
    let a = |attr| {
        let mut v = 0;
        unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) }.result().map(|_| v)
    };
    use sys::CUdevice_attribute as A;
    Ok(format!(
        "{:08x}:{:02x}:{:02x}.0",
        a(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
        a(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
        a(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
    ))
}

/// CUDA version the driver supports, e.g. "13.0".
pub fn driver_cuda_version() -> Result<String> {
    require_driver()?;
    let mut v = 0;
    unsafe { sys::cuDriverGetVersion(&mut v) }.result()?;
    Ok(format!("{}.{}", v / 1000, v % 1000 / 10))
}

/// Whether GPU `a` can reach GPU `b`'s memory as a peer (NVLink or PCIe peer-to-peer).
pub fn can_access_peer(a: usize, b: usize) -> Result<bool> {
    let (mut da, mut db, mut can) = (0, 0, 0);
    // SAFETY: plain driver queries with out-pointers to locals.
    unsafe {
        sys::cuDeviceGet(&mut da, a as i32).result()?;
        sys::cuDeviceGet(&mut db, b as i32).result()?;
        sys::cuDeviceCanAccessPeer(&mut can, da, db).result()?;
    }
    Ok(can != 0)
}

/// Lets the context current on this thread reach `peer`'s memory (already enabled is fine).
pub fn enable_peer_access(peer: &CudaContext) -> Result<()> {
    // SAFETY: `peer` is a live context of this process.
    let r = unsafe { sys::cuCtxEnablePeerAccess(peer.cu_ctx(), 0) };
    if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        r.result()?;
    }
    Ok(())
}

/// `bytes` from `src` to `dst` (device address, context) by the copy engines, on `stream`.
///
/// # Safety
/// Both ranges must lie in live allocations of their contexts, `stream` must belong to the source's
/// context, and that context must have peer access to the destination's.
pub unsafe fn copy_peer_async(
    dst: (sys::CUdeviceptr, &CudaContext),
    src: (sys::CUdeviceptr, &CudaContext),
    bytes: usize,
    stream: &CudaStream,
) -> Result<()> {
    Ok(sys::cuMemcpyPeerAsync(dst.0, dst.1.cu_ctx(), src.0, src.1.cu_ctx(), bytes, stream.cu_stream()).result()?)
}

/// cuProfilerStart / cuProfilerStop around `f`.
pub fn profiled<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: no arguments; a process without a profiler attached ignores them.
    unsafe { sys::cuProfilerStart() };
    let out = f();
    unsafe { sys::cuProfilerStop() };
    out
}

/// Device memory from `cuMemAlloc`. Not from a stream-ordered pool (cudarc's `alloc` uses one
/// where it can): peer access does not reach pool memory, and copies into it were staged through
/// the host at a tenth of the NVLink rate.
pub struct DeviceBytes(pub sys::CUdeviceptr, Arc<CudaContext>);

impl DeviceBytes {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DeviceBytes> {
        ctx.bind_to_thread()?;
        let mut p = 0;
        // SAFETY: allocates in the context just made current; freed in Drop.
        unsafe { sys::cuMemAlloc_v2(&mut p, bytes).result()? };
        Ok(DeviceBytes(p, ctx.clone()))
    }
}

impl Drop for DeviceBytes {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in this context and freed once; every stream was
        // drained after use.
        unsafe {
            if self.1.bind_to_thread().is_ok() {
                let _ = sys::cuMemFree_v2(self.0);
            }
        }
    }
}

/// The kernel driver's version ("580.159.04"), from /proc.
pub fn kernel_driver_version() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| {
            let line = t.lines().next()?.to_string();
            line.split_whitespace()
                .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
                .map(String::from)
        })
        .unwrap_or_default()
}

/// Threads per CTA of every kernel (config.h's GB_THREADS, which their launch bounds name).
pub const THREADS: u32 = config::GB_THREADS;

/// CTAs of the untimed kernels that fill and check buffers with grid-stride loops: two per SM of
/// a 132-SM H100 or H200, a wave of the GPU.
pub const WAVE: u32 = 264;

/// `ctas` CTAs of THREADS threads, with `smem` bytes of dynamic shared memory.
pub fn grid(ctas: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (ctas.max(1), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: smem }
}

/// A thread per element of `count`, at most 1024 CTAs (grid-stride loops do the rest).
pub fn grid_for(count: u64) -> LaunchConfig {
    grid(count.div_ceil(u64::from(THREADS)).min(1024) as u32, 0)
}

pub struct Gpu {
    pub ordinal: usize,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    modules: HashMap<&'static str, Arc<CudaModule>>,
}

impl Gpu {
    /// Open GPU `ordinal`, bind its primary context to this thread, create a stream and load
    /// every embedded kernel module.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(Error::env(
                format!("GPU {ordinal} requested but only {n} visible"),
                "run fewer ranks per node (-t/-g or mpirun -np), or check CUDA_VISIBLE_DEVICES",
            ));
        }
        let ctx = CudaContext::new(ordinal)?;
        // Timing loops must not record/wait events behind our back (cudarc multi-stream mode).
        unsafe { ctx.disable_event_tracking() };
        ctx.bind_to_thread()?;
        let stream = ctx.new_stream()?;
        let mut modules = HashMap::new();
        for (name, image) in embedded::FATBINS {
            let m = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec())).map_err(|e| {
                Error::new(
                    crate::error::Exit::Cuda,
                    format!(
                        "loading kernels '{name}' on GPU {ordinal}: {e} (built for {})",
                        env!("GINBENCH_KERNEL_TARGETS")
                    ),
                )
            })?;
            modules.insert(*name, m);
        }
        Ok(Gpu { ordinal, ctx, stream, modules })
    }

    /// Streaming multiprocessors of this GPU.
    pub fn sm_count(&self) -> Result<u32> {
        Ok(self.ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as u32)
    }

    pub fn function(&self, module: &str, name: &str) -> Result<CudaFunction> {
        let m = self.modules.get(module).ok_or_else(|| Error::internal(format!("no kernel module '{module}'")))?;
        Ok(m.load_function(name)?)
    }

    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_default()
    }

    pub fn pci_bus_id(&self) -> String {
        pci_bus_id_of(self.ordinal).unwrap_or_default()
    }

    pub fn total_mem(&self) -> u64 {
        self.ctx.total_mem().unwrap_or(0) as u64
    }

    pub fn free_mem(&self) -> u64 {
        self.ctx.mem_get_info().map(|(free, _)| free as u64).unwrap_or(0)
    }

    /// The same GPU (context, kernels) enqueueing on `stream`: what a second operation of one
    /// rank runs on, so that every launch and timing helper works on it unchanged.
    pub fn on_stream(&self, stream: Arc<CudaStream>) -> Gpu {
        Gpu { ordinal: self.ordinal, ctx: self.ctx.clone(), stream, modules: self.modules.clone() }
    }

    /// A new stream of this GPU with `priority` (lower is more urgent; see `priority_range`).
    pub fn stream_with_priority(&self, priority: i32) -> Result<Arc<CudaStream>> {
        Ok(self.ctx.new_stream_with_priority(priority)?)
    }

    /// The stream priorities this GPU offers: (least, greatest); greatest is the lowest number.
    pub fn priority_range(&self) -> Result<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }.result()?;
        Ok((least, greatest))
    }

    pub fn timing_event(&self) -> Result<CudaEvent> {
        Ok(self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// This GPU as the results schema records it.
    pub fn describe(&self, rank: usize, host: &str) -> crate::results::Gpu {
        crate::results::Gpu {
            rank,
            name: self.name(),
            host: host.into(),
            device: self.ordinal,
            pci_bus_id: self.pci_bus_id(),
            memory_bytes: self.total_mem(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        }
    }

    /// Raw stream handle for NCCL (`cudaStream_t` and `CUstream` are the same object).
    pub fn raw_stream(&self) -> *mut std::ffi::c_void {
        self.stream.cu_stream() as *mut std::ffi::c_void
    }
}

#[cfg(test)]
mod tests {
    use super::embedded::FATBINS;

    /// build.rs compiled every kernel file into a fatbin holding the kernels the Rust side loads
    /// by name (names are in the fatbin's ELF symbol tables).
    #[test]
    fn kernels_are_compiled_and_embedded() {
        let find = |module: &str| FATBINS.iter().find(|(m, _)| *m == module).map(|(_, b)| *b).unwrap();
        let has = |bin: &[u8], name: &str| bin.windows(name.len()).any(|w| w == name.as_bytes());
        let check = find("check");
        for k in ["gb_fill_u8", "gb_poison_u32", "gb_verify_u64"] {
            assert!(has(check, k), "check.fatbin lacks {k}");
        }
        let nvl = find("nvl");
        for k in ["gb_nvl_simple", "gb_nvl_pull", "gb_nvl_ll", "gb_nvl"] {
            assert!(has(nvl, k), "nvl.fatbin lacks {k}");
        }
    }
}
