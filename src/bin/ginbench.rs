use clap::{Parser, Subcommand};
use ginbench::console;
use ginbench::environment::node;
use ginbench::error::{die, Error, Exit};
use ginbench::report::{compare, json, sidebyside, write_atomic};

use std::path::{Path, PathBuf};

const PROG: &str = "ginbench";

#[derive(Parser)]
#[command(name = "ginbench", version = ginbench::driver::cli::VERSION, about = "ginbench: node report and results tools")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// What this node offers: NCCL, CUDA driver, GPUs and topology, network, GIN, variables.
    /// Exit 8 when no GPU or no matching NCCL was found.
    Env {
        /// Print the `env` object of the results schema as JSON instead
        #[arg(long)]
        json: bool,
    },
    /// Check the MPI bootstrap: run under mpirun / srun; every rank exchanges bytes with every
    /// other and reports its rank, host and local rank. No GPU needed.
    MpiCheck,
    /// Regression gate: compare a candidate results file with a baseline. Exit 0 pass,
    /// 1 regression (or a row or cycle missing, a failed or newly skipped row, wrong data,
    /// unchecked, an interference overlap lost, a candidate run that ended in error), 2 bad input
    /// (unreadable or foreign files, NaN / infinite / zero / negative / sub-ns times or
    /// bandwidths, rows that are not the run's cycles, a baseline with no ok row, nothing
    /// compared, runs whose rank count or timing settings differ, or whose ranks shared GPUs).
    Compare {
        baseline: PathBuf,
        candidate: PathBuf,
        /// Slowdown that counts as a regression (beyond the baseline's own spread too), in percent
        /// from 0 to 1000: 5% or 5 (a bare 0.05 is 0.05 %)
        #[arg(long, default_value = "5%", allow_hyphen_values = true)]
        threshold: String,
        /// Also write the verdicts as JSON (schema ginbench-compare/1; a refused comparison
        /// writes its refusal, so no earlier verdict stays)
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write JUnit XML for CI systems (a refusal is one failing test case)
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// The NVLink ceiling of this host: the copy engines (no SM) and an SM copy kernel (nvl's copy
    /// loop without its protocol), every pair one way and both ways at once (the copy engines'
    /// both-ways figure is the link limit alltoall busbw is read against), and every GPU to every
    /// other at once (the alltoall pattern), in GB/s per sending GPU; every copy is checked. Keep
    /// its JSON beside results.
    /// Exit 6 on bad input, 7 if a copy arrived wrong, 8 with fewer than 2 GPUs, more than 8 without
    /// -g, or no peer path.
    #[command(allow_negative_numbers = true)]
    Ceiling {
        /// GPUs to use, 0..g-1 (default: every visible GPU; at most 8)
        #[arg(short = 'g', long = "ngpus", value_parser = clap::value_parser!(u32).range(2..=8))]
        gpus: Option<u32>,
        /// Bytes per copy (K/M/G/T suffixes, powers of 1024)
        #[arg(short = 'b', long = "bytes", default_value = "256M")]
        bytes: String,
        /// Timed rounds per measurement (1..=1000000)
        #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = ginbench::driver::cli::iterations(1))]
        iters: u32,
        /// Untimed rounds first (at most 1000000)
        #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_parser = ginbench::driver::cli::iterations(0))]
        warmup: u32,
        /// CTAs of the SM copy kernel (512 threads each; alltoall_perf's nvl default is 128)
        #[arg(short = 'V', long = "ctas", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
        ctas: u32,
        /// Also write the figures as JSON (schema ginbench/1, benchmark "ceiling")
        #[arg(short = 'J', long = "output_file", value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Side-by-side report of runs (e.g. two clusters): environments and their differences, the
    /// best impl per size and auto's time against it, busbw / time per size and impl (EP: bw /
    /// time per phase and tokens per rank, per impl, mode and dispatch dtype) with ratios to the
    /// first run, SVG plots; Markdown and HTML.
    /// Exit 2 on bad input (also: mixed benchmarks, values no plot can hold).
    Report {
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Output folder (report.md, report.html, *.svg)
        #[arg(short = 'o', long = "output", default_value = "report")]
        output: PathBuf,
        /// Name of each run, in order (default: the file name without .json; where two runs'
        /// names collide, the folders that tell them apart, e.g. h200x2/ll and h200x4/ll)
        #[arg(long = "label")]
        labels: Vec<String>,
    },
}

/// `compare` and `report` exit 2 on bad input (its documented contract); other subcommands use exit 6.
fn bad_input_exit() -> i32 {
    if matches!(std::env::args_os().nth(1).as_deref().and_then(|a| a.to_str()), Some("compare" | "report")) {
        2
    } else {
        Exit::Usage as i32
    }
}

/// Read a results file and refuse impossible values (NaN, infinite, zero or negative times and
/// bandwidths); errors name the file.
fn load(path: &Path) -> Result<ginbench::results::Run, String> {
    // A device (/dev/zero) would be read forever; a pipe (`<(jq ...)`) is fine. At most 1 GiB.
    use std::io::Read;
    const MAX_BYTES: u64 = 1 << 30;
    let shown = path.display();
    let too_big = || format!("{shown}: over the 1 GiB a results file may have");
    let mut fifo = false;
    if let Ok(m) = std::fs::metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if m.file_type().is_char_device() || m.file_type().is_block_device() {
            return Err(format!("{shown}: a device, not a results file"));
        }
        // A regular file is measured before it is read; a pipe only by what it delivers.
        if m.len() > MAX_BYTES {
            return Err(too_big());
        }
        fifo = m.file_type().is_fifo();
    }
    let bytes = if fifo {
        // A pipe is waited for at most this long, to open or to deliver more.
        read_pipe(path, MAX_BYTES + 1, std::time::Duration::from_secs(30))
    } else {
        let mut bytes = vec![];
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
            .map(|_| bytes)
            .map_err(|e| e.to_string())
    }
    .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_big());
    }
    let text = String::from_utf8(bytes).map_err(|e| format!("{shown}: not UTF-8 text: {e}"))?;
    let run = json::parse(&text).map_err(|e| format!("{shown}: {e}"))?;
    compare::check_values(&run).map_err(|e| format!("{shown}: {e}"))?;
    Ok(run)
}

