//! Rank 0's output for every benchmark: the preamble, one table section per impl with its skip
//! reasons on `#` lines, a progress line on a terminal, the footer, and the JSON / CSV at the
//! end. Every rank takes part in the reductions (`reduce`); only rank 0 prints and keeps rows.
use super::cli::Common;
use super::Benchmark;
use crate::bootstrap::{self, Bootstrap};
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::harness::{stats, Timing};
use crate::report;
use crate::results::{Env, Row, Run, Status, Summary};
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

pub struct Output {
    print: bool,
    pub run: Run,
    rows: Vec<Row>,
    /// Sweep repetition (`-N`) the next rows belong to.
    pub cycle: u32,
    /// Skip reasons already printed in the current section.
    reasons_shown: HashSet<String>,
    /// Rows under measurement ([`Output::measuring`]), recorded `failed` if the run ends first.
    pending: Vec<Row>,
    /// Where the current table section's rows start in `rows` (None before the first).
    section_start: Option<usize>,
    /// The benchmark's footer, shown under each section.
    footer: fn(&Summary) -> String,
    /// A progress line on stderr: rank 0, a terminal, not under CI, stdout not JSON.
    progress: bool,
    to: Destination,
}

/// Where rank 0's output goes: text to stdout (stderr when stdout carries the JSON), the JSON and
/// CSV files, and error lines under the program's name.
#[derive(Clone)]
struct Destination {
    prog: &'static str,
    json_stdout: bool,
    json: Option<PathBuf>,
    csv: Option<PathBuf>,
}

impl Destination {
    /// `run` ended with its `rows`, their `summary` and `error`, into the results files; the
    /// lines to show (or why the files could not be written).
    fn write(&self, run: &mut Run, rows: Vec<Row>, summary: Summary, error: Option<String>) -> Result<Vec<String>> {
        run.finish(rows, summary, error);
        report::write_outputs(run, self.json.as_deref(), self.csv.as_deref()).map_err(Error::internal)
    }
}

/// A copy of rank 0's run so far, kept beside its `Output` for the `-T` watchdog: a run it ends
/// still writes the rows measured before the hang ([`save_unfinished`]).
struct Unfinished {
    run: Run,
    rows: Vec<Row>,
    pending: Vec<Row>,
    to: Destination,
}

static UNFINISHED: Mutex<Option<Unfinished>> = Mutex::new(None);

fn unfinished() -> std::sync::MutexGuard<'static, Option<Unfinished>> {
    UNFINISHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// For the watchdog as it ends the process: rank 0's results files with the rows measured so
/// far and `error`, so a sweep that hangs at its last size keeps the others (`compare` fails a
/// run that ended in error). Nothing where no run is under way or this process is not rank 0's.
pub fn save_unfinished(error: &str) {
    let Some(Unfinished { mut run, mut rows, pending, to }) = unfinished().take() else { return };
    rows.extend(failed(pending, error));
    let summary = Summary::of(&rows);
    match to.write(&mut run, rows, summary, Some(error.to_string())) {
        Ok(lines) => lines.iter().for_each(|l| report::print_text(to.json_stdout, l)),
        Err(e) => crate::console::err(&format!("{}: error: the rows measured so far were not saved: {e}\n", to.prog)),
    }
}

/// The rows under measurement when the run ended with `error`: those that had not finished are
/// recorded `failed`, with the error as their reason.
fn failed(pending: Vec<Row>, error: &str) -> impl Iterator<Item = Row> + '_ {
    pending.into_iter().map(move |r| match r.status {
        Status::Failed => Row { reason: Some(error.to_string()), ..r },
        _ => r,
    })
}

/// One measurement reduced over ranks.
#[derive(Debug, Clone)]
pub struct Reduced {
    /// Completion time per `-a`: what bandwidths are computed from.
    pub time_us: f64,
    /// Host enqueue time per `-a` (`-C 1` prints it in place of the completion time).
    pub cpu_us: f64,
    /// Per-iteration percentiles of the slowest rank.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Wrong elements summed over ranks; None when not checked.
    pub wrong: Option<u64>,
    /// The caller's extra values, averaged over ranks.
    pub extras: Vec<f64>,
    /// The caller's extra values of the rank whose `time_us` is shown (rank 0, the fastest or
    /// the slowest); with `-a 1`, whose time is no one rank's, their mean. A bandwidth divides
    /// these, so it is one rank's bytes over that rank's time, never more than any rank moved.
    pub timed_extras: Vec<f64>,
}

