//! The regression gate: compare a candidate run with a baseline, row by row.
//!
//! Rows match on (benchmark, impl, size, dtype, placement, mode, phase, tokens, for a combine the
//! dtype of the dispatch it followed, and for interference rows the background's op and size);
//! repeated measurements of one key (`-N` cycles) form a group. A regression is a candidate slower
//! than the baseline by more than the threshold AND slower than the baseline's slowest repeated run
//! (with one run, the threshold alone decides). The gate fails closed: a baseline row or cycle
//! missing from the candidate (or fewer of its rows in a cycle), a row that failed in the candidate
//! (whatever the baseline did), one newly skipped, any wrong element, a check the baseline made and
//! the candidate did not (in any cycle), an interference background that covered less of the
//! foreground than the baseline's (or whose overlap the candidate does not record), and a candidate
//! run that ended in error fail it. A gate that compares nothing never passes, and runs that cannot
//! be set against each other are refused as bad input: an empty baseline, one without an ok row,
//! with a row of wrong data or that ended in error, rows whose keys match nothing that can be
//! timed, more rows of a key in a cycle than the baseline has, another rank or host count,
//! settings that change what a time means (CUDA graphs, -a, -C, -z, -m, -V, virtual nodes,
//! routing, seed, layer shape, layout, communicator knobs, the ceiling's CTAs), rows that do not
//! match the run's `-N` cycles (a row in a cycle the run did not have, or, in a run that finished,
//! a row missing from one of its cycles or not equally often in each), an ok row without a time,
//! and impossible values (NaN, infinite, negative, zero, sub-nanosecond or over-a-week times; NaN,
//! infinite or negative bandwidths). Interference rows gate on `time_us`, which is the foreground's
//! together time, and on the background's together time (`background.together_us`), by the same
//! rule: a training step waits for both; their alone / together times and slowdowns (both sides)
//! must be finite and above 0 as well, and the overlap in 0..1.
use crate::results::{wrong_total, BgOp, Kind, Mode, Phase, Row, Run, Status};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

crate::results::named_enum! {
    /// A row's verdict, as the JSON output spells it; the order is the report's.
    Verdict {
        /// Fails the gate.
        Regression = "regression",
        Missing = "missing",
        /// Failed in the candidate (a timeout, an NCCL error), whatever the baseline did.
        Failed = "failed",
        NewlySkipped = "newly-skipped",
        Wrong = "wrong",
        /// Checked in the baseline, not in the candidate.
        Unchecked = "unchecked",
        /// An interference row whose background covered less of the foreground than the baseline's.
        OverlapLost = "overlap-lost",
        /// Does not.
        Improvement = "improvement",
        #[default]
        Unchanged = "unchanged",
        New = "new",
        NotCompared = "not-compared",
    }
}

