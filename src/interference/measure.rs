//! Alone and together. The background runs on a host thread of its own (as a framework's
//! communication stream is fed beside its compute), so enqueueing it never delays the
//! foreground's launches; the foreground's host thread starts enqueueing only after the
//! background's first iteration has finished on the GPU and every rank got there (a barrier), so
//! its window opens on an empty stream with the ranks lined up, as in the alone loop; and the
//! background's iteration count is planned from both sides' alone times to outlast the
//! foreground. Events after every background iteration and around the foreground's loop give the
//! overlap and the background's time over the iterations that lay wholly inside the foreground's
//! window. Counts are the same on every rank (planned from times reduced over all ranks), as
//! every collective needs.
use super::background::Background;
use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::CudaEvent;

/// Background iterations wholly inside the foreground window that a together run aims for.
pub const BG_INSIDE: u32 = 3;
/// The most foreground iterations a together run stretches to (to hold BG_INSIDE background
/// iterations) and the most background iterations it queues.
pub const MAX_FG_ITERS: u32 = 100_000;
pub const MAX_BG_ITERS: u32 = 100_000;
/// Attempts of a together run: each doubles the slack when the background ended too soon.
pub const ATTEMPTS: u32 = 3;

/// Iteration counts of one together run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub fg_iters: u32,
    pub bg_iters: u32,
}

/// Plan a together run from the alone times (µs per operation, the largest over ranks): the
/// foreground window holds at least BG_INSIDE + 1 background iterations (so the background's
/// together time is measured over whole iterations inside it) and `iters`; the background
/// covers `stretch` times the foreground window as it ran alone, plus its lead iteration.
pub fn plan(fg_alone_us: f64, bg_alone_us: f64, iters: u32, stretch: f64) -> Plan {
    let (fg, bg) = (fg_alone_us.max(1e-3), bg_alone_us.max(1e-3));
    let need = ((BG_INSIDE + 1) as f64 * bg / fg).ceil();
    let fg_iters = (iters as f64).max(need).min(MAX_FG_ITERS as f64) as u32;
    let window = fg_iters as f64 * fg * stretch;
    let bg_iters = (1.0 + (window / bg).ceil()).clamp(2.0, MAX_BG_ITERS as f64) as u32;
    Plan { fg_iters, bg_iters }
}

/// Event times of one overlapped run, in µs from the background's first event.
#[derive(Debug, Clone, PartialEq)]
pub struct Marks {
    /// The foreground's timed window.
    pub fg: (f64, f64),
    /// Before the first background iteration and after each.
    pub bg: Vec<f64>,
}

impl Marks {
    /// The fraction of the foreground's window during which the background ran.
    pub fn overlap(&self) -> f64 {
        let (fs, fe) = self.fg;
        let (bs, be) = (self.bg[0], *self.bg.last().unwrap());
        if fe <= fs {
            return if bs <= fs && be >= fe { 1.0 } else { 0.0 };
        }
        ((fe.min(be) - fs.max(bs)) / (fe - fs)).clamp(0.0, 1.0)
    }

    /// The foreground's time per operation over `iters` operations.
    pub fn fg_us(&self, iters: u32) -> f64 {
        (self.fg.1 - self.fg.0) / iters as f64
    }

    /// Mean time of every background iteration after the lead one (what a new plan takes when
    /// too few lay inside the window).
    pub fn bg_us(&self) -> f64 {
        // bg[0] precedes the lead iteration and bg[1] ends it; plans queue at least two.
        let after_lead = &self.bg[1..];
        (after_lead[after_lead.len() - 1] - after_lead[0]) / (after_lead.len() - 1).max(1) as f64
    }

    /// Mean time of the background iterations wholly inside the foreground's window, and how
    /// many there were (None: none was).
    pub fn bg_inside_us(&self) -> Option<(f64, usize)> {
        let (fs, fe) = self.fg;
        let inside: Vec<f64> = self.bg.windows(2).filter(|w| w[0] >= fs && w[1] <= fe).map(|w| w[1] - w[0]).collect();
        (!inside.is_empty()).then(|| (inside.iter().sum::<f64>() / inside.len() as f64, inside.len()))
    }
}

fn us(a: &CudaEvent, b: &CudaEvent) -> Result<f64> {
    Ok(a.elapsed_ms(b)? as f64 * 1e3)
}

/// The background alone: `warmup` iterations, then `iters` with an event after each (as in a
/// together run, so both are timed alike); its mean time per operation on this rank, over the
/// iterations after the first: the together time is the mean of whole iterations inside the
/// foreground's window, queued back to back, so the first one's wait for its launch (the stream
/// was idle) would count alone only and read as less slowdown.
pub fn bg_alone(bg: &mut Background, boot: &dyn Bootstrap, iters: u32, warmup: u32) -> Result<f64> {
    for _ in 0..warmup {
        bg.launch()?;
    }
    bg.gpu.stream.synchronize()?;
    boot.barrier();
    let events = (0..=iters).map(|_| bg.gpu.timing_event()).collect::<Result<Vec<_>>>()?;
    events[0].record(&bg.gpu.stream)?;
    for e in &events[1..] {
        bg.launch()?;
        e.record(&bg.gpu.stream)?;
    }
    events[iters as usize].synchronize()?;
    let first = if iters >= 2 { 1 } else { 0 };
    Ok(us(&events[first], &events[iters as usize])? / (iters as usize - first) as f64)
}

