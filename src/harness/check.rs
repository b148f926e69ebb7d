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
    /// Every check of a process gets a new seed.
    seeds: Seeds,
}

/// The period in the seed of EP's token values (`gb_ep_value` in src/kernels/ep_common.cuh takes
/// them modulo 251): seed 251 gives the values of seed 0, the timed data.
pub const EP_VALUE_PERIOD: u32 = 251;

/// The seeds of a process's checks, one new seed per checked run. Seed 0 is the timed runs' data,
/// so a checked run on seed 0, or on one that gives the same values, could not tell a buffer left
/// as the timed run wrote it from a right one: the seeds are never 0 and never a multiple of
/// [`EP_VALUE_PERIOD`]. (A fixed seed per check had let alltoall's send buffers hold the new fill
/// already, from the same check at an earlier size or impl.)
#[derive(Debug, Clone, Default)]
pub struct Seeds {
    last: u32,
}

impl Seeds {
    /// The next check's seed.
    pub fn new_seed(&mut self) -> u32 {
        let mut s = self.last.wrapping_add(1);
        while s.is_multiple_of(EP_VALUE_PERIOD) {
            s = s.wrapping_add(1);
        }
        self.last = s;
        s
    }
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
            seeds: Seeds::default(),
        })
    }

    /// A new seed for the next check (see [`Seeds`]).
    pub fn new_seed(&mut self) -> u32 {
        self.seeds.new_seed()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_seeds_never_repeat_the_timed_data() {
        // EP's token values: (… + seed · 65537) mod 251, and 65537 ≡ 26 (mod 251), invertible:
        // a seed gives seed 0's values exactly when it is a multiple of 251.
        let src = include_str!("../kernels/ep_common.cuh");
        assert!(src.contains("seed * 65537u) % 251u"), "gb_ep_value changed: update EP_VALUE_PERIOD");
        let mut seen = std::collections::HashSet::new();
        let mut seeds = Seeds::default();
        for _ in 0..10_000 {
            let s = seeds.new_seed();
            assert!(!(s as u64 * 65537).is_multiple_of(251), "seed {s}");
            assert!(seen.insert(s), "seed {s} twice");
        }
        assert_eq!(Seeds { last: 250 }.new_seed(), 252);
        assert_eq!(Seeds { last: u32::MAX }.new_seed(), 1, "wraps past 0");
    }
}
