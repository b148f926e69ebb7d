//! Device side shared by every EP impl: kernel arguments, buffers, the per-rank inputs and the
//! launches of the common kernels (src/kernels/ep.cu).
use super::routing::Routing;
use super::shape::{Payload, Shape};
use super::Received;
use crate::cuda::{config, grid, Gpu, THREADS, WAVE};
use crate::error::Result;
use crate::harness::check::Break;
use cudarc::driver::{sys, CudaFunction, CudaSlice, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};

/// Tokens per chunk of the deterministic layout.
pub const CHUNK: usize = config::GB_EP_CHUNK as usize;

/// Mirrors `EpArgs` in src/kernels/ep.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Args {
    pub tokens: i32,
    pub max_tokens: i32,
    pub hidden: i32,
    pub topk: i32,
    pub experts: i32,
    pub local: i32,
    pub ranks: i32,
    pub rank: i32,
    pub row: i32,
    pub fp8: i32,
}
unsafe impl DeviceRepr for Args {}
// The kernels assert the same size (ep_common.cuh): both sides change together or neither builds.
const _: () = assert!(std::mem::size_of::<Args>() == 40);

impl Args {
    pub fn new(shape: &Shape, payload: Payload, ranks: usize, rank: usize, tokens: usize, max_tokens: usize) -> Args {
        Args {
            tokens: tokens as i32,
            max_tokens: max_tokens as i32,
            hidden: shape.hidden as i32,
            topk: shape.topk as i32,
            experts: shape.experts as i32,
            local: shape.local_experts(ranks) as i32,
            ranks: ranks as i32,
            rank: rank as i32,
            // The kernels move rows in 16-byte vectors: an FP8 row (H + 4H/128 bytes) is padded
            // when H is not a multiple of 512.
            row: shape.dispatch_row_bytes(payload).next_multiple_of(16) as i32,
            fp8: (payload == Payload::Fp8) as i32,
        }
    }
}

/// Mirrors `RowSet`: `groups` groups of `group_rows` rows, group g holding counts[g] valid rows
/// (`count0` when `counts` is 0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RowSet {
    pub groups: i32,
    pub counts: u64,
    pub count0: i32,
    pub group_rows: u64,
}
unsafe impl DeviceRepr for RowSet {}
const _: () = assert!(std::mem::size_of::<RowSet>() == 32); // ep.cu asserts the same

/// Mirrors `ExpertSel`: one selection a received row carries into the checks' expert.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpertSel {
    /// Global expert id; -1: none.
    pub expert: i32,
    pub weight: f32,
}
const _: () = assert!(std::mem::size_of::<ExpertSel>() == 8); // ep.cu asserts the same

/// A zeroed device buffer and its address.
pub struct Buf {
    _mem: CudaSlice<u8>,
    pub ptr: u64,
    pub bytes: usize,
}

impl Buf {
    pub fn zeros(gpu: &Gpu, bytes: usize) -> Result<Buf> {
        let mem = gpu.stream.alloc_zeros::<u8>(bytes.max(16))?;
        let ptr = {
            let (p, _sync) = mem.device_ptr(&gpu.stream);
            p
        };
        Ok(Buf { _mem: mem, ptr, bytes })
    }

    pub fn upload<T: Copy>(gpu: &Gpu, data: &[T]) -> Result<Buf> {
        let bytes = std::mem::size_of_val(data);
        let b = Buf::zeros(gpu, bytes)?;
        b.write(gpu, data)?;
        Ok(b)
    }

    pub fn write<T: Copy>(&self, gpu: &Gpu, data: &[T]) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes <= self.bytes, "upload of {bytes} bytes into a buffer of {}", self.bytes);
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                self.ptr,
                std::slice::from_raw_parts(data.as_ptr() as *const u8, bytes),
                gpu.stream.cu_stream(),
            )
        }?;
        gpu.stream.synchronize()?;
        Ok(())
    }

    pub fn read<T: Copy + Default>(&self, gpu: &Gpu, n: usize) -> Result<Vec<T>> {
        assert!(n * std::mem::size_of::<T>() <= self.bytes);
        read(gpu, self.ptr, n)
    }

    /// Every bit set, in stream order (no host sync): what `gb_ep_verify_combine` expects past
    /// the valid rows.
    pub fn poison(&self, gpu: &Gpu) -> Result<()> {
        let byte = config::GB_EP_POISON_BYTE as u8;
        unsafe { cudarc::driver::result::memset_d8_async(self.ptr, byte, self.bytes, gpu.stream.cu_stream()) }?;
        Ok(())
    }
}

