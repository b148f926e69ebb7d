//! `-T SECONDS`: if no step (initialisation, one measured size) finishes within the limit, abort
//! every NCCL communicator and exit with code 4, rather than hang.
use crate::error::Exit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
static LAST_BEAT_MS: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Record progress: a step finished.
pub fn beat() {
    LAST_BEAT_MS.store(now_ms(), Ordering::Relaxed);
}

/// Start the watchdog thread (no-op for 0 seconds). When it fires, `on_timeout` gets the error
/// (e.g. to save the results so far) while NCCL's communicators are being aborted.
pub fn start(prog: &'static str, timeout_s: u64, on_timeout: fn(&str)) {
    if timeout_s == 0 {
        return;
    }
    beat();
    let limit = timeout_s.saturating_mul(1000);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let idle = now_ms().saturating_sub(LAST_BEAT_MS.load(Ordering::Relaxed));
        if idle > limit {
            let _reporting = crate::error::exiting();
            let error = format!("timeout: no progress for {timeout_s} s");
            crate::console::err(&format!(
                "{prog}: error: {error}; aborting NCCL communicators (fix: raise -T, or look for a stuck rank or GPU)\n"
            ));
            // Each step in a helper thread, so that the process exits after a grace period even if
            // a file system or NCCL itself is stuck. The results first: the abort lets the stuck
            // rank go on to fail with an NCCL error of its own.
            let grace = Instant::now() + Duration::from_secs(5);
            let (saved_tx, saved) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                on_timeout(&error);
                let _ = saved_tx.send(());
            });
            let _ = saved.recv_timeout(Duration::from_secs(2));
            let (aborted_tx, aborted) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                crate::nccl::abort_all();
                let _ = aborted_tx.send(());
            });
            let _ = aborted.recv_timeout(grace.saturating_duration_since(Instant::now()));
            std::process::exit(Exit::Timeout as i32);
        }
    });
}
