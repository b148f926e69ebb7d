//! The correctness check on the device (kernels in src/kernels/check.cu): fill send buffers with
//! a per-rank pattern, poison receive buffers, verify bit-exactly, count wrong elements, and
//! count elements of a filled region (a send buffer, a guard) that changed.
use crate::cuda::{grid_for, Gpu};
use crate::error::Result;
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

pub struct Checker {
    fill: CudaFunction,
    poison: CudaFunction,
    verify: CudaFunction,
    changed: CudaFunction,
    wrong: CudaSlice<u64>,
    /// Every check of a process gets a new seed.
    seeds: Seeds,
    pub brk: Break,
}

/// Test only: a negative control that breaks what the checks see (`GINBENCH_CHECK_BREAK`), to show
/// once that they count it. Every checked run must then be counted wrong. Every rank must see the
/// same setting (`mpirun -x`): under `no-op`, ranks that disagree wait for each other until `-T`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Break {
    None,
    /// EP: every row gets the next expert's gains, as a combine that took another selection's
    /// row would see them.
    WrongExpert,
    /// The guard after each operation's output starts on its last element, as an operation
    /// that wrote one element too many would write into it. alltoall: each receive span; EP:
    /// the combined tokens (every combine row wrong, no dispatch).
    GuardOverlap,
    /// The checked operations are not run, as an impl that wrote nothing would leave its
    /// buffers. alltoall: out of place every received element is wrong; in place every element
    /// of a peer's block (the own block needs no write, so one rank alone reads 0). EP: the rows,
    /// layout and combined tokens of the timed routing's values stay, so nearly all are wrong.
    NoOp,
    /// EP: the layout check is handed a reference in which each source rank's first selection
    /// chose the next expert, as a dispatch that put those rows there would have them: every
    /// dispatch row must be counted wrong (descriptors, ranges, metadata, counts), no combine.
    Layout,
}

impl Break {
    pub const VAR: &'static str = "GINBENCH_CHECK_BREAK";

    pub fn from_env() -> Result<Break> {
        match std::env::var(Self::VAR).as_deref() {
            Err(_) => Ok(Break::None),
            Ok("wrong-expert") => Ok(Break::WrongExpert),
            Ok("guard-overlap") => Ok(Break::GuardOverlap),
            Ok("no-op") => Ok(Break::NoOp),
            Ok("layout") => Ok(Break::Layout),
            Ok(other) => Err(crate::error::Error::env(
                format!("{}={other}: not a known break", Self::VAR),
                format!("unset {}, or set it to wrong-expert, guard-overlap, no-op or layout (test only)", Self::VAR),
            )),
        }
    }
}

/// Where a rank's elements lie in a checked pattern: rank `rank`'s pattern for `seed`, from
/// element `base` on (operation j of a checked group starts at j x its elements, so no two
/// operations carry the same values), in blocks of `block` elements bound for ranks 0, 1, ...
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    pub seed: u32,
    pub rank: u32,
    pub base: u64,
    /// Elements per peer; [`Key::NO_PEER`] for a region bound for none (a guard, the timed data).
    pub block: u64,
}

impl Key {
    pub const NO_PEER: u64 = u64::MAX;
}

/// The seeds of a process's checks, one new seed per checked run. Seed 0 is the timed runs' data,
/// so a checked run on seed 0 could not tell a buffer left as the timed run wrote it from a right
/// one: the seeds are never 0. The device hashes a seed into its values (`gb_keyed64` in
/// src/kernels/splitmix.cuh), so no other seed repeats them. (A fixed seed per check had let
/// alltoall's send buffers hold the new fill already, from the same check at an earlier size or
/// impl; EP's values had been linear in the seed, and seed 251 repeated seed 0's.) Seeds stay
/// below 2^29, so a check that runs in rounds takes [`Seeds::round`] for each.
#[derive(Debug, Clone, Default)]
pub struct Seeds {
    last: u32,
}

impl Seeds {
    /// The next check's seed.
    pub fn new_seed(&mut self) -> u32 {
        self.last = if self.last + 1 < 1 << Self::ROUND_SHIFT { self.last + 1 } else { 1 };
        self.last
    }

    const ROUND_SHIFT: u32 = 29;

    /// The seed of round `round` (0..4) of the check of `seed`, which no other check's seeds
    /// repeat; round 0's is `seed` itself.
    pub fn round(seed: u32, round: usize) -> u32 {
        debug_assert!(round < 4 && seed < 1 << Self::ROUND_SHIFT);
        seed | (round as u32) << Self::ROUND_SHIFT
    }

