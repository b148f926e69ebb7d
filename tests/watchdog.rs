//! The `-T` watchdog on its own, no GPU needed: a process that makes no progress within the limit
//! ends with exit 4 and one line, even before NCCL was ever loaded (a rank stuck in its launch),
//! and a run under way still writes the rows it measured; one that reports progress runs on.
//! Each case runs in a child process (this test binary again), since the watchdog ends the
//! process it watches.
use ginbench::results::Status;
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "GINBENCH_WATCHDOG_TEST_CHILD";

/// In the child: a watchdog of 1 s, then progress every 100 ms for 2.5 s ("beats"), or none at
/// all ("stalls", which only the watchdog can end early); "stalls-measuring <dir>": rank 0 of an
/// alltoall_perf run with `-J` and `--csv` into <dir>, its config added to after the start,
/// stalls after its first two rows, in its third measurement.
fn child(mode: &str) -> ! {
    use ginbench::driver::output::{self, Output};
    use ginbench::harness::watchdog;
    watchdog::start("watchdog_test", 1, output::save_unfinished);
    let sleep = |ms| std::thread::sleep(Duration::from_millis(ms));
    match mode.split_once(' ') {
        None if mode == "beats" => (0..25).for_each(|_| {
            sleep(100);
            watchdog::beat();
        }),
        Some(("stalls-measuring", dir)) => {
            use ginbench::alltoall::cli;
            let args = ["-J", &format!("{dir}/run.json"), "--csv", &format!("{dir}/run.csv")];
            let argv = std::iter::once("alltoall_perf").chain(args).map(String::from).collect();
            let a = ginbench::error::parse_args::<cli::Args>("alltoall_perf", argv).unwrap();
            let c = cli::Config::from_args(&a, args.join(" ")).unwrap();
            let env = ginbench::results::Env::default();
            let mut out = Output::new::<cli::Config>(true, &c.common, env, "t".into(), serde_json::json!({}));
            // As the benchmarks record what NCCL granted each impl, after the start.
            out.run.config["granted"] = serde_json::json!({"gin": 4});
            for size in [8, 64] {
                let row = ginbench::results::Row { impl_name: "nvl".into(), size_bytes: size, ..Default::default() };
                out.rows(None, vec![row]);
            }
            // A new impl's grant, recorded before its first measurement, which hangs.
            out.run.config["granted"] = serde_json::json!({"gin": 8});
            let key = ginbench::results::Row { impl_name: "gin".into(), size_bytes: 512, ..Default::default() };
            out.measuring("gin 512 B", &[], vec![key]);
            sleep(30_000)
        }
        _ => sleep(30_000),
    }
    std::process::exit(0)
}

/// In the child (this test binary again, running `test` alone): [`child`], which never returns.
/// Here: run that child in `mode`; its exit code and stderr.
fn watched(test: &str, mode: &str) -> (Option<i32>, String) {
    let (code, _, err) = watched_out(test, mode);
    (code, err)
}

/// [`watched`], with the child's stdout too.
fn watched_out(test: &str, mode: &str) -> (Option<i32>, String, String) {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
    }
    let me = std::env::current_exe().expect("the test binary");
    let o = Command::new(me).args([test, "--exact", "--nocapture"]).env(CHILD, mode).output().expect("child runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

const TIMEOUT_LINE: &str = "watchdog_test: error: timeout: no progress for 1 s; aborting NCCL communicators \
                            (fix: raise -T, or look for a stuck rank or GPU)\n";

#[test]
fn no_progress_within_the_limit_is_exit_4_and_one_line() {
    let (code, err) = watched("no_progress_within_the_limit_is_exit_4_and_one_line", "stalls");
    assert_eq!(code, Some(4), "{err}");
    assert_eq!(err, TIMEOUT_LINE);
}

#[test]
fn a_run_ended_by_the_watchdog_keeps_the_rows_it_measured() {
    let dir = std::env::temp_dir().join(format!("ginbench-watchdog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let test = "a_run_ended_by_the_watchdog_keeps_the_rows_it_measured";
    let (code, out, err) = watched_out(test, &format!("stalls-measuring {}", dir.display()));
    assert_eq!(code, Some(4), "{err}");
    assert_eq!(err, TIMEOUT_LINE);
    assert!(out.contains("# Wrote JSON to") && out.contains("# Wrote CSV to"), "{out}");
    let text = std::fs::read_to_string(dir.join("run.json")).expect("the JSON was written");
    let run = ginbench::report::json::parse(&text).expect("a results file ginbench reads");
    assert_eq!(run.error(), Some("timeout: no progress for 1 s"));
    assert_eq!(run.config["granted"], serde_json::json!({"gin": 8}), "the config as it was when the run hung");
    assert_eq!(run.rows.iter().map(|r| r.size_bytes).collect::<Vec<_>>(), [8, 64, 512]);
    // The measurement under way is recorded failed, with the watchdog's error.
    let last = &run.rows[2];
    assert_eq!((last.status, last.reason.as_deref()), (Status::Failed, Some("timeout: no progress for 1 s")));
    assert!(run.finished_at.is_some() && run.summary.as_ref().is_some_and(|s| s.rows_failed == 1));
    let csv = std::fs::read_to_string(dir.join("run.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "a header and three rows: {csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn progress_keeps_the_watchdog_quiet() {
    let (code, err) = watched("progress_keeps_the_watchdog_quiet", "beats");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
}