impl Verdict {
    pub fn fails(self) -> bool {
        matches!(
            self,
            Verdict::Regression
                | Verdict::Missing
                | Verdict::Failed
                | Verdict::NewlySkipped
                | Verdict::Wrong
                | Verdict::Unchecked
                | Verdict::OverlapLost
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub key: String,
    pub verdict: Verdict,
    pub baseline_us: Option<f64>,
    pub candidate_us: Option<f64>,
    /// Candidate time over baseline time, minus 1 (+0.10 = 10 % slower).
    pub change: Option<f64>,
    /// The slowest the baseline itself was, over its cycles.
    pub baseline_limit_us: Option<f64>,
    pub baseline_busbw_gbps: Option<f64>,
    pub candidate_busbw_gbps: Option<f64>,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub schema: &'static str,
    pub threshold: f64,
    pub passed: bool,
    /// Environment differences worth knowing (NCCL, GPUs, GIN, network, driver).
    pub env_differences: Vec<String>,
    /// The error that ended the candidate's run early: it fails the gate.
    pub candidate_error: Option<String>,
    /// Worst first.
    pub findings: Vec<Finding>,
}

/// "5%" or "5" (percent) -> 0.05.
pub fn parse_threshold(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t);
    match t.parse::<f64>() {
        // + 0.0 turns -0 into 0.
        Ok(v) if (0.0..=1000.0).contains(&v) => Ok(v / 100.0 + 0.0),
        _ => Err(format!("threshold '{s}' is not a percentage from 0 to 1000 (e.g. 5%)")),
    }
}

/// The key a row is matched on, e.g. `alltoall nvl 1048576 float out-of-place`; also how errors
/// name a row. EP rows (and interference rows of an EP foreground) go by their tokens, not their
/// bytes: how an impl counts the bytes it moves may change between builds, the tokens do not.
pub fn key(benchmark: Kind, r: &Row) -> String {
    let size = if r.tokens.is_some() { String::new() } else { format!(" {}", r.size_bytes) };
    let mut k = format!("{benchmark} {}{size} {} {}", r.impl_name, r.dtype, r.placement);
    for e in [r.mode.map(Mode::as_str), r.phase.map(Phase::as_str)].into_iter().flatten() {
        k += &format!(" {e}");
    }
    if let Some(t) = r.tokens {
        k += &format!(" tokens={t}");
    }
    if let Some(b) = &r.background {
        k += &format!(" bg={}:{}", b.op, b.size_bytes);
    }
    k
}

/// Why a row was not measured: "skipped (REASON)" from its first row that is not ok.
fn not_run(rows: &[&Row]) -> String {
    match rows.iter().find(|r| r.status != Status::Ok) {
        Some(r) => match &r.reason {
            Some(why) if !why.is_empty() => format!("{} ({why})", r.status),
            _ => r.status.to_string(),
        },
        None => "ok without a time".into(),
    }
}

/// The shortest time a row may hold, in µs (1 ns): no GPU operation, not even an empty one timed
/// on the host, completes faster; a smaller positive time is corrupt, not fast.
pub const MIN_TIME_US: f64 = 1e-3;

/// The longest time a row may hold, in µs: a week, the most `-T` lets one step take. A longer
/// time is corrupt, and as a baseline it would let any candidate pass.
pub const MAX_TIME_US: f64 = 604_800e6;

/// Impossible values are bad input, not data: every time must be finite and at least
/// [`MIN_TIME_US`] (an ok row must have one), every bandwidth finite and not negative, and zero
/// only where nothing moves (a zero-byte row) or nothing crosses (busbw on one rank, whose factor
/// (n-1)/n is 0); and the rows must be the run's `-N` cycles (see [`check_cycles`]). The error
/// names the row's key, its cycle and the field.
pub fn check_values(run: &Run) -> Result<(), String> {
    if !matches!(run.tool.build.as_str(), "" | "release" | "debug") {
        return Err(format!("tool.build is '{}': it is 'release' or 'debug'", run.tool.build));
    }
    if run.env.ranks == 0 && !run.rows.is_empty() {
        return Err("env.ranks is 0: a run with rows ran on at least one rank".into());
    }
    for r in &run.rows {
        let (ep_row, bg_row) = (r.phase.is_some(), r.background.is_some());
        let fits = match run.benchmark {
            Kind::Ep => ep_row && !bg_row,
            Kind::Interference => bg_row,
            Kind::Alltoall | Kind::Ceiling => !ep_row && !bg_row,
        };
        if !fits {
            return Err(format!(
                "row '{}' (cycle {}) is not a row of benchmark '{}'",
                key(run.benchmark, r),
                r.cycle,
                run.benchmark
            ));
        }
        let bad = |field: &str, v: f64, rule: &str| {
            // Tiny and huge values in exponent form: 5e-324, not 324 digits.
            let v = if v != 0.0 && v.is_finite() && !(1e-6..1e15).contains(&v.abs()) {
                format!("{v:e}")
            } else {
                format!("{v}")
            };
            Err(format!("row '{}' (cycle {}): {field} is {v}: {rule}", key(run.benchmark, r), r.cycle))
        };
        let bg = r.background.as_ref();
        if r.status == Status::Ok && r.time_us.is_none() {
            return Err(format!(
                "row '{}' (cycle {}): status ok without a time_us: a row that ran has a time",
                key(run.benchmark, r),
                r.cycle
            ));
        }
        let (time, ratio) = (true, false);
        for (field, v, is_time) in [
            ("time_us", r.time_us, time),
            ("p50_us", r.p50_us, time),
            ("p99_us", r.p99_us, time),
            ("alone_us", r.alone_us, time),
            ("together_us", r.together_us, time),
            ("slowdown", r.slowdown, ratio),
            ("background.alone_us", bg.and_then(|b| b.alone_us), time),
            ("background.together_us", bg.and_then(|b| b.together_us), time),
            ("background.slowdown", bg.and_then(|b| b.slowdown), ratio),
        ] {
            match v {
                Some(v) if !(v.is_finite() && v > 0.0) => return bad(field, v, "times must be finite and above 0"),
                Some(v) if is_time && v < MIN_TIME_US => {
                    return bad(field, v, "below 1 ns: no GPU operation completes that fast")
                }
                Some(v) if is_time && v > MAX_TIME_US => {
                    return bad(field, v, "above a week, the longest a step may take")
                }
                _ => {}
            }
        }
        // interference_perf writes the foreground's together time as time_us, and counts the
        // background's wrong elements in the row's: a file that does not is not one of its.
        if let (Some(t), Some(together)) = (r.time_us, r.together_us) {
            if t != together {
                return bad("time_us", t, "an interference row's time_us is its together_us");
            }
        }
        // A row whose background ran is timed together with it: without that time its
        // time_us is the foreground alone, which no regression of the pair would move.
        if r.status == Status::Ok && r.together_us.is_none() && bg.is_some_and(|b| b.op != BgOp::None) {
            return Err(format!(
                "row '{}' (cycle {}): its background ran, and it has no together_us",
                key(run.benchmark, r),
                r.cycle
            ));
        }
        if let Some(w) = bg.and_then(|b| b.wrong).filter(|&w| w > r.wrong.unwrap_or(0)) {
            return bad("background.wrong", w as f64, "the row's wrong count includes the background's");
        }
        // Only of rows that ran: a skipped row says what it would have run, and earlier builds
        // left its rank count at 0.
        if r.status == Status::Ok && bg.is_some_and(|b| b.ranks == 0 && b.op != BgOp::None) {
            return bad("background.ranks", 0.0, "a background runs on at least one rank");
        }
        if let Some(o) = r.overlap.filter(|o| !(o.is_finite() && (0.0..=1.0).contains(o))) {
            return bad("overlap", o, "an overlap is a fraction from 0 to 1");
        }
        for (field, v) in [
            ("algbw_gbps", r.algbw_gbps),
            ("busbw_gbps", r.busbw_gbps),
            ("bw_gbps", r.bw_gbps),
            ("background.busbw_alone_gbps", bg.and_then(|b| b.busbw_alone_gbps)),
            ("background.busbw_together_gbps", bg.and_then(|b| b.busbw_together_gbps)),
        ] {
            let one_rank =
                if field.starts_with("background.") { bg.is_some_and(|b| b.ranks <= 1) } else { run.env.ranks <= 1 };
            let zero_ok = r.size_bytes == 0 || (field.contains("busbw") && one_rank);
            match v {
                Some(v) if !(v.is_finite() && v >= 0.0) => {
                    return bad(field, v, "bandwidths must be finite and not negative")
                }
                Some(v) if v == 0.0 && !zero_ok => {
                    return bad(field, v, "a row that moves bytes cannot have zero bandwidth")
                }
                _ => {}
            }
        }
    }
    if let Some(e) = run.config.get("error").filter(|e| !e.is_string()) {
        // Read as no error, it would let a run that failed pass.
        return Err(format!("config.error is {e}: it is the message that ended the run, a string"));
    }
    check_cycles(run)
}

/// The rows must be the run's `-N` cycles (`config.run_cycles`): none in a cycle the run did not
/// have, and, in a run that finished (no `config.error`), every row key in every cycle, as the
/// benchmarks write them. Extra or partial cycles would weigh in a key's mean with nothing to set
/// them against. Files from before `run_cycles` was recorded hold one cycle.
fn check_cycles(run: &Run) -> Result<(), String> {
    let n = match run.config.get("run_cycles") {
        Some(v) => v.as_u64().filter(|&n| n > 0).ok_or_else(|| {
            format!("config.run_cycles is {v}: it is the run's cycle count (-N), a whole number from 1")
        })?,
        None if run.rows.iter().all(|r| r.cycle == 0) => 1,
        None => {
            return Err("config.run_cycles is missing and rows are in cycles beyond 0: the run's cycles cannot be \
                        told from rows added to it"
                .into())
        }
    };
    if let Some(r) = run.rows.iter().find(|r| u64::from(r.cycle) >= n) {
        return Err(format!(
            "row '{}' is in cycle {}, but the run had {n} cycles (config.run_cycles)",
            key(run.benchmark, r),
            r.cycle
        ));
    }
    if run.error().is_some() {
        return Ok(());
    }
    for (k, rows) in groups(run) {
        let c = per_cycle(&rows);
        if c.len() as u64 != n {
            return Err(format!(
                "row '{k}' is in {} of the run's {n} cycles (config.run_cycles): a finished run has every row in every cycle",
                c.len()
            ));
        }
        // Copies of a row in one cycle would outweigh the others in its mean.
        let first = c[&0];
        if let Some((cycle, m)) = c.iter().find(|(_, &m)| m != first) {
            return Err(format!(
                "row '{k}' is {m} times in cycle {cycle} and {first} in cycle 0: a finished run writes a row equally often in every cycle"
            ));
        }
    }
    Ok(())
}

/// A baseline the gate can stand on: a whole run with rows, at least one of which ran.
pub fn check_baseline(run: &Run) -> Result<(), String> {
    if let Some(e) = run.error() {
        return Err(format!("baseline run ended in error ({e}): record it again"));
    }
    if run.rows.is_empty() {
        return Err("baseline has no rows: a gate that compares nothing cannot pass".into());
    }
    // A row that moved wrong data timed something else (a kernel that wrote nothing is fast):
    // as a reference it would fail a correct candidate or pass a slow one.
    if let Some(r) = run.rows.iter().find(|r| r.wrong.unwrap_or(0) > 0) {
        return Err(format!(
            "baseline row '{}' (cycle {}) has {} wrong elements: a broken run is no reference; record it again",
            key(run.benchmark, r),
            r.cycle,
            r.wrong.unwrap_or(0)
        ));
    }
    if !run.rows.iter().any(|r| r.status == Status::Ok && r.time_us.is_some()) {
        return Err(format!(
            "baseline has no ok row to compare ({} rows, none ok with a time): a gate that compares nothing cannot pass",
            run.rows.len()
        ));
    }
    Ok(())
}

/// The rows of `run` by key. A combine's key adds the dtype of the dispatch it followed: a run of
/// BF16 and FP8 dispatches has two combines per (impl, mode, tokens), which must not pass for
/// repeated cycles of one. (A key may hold several rows of one cycle: sizes that round to the
/// same bytes, e.g. the zero-byte rows of a sweep from 8 B.)
fn groups(run: &Run) -> BTreeMap<String, Vec<&Row>> {
    let mut g: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for (r, dispatch) in run.rows.iter().zip(run.dispatch_dtypes()) {
        let mut k = key(run.benchmark, r);
        if r.phase == Some(Phase::Combine) {
            k += &format!(" after-dispatch={dispatch}");
        }
        g.entry(k).or_default().push(r);
    }
    g
}

/// Rows per cycle.
fn per_cycle(rows: &[&Row]) -> BTreeMap<u32, usize> {
    let mut n = BTreeMap::new();
    for r in rows {
        *n.entry(r.cycle).or_default() += 1;
    }
    n
}

/// Settings that change what a row's time means without changing its key, as JSON pointers into
/// `config`: a gate across them would compare different things, and a report says where runs
/// differ in them. (Iteration counts only change the precision.) A pointer a benchmark does not
/// have reads the same in both runs. interference_perf keeps its foreground's settings under
/// `foreground`.
pub const SAME_SETTINGS: [&str; 33] = [
    "/agg_iters",
    "/average",
    "/blocking",
    "/cudagraph",
    "/report_cputime",
    "/device_cta_count",
    // `ginbench ceiling`'s CTAs for its SM copies
    "/ctas",
    "/emulate_nodes",
    // -R: how NCCL moves `host`'s data, or whether the device impls run at all
    "/local_register",
    // the GIN resources asked of the device communicators (what NCCL granted may change with
    // its version, which a gate across an upgrade must allow)
    "/gin/contexts",
    "/gin/type",
    "/routing",
    "/masked",
    "/seed",
    "/hidden",
    "/topk",
    "/experts",
    "/layout",
    // interference_perf's EP and DP group sizes: `layout` is null where the rank count was not
    // known when the command line was read (an MPI launch that does not export its size)
    "/ep",
    "/dp",
    // each communicator's knobs, and the GIN resources the foreground's asked for (not those
    // granted, as above)
    "/comms/ep/nccl",
    "/comms/ep/stream_priority",
    "/comms/ep/gin/contexts",
    "/comms/ep/gin/type",
    "/comms/dp/nccl",
    "/comms/dp/stream_priority",
    "/foreground/local_register",
    "/foreground/routing",
    "/foreground/seed",
    "/foreground/hidden",
    "/foreground/topk",
    "/foreground/experts",
    "/foreground/dispatch_dtype",
];

/// Why two runs cannot be gated against each other, if they cannot: another layout of ranks, or
/// a setting that changes what their times mean.
fn incomparable(a: &Run, b: &Run) -> Option<String> {
    let mut d = vec![];
    if a.env.ranks != b.env.ranks || a.env.hosts.len() != b.env.hosts.len() {
        d.push(format!(
            "ranks / hosts: {} / {} -> {} / {}",
            a.env.ranks,
            a.env.hosts.len(),
            b.env.ranks,
            b.env.hosts.len()
        ));
    }
    d.extend(setting_differences(a, b, SAME_SETTINGS));
    (!d.is_empty()).then(|| d.join("; "))
}

/// The `config` settings among `pointers` (JSON pointers) in which two runs differ, as
/// "name: a -> b" (`/foreground/seed` is named `foreground.seed`). A setting a file lacks (one
/// written before it existed) is its null: unset, shown as `-`.
pub fn setting_differences<'p>(a: &Run, b: &Run, pointers: impl IntoIterator<Item = &'p str>) -> Vec<String> {
    fn get<'r>(r: &'r Run, p: &str) -> Option<&'r serde_json::Value> {
        r.config.pointer(p).filter(|v| !v.is_null())
    }
    let show = |v: Option<&serde_json::Value>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    pointers
        .into_iter()
        .filter_map(|p| {
            let (x, y) = (get(a, p), get(b, p));
            (x != y).then(|| format!("{}: {} -> {}", p[1..].replace('/', "."), show(x), show(y)))
        })
        .collect()
}