/// `n` values from device address `ptr`, after the stream's work.
pub fn read<T: Copy + Default>(gpu: &Gpu, ptr: u64, n: usize) -> Result<Vec<T>> {
    let mut v = vec![T::default(); n];
    gpu.stream.synchronize()?;
    if n > 0 {
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v.as_slice())) };
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(bytes, ptr) }?;
    }
    Ok(v)
}

/// Dynamic shared memory for a kernel that needs `need` bytes and must run one CTA per SM (more
/// than half an SM's), so that `ctas` CTAs occupy exactly `ctas` SMs. Raises the kernel's limit.
pub fn one_cta_per_sm(gpu: &Gpu, f: &CudaFunction, need: u32) -> Result<u32> {
    let per_sm =
        gpu.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u32;
    dynamic_smem(gpu, f, need.max(per_sm / 2 + 1024), "an EP kernel")
}

/// Lets `f` launch with `need` bytes of dynamic shared memory: above the default 48 KB a kernel
/// must opt in, up to what the GPU allows. (The HT notify kernels hold the whole count matrix,
/// ranks x (ranks + local experts) words: 64 KB at 8 ranks of 2048 experts each.)
pub fn dynamic_smem(gpu: &Gpu, f: &CudaFunction, need: u32, what: &str) -> Result<u32> {
    let max = gpu.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
    if need > max {
        return Err(crate::error::Error::env(
            format!("{what} needs {need} bytes of shared memory per CTA; this GPU allows {max}"),
            "use fewer ranks per EP group or fewer experts per rank",
        ));
    }
    f.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, need as i32)?;
    Ok(need)
}

/// This rank's inputs for one token count: tokens (BF16), the rows dispatch sends (the BF16
/// tokens, or their FP8 quantization), routing, and the combined output.
pub struct Inputs {
    pub args: Args,
    pub x: Buf,
    /// Dispatched rows: `x` itself for BF16, else the FP8 rows.
    pub rows: u64,
    fp8_rows: Option<Buf>,
    pub idx: Buf,
    pub weight: Buf,
    pub out: Buf,
    f: Common,
}

struct Common {
    fill: CudaFunction,
    quantize: CudaFunction,
}

impl Inputs {
    /// Buffers for `args.tokens` tokens; `route` fills in a routing.
    pub fn new(gpu: &Gpu, args: Args) -> Result<Inputs> {
        let (t, h, k) = (args.tokens as usize, args.hidden as usize, args.topk as usize);
        let x = Buf::zeros(gpu, t * h * 2)?;
        let fp8_rows = if args.fp8 != 0 { Some(Buf::zeros(gpu, t * args.row as usize)?) } else { None };
        let rows = fp8_rows.as_ref().map(|b| b.ptr).unwrap_or(x.ptr);
        Ok(Inputs {
            args,
            rows,
            x,
            fp8_rows,
            idx: Buf::zeros(gpu, t * k * 4)?,
            weight: Buf::zeros(gpu, t * k * 4)?,
            out: Buf::zeros(gpu, t * h * 2)?,
            f: Common { fill: gpu.function("ep", "gb_ep_fill")?, quantize: gpu.function("ep", "gb_ep_quantize")? },
        })
    }

    /// Upload this rank's routing (as many tokens as `args`).
    pub fn route(&self, gpu: &Gpu, r: &Routing) -> Result<()> {
        self.idx.write(gpu, &r.idx)?;
        self.weight.write(gpu, &r.weight)
    }

