//! `ginbench ceiling`: the most the copy engines move between this host's GPUs, as a record to keep
//! beside results (every alltoall figure is read against it). Copy engines need no SM and no
//! protocol, so what they reach is the link's practical limit:
//!  - one way: GPU i copies to GPU j, nothing else moves (every ordered pair in turn);
//!  - both ways: i and j copy to each other at once (every pair in turn);
//!  - all-to-all: every GPU copies to every other at once, one stream per (source, destination):
//!    what copy engines reach in the alltoall pattern. On 4×H200 that is half the both-ways
//!    figure (the copy engines, not the links, limit it), so the link limit an alltoall kernel
//!    is read against is the both-ways figure.
//!
//! Figures are GB/s per GPU sent (bytes a GPU copies to its peers / wall time, 1 GB = 1e9 B), timed
//! on the host over `iters` rounds after warm-up, every stream drained before and after.
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::results::{Placement, Row, Status};
use cudarc::driver::{sys, CudaContext, CudaStream};
use std::sync::Arc;
use std::time::Instant;

/// The three patterns, as row names say them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    OneWay,
    BothWays,
    AllToAll,
}

impl Pattern {
    /// The row's `impl` name: `ce-oneway-0to1`, `ce-bothways-0-1`, `ce-alltoall`.
    pub fn row_name(self, gpus: &[usize]) -> String {
        match self {
            Pattern::OneWay => format!("ce-oneway-{}to{}", gpus[0], gpus[1]),
            Pattern::BothWays => format!("ce-bothways-{}-{}", gpus[0], gpus[1]),
            Pattern::AllToAll => "ce-alltoall".into(),
        }
    }

    /// Every measurement of a sweep over `n` GPUs: each ordered pair one way, each pair both ways,
    /// then all of them at once.
    pub fn plan(n: usize) -> Vec<(Pattern, Vec<usize>)> {
        let mut v = vec![];
        for i in 0..n {
            for j in (0..n).filter(|&j| j != i) {
                v.push((Pattern::OneWay, vec![i, j]));
            }
        }
        for i in 0..n {
            for j in i + 1..n {
                v.push((Pattern::BothWays, vec![i, j]));
            }
        }
        v.push((Pattern::AllToAll, (0..n).collect()));
        v
    }

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
}

/// Device memory from `cuMemAlloc`. Not from a stream-ordered pool (cudarc's `alloc` uses one
/// where it can): peer access does not reach pool memory, and copies into it were staged through
/// the host at a tenth of the NVLink rate.
struct DeviceBytes(sys::CUdeviceptr, Arc<CudaContext>);