    /// (round, the check's seed) of a round's seed.
    pub fn split(seed: u32) -> (usize, u32) {
        ((seed >> Self::ROUND_SHIFT) as usize, seed & ((1 << Self::ROUND_SHIFT) - 1))
    }
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
        let f = |name: &str| gpu.function("check", &format!("gb_{name}_{sfx}"));
        Ok(Checker {
            fill: f("fill")?,
            poison: f("poison")?,
            verify: f("verify")?,
            changed: f("changed")?,
            wrong: gpu.stream.alloc_zeros::<u64>(1)?,
            seeds: Seeds::default(),
            brk: Break::from_env()?,
        })
    }

    /// A new seed for the next check (see [`Seeds`]).
    pub fn new_seed(&mut self) -> u32 {
        self.seeds.new_seed()
    }

    /// `count` elements of `key`'s send pattern.
    pub fn fill(&self, gpu: &Gpu, buf: u64, count: u64, key: Key) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.fill);
        b.arg(&buf).arg(&count).arg(&key.block).arg(&key.seed).arg(&key.rank).arg(&key.base);
        unsafe { b.launch(grid_for(count)) }?;
        Ok(())
    }

    /// The timed runs' data in `bufs` (`count` elements each): rank `rank`'s pattern for seed 0,
    /// a real pattern and never zeros.
    pub fn fill_timed(&self, gpu: &Gpu, bufs: &[u64], count: u64, rank: u32) -> Result<()> {
        let timed = Key { seed: 0, rank, base: 0, block: Key::NO_PEER };
        bufs.iter().try_for_each(|&b| self.fill(gpu, b, count, timed))
    }

    /// Poison the `nranks` receive blocks of `key` so any element left unwritten is wrong.
    pub fn poison(&self, gpu: &Gpu, buf: u64, nranks: u32, key: Key) -> Result<()> {
        let mut b = gpu.stream.launch_builder(&self.poison);
        b.arg(&buf).arg(&key.block).arg(&nranks).arg(&key.seed).arg(&key.rank).arg(&key.base);
        unsafe { b.launch(grid_for(key.block * nranks as u64)) }?;
        Ok(())
    }

    /// Elements of the `nranks` receive blocks of `key` that differ from what the peers sent.
    pub fn verify(&mut self, gpu: &Gpu, buf: u64, nranks: u32, key: Key) -> Result<u64> {
        gpu.stream.memset_zeros(&mut self.wrong)?;
        let mut b = gpu.stream.launch_builder(&self.verify);
        b.arg(&buf).arg(&key.block).arg(&nranks).arg(&key.seed).arg(&key.rank).arg(&key.base).arg(&mut self.wrong);
        unsafe { b.launch(grid_for(key.block * nranks as u64)) }?;
        Ok(gpu.stream.clone_dtoh(&self.wrong)?[0])
    }

    /// Elements among `count` that no longer hold `key`'s fill.
    pub fn changed(&mut self, gpu: &Gpu, buf: u64, count: u64, key: Key) -> Result<u64> {
        gpu.stream.memset_zeros(&mut self.wrong)?;
        let mut b = gpu.stream.launch_builder(&self.changed);
        b.arg(&buf).arg(&count).arg(&key.block).arg(&key.seed).arg(&key.rank).arg(&key.base).arg(&mut self.wrong);
        unsafe { b.launch(grid_for(count)) }?;
        Ok(gpu.stream.clone_dtoh(&self.wrong)?[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_seeds_never_repeat_the_timed_data() {
        let mut seen = std::collections::HashSet::new();
        let mut seeds = Seeds::default();
        for _ in 0..10_000 {
            let s = seeds.new_seed();
            assert_ne!(s, 0);
            assert!(seen.insert(s), "seed {s} twice");
        }
        assert_eq!(Seeds { last: 250 }.new_seed(), 251, "251 is no longer a period");
        assert_eq!(Seeds { last: (1 << 29) - 1 }.new_seed(), 1, "wraps past 0, below 2^29");
        assert_eq!(Seeds::round(5, 0), 5);
        assert_eq!(Seeds::round(5, 3), (3 << 29) | 5);
        assert_eq!(Seeds::split(Seeds::round(5, 2)), (2, 5));
    }
}