/// Reduce one measurement over every rank (collective); `extras` are averaged.
pub fn reduce(
    boot: &dyn Bootstrap,
    average: stats::Average,
    timing: &Timing,
    wrong: Option<u64>,
    extras: &[f64],
) -> Reduced {
    let mut mine = vec![timing.mean_us, timing.cpu_us, wrong.map(|w| w as f64).unwrap_or(-1.0)];
    mine.extend(extras);
    let head = mine.len();
    mine.extend(&timing.samples_us);
    let all = boot.allgather_f64(&mine);
    let pick = |i: usize| all.iter().map(|v| v[i]).collect::<Vec<f64>>();
    let samples: Vec<Vec<f64>> = all.iter().map(|v| v[head..].to_vec()).collect();
    let pct = stats::percentiles(&stats::slowest_per_iteration(&samples));
    let extras: Vec<f64> = (3..head).map(|i| pick(i).iter().sum::<f64>() / all.len() as f64).collect();
    let times = pick(0);
    let timed_extras = (3..head).map(|i| stats::of_timed_rank(&times, average, &pick(i))).collect();
    Reduced {
        time_us: stats::reduce(&times, average),
        cpu_us: stats::reduce(&pick(1), average),
        p50_us: pct.map(|p| p.0),
        p99_us: pct.map(|p| p.1),
        wrong: wrong.map(|_| pick(2).iter().map(|&w| w.max(0.0) as u64).sum()),
        extras,
        timed_extras,
    }
}

/// The progress line shows on rank 0 only, on a terminal, never under CI nor when stdout
/// carries the JSON (`-J -`).
fn show_progress(rank0: bool, json_stdout: bool, ci: bool, stderr_is_tty: bool) -> bool {
    rank0 && !json_stdout && !ci && stderr_is_tty
}

impl Output {
    pub fn new<B: Benchmark>(print: bool, c: &Common, env: Env, started_at: String, config: serde_json::Value) -> Self {
        let json_stdout = c.json_to_stdout();
        let run = Run::start(B::KIND, &c.command, started_at, env, config);
        let to = Destination { prog: B::PROG, json_stdout, json: c.json.clone(), csv: c.csv.clone() };
        if print {
            *unfinished() = Some(Unfinished { run: run.clone(), rows: vec![], pending: vec![], to: to.clone() });
        }
        Output {
            print,
            run,
            rows: vec![],
            cycle: 0,
            reasons_shown: Default::default(),
            pending: vec![],
            section_start: None,
            footer: B::footer,
            progress: show_progress(
                print,
                json_stdout,
                std::env::var_os("CI").is_some(),
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
            ),
            to,
        }
    }

    /// Show table text (rank 0 only).
    pub fn emit(&self, s: &str) {
        if !self.print {
            return;
        }
        self.progress("");
        report::print_text(self.to.json_stdout, s);
    }

    /// A measurement starts: `text` on the progress line, and the table line's rows held so that a
    /// run ending before [`Output::rows`] records them (an error, or the `-T` watchdog) records
    /// `done` as they are and each of `current` (its keys set) as `failed`, with the error.
    pub fn measuring(&mut self, text: &str, done: &[Row], current: Vec<Row>) {
        self.progress(text);
        let failed = current.into_iter().map(|r| Row { status: Status::Failed, reason: None, ..r });
        self.pending = done.iter().cloned().chain(failed).collect();
        if self.print {
            if let Some(u) = unfinished().as_mut() {
                // The run too, as in `rows`: what NCCL granted the impl before this measurement.
                u.run.clone_from(&self.run);
                u.pending.clone_from(&self.pending);
            }
        }
    }

    /// Replace the progress line (empty: clear it).
    fn progress(&self, text: &str) {
        if self.progress {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K{}", if text.is_empty() { String::new() } else { format!("# running {text}") });
            let _ = e.flush();
        }
    }

    /// The version line, the benchmark's lines, GIN, and every rank's device (collective).
    pub fn preamble(&self, boot: &dyn Bootstrap, gpu: &Gpu, describe: &str) {
        let line = format!(
            "#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} [{}] {}\n",
            boot.rank(),
            std::process::id(),
            bootstrap::hostname(),
            gpu.ordinal,
            gpu.pci_bus_id(),
            gpu.name()
        );
        let lines = boot.allgather(line.as_bytes());
        if !self.print {
            return;
        }
        let e = &self.run.env;
        let mut s = format!(
            "# ginbench {} ({}) {} nccl-headers={} nccl-library={} nccl-path={}\n",
            self.run.tool.version, self.run.tool.git, self.to.prog, e.nccl.header, e.nccl.library, e.nccl.path
        );
        if self.run.tool.build == "debug" {
            s += "# note: a debug build: its host code launches kernels more slowly, so launch-bound times can read high (build with --release for figures)\n";
        }
        s += describe;
        s += &format!("# ranks {} hosts {} gin: {} ({})\n", e.ranks, e.hosts.len(), e.gin.kind, e.gin.reason);
        if e.gin.backend == crate::gin_backend::Backend::Loopback {
            s += &format!(
                "# gin backend: loopback ({}), {} node(s) to NCCL: GIN between this host's GPUs, not a network\n",
                e.gin.plugin, e.gin.nodes
            );
        }
        let per_process = if bootstrap::launched_by_mpi() { 1 } else { e.ranks };
        if let Some(w) = cpu_warning(&e.gpus, per_process) {
            s += &w;
        }
        if let Some(w) = shared_gpu_note(e) {
            s += &w;
        }
        s += "#\n# Using devices\n";
        for l in lines {
            s += &String::from_utf8_lossy(&l);
        }
        self.emit(&s);
    }

