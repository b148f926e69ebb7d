//! The `-T` watchdog on its own, no GPU needed: a process that makes no progress within the limit
//! ends with exit 4 and one line, even before NCCL was ever loaded (a rank stuck in its launch);
//! one that reports progress runs on. Each case runs in a child process (this test binary again),
//! since the watchdog ends the process it watches.
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "GINBENCH_WATCHDOG_TEST_CHILD";

/// In the child: a watchdog of 1 s, then progress every 100 ms for 2.5 s ("beats"), or none at
/// all ("stalls", which only the watchdog can end early).
fn child(mode: &str) -> ! {
    use ginbench::harness::watchdog;
    watchdog::start("watchdog_test", 1);
    let sleep = |ms| std::thread::sleep(Duration::from_millis(ms));
    match mode {
        "beats" => (0..25).for_each(|_| {
            sleep(100);
            watchdog::beat();
        }),
        _ => sleep(30_000),
    }
    std::process::exit(0)
}

/// In the child (this test binary again, running `test` alone): [`child`], which never returns.
/// Here: run that child in `mode`; its exit code and stderr.
fn watched(test: &str, mode: &str) -> (Option<i32>, String) {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
    }
    let me = std::env::current_exe().expect("the test binary");
    let o = Command::new(me).args([test, "--exact", "--nocapture"]).env(CHILD, mode).output().expect("child runs");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn no_progress_within_the_limit_is_exit_4_and_one_line() {
    let (code, err) = watched("no_progress_within_the_limit_is_exit_4_and_one_line", "stalls");
    assert_eq!(code, Some(4), "{err}");
    assert_eq!(
        err,
        "watchdog_test: error: timeout: no progress for 1 s; aborting NCCL communicators \
         (fix: raise -T, or look for a stuck rank or GPU)\n"
    );
}

#[test]
fn progress_keeps_the_watchdog_quiet() {
    let (code, err) = watched("progress_keeps_the_watchdog_quiet", "beats");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
}
