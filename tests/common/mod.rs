//! Builders shared by the integration tests.
use ginbench::results::*;

/// An ok, checked, out-of-place float row; bandwidths follow from size and time (4 ranks).
pub fn row(impl_name: &str, size: u64, time: f64, p99: f64, cycle: u32) -> Row {
    Row {
        impl_name: impl_name.into(),
        size_bytes: size,
        count: size / 16,
        dtype: "float".into(),
        placement: Placement::OutOfPlace,
        time_us: Some(time),
        p50_us: Some(time),
        p99_us: Some(p99),
        algbw_gbps: Some(size as f64 / 1e3 / time),
        busbw_gbps: Some(size as f64 / 1e3 / time * 0.75),
        wrong: Some(0),
        status: Status::Ok,
        reason: None,
        cycle,
        mode: None,
        phase: None,
        tokens: None,
        ..Default::default()
    }
}

/// An alltoall run of 4 ranks holding `rows`.
/// A run of `rows`, with the cycle count a benchmark records for them.
pub fn run(rows: Vec<Row>) -> Run {
    let cycles = rows.iter().map(|r| r.cycle + 1).max().unwrap_or(1);
    Run {
        schema: SCHEMA.into(),
        benchmark: Kind::Alltoall,
        tool: Tool { version: "0.1.0".into(), git: "x".into(), build: "release".into() },
        command: "alltoall_perf".into(),
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: None,
        env: Env { ranks: 4, ..Default::default() },
        config: serde_json::json!({ "run_cycles": cycles }),
        rows,
        summary: None,
    }
}

/// Run `bin args` and wait at most `limit`; a process still running then is killed and the test
/// fails (a hang is a defect, not a slow pass).
#[allow(dead_code)]
pub fn output_within(bin: &str, args: &[&std::ffi::OsStr], limit: std::time::Duration) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bin} {args:?} still ran after {limit:?}: killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// An ok EP row of the deepseek-v3 shape: `tokens` per rank, `(time µs, bw GB/s)`; its size
/// depends on `ranks` as real rows' do.
#[allow(dead_code)]
pub fn ep_row(
    impl_name: &str,
    mode: &str,
    phase: &str,
    dtype: &str,
    tokens: u64,
    (time, bw): (f64, f64),
    ranks: u64,
) -> Row {
    Row {
        impl_name: impl_name.into(),
        size_bytes: tokens * 7168 * 2 * (ranks + 1),
        count: tokens * 7168,
        dtype: dtype.into(),
        placement: Placement::OutOfPlace,
        time_us: Some(time),
        p50_us: Some(time),
        p99_us: Some(time * 1.2),
        algbw_gbps: Some(bw),
        wrong: Some(0),
        status: Status::Ok,
        mode: Some(Mode::from_name(mode).expect("ll or ht")),
        phase: Some(Phase::from_name(phase).expect("dispatch or combine")),
        tokens: Some(tokens),
        hidden: Some(7168),
        topk: Some(8),
        experts: Some(256),
        bw_gbps: Some(bw),
        bw_definition: Some(format!("deepep-{mode}: logical bytes / time")),
        wire_bytes: Some(WireBytes { nvl: tokens * 1000, net: 0 }),
        sms: Some(24),
        ..Default::default()
    }
}

/// An EP run of `ranks` ranks holding `rows`.
#[allow(dead_code)]
pub fn ep_run(ranks: usize, rows: Vec<Row>) -> Run {
    let mut r = run(rows);
    r.benchmark = Kind::Ep;
    r.command = "ep_perf".into();
    r.env.ranks = ranks;
    r
}

/// An ok interference row: the nvl alltoall of 32 MB against an all-reduce of `bg_size` bytes
/// per rank over 2 ranks; `(alone, together)` µs for each side.
#[allow(dead_code)]
pub fn interference_row(bg_size: u64, fg: (f64, f64), bg: (f64, f64), cycle: u32) -> Row {
    let busbw = |t: f64| bg_size as f64 / 1e3 / t;
    Row {
        time_us: Some(fg.1),
        p50_us: None,
        p99_us: None,
        algbw_gbps: Some(33554432.0 / 1e3 / fg.1),
        busbw_gbps: Some(33554432.0 / 1e3 / fg.1 * 0.75),
        alone_us: Some(fg.0),
        together_us: Some(fg.1),
        slowdown: Some(fg.1 / fg.0),
        overlap: Some(1.0),
        fg_iters: Some(20),
        background: Some(Background {
            op: BgOp::AllReduce,
            size_bytes: bg_size,
            count: bg_size / 4,
            dtype: "float".into(),
            redop: "sum".into(),
            ranks: 2,
            alone_us: Some(bg.0),
            together_us: Some(bg.1),
            slowdown: Some(bg.1 / bg.0),
            busbw_alone_gbps: Some(busbw(bg.0)),
            busbw_together_gbps: Some(busbw(bg.1)),
            wrong: Some(0),
        }),
        ..row("nvl", 33554432, fg.1, fg.1, cycle)
    }
}

/// An interference run of 4 ranks holding `rows`.
#[allow(dead_code)]
pub fn interference_run(rows: Vec<Row>) -> Run {
    Run { benchmark: Kind::Interference, command: "interference_perf".into(), ..run(rows) }
}

/// Compares `got` with tests/golden/`name`; GINBENCH_BLESS=1 writes the file instead.
#[allow(dead_code)]
pub fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("GINBENCH_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (GINBENCH_BLESS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs from its golden file");
}
