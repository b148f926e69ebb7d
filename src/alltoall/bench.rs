//! `alltoall_perf`: for each implementation, sweep sizes out of place and in place, check, and
//! hand the rows to the driver.
use super::cli::Config;
use super::{InPlace, Rank};
use crate::cuda::Gpu;
use crate::driver::cli::Entry;
use crate::driver::{self, Benchmark, Output, RankCtx};
use crate::error::{Error, Result};
use crate::gin_transport;
use crate::harness::check::{Break, Checker, Key};
use crate::harness::{self, sizes, watchdog, LoopParams};
use crate::nccl::{self, DevMem, Registration};
use crate::report::table;
use crate::results::{Env, Placement, Row, Status, Summary};

const GIB: u64 = 1 << 30;

impl Benchmark for Config {
    const PROG: &'static str = "alltoall_perf";
    const KIND: crate::results::Kind = crate::results::Kind::Alltoall;
    driver::command_line!(super::cli::Args);

    fn list_impls() -> String {
        super::registry::IMPLS.iter().map(|i| format!("{:>2}  {:<12} {}\n", i.id, i.name, i.about)).collect()
    }

    fn common(&self) -> &driver::Common {
        &self.common
    }

    fn config_json(&self) -> serde_json::Value {
        config_json(self)
    }

    fn real_gin_impls(&self) -> Vec<&'static str> {
        driver::cli::real_gin_names(&self.impls)
    }

    fn describe(&self, _env: &Env) -> String {
        let c = &self.common;
        format!(
            "# nThread {} nGpus 1 minBytes {} maxBytes {} warmup iters: {} iters: {} agg iters: {} validation: {} graph: {}\n",
            c.local_ranks, self.min_bytes, self.max_bytes, c.warmup, c.iters, self.agg, c.check, c.graph_launches
        )
    }

    fn check_gpu(&self, gpu: &Gpu) -> Result<()> {
        super::registry::check_resident(&self.impls, gpu, self.common.ctas)
    }

    fn sweep(&self, ctx: &RankCtx, out: &mut Output) -> Result<()> {
        run_rank(self, ctx, out)
    }

    fn footer(s: &Summary) -> String {
        table::footer(s.rows_wrong, Some(s.avg_busbw_gbps))
    }
}

/// Largest buffer, per rank, that `sizes` need.
pub fn buffer_bytes(elt: u64, sizes: &[u64], nranks: u64) -> u64 {
    let max = sizes.iter().map(|&s| nranks * sizes::alltoall_count(s, elt, nranks) * elt).max().unwrap_or(0);
    max.max(4096)
}

/// Each buffer spans at least this much where memory allows, so that a size rotates through the
/// same span (`Step`) whatever the largest size of the run (-e): without it, `-b 2M -e 2M` ran
/// every iteration at one offset, out of the L2 cache: `nvl` 8.56 µs against 9.12 in a sweep to
/// 128 MB on 2×H200 (results/h200x2/rotation-span/). Twice the L2 of a B200 (126 MB), five times
/// an H200's.
const ROTATION_BYTES: u64 = 256 << 20;

/// Bytes to allocate per buffer: `need` (`buffer_bytes`), raised to the rotation span as far as
/// `fit` (what memory allows) goes.
pub fn buffer_span(need: u64, fit: u64) -> u64 {
    need.max(ROTATION_BYTES.min(fit))
}

