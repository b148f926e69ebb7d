//! `alltoall_perf`: bring ranks up, sweep sizes for each implementation, check, report.
use super::{make, InPlace, Rank};
use crate::bootstrap::{self, Bootstrap};
use crate::cli::Config;
use crate::cuda::Gpu;
use crate::error::{Error, Exit, Result};
use crate::harness::check::Checker;
use crate::harness::{self, sizes, stats, watchdog, LoopParams};
use crate::nccl::{self, Comm, DevMem, Registration};
use crate::report::schema::{self, Env, Row, Run, Summary};
use crate::report::{self, table};
use std::io::Write;

const PROG: &str = "alltoall_perf";
const GIB: u64 = 1 << 30;

/// Run the benchmark on every rank; returns the process exit code.
pub fn main(cfg: Config) -> Result<Exit> {
    let local_ranks = cfg.local_ranks;
    harness::ranks::run(PROG, local_ranks, move |boot, device| run_rank(boot, &cfg, device))
}

/// Largest buffer, per rank, that the sweep needs.
fn buffer_bytes(cfg: &Config, nranks: u64) -> u64 {
    let elt = cfg.dtype.size();
    let max = cfg.sizes.iter().map(|&s| nranks * sizes::alltoall_count(s, elt, nranks) * elt).max().unwrap_or(0);
    max.max(4096)
}

fn run_rank(boot: &dyn Bootstrap, cfg: &Config, device: usize) -> Result<Exit> {
    let (rank, n) = (boot.rank(), boot.size());
    let started_at = schema::now_rfc3339();
    let gpu = Gpu::open(device)?;
    crate::gin::check_nodes_divide(cfg.emulate_nodes, n)?;
    let gin = nccl::probe_gin(boot)?;
    let comm = Comm::bootstrap(boot)?;
    watchdog::beat();

    // Memory: send + receive of the largest size must fit, with headroom for NCCL (as nccl-tests).
    let mut sweep = cfg.sizes.clone();
    let want = buffer_bytes(cfg, n as u64);
    let reserve = (gpu.total_mem().div_ceil(16 * GIB) * GIB).min(4 * GIB) + GIB;
    let fit = gpu.free_mem().saturating_sub(reserve) / 2;
    let fit = boot.allgather_f64(&[fit as f64]).iter().map(|v| v[0] as u64).min().unwrap_or(0);
    let mut note = None;
    if want > fit {
        sweep.retain(|&s| s <= fit);
        note = Some(format!("# Reducing maxBytes to {fit} due to memory limitation"));
        if sweep.is_empty() {
            return Err(Error::env(
                format!("not even the smallest size fits in GPU memory ({fit} bytes free per buffer)"),
                "use a smaller -b",
            ));
        }
    }
    let env = crate::envinfo::gather(boot, &gpu, gin)?;
    let gin = env.gin.clone();
    if cfg.require_gin && gin.kind == "none" {
        if let Some(i) = cfg.impls.iter().find(|i| matches!(i.name, "gin" | "hybrid")) {
            return Err(Error::env(
                format!("{} needs GIN (--require-gin) and GIN is unavailable: {}", i.name, gin.reason),
                "run on nodes with an RDMA NIC and a GIN backend (NCCL_GIN_TYPE), or drop --require-gin",
            ));
        }
    }
    let bytes = buffer_bytes(&Config { sizes: sweep.clone(), ..cfg.clone() }, n as u64);
    let send = DevMem::alloc(bytes as usize)?;
    let recv = DevMem::alloc(bytes as usize)?;
    let reg = Registration::register(&comm, cfg.register, &send, &recv)?;
    let mut r = Rank {
        boot,
        gpu,
        comm,
        send,
        recv,
        reg,
        dtype: cfg.dtype,
        ctas: cfg.ctas,
        gin: gin.clone(),
        emulate_nodes: cfg.emulate_nodes,
    };
    let mut checker = Checker::new(&r.gpu, cfg.dtype.size())?;
    // Timed data is a real pattern, never zeros.
    checker.fill(&r.gpu, r.send.ptr, bytes / cfg.dtype.size(), 0, rank as u32)?;
    checker.fill(&r.gpu, r.recv.ptr, bytes / cfg.dtype.size(), 0, rank as u32)?;
    r.gpu.stream.synchronize()?;
    watchdog::beat();

    let mut out = Output::new(rank == 0, cfg, env, started_at);
    out.preamble(&r, note);

    let result = sweep_all(&r, cfg, &sweep, &mut checker, &mut out);
    let exit = match &result {
        Ok(()) if out.wrong_rows() > 0 => Exit::WrongData,
        Ok(()) => Exit::Ok,
        Err(e) => e.exit,
    };
    out.finish(result.as_ref().err())?;
    r.gpu.stream.synchronize()?;
    r.reg.release(&r.comm);
    result.map(|_| exit)
}