/// A pipe's bytes, at most `max`, read in a thread: opening a named pipe waits for a writer,
/// forever where none comes, and a writer may go quiet without ever closing it; either ends the
/// read after `wait`. (`<(jq ...)` has its writer already.)
fn read_pipe(path: &Path, max: u64, wait: std::time::Duration) -> Result<Vec<u8>, String> {
    use std::io::Read;
    enum Piped {
        Opened,
        Chunk(Vec<u8>), // empty: the end
        Failed(std::io::Error),
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        let mut f = match std::fs::File::open(owned) {
            Ok(f) if tx.send(Piped::Opened).is_ok() => f.take(max),
            Ok(_) => return,
            Err(e) => return drop(tx.send(Piped::Failed(e))),
        };
        loop {
            let mut chunk = vec![0u8; 1 << 20];
            let msg = match f.read(&mut chunk) {
                Ok(n) => {
                    chunk.truncate(n);
                    Piped::Chunk(chunk)
                }
                Err(e) => Piped::Failed(e),
            };
            let end = !matches!(&msg, Piped::Chunk(c) if !c.is_empty());
            if tx.send(msg).is_err() || end {
                return;
            }
        }
    });
    let (mut opened, mut bytes) = (false, vec![]);
    loop {
        match rx.recv_timeout(wait) {
            Err(_) if !opened => {
                return Err(format!("a named pipe that nothing opened for writing within {} s", wait.as_secs()))
            }
            Err(_) => return Err(format!("a pipe that delivered nothing for {} s and was not closed", wait.as_secs())),
            Ok(Piped::Opened) => opened = true,
            Ok(Piped::Chunk(c)) if c.is_empty() => return Ok(bytes),
            Ok(Piped::Chunk(c)) => bytes.extend(c),
            Ok(Piped::Failed(e)) => return Err(e.to_string()),
        }
    }
}

