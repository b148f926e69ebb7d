//! `ginbench ceiling`: the most that moves between this host's GPUs, as a record to keep beside
//! results (every alltoall figure is read against it). Two engines, each in three patterns:
//!  - copy engines (`ce-` rows): need no SM and no protocol, so what they reach is the link's
//!    practical limit;
//!  - SM stores (`sm-` rows): a kernel with nvl's copy loop and launch shape but no protocol, so
//!    what SM-initiated writes reach on the same links; an SM alltoall kernel is read against it.
//!
//! The patterns:
//!  - one way: GPU i copies to GPU j, nothing else moves (every ordered pair in turn);
//!  - both ways: i and j copy to each other at once (every pair in turn);
//!  - all-to-all: every GPU copies to every other at once (copy engines: one stream per
//!    (source, destination); SM: one kernel per source). On 4×H200 the copy engines reach half
//!    the both-ways figure in this pattern (the copy engines, not the links, limit it), so the
//!    link limit an alltoall kernel is read against is the both-ways figure.
//!
//! Figures are GB/s per GPU sent (bytes a GPU copies to its peers / wall time, 1 GB = 1e9 B), timed
//! on the host over `iters` rounds after warm-up, every stream drained before and after. Every
//! copy is checked: sources hold a pattern per (source, destination), receive slots are poisoned
//! with its complement before a measurement and verified after it (`wrong`, in bytes).
use crate::cuda::{self, grid, DeviceBytes, Gpu, THREADS, WAVE};
use crate::error::{Error, Result};
use crate::results::{Placement, Row, Status};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use std::sync::Arc;
use std::time::Instant;

/// What moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `cuMemcpyPeerAsync`: the copy engines, no SM.
    CopyEngines,
    /// `gb_ceiling_sm_copy` (src/kernels/ceiling.cu): 16-byte SM stores into the peer.
    Sm,
}

impl Engine {
    fn prefix(self) -> &'static str {
        match self {
            Engine::CopyEngines => "ce",
            Engine::Sm => "sm",
        }
    }
}

/// The three patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    OneWay,
    BothWays,
    AllToAll,
}

/// One measurement: an engine, a pattern and the GPUs it involves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub engine: Engine,
    pub pattern: Pattern,
    pub gpus: Vec<usize>,
}

impl Case {
    /// The row's `impl` name: `ce-oneway-0to1`, `sm-bothways-0-1`, `ce-alltoall`.
    pub fn row_name(&self) -> String {
        let (e, g) = (self.engine.prefix(), &self.gpus);
        match self.pattern {
            Pattern::OneWay => format!("{e}-oneway-{}to{}", g[0], g[1]),
            Pattern::BothWays => format!("{e}-bothways-{}-{}", g[0], g[1]),
            Pattern::AllToAll => format!("{e}-alltoall"),
        }
    }

    /// Every measurement of a sweep over `n` GPUs, for each engine: each ordered pair one way,
    /// each pair both ways, then all of them at once.
    pub fn plan(n: usize) -> Vec<Case> {
        let mut v = vec![];
        for engine in [Engine::CopyEngines, Engine::Sm] {
            let mut case = |pattern, gpus| v.push(Case { engine, pattern, gpus });
            for i in 0..n {
                for j in (0..n).filter(|&j| j != i) {
                    case(Pattern::OneWay, vec![i, j]);
                }
            }
            for i in 0..n {
                for j in i + 1..n {
                    case(Pattern::BothWays, vec![i, j]);
                }
            }
            case(Pattern::AllToAll, (0..n).collect());
        }
        v
    }
}

impl Pattern {
    /// The copies of one round: (source, destination) pairs.
    fn copies(self, gpus: &[usize]) -> Vec<(usize, usize)> {
        match self {
            Pattern::OneWay => vec![(gpus[0], gpus[1])],
            Pattern::BothWays => vec![(gpus[0], gpus[1]), (gpus[1], gpus[0])],
            Pattern::AllToAll => {
                gpus.iter().flat_map(|&i| gpus.iter().filter(move |&&j| j != i).map(move |&j| (i, j))).collect()
            }
        }
    }
}