    /// Tokens for `seed` (every value a function of rank, token, channel and seed).
    pub fn fill(&self, gpu: &Gpu, seed: u32) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.f.fill);
        b.arg(&self.x.ptr).arg(&self.args).arg(&seed);
        unsafe { b.launch(grid(WAVE, 0)) }?;
        Ok(())
    }

    /// FP8 rows from the tokens (a no-op for BF16), on `ctas` CTAs.
    pub fn quantize(&self, gpu: &Gpu, ctas: u32) -> Result<()> {
        if let Some(q) = &self.fp8_rows {
            let mut b = gpu.stream.launch_builder(&self.f.quantize);
            b.arg(&self.x.ptr).arg(&q.ptr).arg(&self.args);
            unsafe { b.launch(grid(ctas, 0)) }?;
        }
        Ok(())
    }
}

/// The deterministic layout (counts and positions per expert and per destination rank), two
/// kernels; used by the host impl and the HT impls.
pub struct LayoutBufs {
    pub chunk_cnt: Buf,
    pub chunk_base: Buf,
    pub sel_local: Buf,
    pub tok_local: Buf,
    pub totals: Buf,
    pub expert_off: Buf,
    /// The scan's arrivals; its last CTA resets it.
    ticket: Buf,
    chunks_fn: CudaFunction,
    scan_fn: CudaFunction,
    /// Warps per CTA of the chunks kernel: each keeps E mask words in shared memory.
    chunk_warps: u32,
}

/// Shared memory the chunks kernel may take per CTA (a warp needs 4 bytes per expert).
const LAYOUT_SMEM: u32 = 96 * 1024;

impl LayoutBufs {
    pub fn new(gpu: &Gpu, a: &Args) -> Result<LayoutBufs> {
        let (t, k, r, e) = (a.max_tokens as usize, a.topk as usize, a.ranks as usize, a.experts as usize);
        let chunks = t.div_ceil(CHUNK);
        let chunks_fn = gpu.function("ep", "gb_ep_layout_chunks")?;
        let chunk_warps = (LAYOUT_SMEM / (4 * e as u32)).clamp(1, THREADS / 32);
        let smem = chunk_warps * 4 * e as u32;
        chunks_fn
            .set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)?;
        Ok(LayoutBufs {
            chunk_cnt: Buf::zeros(gpu, chunks * (e + r) * 4)?,
            chunk_base: Buf::zeros(gpu, chunks * (e + r) * 4)?,
            sel_local: Buf::zeros(gpu, t * k * 4)?,
            tok_local: Buf::zeros(gpu, t * r * 4)?,
            totals: Buf::zeros(gpu, (e + r) * 4)?,
            expert_off: Buf::zeros(gpu, (e + 1) * 4)?,
            ticket: Buf::zeros(gpu, 4)?,
            chunks_fn,
            scan_fn: gpu.function("ep", "gb_ep_layout_scan")?,
            chunk_warps,
        })
    }

    /// Both kernels on at most `ctas` CTAs.
    pub fn launch(&self, gpu: &Gpu, a: &Args, idx: u64, ctas: u32) -> Result<()> {
        let chunks = (a.tokens as u32).div_ceil(CHUNK as u32);
        let keys = (a.experts + a.ranks) as u32;
        let w = self.chunk_warps;
        let mut b = gpu.stream.launch_builder(&self.chunks_fn);
        b.arg(&idx).arg(a).arg(&self.chunk_cnt.ptr).arg(&self.sel_local.ptr).arg(&self.tok_local.ptr);
        let cfg = LaunchConfig {
            grid_dim: (ctas.min(chunks.div_ceil(w)).max(1), 1, 1),
            block_dim: (32 * w, 1, 1),
            shared_mem_bytes: w * 4 * a.experts as u32,
        };
        unsafe { b.launch(cfg) }?;
        let mut b = gpu.stream.launch_builder(&self.scan_fn);
        b.arg(&self.chunk_cnt.ptr).arg(a).arg(&self.chunk_base.ptr).arg(&self.totals.ptr).arg(&self.expert_off.ptr);
        b.arg(&self.ticket.ptr);
        unsafe { b.launch(grid(ctas.min(keys.div_ceil(THREADS / 32)), 0)) }?;
        Ok(())
    }
}