/// Bad input to `compare` or `report`: one line, and their documented exit 2.
fn bad(msg: String) -> i32 {
    console::err(&format!("{PROG}: error: {}\n", console::one_line(&msg)));
    2
}

/// A refused comparison replaces the outputs too, so CI never reads an earlier verdict there.
/// Each output gets the refusal where it is a file the outputs may be (`check_writable`: not `-`,
/// a folder or a device), names no input, and is new or holds a verdict already: never another
/// file a misread command line named. As far as it can be written: the refusal itself is the
/// exit code and the line on stderr.
fn refuse_into(outputs: &[(&Path, &str)], inputs: &[&Path], msg: &str) {
    for &(p, flag) in outputs {
        // Checked before anything is read: a FIFO or a device is never opened.
        let usable = ginbench::driver::cli::check_writable(p, flag).is_ok()
            && !inputs.iter().any(|i| ginbench::report::same_file(p, i));
        if usable && (!p.exists() || holds_a_verdict(p)) {
            let text = if flag == "--junit" { compare::refused_junit(msg) } else { compare::refused_json(msg) };
            let _ = write_atomic(p, text.as_bytes());
        }
    }
}

/// Whether the regular file `p` holds a verdict of `compare` (read up to 256 MiB).
fn holds_a_verdict(p: &Path) -> bool {
    use std::io::Read;
    let mut text = String::new();
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
        && std::fs::File::open(p).and_then(|f| f.take(1 << 28).read_to_string(&mut text)).is_ok()
        && compare::is_verdict(&text)
}