fn sweep_all(r: &Rank, cfg: &Config, sweep: &[u64], checker: &mut Checker, out: &mut Output) -> Result<()> {
    let n = r.boot.size() as u64;
    for cycle in 0..cfg.cycles {
        for (ii, info) in cfg.impls.iter().enumerate() {
            let imp = make(info, r)?;
            if let Ok(imp) = &imp {
                warm_up(r, imp.as_ref(), cfg, sweep)?;
            }
            out.impl_header(info.name, info.id, r.reg.describe());
            for (si, &size) in sweep.iter().enumerate() {
                let count = sizes::alltoall_count(size, cfg.dtype.size(), n);
                let bytes_per_peer = count * cfg.dtype.size();
                let mut rows = vec![];
                for inplace in [false, true] {
                    let placement = if inplace { "in-place" } else { "out-of-place" };
                    let skip = match &imp {
                        Err(why) => Some(why.clone()),
                        Ok(imp) => imp.unsupported(bytes_per_peer).or_else(|| match imp.in_place(bytes_per_peer) {
                            InPlace::Unsupported(why) if inplace => Some(format!("in place not supported: {why}")),
                            _ => None,
                        }),
                    };
                    let row = match (skip, &imp) {
                        (Some(why), _) => out.skipped(info.name, count, placement, cycle, why),
                        (None, Ok(imp)) => {
                            out.progress(&format!(
                                "{} ({}/{}) {} B {placement} ({}/{})",
                                info.name,
                                ii + 1,
                                cfg.impls.len(),
                                n * bytes_per_peer,
                                si + 1,
                                sweep.len()
                            ));
                            let case = Case {
                                impl_name: info.name,
                                count,
                                inplace,
                                capture: !inplace && cfg.profile_size == Some(size),
                            };
                            let m = measure(r, imp.as_ref(), cfg, &case, checker)?;
                            out.row(r.boot, info.name, count, placement, cycle, &m)
                        }
                        (None, Err(_)) => unreachable!("a skipped impl always has a reason"),
                    };
                    rows.push(row);
                }
                out.line(&rows[0], &rows[1]);
                out.rows.extend(rows);
                watchdog::beat();
            }
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
        for _ in 0..cfg.warmup.max(1) {
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
    inplace: bool,
    /// Inside a profiler capture range (`--profile-size`).
    capture: bool,
}

fn measure(r: &Rank, imp: &dyn super::Impl, cfg: &Config, case: &Case, checker: &mut Checker) -> Result<Measured> {
    let Case { impl_name, count, inplace, capture } = *case;
    let n = r.boot.size() as u64;
    let elt = cfg.dtype.size();
    let bytes = n * count * elt;
    // Rotate through the buffer so that sizes below the L2 cache are not served from it.
    let stride = bytes.next_multiple_of(4096).max(4096);
    let slots = (r.recv.bytes as u64 / stride).clamp(1, cfg.iters as u64);
    let (send, recv) = (if inplace { r.recv.ptr } else { r.send.ptr }, r.recv.ptr);
    let agg = cfg.agg;
    let mut op = |i: u32| -> Result<()> {
        let off = (i as u64 % slots) * stride;
        if agg > 1 {
            nccl::group_start()?;
        }
        for _ in 0..agg {
            imp.launch(r, send + off, recv + off, count)?;
        }
        if agg > 1 {
            nccl::group_end()?;
        }
        Ok(())
    };
    let params = LoopParams {
        iters: cfg.iters,
        warmup: cfg.warmup,
        ops_per_iter: agg,
        blocking: cfg.blocking,
        graph_launches: cfg.graph_launches,
        capture,
    };
    let label = format!("{impl_name} {bytes}B {}", if inplace { "in-place" } else { "out-of-place" });
    let timing = harness::time_loop(&r.gpu, r.boot, &params, &label, &mut op)?;
    r.comm.async_error()?;

    let mode = if inplace { imp.in_place(count * elt) } else { InPlace::Checked };
    let note = match mode {
        InPlace::Checked => None,
        InPlace::Unchecked(why) | InPlace::Unsupported(why) => Some(why),
    };
    let wrong = if cfg.check == 0 || note.is_some() {
        None
    } else {
        let _range = crate::profile::range(|| format!("{label} check"));
        let rank = r.boot.rank() as u32;
        let mut wrong = 0;
        for rep in 0..cfg.check {
            let seed = rep + 1;
            checker.fill(&r.gpu, send, n * count, seed, rank)?;
            if !inplace {
                // In place the buffer holds the input; every block but our own must still change.
                checker.poison(&r.gpu, recv, count, n as u32, seed, rank)?;
            }
            harness::run_once(&r.gpu, cfg.graph_launches > 0, &mut || imp.launch(r, send, recv, count))?;
            wrong += checker.verify(&r.gpu, recv, count, n as u32, seed, rank)?;
            if wrong > 0 {
                break;
            }
        }
        Some(wrong)
    };
    Ok(Measured { timing, wrong, note })
}

/// The progress line shows on rank 0 only, on a terminal, never under CI nor when stdout
/// carries the JSON (`-J -`).
fn show_progress(rank0: bool, json_stdout: bool, ci: bool, stderr_is_tty: bool) -> bool {
    rank0 && !json_stdout && !ci && stderr_is_tty
}

/// Rank 0's output: the table as it goes, and the JSON / CSV at the end. Other ranks take part
/// in the reductions only.
struct Output<'c> {
    print: bool,
    cfg: &'c Config,
    run: Run,
    rows: Vec<Row>,
    style: table::Style,
    /// Skip reasons already printed under the current impl's table.
    reasons_shown: std::collections::HashSet<String>,
    /// `-J -`: the JSON owns stdout; the table goes to stderr.
    json_stdout: bool,
    /// A progress line on stderr: rank 0, a terminal, not under CI, stdout not JSON.
    progress: bool,
}

impl<'c> Output<'c> {
    fn new(print: bool, cfg: &'c Config, env: Env, started_at: String) -> Self {
        let json_stdout = cfg.json.as_deref() == Some(std::path::Path::new("-"));
        let run = Run::start("alltoall", &cfg.command, started_at, env, config_json(cfg));
        Output {
            print,
            cfg,
            run,
            rows: vec![],
            style: table::Style { cputime: cfg.cputime, per_iter: cfg.per_iter },
            reasons_shown: Default::default(),
            json_stdout,
            progress: show_progress(
                print,
                json_stdout,
                std::env::var_os("CI").is_some(),
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
            ),
        }
    }

    fn emit(&self, s: &str) {
        if !self.print {
            return;
        }
        self.progress("");
        report::print_text(self.json_stdout, s);
    }

    /// Replace the progress line (empty: clear it).
    fn progress(&self, text: &str) {
        if self.progress {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K{}", if text.is_empty() { String::new() } else { format!("# running {text}") });
            let _ = e.flush();
        }
    }

    fn preamble(&self, r: &Rank, note: Option<String>) {
        // Every rank contributes its device line.
        let line = format!(
            "#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} [{}] {}\n",
            r.boot.rank(),
            std::process::id(),
            bootstrap::hostname(),
            r.gpu.ordinal,
            r.gpu.pci_bus_id(),
            r.gpu.name()
        );
        let lines = r.boot.allgather(line.as_bytes());
        if !self.print {
            return;
        }
        let e = &self.run.env;
        let c = self.cfg;
        let mut s = format!(
            "# ginbench {} ({}) alltoall_perf nccl-headers={} nccl-library={} nccl-path={}\n",
            self.run.tool.version, self.run.tool.git, e.nccl.header, e.nccl.library, e.nccl.path
        );
        s += &format!(
            "# nThread {} nGpus 1 minBytes {} maxBytes {} warmup iters: {} iters: {} agg iters: {} validation: {} graph: {}\n",
            c.local_ranks, c.min_bytes, c.max_bytes, c.warmup, c.iters, c.agg, c.check, c.graph_launches
        );
        s += &format!("# ranks {} hosts {} gin: {} ({})\n", e.ranks, e.hosts.len(), e.gin.kind, e.gin.reason);
        if let Some(n) = note {
            s += &n;
            s.push('\n');
        }
        s += "#\n# Using devices\n";
        for l in lines {
            s += &String::from_utf8_lossy(&l);
        }
        self.emit(&s);
    }

    fn impl_header(&mut self, name: &str, id: u32, registration: &str) {
        self.reasons_shown.clear();
        self.emit(&format!("#\n# impl {name} (-D {id}), registration: {registration}\n"));
        self.emit(&table::header(self.style));
    }

    /// Reduce one measurement over ranks into a row (every rank calls this; rank 0 keeps it).
    /// A row that did not run, for `reason` (the same on every rank).
    fn skipped(&self, impl_name: &str, count: u64, placement: &str, cycle: u32, reason: String) -> Row {
        let n = self.run.env.ranks as u64;
        Row {
            impl_name: impl_name.into(),
            size_bytes: n * count * self.cfg.dtype.size(),
            count,
            dtype: self.cfg.dtype.name().into(),
            placement: placement.into(),
            time_us: None,
            p50_us: None,
            p99_us: None,
            algbw_gbps: None,
            busbw_gbps: None,
            wrong: None,
            status: "skipped".into(),
            reason: Some(reason),
            cycle,
            mode: None,
            phase: None,
            tokens: None,
            ..Default::default()
        }
    }

    fn row(&self, boot: &dyn Bootstrap, impl_name: &str, count: u64, placement: &str, cycle: u32, m: &Measured) -> Row {
        let n = boot.size();
        let mut mine = vec![m.timing.mean_us, m.timing.cpu_us, m.wrong.map(|w| w as f64).unwrap_or(-1.0)];
        mine.extend(&m.timing.samples_us);
        let all = boot.allgather_f64(&mine);
        let pick = |i: usize| all.iter().map(|v| v[i]).collect::<Vec<f64>>();
        let time = stats::reduce(&pick(if self.cfg.cputime { 1 } else { 0 }), self.cfg.average);
        let samples: Vec<Vec<f64>> = all.iter().map(|v| v[3..].to_vec()).collect();
        let pct = stats::percentiles(&stats::slowest_per_iteration(&samples));
        let wrong = m.wrong.map(|_| pick(2).iter().map(|&w| w.max(0.0) as u64).sum());
        let elt = self.cfg.dtype.size();
        let size_bytes = n as u64 * count * elt;
        let (alg, bus) = sizes::alltoall_bw(size_bytes, time, n as u64);
        Row {
            impl_name: impl_name.into(),
            size_bytes,
            count,
            dtype: self.cfg.dtype.name().into(),
            placement: placement.into(),
            time_us: Some(time),
            p50_us: pct.map(|p| p.0),
            p99_us: pct.map(|p| p.1),
            algbw_gbps: Some(alg),
            busbw_gbps: Some(bus),
            wrong,
            status: "ok".into(),
            reason: m.note.filter(|_| self.cfg.check > 0).map(String::from),
            cycle,
            mode: None,
            phase: None,
            tokens: None,
            ..Default::default()
        }
    }

    fn line(&mut self, out: &Row, inp: &Row) {
        let mut s = table::line(out, inp, self.style);
        s += &table::new_reasons(&mut self.reasons_shown, &[out, inp]);
        self.emit(&s);
    }

    fn wrong_rows(&self) -> u64 {
        self.rows.iter().filter(|r| r.wrong.unwrap_or(0) > 0).count() as u64
    }

    fn finish(&mut self, error: Option<&Error>) -> Result<()> {
        if !self.print {
            return Ok(());
        }
        let summary = Summary::of(&self.rows);
        self.emit(&table::footer(summary.rows_wrong, summary.avg_busbw_gbps));
        self.run.finish(std::mem::take(&mut self.rows), summary, error.map(|e| e.to_string()));
        for line in report::write_outputs(&self.run, self.cfg.json.as_deref(), self.cfg.csv.as_deref())
            .map_err(Error::internal)?
        {
            self.emit(&line);
        }
        Ok(())
    }
}

fn config_json(c: &Config) -> serde_json::Value {
    serde_json::json!({
        "local_ranks": c.local_ranks,
        "min_bytes": c.min_bytes,
        "max_bytes": c.max_bytes,
        "iters": c.iters,
        "warmup_iters": c.warmup,
        "agg_iters": c.agg,
        "run_cycles": c.cycles,
        "check": c.check,
        "datatype": c.dtype.name(),
        "blocking": c.blocking,
        "cudagraph": c.graph_launches,
        "average": c.average,
        "timeout_s": c.timeout_s,
        "local_register": c.register,
        "impls": c.impls.iter().map(|i| i.name).collect::<Vec<_>>(),
        "device_cta_count": c.ctas,
        "report_cputime": c.cputime,
        "per_iter_timing": c.per_iter,
        "emulate_nodes": c.emulate_nodes,
        "profile_size": c.profile_size,
        "require_gin": c.require_gin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_for_a_person_at_a_terminal() {
        assert!(show_progress(true, false, false, true));
        assert!(!show_progress(false, false, false, true), "other ranks stay quiet");
        assert!(!show_progress(true, true, false, true), "-J - owns stdout");
        assert!(!show_progress(true, false, true, true), "quiet under CI");
        assert!(!show_progress(true, false, false, false), "not a terminal");
    }
}