fn run_rank(cfg: &Config, ctx: &RankCtx, out: &mut Output) -> Result<()> {
    let (boot, n) = (ctx.boot, ctx.boot.size());
    let rank = boot.rank();
    // Memory: send + receive of the largest size must fit, with headroom for NCCL (as nccl-tests).
    let mut sweep = cfg.sizes.clone();
    let want = buffer_bytes(cfg.dtype.size(), &sweep, n as u64);
    let gpu = ctx.gpu;
    let reserve = (gpu.total_mem().div_ceil(16 * GIB) * GIB).min(4 * GIB) + GIB;
    let fit = gpu.free_mem().saturating_sub(reserve) / 2;
    let fit = boot.allgather_f64(&[fit as f64]).iter().map(|v| v[0] as u64).min().unwrap_or(0);
    if want > fit {
        sweep.retain(|&s| s <= fit);
        out.emit(&format!("# Reducing maxBytes to {fit} due to memory limitation\n"));
        if sweep.is_empty() {
            return Err(Error::env(
                format!("not even the smallest size fits in GPU memory ({fit} bytes free per buffer)"),
                "use a smaller -b",
            ));
        }
    }
    let bytes = buffer_span(buffer_bytes(cfg.dtype.size(), &sweep, n as u64), fit);
    let send = DevMem::alloc(bytes as usize)?;
    let recv = DevMem::alloc(bytes as usize)?;
    if cfg.impls.iter().any(|i| i.real_gin()) {
        crate::nccl::compat::enable_gin_early(ctx.comm, &ctx.env.gin)?;
    }
    let reg = Registration::register(ctx.comm, cfg.register, &send, &recv)?;
    let mut r = Rank {
        boot,
        gpu,
        comm: ctx.comm,
        send,
        recv,
        reg,
        dtype: cfg.dtype,
        ctas: cfg.common.ctas,
        gin: ctx.env.gin.clone(),
        emulate_nodes: cfg.common.emulate_nodes,
        gin_request: cfg.gin,
    };
    let mut checker = Checker::new(r.gpu, cfg.dtype.size())?;
    checker.fill_timed(r.gpu, &[r.send.ptr, r.recv.ptr], bytes / cfg.dtype.size(), rank as u32)?;
    r.gpu.stream.synchronize()?;
    watchdog::beat();
    let result = (0..cfg.common.cycles).try_for_each(|cycle| {
        out.cycle = cycle;
        sweep_impls(&r, cfg, &sweep, &mut checker, out)
    });
    r.gpu.stream.synchronize()?;
    r.reg.release(r.comm);
    result
}

fn table_style(cfg: &Config) -> table::Style {
    table::Style { cputime: cfg.cputime, per_iter: cfg.common.per_iter }
}

fn sweep_impls(r: &Rank, cfg: &Config, sweep: &[u64], checker: &mut Checker, out: &mut Output) -> Result<()> {
    let n = r.boot.size() as u64;
    for (ii, info) in cfg.impls.iter().enumerate() {
        let imp = (info.make)(r)?;
        if info.real_gin() {
            let granted = imp.as_ref().ok().and_then(|i| i.gin_contexts());
            gin_transport::record_granted(r.boot, &mut out.run.config, GIN, info.name, granted);
        }
        if let Ok(imp) = &imp {
            warm_up(r, imp.as_ref(), cfg, sweep)?;
        }
        out.section(
            &format!("impl {} (-D {}), registration: {}", info.name, info.id, r.reg.describe()),
            &table::header(table_style(cfg)),
        );
        for (si, &size) in sweep.iter().enumerate() {
            let count = sizes::alltoall_count(size, cfg.dtype.size(), n);
            let bytes_per_peer = count * cfg.dtype.size();
            let mut rows = vec![];
            for placement in [Placement::OutOfPlace, Placement::InPlace] {
                let inplace = placement == Placement::InPlace;
                let skip = match &imp {
                    Err(why) => Some(why.clone()),
                    Ok(imp) => imp.unsupported(bytes_per_peer).or_else(|| match imp.in_place(bytes_per_peer) {
                        InPlace::Unsupported(why) if inplace => Some(format!("in place not supported: {why}")),
                        _ => None,
                    }),
                };
                let mut row = match (skip, &imp) {
                    (Some(why), _) => skipped(cfg, n, info.name, count, placement, out.cycle, why),
                    (None, Ok(imp)) => {
                        let text = format!(
                            "{} ({}/{}) {} B {placement} ({}/{})",
                            info.name,
                            ii + 1,
                            cfg.impls.len(),
                            n * bytes_per_peer,
                            si + 1,
                            sweep.len()
                        );
                        out.measuring(&text, &rows, vec![keyed(cfg, n, info.name, count, placement, out.cycle)]);
                        let case = Case {
                            impl_name: info.name,
                            count,
                            placement,
                            capture: !inplace && cfg.profile_size == Some(size),
                        };
                        let m = measure(r, imp.as_ref(), cfg, &case, checker)?;
                        measured(r, cfg, info.name, count, placement, out.cycle, &m)
                    }
                    (None, Err(_)) => unreachable!("a skipped impl always has a reason"),
                };
                row.ran = imp.as_ref().ok().and_then(|i| i.ran(bytes_per_peer, inplace)).map(String::from);
                rows.push(row);
            }
            out.rows(table::line(&rows[0], &rows[1], table_style(cfg)), rows);
            watchdog::beat();
        }
    }
    Ok(())
}