/// A `compare` command line clap refused: every `--json` / `--junit` value as written (a word
/// that starts with `-` is no value: it is the next flag), and the other words, which may name
/// inputs, for [`refuse_into`].
fn compare_outputs_of(args: &[std::ffi::OsString]) -> (Vec<(PathBuf, &'static str)>, Vec<PathBuf>) {
    let (mut outputs, mut others) = (vec![], vec![]);
    let mut words = args.iter().peekable();
    while let Some(w) = words.next() {
        let text = w.to_str().unwrap_or_default();
        let (flag, inline) = text.split_once('=').map_or((text, None), |(f, v)| (f, Some(PathBuf::from(v))));
        let flag = match flag {
            "--json" => "--json",
            "--junit" => "--junit",
            _ => {
                others.push(PathBuf::from(w));
                continue;
            }
        };
        let next_is_value = words.peek().is_some_and(|n| !n.to_string_lossy().starts_with('-'));
        if let Some(p) = inline.or_else(|| next_is_value.then(|| words.next().map(PathBuf::from)).flatten()) {
            outputs.push((p, flag));
        }
    }
    (outputs, others)
}

fn run_compare(base: &Path, cand: &Path, threshold: &str, json_out: Option<&Path>, junit: Option<&Path>) -> i32 {
    let outputs: Vec<(&Path, &str)> =
        [(json_out, "--json"), (junit, "--junit")].into_iter().filter_map(|(p, f)| Some((p?, f))).collect();
    let refuse = |msg: String| -> i32 {
        refuse_into(&outputs, &[base, cand], &msg);
        bad(msg)
    };
    // The outputs are checked before anything is read, so a verdict is never lost to a bad path
    // (a refusal still reaches whichever output can take it).
    let check = || -> Result<(), Error> {
        use ginbench::driver::cli::{check_distinct, check_writable};
        for &(p, flag) in &outputs {
            check_writable(p, flag)?;
            for (input, what) in [(base, "the baseline"), (cand, "the candidate")] {
                check_distinct((p, flag), (input, what))?;
            }
        }
        if let (Some(j), Some(x)) = (json_out, junit) {
            check_distinct((j, "--json"), (x, "--junit"))?;
        }
        Ok(())
    };
    if let Err(e) = check() {
        return refuse(e.to_string());
    }
    let write = |json: String, xml: String| -> Result<(), String> {
        for (path, text) in [(json_out, json), (junit, xml)] {
            if let Some(p) = path {
                write_atomic(p, text.as_bytes()).map_err(|e| format!("writing {}: {e}", p.display()))?;
            }
        }
        Ok(())
    };
    let threshold = match compare::parse_threshold(threshold) {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    let (b, c) = match (load(base), load(cand)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(e), _) | (_, Err(e)) => return refuse(e),
    };
    if let Err(e) = compare::check_baseline(&b) {
        return refuse(format!("{}: {e}", base.display()));
    }
    let outcome = match compare::compare(&b, &c, threshold) {
        Ok(o) => o,
        Err(e) => return refuse(e),
    };
    if let Err(e) = write(compare::to_json(&outcome), compare::to_junit(&outcome)) {
        return refuse(e);
    }
    // The verdict shown where it was asked for, or the outputs say the run was refused too.
    if let Err(e) = console::out(&compare::render_text(&outcome)) {
        return refuse(e.to_string());
    }
    if outcome.passed {
        0
    } else {
        1
    }
}

fn run_report(runs: &[PathBuf], labels: &[String], out: &Path) -> i32 {
    if labels.len() > runs.len() {
        return bad(format!("{} --label given for {} runs (one per run, in order)", labels.len(), runs.len()));
    }
    // Given labels first, then the files' distinguishing names; never two runs with one label.
    let mut names: Vec<String> = sidebyside::default_labels(runs);
    names[..labels.len()].clone_from_slice(labels);
    sidebyside::distinct(&mut names);
    let mut labeled = vec![];
    for (p, label) in runs.iter().zip(names) {
        let loaded = load(p).and_then(|run| {
            sidebyside::check_plottable(&run).map(|()| run).map_err(|e| format!("{}: {e}", p.display()))
        });
        match loaded {
            Ok(run) => labeled.push(sidebyside::Labeled { label, run }),
            Err(e) => return bad(e),
        }
    }
    if let Err(e) = sidebyside::write(&labeled, out) {
        return bad(e);
    }
    match console::out(&format!("wrote {}/report.md and report.html\n", out.display())) {
        Ok(()) => 0,
        Err(e) => bad(e.to_string()),
    }
}

/// `ginbench ceiling`: everything the command line decides is checked before a GPU is opened.
fn run_ceiling(
    g: Option<u32>,
    bytes: &str,
    iters: u32,
    warmup: u32,
    ctas: u32,
    json: Option<&Path>,
) -> Result<(), Error> {
    use ginbench::ceiling::{self, Case, Host, Settings};
    let bytes = ginbench::harness::sizes::parse_size(bytes)?;
    if bytes == 0 || bytes > 64 << 30 {
        return Err(Error::usage(format!("-b {bytes}: a copy must be 1 B to 64 GiB"), "e.g. -b 256M"));
    }
    if let Some(path) = json {
        ginbench::driver::cli::check_writable(path, "-J")?;
    }
    let visible = ginbench::cuda::device_count()?;
    let n = g.map_or(visible, |g| g as usize);
    if n > ceiling::MAX_GPUS {
        return Err(Error::env(
            format!("{n} GPUs visible; the ceiling covers at most {}", ceiling::MAX_GPUS),
            "choose them with -g",
        ));
    }
    if n < 2 || n > visible {
        return Err(Error::env(
            format!("the ceiling needs 2 or more GPUs: {n} asked, {visible} visible"),
            "run it on a multi-GPU host; -g chooses how many",
        ));
    }
    let s = Settings { gpus: n, bytes, iters, warmup, ctas };
    let host = Host::open(&s)?;
    let mut rows = vec![];
    for case in Case::plan(n) {
        rows.push(host.measure(&case, &s)?);
    }
    console::out(&ceiling::table(&s, &rows))?;
    let wrong = ginbench::results::wrong_total(&rows);
    if let Some(path) = json {
        let env = ginbench::environment::build(host.describe(), Default::default(), None);
        let command = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
        let config = serde_json::json!({ "gpus": n, "bytes": bytes, "iters": iters, "warmup": warmup, "ctas": ctas });
        let mut run = ginbench::results::Run::start(
            ginbench::results::Kind::Ceiling,
            &command,
            ginbench::results::now_rfc3339(),
            env,
            config,
        );
        // The summary's wrong and failed counts; its mean busbw would mix patterns, so it stays 0.
        let summary = ginbench::results::Summary { avg_busbw_gbps: 0.0, ..ginbench::results::Summary::of(&rows) };
        run.finish(rows, summary, None);
        write_atomic(path, json::to_string(&run).as_bytes())?;
        console::out(&format!("# Wrote JSON to {}\n", path.display()))?;
    }
    if wrong > 0 {
        return Err(Error::new(
            ginbench::error::Exit::WrongData,
            format!("{wrong} bytes arrived wrong: the figures above are of broken copies"),
        )
        .with_fix("check the GPUs and their peer-to-peer path (nvidia-smi topo -m)"));
    }
    Ok(())
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        use clap::error::ErrorKind::*;
        if matches!(e.kind(), DisplayHelp | DisplayVersion) {
            let unwritable = if bad_input_exit() == 2 { 2 } else { Exit::Environment as i32 };
            ginbench::error::show(PROG, &e, unwritable);
        }
        if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
            // No subcommand: nothing was asked for, so this is a usage error, not a success.
            console::err(&format!(
                "{PROG}: error: no command given (fix: ginbench env | mpi-check | compare | report | ceiling; see ginbench --help)\n"
            ));
            std::process::exit(Exit::Usage as i32);
        }
        // The help to see is the subcommand's, where one was named.
        let help = std::env::args_os()
            .nth(1)
            .and_then(|s| s.into_string().ok())
            .filter(|s| <Cli as clap::CommandFactory>::command().find_subcommand(s).is_some())
            .map_or("ginbench --help".to_string(), |s| format!("ginbench {s} --help"));
        let line = format!("{} (fix: see {help})", ginbench::error::clap_one_line(&e));
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if args.first().is_some_and(|a| a == "compare") {
            let (outputs, others) = compare_outputs_of(&args[1..]);
            let outputs: Vec<(&Path, &str)> = outputs.iter().map(|(p, f)| (p.as_path(), *f)).collect();
            let others: Vec<&Path> = others.iter().map(PathBuf::as_path).collect();
            refuse_into(&outputs, &others, &line);
        }
        console::err(&format!("{PROG}: error: {line}\n"));
        std::process::exit(bad_input_exit())
    });
    match cli.cmd {
        Cmd::Env { json } => {
            let r = node::collect();
            let shown = if json {
                serde_json::to_string_pretty(&r.env).expect("env serializes") + "\n"
            } else {
                node::render(&r)
            };
            console::out(&shown).unwrap_or_else(|e| die(PROG, &e));
            if r.problems.is_empty() {
                std::process::exit(0);
            }
            // The report (or the JSON) is on stdout; why the exit is 8, on stderr in both forms.
            die(PROG, &Error::new(Exit::Environment, r.problems.join("; ")));
        }
        Cmd::MpiCheck => match ginbench::bootstrap::check::run() {
            Ok(line) => console::out(&format!("{line}\n")).unwrap_or_else(|e| die(PROG, &e)),
            Err(e) => die(PROG, &e),
        },
        Cmd::Ceiling { gpus, bytes, iters, warmup, ctas, json } => {
            if let Err(e) = run_ceiling(gpus, &bytes, iters, warmup, ctas, json.as_deref()) {
                die(PROG, &e)
            }
        }
        Cmd::Report { runs, output, labels } => std::process::exit(run_report(&runs, &labels, &output)),
        Cmd::Compare { baseline, candidate, threshold, json, junit } => {
            std::process::exit(run_compare(&baseline, &candidate, &threshold, json.as_deref(), junit.as_deref()))
        }
    }
}