/// Run `bg_iters` iterations of `bg_op` on a background thread, an event after each, and `fg`
/// on this thread once the first background iteration has finished on the GPU on every rank;
/// `fg`'s result, and the marks (the foreground's window is the events around `fg`'s work on
/// `fg_gpu`). Waiting on the host, not on the GPU, keeps `fg`'s operations from queueing up
/// behind that first iteration: a launch-bound foreground would otherwise open its window with a
/// backlog and read faster than alone.
pub fn overlapped<T>(
    fg_gpu: &Gpu,
    bg: &mut Background,
    boot: &dyn Bootstrap,
    bg_iters: u32,
    bg_op: impl Fn(&mut Background) -> Result<()> + Send,
    fg: impl FnOnce() -> Result<T>,
) -> Result<(T, Marks)> {
    let bg_events = (0..=bg_iters).map(|_| bg.gpu.timing_event()).collect::<Result<Vec<_>>>()?;
    let (fs, fe) = (fg_gpu.timing_event()?, fg_gpu.timing_event()?);
    boot.barrier();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (out, bg_result) = std::thread::scope(|s| {
        let events = &bg_events;
        let h = s.spawn(move || -> Result<()> {
            bg.gpu.ctx.bind_to_thread()?;
            let _r = crate::profile::range(|| format!("background {} {}B x{bg_iters}", bg.op, bg.bytes()));
            events[0].record(&bg.gpu.stream)?;
            for j in 0..bg_iters {
                bg_op(bg)?;
                events[j as usize + 1].record(&bg.gpu.stream)?;
                if j == 0 {
                    // The first iteration's end event is recorded: the foreground may wait on it.
                    let _ = tx.send(());
                }
            }
            Ok(())
        });
        let out = match rx.recv() {
            Ok(()) => (|| {
                events[1].synchronize()?;
                boot.barrier();
                fs.record(&fg_gpu.stream)?;
                let t = fg()?;
                fe.record(&fg_gpu.stream)?;
                Ok(t)
            })(),
            Err(_) => Err(Error::internal("the background thread stopped before its first iteration")),
        };
        let bg_result = h.join().unwrap_or_else(|_| Err(Error::internal("the background thread panicked")));
        (out, bg_result)
    });
    bg_result?;
    let t = out?;
    fe.synchronize()?;
    bg_events[bg_iters as usize].synchronize()?;
    let marks = Marks {
        fg: (us(&bg_events[0], &fs)?, us(&bg_events[0], &fe)?),
        bg: bg_events.iter().map(|e| us(&bg_events[0], e)).collect::<Result<Vec<_>>>()?,
    };
    Ok((t, marks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_the_foreground_and_hold_whole_background_iterations() {
        // LL dispatch 50 µs against a 1 GB all-reduce of 6 ms: the foreground stretches so that
        // its window holds BG_INSIDE + 1 background iterations.
        let p = plan(50.0, 6000.0, 20, 2.0);
        assert_eq!(p.fg_iters, 480);
        assert_eq!(p.bg_iters, 1 + 8);
        // A long foreground against a short background: -n iterations, many background ones.
        let p = plan(500.0, 20.0, 20, 2.0);
        assert_eq!(p, Plan { fg_iters: 20, bg_iters: 1 + 1000 });
        // More slack, more background.
        assert!(plan(500.0, 20.0, 20, 4.0).bg_iters > p.bg_iters);
        // Bounded both ways, whatever the times.
        let p = plan(1e-9, 1e9, 20, 8.0);
        assert_eq!(p.fg_iters, MAX_FG_ITERS);
        assert!(p.bg_iters >= 2);
        assert_eq!(plan(1e9, 1e-9, 20, 8.0).bg_iters, MAX_BG_ITERS);
    }

    #[test]
    fn overlap_and_inside_iterations_come_from_the_marks() {
        // Background iterations of 10 µs from 0 to 100; the foreground from 15 to 65.
        let bg: Vec<f64> = (0..=10).map(|i| i as f64 * 10.0).collect();
        let m = Marks { fg: (15.0, 65.0), bg: bg.clone() };
        assert_eq!(m.overlap(), 1.0);
        assert_eq!(m.fg_us(5), 10.0);
        // wholly inside: [20,30] [30,40] [40,50] [50,60]
        assert_eq!(m.bg_inside_us(), Some((10.0, 4)));
        assert_eq!(m.bg_us(), 10.0);
        // The background ended at 100 but the foreground ran to 140: 85 of 125 µs covered.
        let m = Marks { fg: (15.0, 140.0), bg: bg.clone() };
        assert!((m.overlap() - 85.0 / 125.0).abs() < 1e-12);
        // A foreground that started after the background ended was not overlapped at all.
        let m = Marks { fg: (120.0, 130.0), bg };
        assert_eq!(m.overlap(), 0.0);
        assert_eq!(m.bg_inside_us(), None);
    }

    #[test]
    fn an_empty_foreground_window_is_overlapped_only_inside_the_background() {
        // A window of zero length has no fraction: it is covered or it is not.
        let bg: Vec<f64> = (0..=10).map(|i| i as f64 * 10.0).collect();
        assert_eq!(Marks { fg: (50.0, 50.0), bg: bg.clone() }.overlap(), 1.0);
        assert_eq!(Marks { fg: (150.0, 150.0), bg }.overlap(), 0.0);
    }

    #[test]
    fn only_iterations_wholly_inside_the_window_time_the_background_together() {
        // [0,10] began before the window and [40,50], [50,100] ended after it: three are inside.
        let m = Marks { fg: (5.0, 45.0), bg: vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 100.0] };
        assert_eq!(m.bg_inside_us(), Some((10.0, 3)));
    }
}