/// A warm-up pass over the smallest and largest sizes before the table (nccl-tests does the same),
/// so the first row does not pay for connection setup and lazy initialisation.
fn warm_up(r: &Rank, imp: &dyn super::Impl, cfg: &Config, sweep: &[u64]) -> Result<()> {
    let n = r.boot.size() as u64;
    for &size in [sweep.first(), sweep.last()].into_iter().flatten() {
        let count = sizes::alltoall_count(size, cfg.dtype.size(), n);
        if imp.unsupported(count * cfg.dtype.size()).is_some() {
            continue;
        }
        for _ in 0..cfg.common.warmup.max(1) {
            imp.launch(r, r.send.ptr, r.recv.ptr, count)?;
        }
    }
    r.gpu.stream.synchronize()?;
    Ok(())
}

/// One rank's view of one measurement.
struct Measured {
    timing: harness::Timing,
    /// Wrong elements on this rank; None when not checked.
    wrong: Option<u64>,
    /// Why the row carries no check, if it does not.
    note: Option<&'static str>,
}

/// One measurement to take.
struct Case<'a> {
    impl_name: &'a str,
    /// Elements per peer.
    count: u64,
    placement: Placement,
    /// Inside a profiler capture range (`--profile-size`).
    capture: bool,
}

/// One measurement's operations: the timed iteration and the checked run. `alltoall_perf` and
/// `interference_perf`'s foreground both go through it, so they time the same code.
pub struct Step<'a> {
    pub r: &'a Rank<'a>,
    pub imp: &'a dyn super::Impl,
    /// Elements per peer.
    pub count: u64,
    pub inplace: bool,
    /// Operations per iteration (`-m`).
    pub agg: u32,
    stride: u64,
    slots: u64,
}

impl<'a> Step<'a> {
    pub fn new(r: &'a Rank<'a>, imp: &'a dyn super::Impl, count: u64, inplace: bool, agg: u32, iters: u32) -> Self {
        let bytes = r.boot.size() as u64 * count * r.dtype.size();
        // Rotate through the buffer so that sizes below the L2 cache are not served from it.
        let stride = bytes.next_multiple_of(4096).max(4096);
        let slots = (r.recv.bytes as u64 / stride).clamp(1, iters as u64 * agg as u64);
        Step { r, imp, count, inplace, agg, stride, slots }
    }

    fn buffers(&self) -> (u64, u64) {
        (if self.inplace { self.r.recv.ptr } else { self.r.send.ptr }, self.r.recv.ptr)
    }

    /// Enqueue timed iteration `i`: `agg` operations, each at the next rotating offset (as
    /// nccl-tests moves on for every operation of `-m`, so none re-reads a block left in L2).
    pub fn op(&self, i: u32) -> Result<()> {
        let agg = self.agg as u64;
        self.group(agg, |j| ((i as u64 * agg + j) % self.slots) * self.stride)
    }

    /// Enqueue `ops` operations, operation j at byte offset `at(j)`, as one NCCL group when there
    /// are several.
    fn group(&self, ops: u64, at: impl Fn(u64) -> u64) -> Result<()> {
        let (send, recv) = self.buffers();
        let grouped = ops > 1;
        if grouped {
            nccl::group_start()?;
        }
        for j in 0..ops {
            self.imp.launch(self.r, send + at(j), recv + at(j), self.count)?;
        }
        if grouped {
            nccl::group_end()?;
        }
        Ok(())
    }