    /// A new table section: the last one's footer, then its title line and column header; skip
    /// reasons are shown anew.
    pub fn section(&mut self, title: &str, header: &str) {
        self.close_section();
        self.section_start = Some(self.rows.len());
        self.reasons_shown.clear();
        self.emit(&format!("#\n# {title}\n"));
        self.emit(header);
    }

    /// Record `rows` (one table line's worth) and show `line` (None: nothing ran, so no data
    /// line: nccl-tests parsers read every data line as numbers) followed by the reasons of rows
    /// that did not run, each once per section.
    pub fn rows(&mut self, line: Option<String>, rows: Vec<Row>) {
        let mut s = line.unwrap_or_default();
        for r in &rows {
            if let Some(why) = report::table::reason(r) {
                if self.reasons_shown.insert(why.clone()) {
                    s += &why;
                }
            }
        }
        self.emit(&s);
        self.pending.clear();
        if self.print {
            if let Some(u) = unfinished().as_mut() {
                // The run too: its config gains what NCCL granted each impl after the start.
                u.run.clone_from(&self.run);
                u.rows.extend(rows.iter().cloned());
                u.pending.clear();
            }
        }
        self.rows.extend(rows);
    }

    /// The footer of the section under way ([`section_footer`]).
    fn close_section(&mut self) {
        if let Some(start) = self.section_start.take() {
            if let Some(f) = section_footer(&self.rows[start..], self.footer) {
                self.emit(&f);
            }
        }
    }

    pub fn wrong_rows(&self) -> u64 {
        self.rows.iter().filter(|r| r.is_wrong()).count() as u64
    }

    /// The last section's footer, then the results files (rank 0).
    pub fn finish(&mut self, error: Option<&Error>) -> Result<()> {
        if !self.print {
            return Ok(());
        }
        unfinished().take();
        if let Some(e) = error {
            let pending = std::mem::take(&mut self.pending);
            self.rows.extend(failed(pending, &e.to_string()));
        }
        self.close_section();
        let summary = Summary::of(&self.rows);
        let rows = std::mem::take(&mut self.rows);
        for line in self.to.write(&mut self.run, rows, summary, error.map(|e| e.to_string()))? {
            self.emit(&line);
        }
        Ok(())
    }
}

/// A section's footer over its own rows, as nccl-tests' is over its run's (a blend of every
/// impl's bandwidths would be no one's); none where nothing in it ran.
fn section_footer(rows: &[Row], footer: fn(&Summary) -> String) -> Option<String> {
    rows.iter().any(|r| r.status == Status::Ok).then(|| footer(&Summary::of(rows)))
}

/// CPUs each rank should have: its own thread, NCCL's proxy thread and, with GIN, NCCL's GIN
/// progress thread all spin while work is in flight.
const CPUS_PER_RANK: usize = 3;

/// A warning line when some rank's process may use fewer than `CPUS_PER_RANK` CPUs per rank it
/// hosts (`per_process`): spinning threads sharing a CPU take turns in scheduler slices, and
/// waits of microseconds become milliseconds. Open MPI binds each process to one core by default
/// when it starts two ranks or fewer.
fn cpu_warning(gpus: &[crate::results::Gpu], per_process: usize) -> Option<String> {
    let g = gpus.iter().filter(|g| g.cpus > 0).min_by_key(|g| g.cpus)?;
    if g.cpus >= CPUS_PER_RANK * per_process.max(1) {
        return None;
    }
    Some(format!(
        "# warning: rank {}'s process may run on {} CPU(s) for {} rank(s); NCCL's proxy and GIN threads spin beside each \
         rank and would share them (waits of us become ms): launch without binding (mpirun --bind-to none, srun \
         --cpu-bind=none) or give each rank {} CPUs\n",
        g.rank, g.cpus, per_process, CPUS_PER_RANK
    ))
}