/// Settings; validated by the CLI before any GPU is opened.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub gpus: usize,
    pub bytes: u64,
    pub iters: u32,
    pub warmup: u32,
    /// CTAs of the SM copy kernel (of GB_THREADS threads).
    pub ctas: u32,
}

/// Most GPUs of one measurement; src/kernels/ceiling.cu's GB_CEILING_MAX_DSTS is one fewer.
pub const MAX_GPUS: usize = 8;
const MAX_DSTS: usize = MAX_GPUS - 1;

/// Mirrors `GbCeilingDsts` in src/kernels/ceiling.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Dsts {
    src: [u64; MAX_DSTS],
    dst: [u64; MAX_DSTS],
    n: i32,
}
unsafe impl DeviceRepr for Dsts {}
const _: () = assert!(std::mem::size_of::<Dsts>() == 120); // ceiling.cu asserts the same

/// The pattern of source slot (i, j): GPU i's bytes for GPU j (never 0).
fn tag(i: usize, j: usize) -> u32 {
    (i * MAX_GPUS + j + 1) as u32
}

/// Slot stride in the source and receive buffers: slots stay 16-byte aligned for the SM kernel
/// whatever the copy size.
fn stride(bytes: u64) -> u64 {
    bytes.next_multiple_of(4096)
}

/// One GPU's side: its context and streams, n source slots (slot j for GPU j) and n receive slots
/// (slot i from GPU i), slot k at k × stride (`Host::src`, `Host::recv`).
struct Side {
    gpu: Gpu,
    src: DeviceBytes,
    recv: DeviceBytes,
    /// One stream per destination, so copies to different peers run concurrently; the SM kernel
    /// and the checks run on the first.
    streams: Vec<Arc<CudaStream>>,
    copy: CudaFunction,
    fill: CudaFunction,
    verify: CudaFunction,
}

impl Side {
    /// Writes the pattern `tag` (or its complement) into `bytes` at `at` on the first stream.
    fn fill(&self, at: u64, bytes: u64, tag: u32, complement: bool) -> Result<()> {
        let mut l = self.streams[0].launch_builder(&self.fill);
        let c = complement as i32;
        l.arg(&at).arg(&bytes).arg(&tag).arg(&c);
        // SAFETY: `at` is a slot of `bytes` in this GPU's allocation; the arguments match
        // gb_ceiling_fill's signature.
        unsafe { l.launch(check_launch())? };
        Ok(())
    }

    /// Bytes at `at` that differ from the pattern `tag`.
    fn wrong(&self, at: u64, bytes: u64, tag: u32) -> Result<u64> {
        let s = &self.streams[0];
        let count = s.alloc_zeros::<u64>(1)?;
        let mut l = s.launch_builder(&self.verify);
        l.arg(&at).arg(&bytes).arg(&tag).arg(&count);
        // SAFETY: as for fill; `count` is one u64 on this GPU.
        unsafe { l.launch(check_launch())? };
        Ok(s.clone_dtoh(&count)?[0])
    }
}

/// The check kernels' grid: a wave over the GPU, grid-stride inside.
fn check_launch() -> LaunchConfig {
    grid(WAVE, 0)
}

pub struct Host {
    sides: Vec<Side>,
    bytes: u64,
    /// Slot stride in the source and receive buffers.
    stride: u64,
    ctas: u32,
}

impl Host {
    /// Opens `n` GPUs, enables peer access between every pair and allocates the buffers.
    pub fn open(s: &Settings) -> Result<Host> {
        let n = s.gpus;
        let mut sides = Vec::with_capacity(n);
        for i in 0..n {
            let gpu = Gpu::open(i)?;
            let slots = (stride(s.bytes) * n as u64) as usize;
            let (src, recv) = (DeviceBytes::new(&gpu.ctx, slots)?, DeviceBytes::new(&gpu.ctx, slots)?);
            let streams = (0..n).map(|_| gpu.ctx.new_stream()).collect::<std::result::Result<Vec<_>, _>>()?;
            let f = |name| gpu.function("ceiling", name);
            let (copy, fill, verify) = (f("gb_ceiling_sm_copy")?, f("gb_ceiling_fill")?, f("gb_ceiling_verify")?);
            sides.push(Side { gpu, src, recv, streams, copy, fill, verify });
        }
        for i in 0..n {
            sides[i].gpu.ctx.bind_to_thread()?;
            for j in (0..n).filter(|&j| j != i) {
                if !cuda::can_access_peer(i, j)? {
                    return Err(Error::env(
                        format!("GPU {i} cannot access GPU {j} as a peer (no NVLink or P2P path)"),
                        "the ceiling is the peer-to-peer limit; run it on GPUs connected by NVLink",
                    ));
                }
                cuda::enable_peer_access(&sides[j].gpu.ctx)?;
            }
        }
        let host = Host { sides, bytes: s.bytes, stride: stride(s.bytes), ctas: s.ctas };
        for (i, side) in host.sides.iter().enumerate() {
            for j in (0..n).filter(|&j| j != i) {
                side.fill(host.src(i, j), s.bytes, tag(i, j), false)?;
            }
            side.streams[0].synchronize()?;
        }
        Ok(host)
    }