    /// One checked run with `seed`, run as timed iterations run (captured in a CUDA graph with
    /// `graph`): two iterations back to back, each the `-m` group of operations, with no host
    /// sync between them, so the second's start races the first's tail as in the timed loop.
    /// Where the rotation holds fewer than two groups the timed iterations repeat offsets, so a
    /// decoy iteration (other values) runs at the checked group's offsets first, then the fill
    /// of the checked values and the checked iteration, still with no host sync. Every
    /// operation sits at one of the last rotating offsets the timed ones use (at offset 0 an
    /// impl that dropped the offset would pass) and carries its own part of the pattern.
    /// Counted wrong: received elements that differ from what the peers sent, send elements an
    /// out-of-place operation changed, and changed elements of the guards: up to [`GUARD`]
    /// bytes before the receive span and after it, and the gaps between its operations (the
    /// rotation's alignment). Returns after the GPU finished.
    pub fn check_once(&self, checker: &mut Checker, seed: u32, graph: bool) -> Result<u64> {
        let (r, gpu) = (self.r, self.r.gpu);
        let (n, rank, elt) = (r.boot.size() as u64, r.boot.rank() as u32, r.dtype.size());
        // Distinct offsets only: a group larger than the slots would write one twice.
        let per_group = (self.agg as u64).min(self.slots);
        let groups = if self.slots >= 2 * per_group { 2 } else { 1 };
        let ops = groups * per_group;
        let at = |j: u64| (self.slots - ops + j) * self.stride;
        let elems = n * self.count;
        let key = |j: u64| Key { seed, rank, base: j * elems, block: self.count };
        let decoy = groups == 1 && checker.brk != Break::NoOp;
        let decoy_key = |j: u64| Key { seed: !seed, ..key(j) };
        let (send, recv) = self.buffers();
        for j in 0..ops {
            checker.fill(gpu, send + at(j), elems, if decoy { decoy_key(j) } else { key(j) })?;
            if !self.inplace {
                // In place the buffer holds the input, which differs from every peer's block
                // (check.cu's pattern), so every block but our own must still change.
                checker.poison(gpu, recv + at(j), n as u32, key(j))?;
            }
        }
        // Guards: [start, stop) byte ranges of the receive buffer, keyed apart from every rank's
        // data (ranks stay below 2^31), each element by where it lies.
        let end = |j: u64| {
            let end = at(j) + elems * elt;
            // (In place, the overlapping guard also replaces this rank's last input element, so
            // its peers read it wrong too, unless the decoy path's fill of the checked values
            // restores it: the control fails on the guard either way.)
            if checker.brk == Break::GuardOverlap {
                end.saturating_sub(elt)
            } else {
                end
            }
        };
        let limit = r.recv.bytes as u64;
        let guards: Vec<(u64, u64)> = std::iter::once((at(0).saturating_sub(GUARD), at(0)))
            .chain((0..ops).map(|j| (end(j), if j + 1 < ops { at(j + 1) } else { (end(j) + GUARD).min(limit) })))
            .collect();
        let guard_key = |start: u64| Key { seed, rank: rank | 1 << 31, base: start / elt, block: Key::NO_PEER };
        for &(start, stop) in &guards {
            checker.fill(gpu, r.recv.ptr + start, (stop - start) / elt, guard_key(start))?;
        }
        if checker.brk != Break::NoOp {
            let checker = &*checker;
            harness::run_once(gpu, graph, &mut || {
                if decoy {
                    self.group(per_group, at)?;
                    (0..ops).try_for_each(|j| checker.fill(gpu, send + at(j), elems, key(j)))?;
                }
                (0..groups).try_for_each(|g| self.group(per_group, |j| at(g * per_group + j)))
            })?;
        }
        let mut wrong = 0;
        for j in 0..ops {
            wrong += checker.verify(gpu, recv + at(j), n as u32, key(j))?;
            if !self.inplace {
                wrong += checker.changed(gpu, send + at(j), elems, key(j))?;
            }
        }
        for &(start, stop) in &guards {
            wrong += checker.changed(gpu, r.recv.ptr + start, (stop - start) / elt, guard_key(start))?;
        }
        Ok(wrong)
    }
}

/// Bytes of the receive buffer watched on each side of a checked operation's span: writes there
/// (an operation that overran its blocks, or wrote below them) are wrong.
pub const GUARD: u64 = 1 << 20;

fn measure(r: &Rank, imp: &dyn super::Impl, cfg: &Config, case: &Case, checker: &mut Checker) -> Result<Measured> {
    let Case { impl_name, count, placement, capture } = *case;
    let inplace = placement == Placement::InPlace;
    let n = r.boot.size() as u64;
    let elt = cfg.dtype.size();
    let bytes = n * count * elt;
    let step = Step::new(r, imp, count, inplace, cfg.agg, cfg.common.iters);
    let params = LoopParams {
        iters: cfg.common.iters,
        warmup: cfg.common.warmup,
        ops_per_iter: cfg.agg,
        blocking: cfg.blocking,
        graph_launches: cfg.common.graph_launches,
        capture,
    };
    let label = format!("{impl_name} {bytes}B {placement}");
    let timing = harness::time_loop(r.gpu, r.boot, &params, &label, &mut |i| step.op(i))?;
    r.comm.async_error()?;

    let mode = if inplace { imp.in_place(count * elt) } else { InPlace::Checked };
    let note = match mode {
        InPlace::Checked => None,
        InPlace::Unchecked(why) | InPlace::Unsupported(why) => Some(why),
    };
    let wrong = if cfg.common.check == 0 || note.is_some() {
        None
    } else {
        let _range = crate::profile::range(|| format!("{label} check"));
        let mut wrong = 0;
        for _ in 0..cfg.common.check {
            let seed = checker.new_seed();
            // Every check runs on every rank, wrong or not: a rank that stopped early would leave
            // its peers waiting for it in the next checked operation.
            wrong += step.check_once(checker, seed, cfg.common.graph_launches > 0)?;
        }
        Some(wrong)
    };
    Ok(Measured { timing, wrong, note })
}