/// A note when ranks share a GPU (virtual nodes on a smaller host: harness::ranks): they take
/// turns on it, so the rows check correctness but their times mean nothing.
fn shared_gpu_note(env: &Env) -> Option<String> {
    let sharing = env.ranks_sharing_a_gpu();
    (sharing > 0).then(|| {
        format!(
            "# note: {sharing} of {} ranks share a GPU with ranks of other nodes: rows are checked, but those ranks take \
             turns on their GPU, so times and bandwidths mean nothing\n",
            env.gpus.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_takes_each_time_per_a_and_sums_wrong_elements() {
        let timings = [(10.0, 1.0, vec![9.0, 30.0]), (20.0, 3.0, vec![12.0, 11.0])];
        use stats::Average::*;
        for (average, time, cpu) in [(Rank0, 10.0, 1.0), (Mean, 15.0, 2.0), (Min, 10.0, 1.0), (Max, 20.0, 3.0)] {
            let reds: Vec<Reduced> = std::thread::scope(|s| {
                let hs: Vec<_> = crate::bootstrap::threads::group(2)
                    .into_iter()
                    .zip(&timings)
                    .map(|(b, (mean_us, cpu_us, samples_us))| {
                        s.spawn(move || {
                            let t = Timing { mean_us: *mean_us, cpu_us: *cpu_us, samples_us: samples_us.clone() };
                            reduce(&b, average, &t, Some(b.rank() as u64 + 1), &[b.rank() as f64])
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for r in &reds {
                assert_eq!((r.time_us, r.cpu_us, r.wrong), (time, cpu, Some(3)), "-a {average:?}");
                assert_eq!(r.extras, vec![0.5]);
                // rank 1 has the slower mean, rank 0 the faster; -a 1's is no one rank's
                let timed =
                    [(Rank0, 0.0), (Mean, 0.5), (Min, 0.0), (Max, 1.0)].iter().find(|t| t.0 == average).unwrap().1;
                assert_eq!(r.timed_extras, vec![timed], "-a {average:?}");
                // the slowest rank per iteration: 12 and 30, whose p50 (as nccl-tests' sorted[n / 2]) is 30
                assert!((r.p50_us.unwrap() - 30.0).abs() < 0.01 && (r.p99_us.unwrap() - 30.0).abs() < 0.01);
            }
        }
    }

    #[test]
    fn warns_when_ranks_would_share_a_cpu() {
        let g = |rank, cpus| crate::results::Gpu { rank, cpus, ..Default::default() };
        let w = cpu_warning(&[g(0, 64), g(1, 1)], 1).expect("one CPU for a rank");
        assert!(w.starts_with("# warning: rank 1's process may run on 1 CPU(s)"), "{w}");
        assert!(cpu_warning(&[g(0, 3), g(1, 3)], 1).is_none());
        assert!(cpu_warning(&[g(0, 8), g(1, 8)], 4).is_some(), "4 ranks as threads on 8 CPUs");
        assert!(cpu_warning(&[g(0, 0)], 1).is_none(), "unknown: no warning");
    }

    #[test]
    fn notes_ranks_that_share_a_gpu() {
        let g = |rank, host: &str, bus: &str| crate::results::Gpu {
            rank,
            host: host.into(),
            pci_bus_id: bus.into(),
            ..Default::default()
        };
        let env = |gpus: Vec<crate::results::Gpu>| Env { gpus, ..Default::default() };
        let four = env(vec![g(0, "h", "a"), g(1, "h", "b"), g(2, "h", "a"), g(3, "h", "b")]);
        let n = shared_gpu_note(&four).expect("two ranks on each GPU");
        assert!(n.starts_with("# note: 4 of 4 ranks share a GPU"), "{n}");
        assert!(shared_gpu_note(&env(vec![g(0, "h", "a"), g(1, "h", "b")])).is_none());
        assert!(shared_gpu_note(&env(vec![g(0, "h", "a"), g(1, "i", "a")])).is_none(), "same bus id on two hosts");
        assert!(shared_gpu_note(&env(vec![g(0, "h", ""), g(1, "h", "")])).is_none(), "no bus id recorded");
    }

    /// alltoall_perf's Output with its default flags: `print` is rank 0's; with no rows out of
    /// the ordinary, no footer text and no files, rank 0 writes nothing either.
    fn output(print: bool) -> Output {
        let c = crate::alltoall::cli::tests::cfg(&[]).unwrap();
        Output::new::<crate::alltoall::cli::Config>(print, &c.common, Env::default(), "t".into(), serde_json::json!({}))
    }

    fn wrong_row(wrong: Option<u64>) -> Row {
        Row { impl_name: "nvl".into(), wrong, ..Default::default() }
    }

    #[test]
    fn rank_0_finishes_with_its_rows_summary_and_error() {
        let mut out = output(true);
        out.rows(None, vec![wrong_row(Some(3)), wrong_row(Some(0))]);
        out.rows(None, vec![wrong_row(Some(1)), wrong_row(None)]);
        // The exit code's WrongData counts rows, not elements.
        assert_eq!(out.wrong_rows(), 2);
        out.finish(Some(&Error::internal("timed out"))).unwrap();
        let run = &out.run;
        assert_eq!(run.rows.len(), 4);
        assert_eq!(run.summary.as_ref().map(|s| s.rows_wrong), Some(2));
        assert!(run.finished_at.is_some());
        assert_eq!(run.error(), Some("timed out"));
    }

    #[test]
    fn a_run_ending_mid_measurement_records_its_rows_failed() {
        let key = |placement| Row { impl_name: "nvl".into(), size_bytes: 64, placement, ..Default::default() };
        let done = Row { time_us: Some(1.0), wrong: Some(0), ..key(crate::results::Placement::OutOfPlace) };
        let mut out = output(true);
        out.measuring("nvl 64 B", &[], vec![key(crate::results::Placement::OutOfPlace)]);
        out.rows(None, vec![]);
        out.measuring("nvl 64 B in place", std::slice::from_ref(&done), vec![key(crate::results::Placement::InPlace)]);
        out.finish(Some(&Error::internal("NCCL error"))).unwrap();
        let rows = &out.run.rows;
        assert_eq!(rows.len(), 2, "a measurement that ended is not held: {rows:?}");
        assert_eq!((rows[0].status, rows[0].time_us), (Status::Ok, Some(1.0)), "done rows as they were");
        assert_eq!(rows[1].status, Status::Failed);
        assert_eq!(rows[1].placement, crate::results::Placement::InPlace);
        assert!(rows[1].reason.as_deref().unwrap().contains("NCCL error"), "{:?}", rows[1].reason);
        assert_eq!(out.run.summary.as_ref().map(|s| s.rows_failed), Some(1));
    }

    #[test]
    fn each_section_closes_with_the_footer_of_its_own_rows() {
        use crate::driver::Benchmark;
        let footer = <crate::alltoall::cli::Config as Benchmark>::footer;
        let bw =
            |impl_name: &str, busbw| Row { impl_name: impl_name.into(), busbw_gbps: Some(busbw), ..Default::default() };
        let host = [bw("host", 100.0), bw("host", 200.0)];
        let f = section_footer(&host, footer).unwrap();
        assert_eq!(f, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 150 \n#\n");
        let skipped = Row { status: Status::Skipped, ..Default::default() };
        assert_eq!(section_footer(&[skipped.clone(), skipped], footer), None, "nothing ran");
        let ep = <crate::ep::cli::Config as Benchmark>::footer;
        assert_eq!(section_footer(&host, ep).unwrap(), "# Out of bounds values : 0 OK\n#\n", "no busbw column");
    }

    #[test]
    fn a_run_ending_well_records_no_failed_row() {
        let mut out = output(true);
        out.measuring("nvl 64 B", &[], vec![Row::default()]);
        out.finish(None).unwrap();
        assert!(out.run.rows.is_empty(), "held rows fail only with an error");
    }

    #[test]
    fn other_ranks_finish_without_results() {
        let mut out = output(false);
        out.rows(None, vec![wrong_row(Some(1))]);
        out.finish(None).unwrap();
        assert!(out.run.summary.is_none() && out.run.finished_at.is_none() && out.run.rows.is_empty());
    }

    #[test]
    fn a_new_section_shows_skip_reasons_anew() {
        let mut out = output(false);
        let skipped =
            Row { status: crate::results::Status::Skipped, reason: Some("no GIN".into()), ..Default::default() };
        out.rows(None, vec![skipped.clone(), skipped]);
        assert_eq!(out.reasons_shown.len(), 1, "once per section");
        out.section("alltoall", "# header\n");
        assert!(out.reasons_shown.is_empty());
    }

    #[test]
    fn progress_only_for_a_person_at_a_terminal() {
        assert!(show_progress(true, false, false, true));
        assert!(!show_progress(false, false, false, true), "other ranks stay quiet");
        assert!(!show_progress(true, true, false, true), "-J - owns stdout");
        assert!(!show_progress(true, false, true, true), "quiet under CI");
        assert!(!show_progress(true, false, false, false), "not a terminal");
    }
}