/// The check and expert kernels.
pub struct Checks {
    expert: CudaFunction,
    verify_rows: CudaFunction,
    verify_combine: CudaFunction,
    wrong: Buf,
    /// Test only: what the checks break (`GINBENCH_CHECK_BREAK`).
    pub brk: Break,
}

impl Checks {
    pub fn new(gpu: &Gpu) -> Result<Checks> {
        Ok(Checks {
            expert: gpu.function("ep", "gb_ep_expert")?,
            verify_rows: gpu.function("ep", "gb_ep_verify_rows")?,
            verify_combine: gpu.function("ep", "gb_ep_verify_combine")?,
            wrong: Buf::zeros(gpu, 8)?,
            brk: Break::from_env()?,
        })
    }

    /// Combine input: the checks' expert on every received row (`gb_ep_expert`).
    pub fn expert(&self, gpu: &Gpu, a: &Args, rec: &Received, seed: u32) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.expert);
        // Added to every expert id the expert sees: the next expert's gains under the break.
        let shift = (self.brk == Break::WrongExpert) as i32;
        b.arg(&rec.y).arg(a).arg(&rec.desc).arg(&rec.set).arg(&rec.sel).arg(&rec.per_row).arg(&shift);
        b.arg(&seed);
        unsafe { b.launch(grid(WAVE, 0)) }?;
        Ok(())
    }

    fn count(&self, gpu: &Gpu, launch: impl FnOnce(u64) -> Result<()>) -> Result<u64> {
        self.wrong.write(gpu, &[0u64])?;
        launch(self.wrong.ptr)?;
        Ok(self.wrong.read::<u64>(gpu, 1)?[0])
    }

    /// Wrong values among the received rows.
    pub fn rows(&self, gpu: &Gpu, a: &Args, rec: &Received, seed: u32) -> Result<u64> {
        self.count(gpu, |wrong| {
            let mut b = gpu.stream.launch_builder(&self.verify_rows);
            b.arg(&rec.rows).arg(a).arg(&rec.desc).arg(&rec.set).arg(&seed).arg(&wrong);
            unsafe { b.launch(grid(WAVE, 0)) }?;
            Ok(())
        })
    }

    /// Wrong values among the combined tokens, and poisoned elements ([`Buf::poison`], before
    /// the combines) overwritten past them.
    pub fn combined(&self, gpu: &Gpu, inp: &Inputs, seed: u32) -> Result<u64> {
        let a = &inp.args;
        let cap = (inp.out.bytes / (2 * a.hidden as usize)) as i32;
        // Under the break the guard starts on the last valid token, as a combine that wrote one
        // token too many would reach it.
        let guard = a.tokens - (self.brk == Break::GuardOverlap && a.tokens > 0) as i32;
        self.count(gpu, |wrong| {
            let mut b = gpu.stream.launch_builder(&self.verify_combine);
            b.arg(&inp.out.ptr).arg(a).arg(&inp.idx.ptr).arg(&inp.weight.ptr).arg(&seed).arg(&guard).arg(&cap);
            b.arg(&wrong);
            unsafe { b.launch(grid(WAVE, 0)) }?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_whole_16_byte_vectors() {
        for hidden in [128, 256, 384, 512, 2048, 7168] {
            let shape = Shape { hidden, topk: 2, experts: 8 };
            for p in [Payload::Bf16, Payload::Fp8] {
                let a = Args::new(&shape, p, 2, 0, 1, 1);
                assert_eq!(a.row % 16, 0, "hidden {hidden} {p:?}");
                assert!(a.row as usize >= shape.dispatch_row_bytes(p));
            }
        }
        let shape = Shape { hidden: 128, topk: 2, experts: 8 };
        assert_eq!(Args::new(&shape, Payload::Fp8, 2, 0, 1, 1).row, 144, "132 bytes padded");
    }
}