    /// GPU i's source slot for GPU j.
    fn src(&self, i: usize, j: usize) -> u64 {
        self.sides[i].src.0 + j as u64 * self.stride
    }

    /// GPU j's receive slot for GPU i.
    fn recv(&self, j: usize, i: usize) -> u64 {
        self.sides[j].recv.0 + i as u64 * self.stride
    }

    /// The GPUs, as the results schema records them (GPU i as rank i).
    pub fn describe(&self) -> Vec<crate::results::Gpu> {
        let host = crate::bootstrap::hostname();
        self.sides.iter().enumerate().map(|(i, s)| s.gpu.describe(i, &host)).collect()
    }

    /// Issues `rounds` rounds of the case's copies, returning once every copy has completed.
    fn rounds(&self, case: &Case, rounds: u32) -> Result<()> {
        let b = self.bytes;
        let copies = case.pattern.copies(&case.gpus);
        // The SM kernel's launches, one per sending GPU, made once for every round.
        let launches: Vec<(usize, Dsts)> = case
            .gpus
            .iter()
            .map(|&i| {
                let mut c = Dsts::default();
                for &(_, j) in copies.iter().filter(|c| c.0 == i) {
                    (c.src[c.n as usize], c.dst[c.n as usize]) = (self.src(i, j), self.recv(j, i));
                    c.n += 1;
                }
                (i, c)
            })
            .filter(|(_, c)| c.n > 0)
            .collect();
        for _ in 0..rounds {
            match case.engine {
                Engine::CopyEngines => {
                    for &(i, j) in &copies {
                        let (from, to) = (&self.sides[i], &self.sides[j]);
                        // SAFETY: both ranges lie inside live allocations (a slot per peer on
                        // each side); the stream belongs to the source's context, which has peer
                        // access to the target.
                        unsafe {
                            cuda::copy_peer_async(
                                (self.recv(j, i), &to.gpu.ctx),
                                (self.src(i, j), &from.gpu.ctx),
                                b as usize,
                                &from.streams[j],
                            )?
                        }
                    }
                }
                Engine::Sm => {
                    for (i, c) in &launches {
                        let from = &self.sides[*i];
                        let cfg = LaunchConfig {
                            grid_dim: (self.ctas, 1, 1),
                            block_dim: (THREADS, 1, 1),
                            shared_mem_bytes: 0,
                        };
                        let mut l = from.streams[0].launch_builder(&from.copy);
                        l.arg(c).arg(&b);
                        // SAFETY: the arguments match gb_ceiling_sm_copy's signature; every
                        // source and destination is a slot of `b` bytes, the destinations in
                        // peers' allocations this context has peer access to.
                        unsafe { l.launch(cfg)? };
                    }
                }
            }
        }
        for side in &self.sides {
            for s in &side.streams {
                s.synchronize()?;
            }
        }
        Ok(())
    }