/// A row's keys: what it measures, not how it went.
fn keyed(cfg: &Config, n: u64, impl_name: &str, count: u64, placement: Placement, cycle: u32) -> Row {
    Row {
        impl_name: impl_name.into(),
        size_bytes: n * count * cfg.dtype.size(),
        count,
        dtype: cfg.dtype.as_str().into(),
        placement,
        cycle,
        ..Default::default()
    }
}

/// A row that did not run, for `reason` (the same on every rank).
fn skipped(cfg: &Config, n: u64, impl_name: &str, count: u64, placement: Placement, cycle: u32, reason: String) -> Row {
    Row { status: Status::Skipped, reason: Some(reason), ..keyed(cfg, n, impl_name, count, placement, cycle) }
}

/// The row's time, algbw and busbw. As in nccl-tests, `-C` shows the host enqueue time, and the
/// bandwidths stay those of the completion time (data has not moved when the host is done).
fn shown(red: &driver::output::Reduced, cputime: bool, size_bytes: u64, ranks: u64) -> (f64, f64, f64) {
    let (alg, bus) = sizes::alltoall_bw(size_bytes, red.time_us, ranks);
    (if cputime { red.cpu_us } else { red.time_us }, alg, bus)
}

/// One measurement reduced over ranks into a row (every rank calls this; rank 0 keeps it).
fn measured(
    r: &Rank,
    cfg: &Config,
    impl_name: &str,
    count: u64,
    placement: Placement,
    cycle: u32,
    m: &Measured,
) -> Row {
    let n = r.boot.size();
    let red = driver::output::reduce(r.boot, cfg.common.average, &m.timing, m.wrong, &[]);
    let size_bytes = n as u64 * count * cfg.dtype.size();
    let (time, alg, bus) = shown(&red, cfg.cputime, size_bytes, n as u64);
    Row {
        impl_name: impl_name.into(),
        size_bytes,
        count,
        dtype: cfg.dtype.as_str().into(),
        placement,
        time_us: Some(time),
        p50_us: red.p50_us,
        p99_us: red.p99_us,
        algbw_gbps: Some(alg),
        busbw_gbps: Some(bus),
        wrong: red.wrong,
        status: Status::Ok,
        reason: m.note.filter(|_| cfg.common.check > 0).map(String::from),
        cycle,
        ..Default::default()
    }
}

/// Where the JSON's config holds the GIN request, and what NCCL granted.
const GIN: &str = "/gin";

fn config_json(c: &Config) -> serde_json::Value {
    serde_json::json!({
        "min_bytes": c.min_bytes,
        "max_bytes": c.max_bytes,
        "agg_iters": c.agg,
        "datatype": c.dtype.as_str(),
        "blocking": c.blocking,
        "cudagraph": c.common.graph_launches,
        "local_register": c.register as u32,
        "impls": c.impls.iter().map(|i| i.name).collect::<Vec<_>>(),
        "device_cta_count": c.common.ctas,
        "report_cputime": c.cputime,
        "per_iter_timing": c.common.per_iter,
        "profile_size": c.profile_size,
        "gin": c.gin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gin_request_and_grant_land_in_config() {
        let argv = ["alltoall_perf", "-D", "gin", "-R", "2", "--gin-contexts", "2"];
        let args = super::super::cli::parse(argv.map(String::from).to_vec()).unwrap();
        let mut json = config_json(&Config::from_args(&args, String::new()).unwrap());
        assert_eq!(json["gin"], serde_json::json!({"contexts": 2}));
        gin_transport::record_granted(&crate::bootstrap::threads::group(1)[0], &mut json, GIN, "gin", Some(4));
        assert_eq!(json["gin"], serde_json::json!({"contexts": 2, "granted": {"gin": 4}}));
    }

    #[test]
    fn cputime_changes_the_time_shown_not_the_bandwidth() {
        // 2 GiB per rank on 4 ranks: 4495.6 µs to complete, 5 µs to enqueue.
        let red = driver::output::Reduced {
            time_us: 4495.6,
            cpu_us: 5.0,
            p50_us: None,
            p99_us: None,
            wrong: None,
            extras: vec![],
            timed_extras: vec![],
        };
        let (t, alg, bus) = shown(&red, true, 2 << 30, 4);
        assert_eq!(t, 5.0);
        assert!((alg - 477.68).abs() < 0.01 && (bus - 358.26).abs() < 0.01, "{alg} {bus}");
        assert_eq!(shown(&red, false, 2 << 30, 4), (4495.6, alg, bus));
    }
}
