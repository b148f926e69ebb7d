//! The measurement harness shared by every benchmark: warm-up, timed loop (CUDA events, or a
//! CUDA graph with `-G`), per-iteration samples, the timeout watchdog and the correctness check.
pub mod check;
pub mod ranks;
pub mod sizes;
pub mod stats;
pub mod watchdog;

use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::profile;
use cudarc::driver::{sys, CudaEvent};
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct LoopParams {
    pub iters: u32,
    pub warmup: u32,
    /// Operations one call of the iteration closure enqueues (`-m`).
    pub ops_per_iter: u32,
    /// Synchronize after every iteration (`-z 1`).
    pub blocking: bool,
    /// `-G N`: capture the `iters` loop in a CUDA graph and launch it N times.
    pub graph_launches: u32,
    /// Wrap the timed loop in a profiler capture range (`--profile-size`).
    pub capture: bool,
}

/// One rank's timing of one measurement, per operation, in µs.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Completion time: CUDA events around the whole loop, divided by the operations in it.
    pub mean_us: f64,
    /// Host time to enqueue the loop (`-C 1`).
    pub cpu_us: f64,
    /// Per-iteration times from a second pass with an event after every iteration (without
    /// `-G`), or per-graph-launch times divided by its operations (with `-G`).
    pub samples_us: Vec<f64>,
}

/// Warm up, then time `op(i)` (which enqueues iteration i on the GPU's stream). `label` names
/// the NVTX ranges of the phases (warmup, timed, per-iteration).
pub fn time_loop(
    gpu: &Gpu,
    boot: &dyn Bootstrap,
    p: &LoopParams,
    label: &str,
    op: &mut dyn FnMut(u32) -> Result<()>,
) -> Result<Timing> {
    {
        let _r = profile::range(|| format!("{label} warmup"));
        for i in 0..p.warmup {
            op(i)?;
        }
        gpu.stream.synchronize()?;
    }
    boot.barrier();
    let per_iter_ops = p.ops_per_iter as f64;
    if p.graph_launches > 0 {
        let _r = profile::range(|| format!("{label} timed (graph)"));
        return time_graph(gpu, boot, p, op);
    }

    let (start, end) = (gpu.timing_event()?, gpu.timing_event()?);
    let mut timed = || -> Result<f64> {
        let _r = profile::range(|| format!("{label} timed"));
        start.record(&gpu.stream)?;
        let t0 = Instant::now();
        for i in 0..p.iters {
            op(i)?;
            if p.blocking {
                gpu.stream.synchronize()?;
            }
        }
        let cpu = t0.elapsed().as_secs_f64() * 1e6;
        end.record(&gpu.stream)?;
        end.synchronize()?;
        Ok(cpu)
    };
    let cpu = if p.capture { profile::captured(timed)? } else { timed()? };
    let total_ops = p.iters as f64 * per_iter_ops;
    let mean_us = start.elapsed_ms(&end)? as f64 * 1e3 / total_ops;

    // Second pass: an event after each iteration. Kept apart from the timed loop so that the
    // extra event records cannot slow the mean down.
    boot.barrier();
    let _r = profile::range(|| format!("{label} per-iteration"));
    let events = (0..=p.iters).map(|_| gpu.timing_event()).collect::<Result<Vec<_>>>()?;
    events[0].record(&gpu.stream)?;
    for i in 0..p.iters {
        op(i)?;
        events[i as usize + 1].record(&gpu.stream)?;
        if p.blocking {
            gpu.stream.synchronize()?;
        }
    }
    events[p.iters as usize].synchronize()?;
    Ok(Timing { mean_us, cpu_us: cpu / total_ops, samples_us: intervals_us(&events, per_iter_ops)? })
}

/// Run `op` once: directly, or (`graph`) captured into a CUDA graph and replayed, so that `-G`
/// runs are checked the way they are timed. Returns after the GPU finished.
pub fn run_once(gpu: &Gpu, graph: bool, op: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    if !graph {
        op()?;
        gpu.stream.synchronize()?;
        return Ok(());
    }
    gpu.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = op();
    let g = gpu.stream.end_capture(sys::CUgraphInstantiate_flags(0));
    captured?;
    let g = g?.ok_or_else(|| Error::internal("CUDA graph capture produced no graph"))?;
    g.launch()?;
    // The graph is destroyed when `g` drops: only after it ran.
    gpu.stream.synchronize()?;
    Ok(())
}

fn time_graph(
    gpu: &Gpu,
    boot: &dyn Bootstrap,
    p: &LoopParams,
    op: &mut dyn FnMut(u32) -> Result<()>,
) -> Result<Timing> {
    // Thread-local capture: other ranks of this process capture concurrently on their streams.
    gpu.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = (0..p.iters).try_for_each(&mut *op);
    let graph = gpu.stream.end_capture(sys::CUgraphInstantiate_flags(0));
    captured?;
    let graph = graph?.ok_or_else(|| Error::internal("CUDA graph capture produced no graph"))?;
    graph.upload()?;
    graph.launch()?; // warm-up launch
    gpu.stream.synchronize()?;
    boot.barrier();

    let launches = p.graph_launches as usize;
    let events = (0..=launches).map(|_| gpu.timing_event()).collect::<Result<Vec<_>>>()?;
    let timed = || -> Result<f64> {
        events[0].record(&gpu.stream)?;
        let t0 = Instant::now();
        for e in &events[1..] {
            graph.launch()?;
            e.record(&gpu.stream)?;
        }
        let cpu = t0.elapsed().as_secs_f64() * 1e6;
        events[launches].synchronize()?;
        Ok(cpu)
    };
    let cpu = if p.capture { profile::captured(timed)? } else { timed()? };
    let ops = p.iters as f64 * p.ops_per_iter as f64;
    let mean_us = events[0].elapsed_ms(&events[launches])? as f64 * 1e3 / (ops * launches as f64);
    Ok(Timing { mean_us, cpu_us: cpu / (ops * launches as f64), samples_us: intervals_us(&events, ops)? })
}

/// Time between consecutive events, in µs, divided by the operations between them.
fn intervals_us(events: &[CudaEvent], ops: f64) -> Result<Vec<f64>> {
    events.windows(2).map(|w| Ok(w[0].elapsed_ms(&w[1])? as f64 * 1e3 / ops)).collect()
}