    /// One measurement: warm-up, the receive slots poisoned (after the warm-up, so that only
    /// the timed rounds can fill them), `iters` rounds timed on the host, then every copy
    /// checked.
    pub fn measure(&self, case: &Case, s: &Settings) -> Result<Row> {
        let copies = case.pattern.copies(&case.gpus);
        self.rounds(case, s.warmup)?;
        for &(i, j) in &copies {
            self.sides[j].fill(self.recv(j, i), self.bytes, tag(i, j), true)?;
        }
        for side in &self.sides {
            side.streams[0].synchronize()?;
        }
        let t0 = Instant::now();
        self.rounds(case, s.iters)?;
        let secs = t0.elapsed().as_secs_f64();
        let mut wrong = 0;
        for &(i, j) in &copies {
            wrong += self.sides[j].wrong(self.recv(j, i), self.bytes, tag(i, j))?;
        }
        Ok(Row { wrong: Some(wrong), ..row(case, s, secs) })
    }
}

/// The row of one measurement taking `secs` for `s.iters` rounds.
pub fn row(case: &Case, s: &Settings, secs: f64) -> Row {
    let senders = match case.pattern {
        Pattern::OneWay => 1,
        Pattern::BothWays => 2,
        Pattern::AllToAll => case.gpus.len(),
    };
    let per_gpu = (case.pattern.copies(&case.gpus).len() / senders) as f64 * s.bytes as f64;
    let round_us = secs * 1e6 / s.iters as f64;
    let gbps = per_gpu / (round_us * 1e3);
    Row {
        impl_name: case.row_name(),
        size_bytes: s.bytes,
        count: s.bytes,
        dtype: "u8".into(),
        placement: Placement::OutOfPlace,
        time_us: Some(round_us),
        busbw_gbps: Some(gbps),
        bw_gbps: Some(gbps),
        bw_definition: Some(bw_definition(case.engine, s)),
        wrong: None,
        status: Status::Ok,
        ..Default::default()
    }
}

const BW: &str = "bytes each sending GPU copies to its peers per round / round time";

fn bw_definition(engine: Engine, s: &Settings) -> String {
    match engine {
        Engine::CopyEngines => format!("{BW} (copy engines, no SM)"),
        Engine::Sm => format!("{BW} (SM copy kernel, {} CTAs of {THREADS} threads, no protocol)", s.ctas),
    }
}