impl DeviceBytes {
    fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DeviceBytes> {
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

/// One GPU's side: its context and stream, a source buffer, and a receive slot per peer.
struct Side {
    gpu: Gpu,
    src: DeviceBytes,
    recv: DeviceBytes,
    /// One stream per destination, so copies to different peers run concurrently.
    streams: Vec<Arc<CudaStream>>,
}

pub struct Host {
    sides: Vec<Side>,
    bytes: u64,
}

impl Host {
    /// Opens `n` GPUs, enables peer access between every pair and allocates the buffers.
    pub fn open(s: &Settings) -> Result<Host> {
        let n = s.gpus;
        let mut sides = Vec::with_capacity(n);
        for i in 0..n {
            let gpu = Gpu::open(i)?;
            let (src, recv) =
                (DeviceBytes::new(&gpu.ctx, s.bytes as usize)?, DeviceBytes::new(&gpu.ctx, s.bytes as usize * n)?);
            let streams = (0..n).map(|_| gpu.ctx.new_stream()).collect::<std::result::Result<Vec<_>, _>>()?;
            sides.push(Side { gpu, src, recv, streams });
        }
        for i in 0..n {
            sides[i].gpu.ctx.bind_to_thread()?;
            for j in (0..n).filter(|&j| j != i) {
                let mut can = 0;
                // SAFETY: plain driver queries and calls on live contexts of this process.
                unsafe {
                    sys::cuDeviceCanAccessPeer(&mut can, i as i32, j as i32).result()?;
                    if can == 0 {
                        return Err(Error::env(
                            format!("GPU {i} cannot access GPU {j} as a peer (no NVLink or P2P path)"),
                            "the ceiling is the peer-to-peer limit; run it on GPUs connected by NVLink",
                        ));
                    }
                    let r = sys::cuCtxEnablePeerAccess(sides[j].gpu.ctx.cu_ctx(), 0);
                    if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                        r.result()?;
                    }
                }
            }
        }
        Ok(Host { sides, bytes: s.bytes })
    }

    /// The GPUs, as the results schema records them (GPU i as rank i).
    pub fn describe(&self) -> Vec<crate::results::Gpu> {
        let host = crate::bootstrap::hostname();
        self.sides.iter().enumerate().map(|(i, s)| s.gpu.describe(i, &host)).collect()
    }

    /// Issues `rounds` rounds of `pattern`'s copies, returning once every copy has completed.
    fn rounds(&self, pattern: Pattern, gpus: &[usize], rounds: u32) -> Result<()> {
        let b = self.bytes;
        for _ in 0..rounds {
            for (i, j) in pattern.copies(gpus) {
                let (from, to) = (&self.sides[i], &self.sides[j]);
                let stream = &from.streams[j];
                // SAFETY: both ranges lie inside live allocations (recv has a slot per source);
                // the stream belongs to the source's context, which has peer access to the target.
                unsafe {
                    sys::cuMemcpyPeerAsync(
                        to.recv.0 + i as u64 * b,
                        to.gpu.ctx.cu_ctx(),
                        from.src.0,
                        from.gpu.ctx.cu_ctx(),
                        b as usize,
                        stream.cu_stream(),
                    )
                    .result()?;
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

    /// One measurement: warm-up, then `iters` rounds timed on the host.
    pub fn measure(&self, pattern: Pattern, gpus: &[usize], s: &Settings) -> Result<Row> {
        self.rounds(pattern, gpus, s.warmup)?;
        let t0 = Instant::now();
        self.rounds(pattern, gpus, s.iters)?;
        let secs = t0.elapsed().as_secs_f64();
        Ok(row(pattern, gpus, s, secs))
    }
}

/// The row of one measurement taking `secs` for `s.iters` rounds.
pub fn row(pattern: Pattern, gpus: &[usize], s: &Settings, secs: f64) -> Row {
    let senders = match pattern {
        Pattern::OneWay => 1,
        Pattern::BothWays => 2,
        Pattern::AllToAll => gpus.len(),
    };
    let per_gpu = (pattern.copies(gpus).len() / senders) as f64 * s.bytes as f64;
    let round_us = secs * 1e6 / s.iters as f64;
    let gbps = per_gpu / (round_us * 1e3);
    Row {
        impl_name: pattern.row_name(gpus),
        size_bytes: s.bytes,
        count: s.bytes,
        dtype: "u8".into(),
        placement: Placement::OutOfPlace,
        time_us: Some(round_us),
        busbw_gbps: Some(gbps),
        bw_gbps: Some(gbps),
        bw_definition: Some(BW_DEFINITION.into()),
        wrong: None,
        status: Status::Ok,
        ..Default::default()
    }
}

pub const BW_DEFINITION: &str =
    "bytes each sending GPU copies to its peers per round / round time (copy engines, no SM)";

/// The table, nccl-tests style: a header, one line per measurement, and the ceiling figures.
pub fn table(s: &Settings, rows: &[Row]) -> String {
    let mut t = format!(
        "# ginbench ceiling: copy engines between {} GPUs of this host, {} bytes per copy, {} rounds after {} warm-up\n\
         # GB/s per GPU: {BW_DEFINITION}\n\
         #{:>18} {:>12} {:>12} {:>12}\n",
        s.gpus, s.bytes, s.iters, s.warmup, "pattern", "size (B)", "round (us)", "GB/s per GPU"
    );
    for r in rows {
        t += &format!(
            " {:>18} {:>12} {:>12.2} {:>12.1}\n",
            r.impl_name,
            r.size_bytes,
            r.time_us.unwrap_or(f64::NAN),
            r.busbw_gbps.unwrap_or(f64::NAN)
        );
    }
    for (label, prefix) in [("one way", "ce-oneway-"), ("both ways", "ce-bothways-"), ("all-to-all", "ce-alltoall")] {
        let v: Vec<f64> =
            rows.iter().filter(|r| r.impl_name.starts_with(prefix)).filter_map(|r| r.busbw_gbps).collect();
        if !v.is_empty() {
            let (lo, hi) = v.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            t += &format!("# ceiling {label:<10}: {lo:.1} GB/s per GPU (slowest), {hi:.1} (fastest)\n");
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_pair_and_the_whole_host() {
        let p = Pattern::plan(4);
        assert_eq!(p.iter().filter(|(k, _)| *k == Pattern::OneWay).count(), 12);
        assert_eq!(p.iter().filter(|(k, _)| *k == Pattern::BothWays).count(), 6);
        assert_eq!(p.last().unwrap(), &(Pattern::AllToAll, vec![0, 1, 2, 3]));
        assert_eq!(Pattern::AllToAll.copies(&[0, 1, 2]).len(), 6);
        assert_eq!(Pattern::BothWays.copies(&[1, 3]), vec![(1, 3), (3, 1)]);
    }

    #[test]
    fn figures_are_per_sending_gpu() {
        let s = Settings { gpus: 4, bytes: 1_000_000_000, iters: 10, warmup: 1 };
        // 10 rounds in 1 s: a one-way copy of 1 GB per round is 10 GB/s.
        assert_eq!(row(Pattern::OneWay, &[0, 1], &s, 1.0).busbw_gbps, Some(10.0));
        // Both ways: each GPU still sends 1 GB per round.
        assert_eq!(row(Pattern::BothWays, &[0, 1], &s, 1.0).busbw_gbps, Some(10.0));
        // All-to-all on 4 GPUs: each sends 3 GB per round.
        let r = row(Pattern::AllToAll, &[0, 1, 2, 3], &s, 1.0);
        assert_eq!((r.impl_name.as_str(), r.busbw_gbps, r.time_us), ("ce-alltoall", Some(30.0), Some(100_000.0)));
    }

    #[test]
    fn table_names_the_slowest_and_fastest() {
        let s = Settings { gpus: 2, bytes: 1_000_000_000, iters: 10, warmup: 1 };
        let rows = vec![row(Pattern::OneWay, &[0, 1], &s, 1.0), row(Pattern::OneWay, &[1, 0], &s, 2.0)];
        let t = table(&s, &rows);
        assert!(t.contains("# ceiling one way   : 5.0 GB/s per GPU (slowest), 10.0 (fastest)"), "{t}");
        assert!(!t.contains("all-to-all:"), "{t}");
    }
}