/// "failed in 1 of 3 cycles: REASON" when any row of a key failed: a timeout or an NCCL error
/// fails the gate whatever the baseline did.
fn failed(rows: &[&Row]) -> Option<String> {
    let failed: Vec<&&Row> = rows.iter().filter(|r| r.status == Status::Failed).collect();
    let reason = failed.first()?.reason.as_deref().unwrap_or("no reason given");
    Some(format!("failed in {} of {} cycles: {reason}", failed.len(), rows.len()))
}

/// A candidate's times against the baseline's: a regression is slower than the baseline by more
/// than the threshold AND slower than its slowest repeated run.
struct Timed {
    change: f64,
    limit: f64,
    verdict: Verdict,
    detail: String,
}

impl Timed {
    /// Both sets of times are non-empty.
    fn judge(base: &[f64], cand: &[f64], threshold: f64) -> Timed {
        let (bt, ct) = (mean(base).unwrap(), mean(cand).unwrap());
        // The baseline's own spread: its slowest repeated run. With one run there is none to go
        // by (a per-iteration p99 is no spread of the mean: its extra events inflate it several
        // times over at launch-bound sizes), so the threshold alone decides.
        let limit = base.iter().cloned().fold(bt, f64::max);
        let change = ct / bt - 1.0;
        let pct = change * 100.0;
        let (verdict, detail) = if change > threshold && ct > limit {
            (Verdict::Regression, format!("{pct:+.1}% and beyond the baseline's spread"))
        } else if change < -threshold {
            (Verdict::Improvement, format!("{pct:+.1}%"))
        } else if change > threshold {
            (Verdict::Unchanged, format!("{pct:+.1}% but within the baseline's spread"))
        } else {
            (Verdict::Unchanged, String::new())
        };
        Timed { change, limit, verdict, detail }
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn ok_times(rows: &[&Row]) -> Vec<f64> {
    rows.iter().filter(|r| r.status == Status::Ok).filter_map(|r| r.time_us).collect()
}

fn busbw(rows: &[&Row]) -> Option<f64> {
    mean(&rows.iter().filter(|r| r.status == Status::Ok).filter_map(|r| r.busbw_gbps).collect::<Vec<_>>())
}

/// A loopback GIN run measures a software proxy on one host: its gin / hybrid rows must never be
/// set beside a network run's as if they were the same thing.
pub fn loopback_mismatch(a: &Run, b: &Run) -> Option<String> {
    let (x, y) = (a.env.gin.backend, b.env.gin.backend);
    (x != y).then(|| {
        format!(
            "GIN backend differs ({x} -> {y}): a loopback run's gin / hybrid figures come from ginbench's software proxy on one host, not a network"
        )
    })
}

/// A debug build launches kernels more slowly than a release build (see `results::BUILD`): a gate
/// across the two would fail a good release candidate, or pass a slow one against a debug
/// baseline. Runs written before the profile was recorded say nothing and are not refused.
fn build_mismatch(a: &Run, b: &Run) -> Option<String> {
    let (x, y) = (&a.tool.build, &b.tool.build);
    (!x.is_empty() && !y.is_empty() && x != y)
        .then(|| format!("build profile differs ({x} -> {y}): a debug build's launch-bound times can read high"))
}

/// A run whose ranks took turns on shared GPUs (virtual nodes on a smaller host): checked, but
/// its times are not the operation's.
pub fn shared_gpus(run: &Run) -> Option<String> {
    let n = run.env.ranks_sharing_a_gpu();
    (n > 0).then(|| format!("{n} of {} ranks shared a GPU, so its times mean nothing", run.env.gpus.len()))
}

/// Why two runs must never be set against each other as like for like: the gate refuses them
/// (the report warns beside a loopback mismatch, and beside a debug build by a rule of its own).
pub fn mismatches(a: &Run, b: &Run) -> Vec<String> {
    [loopback_mismatch(a, b), build_mismatch(a, b)].into_iter().flatten().collect()
}

/// Variables that name a library: the same library (by file name) may live anywhere.
const BY_FILE_NAME: [&str; 2] = ["NCCL_NET_PLUGIN", "GINBENCH_NCCL_LIB"];
/// Variables that are no setting: a container's label, and where ginbench's own scripts find
/// its binaries, toolchain and build cache.
const NOT_SETTINGS: [&str; 5] =
    ["NCCL_VERSION", "GINBENCH_BIN", "GINBENCH_TOOLCHAIN", "GINBENCH_BUILD_CACHE", "GINBENCH_NCCL_NEXT_HOME"];

/// What differs between the two environments, in the fields that explain performance: the
/// software and hardware, how ranks were launched, and the variables NCCL, libfabric,
/// aws-ofi-nccl and ginbench read
/// ([`BY_FILE_NAME`]; not [`NOT_SETTINGS`]: the NCCL library's version is compared itself).
pub fn env_differences(a: &Run, b: &Run) -> Vec<String> {
    let fields: [(&str, String, String); 9] = [
        ("NCCL library", a.env.nccl.library.to_string(), b.env.nccl.library.to_string()),
        ("CUDA", a.env.cuda.clone(), b.env.cuda.clone()),
        ("GPUs", a.env.gpu_summary(), b.env.gpu_summary()),
        ("ranks", a.env.ranks.to_string(), b.env.ranks.to_string()),
        ("hosts", a.env.hosts.len().to_string(), b.env.hosts.len().to_string()),
        ("GIN type", a.env.gin.kind.to_string(), b.env.gin.kind.to_string()),
        ("GIN backend", a.env.gin.backend.to_string(), b.env.gin.backend.to_string()),
        ("network", a.env.network.kind.clone(), b.env.network.kind.clone()),
        ("driver", a.env.driver.clone(), b.env.driver.clone()),
    ];
    let mut d: Vec<String> =
        fields.into_iter().filter(|(_, x, y)| x != y).map(|(n, x, y)| format!("{n}: {x} -> {y}")).collect();
    // Threads of one process or a process per rank (MPI): the host side differs.
    let per_process = |r: &Run| r.config.get("local_ranks").and_then(|v| v.as_u64());
    if let (Some(x), Some(y)) = (per_process(a), per_process(b)) {
        if x != y {
            d.push(format!("ranks per process: {x} -> {y}"));
        }
    }
    let read = |r: &Run, k: &str| -> String {
        let v = r.env.vars.get(k).map(String::as_str).unwrap_or("-");
        if BY_FILE_NAME.contains(&k) {
            v.rsplit('/').next().unwrap_or(v).to_string()
        } else {
            v.to_string()
        }
    };
    let names: BTreeSet<&String> = a.env.vars.keys().chain(b.env.vars.keys()).collect();
    for k in names {
        let tuned = crate::environment::is_setting(k) && !NOT_SETTINGS.contains(&k.as_str());
        let (x, y) = (read(a, k), read(b, k));
        if tuned && x != y {
            d.push(format!("{k}: {x} -> {y}"));
        }
    }
    d
}

pub fn compare(base: &Run, cand: &Run, threshold: f64) -> Result<Outcome, String> {
    if base.benchmark != cand.benchmark {
        return Err(format!("cannot compare a '{}' run with a '{}' run", base.benchmark, cand.benchmark));
    }
    check_values(base).map_err(|e| format!("baseline: {e}"))?;
    check_values(cand).map_err(|e| format!("candidate: {e}"))?;
    for (which, run) in [("baseline", base), ("candidate", cand)] {
        if let Some(w) = shared_gpus(run) {
            return Err(format!("{which}: {w}: there is nothing to gate on"));
        }
    }
    let why = mismatches(base, cand);
    if !why.is_empty() {
        return Err(format!("{}: refusing to gate one against the other", why.join("; ")));
    }
    check_baseline(base)?;
    if let Some(why) = incomparable(base, cand) {
        return Err(format!("the runs differ in what their times mean ({why}): gate runs of one command line"));
    }
    let (bg, cg) = (groups(base), groups(cand));
    let mut findings = vec![];
    for (k, b) in &bg {
        let f = |verdict, detail: String| Finding {
            key: k.clone(),
            verdict,
            baseline_us: mean(&ok_times(b)),
            candidate_us: None,
            change: None,
            baseline_limit_us: None,
            baseline_busbw_gbps: busbw(b),
            candidate_busbw_gbps: None,
            detail,
        };
        let b_times = ok_times(b);
        let Some(c) = cg.get(k) else {
            findings.push(if b_times.is_empty() {
                f(Verdict::NotCompared, format!("baseline {}; not in the candidate", not_run(b)))
            } else {
                f(Verdict::Missing, "no such row in the candidate".into())
            });
            continue;
        };
        let wrong = wrong_total(c.iter().copied());
        let c_times = ok_times(c);
        let c_not_ok = c.iter().filter(|r| r.status != Status::Ok).count();
        let (b_cycles, c_cycles) = (per_cycle(b), per_cycle(c));
        // More rows of a key in a cycle than the baseline has: another sweep, or rows added that
        // would weigh in the mean.
        if let Some((cycle, n)) = c_cycles.iter().find(|(cy, n)| b_cycles.get(cy).is_some_and(|m| *n > m)) {
            return Err(format!(
                "candidate: row '{k}' is {n} times in cycle {cycle}, {} times in the baseline: gate runs of one command line",
                b_cycles[cycle]
            ));
        }
        let lost_cycles: Vec<u32> =
            b_cycles.iter().filter(|(cy, n)| c_cycles.get(cy).unwrap_or(&0) < n).map(|(cy, _)| *cy).collect();
        let ok = |rows: &'_ [&'_ Row]| rows.iter().filter(|r| r.status == Status::Ok).count();
        let unchecked = |rows: &[&Row]| rows.iter().filter(|r| r.status == Status::Ok && r.wrong.is_none()).count();
        let (b_unchecked, c_unchecked) = (unchecked(b), unchecked(c));
        // Ok interference rows whose background has no together time (no background iteration
        // lay wholly inside the foreground's window).
        let bg_unmeasured =
            |r: &&&Row| r.status == Status::Ok && r.background.as_ref().is_some_and(|g| g.together_us.is_none());
        let (b_bg_lost, c_bg_lost) = (b.iter().filter(bg_unmeasured).count(), c.iter().filter(bg_unmeasured).count());
        // The least overlap of the ok rows; a candidate row that records none counts as none.
        let b_overlap = b.iter().filter(|r| r.status == Status::Ok).filter_map(|r| r.overlap).reduce(f64::min);
        let c_overlap = c.iter().filter(|r| r.status == Status::Ok).map(|r| r.overlap.unwrap_or(0.0)).reduce(f64::min);
        let mut finding = f(Verdict::Unchanged, String::new());
        finding.candidate_us = mean(&c_times);
        finding.candidate_busbw_gbps = busbw(c);
        if wrong > 0 {
            finding.verdict = Verdict::Wrong;
            finding.detail = format!("{wrong} wrong elements in the candidate");
        } else if let Some(failed) = failed(c) {
            finding.verdict = Verdict::Failed;
            finding.detail = failed;
        } else if !lost_cycles.is_empty() {
            finding.verdict = Verdict::Missing;
            finding.detail = format!("cycles {lost_cycles:?} of the baseline are not in the candidate");
        } else if b_unchecked < ok(b) && c_unchecked > b_unchecked {
            finding.verdict = Verdict::Unchecked;
            finding.detail =
                format!("checked in the baseline, not in {c_unchecked} of the candidate's {} cycles (-c 0?)", ok(c));
        } else if let Some((bo, co)) = b_overlap.zip(c_overlap).filter(|(bo, co)| *co < bo - 0.01) {
            finding.verdict = Verdict::OverlapLost;
            finding.detail = if c.iter().any(|r| r.status == Status::Ok && r.overlap.is_none()) {
                format!("the candidate does not record the background's overlap, the baseline {:.1}%", bo * 100.0)
            } else {
                format!(
                    "the background covered {:.1}% of the foreground's window, the baseline's {:.1}%: less interference was measured",
                    co * 100.0,
                    bo * 100.0
                )
            };
        } else if ok(b) > 0 && c_bg_lost > b_bg_lost {
            // The gate judges the background's together time too: one the candidate lost would
            // otherwise pass unjudged.
            finding.verdict = Verdict::OverlapLost;
            finding.detail = format!(
                "the candidate has no background together time in {c_bg_lost} of {} cycles, the baseline in {b_bg_lost}: {}",
                ok(c),
                c.iter().find(bg_unmeasured).and_then(|r| r.reason.clone()).unwrap_or_default()
            );
        } else if b_times.is_empty() {
            finding.verdict = if c_times.is_empty() { Verdict::NotCompared } else { Verdict::New };
            finding.detail = if c_times.is_empty() {
                match (not_run(b), not_run(c)) {
                    (x, y) if x == y => format!("{x} in both"),
                    (x, y) => format!("baseline {x}, candidate {y}"),
                }
            } else {
                format!("baseline {}; runs in the candidate", not_run(b))
            };
        } else if c_times.is_empty() || c_not_ok > b.iter().filter(|r| r.status != Status::Ok).count() {
            // More skipped cycles than the baseline had fail the gate, even among good ones.
            let st = c.iter().find(|r| r.status != Status::Ok);
            finding.verdict = Verdict::NewlySkipped;
            let cycles = if c_not_ok > 0 { format!(" ({c_not_ok} of {} cycles)", c.len()) } else { String::new() };
            finding.detail = format!(
                "{} in the candidate{cycles}: {}",
                st.map(|r| r.status.as_str()).unwrap_or("absent"),
                st.and_then(|r| r.reason.clone()).unwrap_or_default()
            );
        } else if b.iter().all(|r| r.size_bytes == 0 && r.tokens.is_none()) {
            // (An EP row times its tokens' work even where the timed rank sent nothing.)
            finding.verdict = Verdict::NotCompared;
            finding.detail = "zero bytes: nothing to time".into();
        } else {
            let fg = Timed::judge(&b_times, &c_times, threshold);
            finding.change = Some(fg.change);
            finding.baseline_limit_us = Some(fg.limit);
            (finding.verdict, finding.detail) = (fg.verdict, fg.detail);
            // The background's together time: a foreground that keeps its own time by taking
            // the background's SMs or links has still slowed the training step.
            let bg_times = |rows: &[&Row]| -> Vec<f64> {
                rows.iter()
                    .filter(|r| r.status == Status::Ok)
                    .filter_map(|r| r.background.as_ref()?.together_us)
                    .collect()
            };
            let (b_bg, c_bg) = (bg_times(b), bg_times(c));
            if fg.verdict != Verdict::Regression && !b_bg.is_empty() && !c_bg.is_empty() {
                let bgj = Timed::judge(&b_bg, &c_bg, threshold);
                if bgj.verdict == Verdict::Regression {
                    // The finding's times and change are then the background's, so that they
                    // agree with its verdict (and sort it among the worst).
                    finding.verdict = Verdict::Regression;
                    (finding.baseline_us, finding.candidate_us) = (mean(&b_bg), mean(&c_bg));
                    (finding.change, finding.baseline_limit_us) = (Some(bgj.change), Some(bgj.limit));
                    finding.detail = format!(
                        "the background's together time {} (these times are the background's); the foreground's {:+.1}%",
                        bgj.detail,
                        fg.change * 100.0
                    );
                }
            }
        }
        findings.push(finding);
    }
    for (k, c) in &cg {
        if !bg.contains_key(k) {
            let wrong = wrong_total(c.iter().copied());
            let ran = !ok_times(c).is_empty();
            let failed = failed(c);
            findings.push(Finding {
                key: k.clone(),
                verdict: match (wrong > 0, &failed, ran) {
                    (true, _, _) => Verdict::Wrong,
                    (false, Some(_), _) => Verdict::Failed,
                    (false, None, true) => Verdict::New,
                    (false, None, false) => Verdict::NotCompared,
                },
                baseline_us: None,
                candidate_us: mean(&ok_times(c)),
                change: None,
                baseline_limit_us: None,
                baseline_busbw_gbps: None,
                candidate_busbw_gbps: busbw(c),
                detail: if wrong > 0 {
                    format!("{wrong} wrong elements")
                } else if let Some(failed) = failed {
                    format!("not in the baseline; {failed}")
                } else if ran {
                    "not in the baseline".into()
                } else {
                    format!("not in the baseline; candidate {}", not_run(c))
                },
            });
        }
    }
    // Worst first: failing verdicts, then by slowdown.
    findings
        .sort_by(|a, b| a.verdict.cmp(&b.verdict).then(b.change.unwrap_or(0.0).total_cmp(&a.change.unwrap_or(0.0))));
    let candidate_error = cand.error().map(String::from);
    let passed = !findings.iter().any(|f| f.verdict.fails()) && candidate_error.is_none();
    if passed && !findings.iter().any(|f| f.change.is_some()) {
        let not = findings.iter().filter(|f| f.verdict == Verdict::NotCompared).count();
        return Err(format!(
            "the gate compared no row: none of the baseline's {} row keys has a time to set against the candidate's ({not} not compared, e.g. zero bytes or skipped in both): a gate that compares nothing cannot pass",
            bg.len()
        ));
    }
    Ok(Outcome {
        schema: SCHEMA,
        threshold,
        passed,
        env_differences: env_differences(base, cand),
        candidate_error,
        findings,
    })
}

/// 0.05 -> "5", 0.025 -> "2.5", 9.9999 -> "999.99": as given, without a rounding that could print
/// a threshold the gate does not use.
fn percent(fraction: f64) -> String {
    let trim = |s: &str| s.trim_end_matches('0').trim_end_matches('.').to_string();
    let p = fraction * 100.0;
    match trim(&format!("{p:.6}")).as_str() {
        // Too small for six decimals, yet not zero: six significant digits instead.
        "0" if p > 0.0 => {
            let e = format!("{p:.5e}");
            let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
            format!("{}e{x}", trim(m))
        }
        t => t.to_string(),
    }
}

fn us(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// The readable summary: verdict counts, then every finding that matters, worst first.
pub fn render_text(o: &Outcome) -> String {
    let mut s = String::new();
    let count = |v: Verdict| o.findings.iter().filter(|f| f.verdict == v).count();
    s += &format!(
        "ginbench compare: {} (threshold {}%): {} regressions, {} missing, {} failed, {} newly skipped, {} wrong, {} unchecked, {} overlap lost, {} improvements, {} unchanged, {} new, {} not compared\n",
        if o.passed { "PASS" } else { "FAIL" },
        percent(o.threshold),
        count(Verdict::Regression),
        count(Verdict::Missing),
        count(Verdict::Failed),
        count(Verdict::NewlySkipped),
        count(Verdict::Wrong),
        count(Verdict::Unchecked),
        count(Verdict::OverlapLost),
        count(Verdict::Improvement),
        count(Verdict::Unchanged),
        count(Verdict::New),
        count(Verdict::NotCompared),
    );
    // One line per item, whatever the input files hold.
    let line = crate::console::one_line;
    if let Some(e) = &o.candidate_error {
        s += &format!("  the candidate run ended in error: {}\n", line(e));
    }
    for d in &o.env_differences {
        s += &format!("  environment differs: {}\n", line(d));
    }
    // Every row that is not unchanged (or is, with something to say: slower, within the baseline's
    // spread), worst first; "not compared" rows last, each with its reason.
    for f in o.findings.iter().filter(|f| f.verdict != Verdict::Unchanged || !f.detail.is_empty()) {
        s += &format!(
            "  {:<14} {}: {} -> {} us{}{}\n",
            f.verdict.as_str(),
            line(&f.key),
            us(f.baseline_us),
            us(f.candidate_us),
            match (f.baseline_busbw_gbps, f.candidate_busbw_gbps) {
                (Some(a), Some(b)) if a >= 1.0 => format!(" (busbw {a:.1} -> {b:.1} GB/s)"),
                _ => String::new(),
            },
            if f.detail.is_empty() { String::new() } else { format!(": {}", line(&f.detail)) },
        );
    }
    s
}

pub fn to_json(o: &Outcome) -> String {
    serde_json::to_string_pretty(o).expect("an Outcome serializes") + "\n"
}

/// The `--json` output's schema.
const SCHEMA: &str = "ginbench-compare/1";

/// `--json` of a comparison refused (exit 2): no verdict, and why.
pub fn refused_json(error: &str) -> String {
    serde_json::to_string_pretty(&serde_json::json!({"schema": SCHEMA, "passed": false, "refused": error}))
        .expect("json")
        + "\n"
}

/// `--junit` of a comparison refused (exit 2): one failing case that says why.
pub fn refused_junit(error: &str) -> String {
    let mut s = junit_head(1, 1, 0);
    s += &format!(
        "    <testcase classname=\"ginbench\" name=\"comparison\">\n      <failure message=\"refused: {}\" />\n    </testcase>\n",
        xml(error)
    );
    s + JUNIT_TAIL
}

/// Whether `text` is a verdict `compare` wrote (its JSON or its JUnit XML): what a refusal may
/// replace in a file that already exists.
pub fn is_verdict(text: &str) -> bool {
    let json = serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v["schema"] == SCHEMA);
    json || text.starts_with(JUNIT_START)
}

/// How every JUnit document of `compare` starts: the XML declaration and the suites' name.
const JUNIT_START: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ginbench compare\"";

/// A JUnit document up to its first test case, and after its last.
fn junit_head(tests: usize, failures: usize, skipped: usize) -> String {
    let counts = format!("tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\"");
    format!("{JUNIT_START} {counts}>\n  <testsuite name=\"ginbench compare\" {counts}>\n")
}
const JUNIT_TAIL: &str = "  </testsuite>\n</testsuites>\n";

/// Text as an XML attribute or element: markup escaped, and characters XML 1.0 cannot carry at
/// all (control characters, U+FFFE, U+FFFF) shown as `\u{..}`.
fn xml(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            // Nor the two noncharacters U+FFFE and U+FFFF.
            c if crate::console::hidden(c) || matches!(c, '\u{FFFE}' | '\u{FFFF}') => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// JUnit XML: one test case per row key; failing verdicts are failures.
pub fn to_junit(o: &Outcome) -> String {
    let error = o.candidate_error.as_deref();
    let tests = o.findings.len() + usize::from(error.is_some());
    let failures = o.findings.iter().filter(|f| f.verdict.fails()).count() + usize::from(error.is_some());
    let skipped = o.findings.iter().filter(|f| f.verdict == Verdict::NotCompared).count();
    let mut s = junit_head(tests, failures, skipped);
    // What differs between the two environments, where CI shows it.
    if !o.env_differences.is_empty() {
        s += "    <properties>\n";
        for d in &o.env_differences {
            s += &format!("      <property name=\"environment differs\" value=\"{}\" />\n", xml(d));
        }
        s += "    </properties>\n";
    }
    if let Some(e) = error {
        s += &format!(
            "    <testcase classname=\"ginbench\" name=\"candidate run\">\n      <failure message=\"the candidate run ended in error: {}\" />\n    </testcase>\n",
            xml(e)
        );
    }
    for f in &o.findings {
        let (class, name) = f.key.split_once(' ').unwrap_or(("ginbench", &f.key));
        s += &format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.6}\"",
            xml(class),
            xml(name),
            f.candidate_us.unwrap_or(0.0) / 1e6
        );
        if f.verdict.fails() {
            s += &format!(
                ">\n      <failure message=\"{:?}: {}\">baseline {} us, candidate {} us</failure>\n    </testcase>\n",
                f.verdict,
                xml(&f.detail),
                us(f.baseline_us),
                us(f.candidate_us)
            );
        } else if f.verdict == Verdict::NotCompared {
            s += &format!(">\n      <skipped message=\"not compared: {}\" />\n    </testcase>\n", xml(&f.detail));
        } else {
            s += " />\n";
        }
    }
    s + JUNIT_TAIL
}