/// The table, nccl-tests style: a header, one line per measurement, and the figures per engine
/// and pattern.
pub fn table(s: &Settings, rows: &[Row]) -> String {
    let mut t = format!(
        "# ginbench ceiling: copy engines and SM stores between {} GPUs of this host, {} bytes per copy, {} rounds after {} warm-up\n\
         # GB/s per GPU: {BW}; ce: copy engines, no SM; sm: a copy kernel of {} CTAs, no protocol\n\
         #{:>18} {:>12} {:>12} {:>12} {:>10}\n",
        s.gpus, s.bytes, s.iters, s.warmup, s.ctas, "pattern", "size (B)", "round (us)", "GB/s per GPU", "#wrong (B)"
    );
    for r in rows {
        t += &format!(
            " {:>18} {:>12} {:>12.2} {:>12.1} {:>10}\n",
            r.impl_name,
            r.size_bytes,
            r.time_us.unwrap_or(f64::NAN),
            r.busbw_gbps.unwrap_or(f64::NAN),
            r.wrong.map_or("-".into(), |w| w.to_string())
        );
    }
    for (what, e) in [("ceiling", "ce"), ("SM stores", "sm")] {
        for (label, pattern) in [("one way", "oneway-"), ("both ways", "bothways-"), ("all-to-all", "alltoall")] {
            let prefix = format!("{e}-{pattern}");
            let v: Vec<f64> =
                rows.iter().filter(|r| r.impl_name.starts_with(&prefix)).filter_map(|r| r.busbw_gbps).collect();
            if !v.is_empty() {
                let (lo, hi) = v.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                t += &format!("# {what} {label:<10}: {lo:.1} GB/s per GPU (slowest), {hi:.1} (fastest)\n");
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_pair_and_the_whole_host_for_each_engine() {
        let p = Case::plan(4);
        for engine in [Engine::CopyEngines, Engine::Sm] {
            let count = |pattern| p.iter().filter(|c| c.engine == engine && c.pattern == pattern).count();
            assert_eq!((count(Pattern::OneWay), count(Pattern::BothWays), count(Pattern::AllToAll)), (12, 6, 1));
        }
        assert_eq!(p.len(), 38);
        let last = p.last().unwrap();
        assert_eq!((last.row_name(), &last.gpus), ("sm-alltoall".to_string(), &vec![0, 1, 2, 3]));
        assert_eq!(p[0].row_name(), "ce-oneway-0to1");
        assert_eq!(Pattern::AllToAll.copies(&[0, 1, 2]).len(), 6);
        assert_eq!(Pattern::BothWays.copies(&[1, 3]), vec![(1, 3), (3, 1)]);
    }

    #[test]
    fn figures_are_per_sending_gpu() {
        let s = Settings { gpus: 4, bytes: 1_000_000_000, iters: 10, warmup: 1, ctas: 128 };
        let case = |engine, pattern, gpus: &[usize]| Case { engine, pattern, gpus: gpus.to_vec() };
        // 10 rounds in 1 s: a one-way copy of 1 GB per round is 10 GB/s.
        assert_eq!(row(&case(Engine::CopyEngines, Pattern::OneWay, &[0, 1]), &s, 1.0).busbw_gbps, Some(10.0));
        // Both ways: each GPU still sends 1 GB per round.
        let r = row(&case(Engine::Sm, Pattern::BothWays, &[1, 3]), &s, 1.0);
        assert_eq!((r.impl_name.as_str(), r.busbw_gbps), ("sm-bothways-1-3", Some(10.0)));
        assert!(r.bw_definition.unwrap().contains("128 CTAs"));
        // All-to-all on 4 GPUs: each sends 3 GB per round.
        let r = row(&case(Engine::CopyEngines, Pattern::AllToAll, &[0, 1, 2, 3]), &s, 1.0);
        assert_eq!((r.impl_name.as_str(), r.busbw_gbps, r.time_us), ("ce-alltoall", Some(30.0), Some(100_000.0)));
    }

    #[test]
    fn a_row_records_the_copy_it_measured() {
        let s = Settings { gpus: 2, bytes: 3 << 20, iters: 4, warmup: 1, ctas: 64 };
        let r = row(&Case { engine: Engine::Sm, pattern: Pattern::OneWay, gpus: vec![1, 0] }, &s, 2.0);
        assert_eq!((r.size_bytes, r.count, r.dtype.as_str()), (3 << 20, 3 << 20, "u8"));
        assert_eq!((r.placement, r.status, r.wrong), (Placement::OutOfPlace, Status::Ok, None));
        // bw is the same per-GPU figure as busbw, defined beside it.
        assert_eq!(r.bw_gbps, r.busbw_gbps);
        assert!(r.bw_gbps.is_some_and(|g| g > 0.0));
    }

    #[test]
    fn every_source_slot_has_its_own_pattern_and_slots_stay_aligned() {
        // A copy that lands in the wrong slot is caught only if no two (source, destination)
        // pairs share a pattern; 0 is never one.
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..MAX_GPUS {
            for j in (0..MAX_GPUS).filter(|&j| j != i) {
                let t = tag(i, j);
                assert!(t != 0 && seen.insert(t), "tag({i}, {j}) = {t} is 0 or repeated");
            }
        }
        for (bytes, want) in [(1, 4096), (16, 4096), (4096, 4096), (4097, 8192), (256 << 20, 256 << 20)] {
            assert_eq!(stride(bytes), want, "{bytes} B");
        }
    }

    #[test]
    fn table_names_the_slowest_and_fastest() {
        let s = Settings { gpus: 2, bytes: 1_000_000_000, iters: 10, warmup: 1, ctas: 128 };
        let case = |engine, gpus: &[usize]| Case { engine, pattern: Pattern::OneWay, gpus: gpus.to_vec() };
        let rows = vec![
            row(&case(Engine::CopyEngines, &[0, 1]), &s, 1.0),
            row(&case(Engine::CopyEngines, &[1, 0]), &s, 2.0),
            row(&case(Engine::Sm, &[0, 1]), &s, 4.0),
        ];
        let t = table(&s, &rows);
        assert!(t.contains("# ceiling one way   : 5.0 GB/s per GPU (slowest), 10.0 (fastest)"), "{t}");
        assert!(t.contains("# SM stores one way   : 2.5 GB/s per GPU (slowest), 2.5 (fastest)"), "{t}");
        assert!(!t.contains("all-to-all:"), "{t}");
    }
}
