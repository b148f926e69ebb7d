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

/// Start the watchdog thread (no-op for 0 seconds).
pub fn start(prog: &'static str, timeout_s: u64) {
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
            crate::console::err(&format!(
                "{prog}: error: timeout: no progress for {timeout_s} s; aborting NCCL communicators (fix: raise -T, or look for a stuck rank or GPU)\n"
            ));
            // Abort from a helper thread: if NCCL itself is stuck, exit anyway after a grace period.
            let (done, aborted) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                crate::nccl::abort_all();
                let _ = done.send(());
            });
            let _ = aborted.recv_timeout(Duration::from_secs(5));
            std::process::exit(Exit::Timeout as i32);
        }
    });
}
