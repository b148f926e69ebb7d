//! The correctness check on the device (kernels in src/kernels/check.cu): fill send buffers with
//! a per-rank pattern, poison receive buffers, verify bit-exactly, count wrong elements.
use crate::cuda::Gpu;
use crate::error::Result;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

pub struct Checker {
    fill: CudaFunction,
    poison: CudaFunction,
    verify: CudaFunction,
    wrong: CudaSlice<u64>,
}

fn grid(count: u64) -> LaunchConfig {
    let threads = 512u32;
    let blocks = count.div_ceil(threads as u64).clamp(1, 1024) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

impl Checker {
    /// Kernels for elements of `elt` bytes (1, 2, 4 or 8).
    pub fn new(gpu: &Gpu, elt: u64) -> Result<Checker> {
        let sfx = match elt {
            1 => "u8",
            2 => "u16",
            4 => "u32",
            _ => "u64",
        };
        Ok(Checker {
            fill: gpu.function("check", &format!("gb_fill_{sfx}"))?,
            poison: gpu.function("check", &format!("gb_poison_{sfx}"))?,
            verify: gpu.function("check", &format!("gb_verify_{sfx}"))?,
            wrong: gpu.stream.alloc_zeros::<u64>(1)?,
        })
    }

    /// `count` elements of rank `rank`'s send pattern for `seed`.
    pub fn fill(&self, gpu: &Gpu, buf: u64, count: u64, seed: u32, rank: u32) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.fill);
        b.arg(&buf).arg(&count).arg(&seed).arg(&rank);
        unsafe { b.launch(grid(count)) }?;
        Ok(())
    }

    /// Poison `nranks * c` receive elements so any element left unwritten is wrong.
    pub fn poison(&self, gpu: &Gpu, buf: u64, c: u64, nranks: u32, seed: u32, rank: u32) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.poison);
        b.arg(&buf).arg(&c).arg(&nranks).arg(&seed).arg(&rank);
        unsafe { b.launch(grid(c * nranks as u64)) }?;
        Ok(())
    }

    /// Count elements of the receive buffer that differ from what the peers sent.
    pub fn verify(&mut self, gpu: &Gpu, buf: u64, c: u64, nranks: u32, seed: u32, rank: u32) -> Result<u64> {
        gpu.stream.memset_zeros(&mut self.wrong)?;
        let mut b = gpu.stream.launch_builder(&self.verify);
        b.arg(&buf).arg(&c).arg(&nranks).arg(&seed).arg(&rank).arg(&mut self.wrong);
        unsafe { b.launch(grid(c * nranks as u64)) }?;
        let host = gpu.stream.clone_dtoh(&self.wrong)?;
        Ok(host[0])
    }
}
