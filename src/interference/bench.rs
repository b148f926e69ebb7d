//! `interference_perf`: split the EP and DP communicators, set up the foreground through its
//! benchmark's own steps (`alltoall::bench::Step`, `ep::bench::Phases`) and the background, and
//! for every (foreground, background size) pair measure alone, together, and check both while
//! they overlap.
use super::background::{self, Background};
use super::cli::{BgOp, Config, FgKind, Foreground};
use super::measure::{self, Marks};
use crate::alltoall::bench::{buffer_bytes, buffer_span, Step};
use crate::bootstrap::group::Group;
use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::driver::cli::Entry;
use crate::driver::{self, Benchmark, Output, RankCtx};
use crate::ep::bench::{row_base, Phases};
use crate::ep::device::Checks;
use crate::ep::metrics::{Mode, Phase};
use crate::ep::routing::{Generator, RoutingSpec};
use crate::error::{Error, Result};
use crate::gin_transport;
use crate::harness::check::Checker;
use crate::harness::{self, sizes, stats, watchdog, LoopParams};
use crate::nccl::config::MAX_CTAS;
use crate::nccl::{DevMem, Registration};
use crate::report::table;
use crate::results::{self, Env, Placement, Row, Status};

/// Where the JSON's config holds the foreground's GIN request, and what NCCL granted.
const FG_GIN: &str = "/comms/ep/gin";

impl Config {
    /// What the foreground's gin / hybrid ask of their device communicator.
    fn fg_gin(&self) -> crate::gin_transport::GinRequest {
        self.ep_comm.gin.unwrap_or_default()
    }

    /// The background sizes a foreground has a row for: one row of size 0 without a background.
    fn row_bg_sizes(&self) -> &[u64] {
        if self.bg == BgOp::None {
            &[0]
        } else {
            &self.bg_sizes
        }
    }

    /// See [`ep_fits_beside_background`].
    fn check_ep_beside_background(&self, gpu: &Gpu) -> Result<()> {
        if self.bg == BgOp::None {
            return Ok(());
        }
        let env = std::env::var("NCCL_MAX_CTAS").ok();
        ep_fits_beside_background(self.ctas, gpu.sm_count()?, env.as_deref(), self.dp_comm.nccl.max_ctas)
    }
}

/// An EP kernel's CTAs wait on its last one (which publishes the counts), and the kernels run
/// one CTA per SM: if the background's NCCL kernel holds SMs on one rank while the EP kernel holds
/// them all on another, each waits on the other's rank for ever. So the foreground's `ctas` and
/// the most the background may hold (`NCCL_MAX_CTAS`, which overrides the communicator's config,
/// else `--dp-max-ctas`, else NCCL's limit) must fit the GPU's `sms` together.
fn ep_fits_beside_background(ctas: u32, sms: u32, nccl_max_ctas: Option<&str>, dp_max_ctas: Option<i32>) -> Result<()> {
    let from_env = nccl_max_ctas.and_then(|v| v.trim().parse::<i32>().ok()).filter(|&v| v > 0);
    let (bg, why) = match (from_env, dp_max_ctas) {
        (Some(v), _) => (v.min(MAX_CTAS), "NCCL_MAX_CTAS"),
        (None, Some(v)) => (v, "--dp-max-ctas"),
        (None, None) => (MAX_CTAS, "NCCL's limit; --dp-max-ctas lowers it"),
    };
    let room = sms.saturating_sub(bg as u32);
    if ctas > room {
        return Err(Error::usage(
            format!(
                "-V {ctas} and the background's up to {bg} CTAs ({why}) exceed the GPU's {sms} SMs: the EP kernels, whose CTAs wait on each other, could deadlock with it"
            ),
            format!("use -V 1..{room}, or a lower --dp-max-ctas"),
        ));
    }
    Ok(())
}

impl Benchmark for Config {
    const PROG: &'static str = "interference_perf";
    const KIND: crate::results::Kind = crate::results::Kind::Interference;
    driver::command_line!(super::cli::Args);

    fn list_impls() -> String {
        let mut list = String::from("foreground --fg ep (ep_perf's implementations):\n");
        for i in crate::ep::registry::IMPLS {
            list += &format!("  {:<12} {}\n", i.name, i.about);
        }
        list += "foreground --fg alltoall (alltoall_perf's implementations):\n";
        for i in crate::alltoall::registry::IMPLS {
            list += &format!("  {:>2} {:<12} {}\n", i.id, i.name, i.about);
        }
        list += "background --bg: allreduce (ncclAllReduce, float, sum), none\n";
        list
    }

    fn common(&self) -> &driver::Common {
        &self.common
    }

    fn config_json(&self) -> serde_json::Value {
        config_json(self)
    }

    fn real_gin_impls(&self) -> Vec<&'static str> {
        self.fg.real_gin_impls()
    }

    fn describe(&self, env: &Env) -> String {
        let c = &self.common;
        let layout = self.layout_for(env.ranks).map(|l| l.describe()).unwrap_or_else(|e| e.to_string());
        let bg = match self.bg {
            BgOp::None => "none (the foreground alone)".to_string(),
            op => format!(
                "{op} {} {}, {} to {} bytes per rank ({} sizes)",
                op.dtype(),
                op.redop(),
                self.bg_sizes[0],
                self.bg_sizes.last().unwrap(),
                self.bg_sizes.len()
            ),
        };
        let prio = |p: Option<i32>| p.map(|p| p.to_string()).unwrap_or_else(|| "default".into());
        format!(
            "# foreground: {}; device CTAs (SMs): {}\n# background: {bg}\n# layout: {layout}\n# EP communicator: {}, stream priority {}, GIN request {}\n# DP communicator: {}, stream priority {}\n# warmup iters: {} iters: {} validation: {} (both sides checked while overlapped)\n",
            describe_fg(&self.fg),
            if self.ctas == 0 { "impl default".into() } else { self.ctas.to_string() },
            self.ep_comm.nccl.describe(),
            prio(self.ep_comm.stream_priority),
            self.fg_gin().describe(),
            self.dp_comm.nccl.describe(),
            prio(self.dp_comm.stream_priority),
            c.warmup,
            c.iters,
            c.check
        )
    }

    fn check_gpu(&self, gpu: &Gpu) -> Result<()> {
        match &self.fg {
            Foreground::Ep { .. } => {
                crate::ep::check_ctas(gpu, self.ctas)?;
                self.check_ep_beside_background(gpu)?;
            }
            Foreground::Alltoall { impls, .. } => crate::alltoall::registry::check_resident(impls, gpu, self.ctas)?,
        }
        let (least, greatest) = gpu.priority_range()?;
        for (flag, p) in [
            ("--ep-stream-priority", self.ep_comm.stream_priority),
            ("--dp-stream-priority", self.dp_comm.stream_priority),
        ] {
            if let Some(p) = p.filter(|p| !(greatest..=least).contains(p)) {
                return Err(Error::usage(
                    format!("{flag} {p} is outside this GPU's stream priorities {greatest}..{least}"),
                    format!("use {greatest} (most urgent) to {least}"),
                ));
            }
        }
        Ok(())
    }

    fn sweep(&self, ctx: &RankCtx, out: &mut Output) -> Result<()> {
        let world = ctx.boot;
        let me = world.rank();
        let layout = self.layout_for(world.size())?;
        let (eg, dg) = (layout.ep_group(me), layout.dp_group(me));
        // Both splits are collective over every rank, in this order on all of them.
        let ep_comm = ctx.comm.split(eg.color, me, &self.ep_comm.nccl)?;
        let dp_comm = ctx.comm.split(dg.color, me, &self.dp_comm.nccl)?;
        if !self.fg.real_gin_impls().is_empty() {
            crate::nccl::compat::enable_gin_early(&ep_comm, &ctx.env.gin)?;
        }
        let ep_boot = Group::new(world, eg.members);
        // Without a priority the foreground runs on the rank's own stream, as the standalone
        // benchmarks do.
        let fg_view = self.ep_comm.stream_priority.map(|p| ctx.gpu.stream_with_priority(p)).transpose()?;
        let fg_view = fg_view.map(|s| ctx.gpu.on_stream(s));
        let fg_gpu = fg_view.as_ref().unwrap_or(ctx.gpu);
        let bg_stream = match self.dp_comm.stream_priority {
            Some(p) => ctx.gpu.stream_with_priority(p)?,
            None => ctx.gpu.ctx.new_stream()?,
        };
        let max_bg = self.bg_sizes.iter().copied().max().unwrap_or(background::ELT);
        let mut bg = Background::new(self.bg, ctx.gpu.on_stream(bg_stream), dp_comm, max_bg)?;
        watchdog::beat();
        let mut run = Runner { cfg: self, world, fg_gpu, bg: &mut bg, seeds: Default::default() };
        let result = (0..self.common.cycles).try_for_each(|cycle| {
            out.cycle = cycle;
            let fg = Fg { boot: &ep_boot, gpu: fg_gpu, comm: &ep_comm, env: ctx.env };
            match &self.fg {
                Foreground::Alltoall { .. } => run.sweep_alltoall(&fg, out),
                Foreground::Ep { .. } => run.sweep_ep(&fg, out),
            }
        });
        fg_gpu.stream.synchronize()?;
        bg.gpu.stream.synchronize()?;
        result
    }
}

fn describe_fg(fg: &Foreground) -> String {
    match fg {
        Foreground::Alltoall { impls, sizes, dtype, register } => format!(
            "alltoall {} {} bytes per rank {:?}, -R {}",
            impls.iter().map(|i| i.name).collect::<Vec<_>>().join(","),
            dtype.as_str(),
            sizes,
            *register as u32
        ),
        Foreground::Ep { impls, modes, preset, shape, tokens, payload, .. } => format!(
            "ep {} {} dispatch {} {preset} (hidden {} top-{} {} experts) tokens {}",
            impls.iter().map(|i| i.name).collect::<Vec<_>>().join(","),
            modes.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(","),
            payload.as_str(),
            shape.hidden,
            shape.topk,
            shape.experts,
            tokens
                .as_ref()
                .map(|t| format!("{t:?}"))
                .unwrap_or_else(|| { format!("{} LL / {} HT", Mode::Ll.default_tokens(), Mode::Ht.default_tokens()) })
        ),
    }
}

/// The foreground's side of a rank: its group, stream and communicator.
struct Fg<'a> {
    boot: &'a dyn Bootstrap,
    gpu: &'a Gpu,
    comm: &'a crate::nccl::Comm,
    env: &'a Env,
}

struct Runner<'a> {
    cfg: &'a Config,
    world: &'a dyn Bootstrap,
    fg_gpu: &'a Gpu,
    bg: &'a mut Background,
    /// Every checked run gets new values.
    seeds: harness::check::Seeds,
}

/// One foreground measurement: what it enqueues per iteration, and one checked run.
struct Point<'a> {
    label: String,
    base: Row,
    op: &'a dyn Fn(u32) -> Result<()>,
    check: &'a dyn Fn(u32) -> Result<u64>,
    /// Bytes per rank for the foreground's nccl-tests bandwidths (alltoall), with its ranks.
    alltoall_bytes: Option<(u64, u64)>,
    /// An EP foreground: the bytes each rank sends in the phase, of which the row's `size_bytes`
    /// is the timed rank's (per `-a`; the mean with -a 1), as in ep_perf.
    sent: Option<Vec<f64>>,
}

impl Runner<'_> {
    fn params(&self) -> LoopParams {
        let c = &self.cfg.common;
        LoopParams {
            iters: c.iters,
            warmup: c.warmup,
            ops_per_iter: 1,
            blocking: false,
            graph_launches: 0,
            capture: false,
        }
    }

    /// Reduce per-rank values over every rank per `-a`.
    fn reduce(&self, v: f64) -> f64 {
        let all: Vec<f64> = self.world.allgather_f64(&[v]).iter().map(|x| x[0]).collect();
        stats::reduce(&all, self.cfg.common.average)
    }

    fn world_max(&self, v: f64) -> f64 {
        self.world.allgather_f64(&[v]).iter().map(|x| x[0]).fold(f64::MIN, f64::max)
    }

    fn world_min(&self, v: f64) -> f64 {
        self.world.allgather_f64(&[v]).iter().map(|x| x[0]).fold(f64::MAX, f64::min)
    }

    fn world_sum(&self, v: u64) -> u64 {
        self.world.allgather_f64(&[v as f64]).iter().map(|x| x[0] as u64).sum()
    }

    /// The foreground alone over `iters` timed iterations, through the standalone benchmarks' own
    /// timing loop: this rank's time per operation.
    fn fg_alone(&self, p: &Point, iters: u32) -> Result<f64> {
        let params = LoopParams { iters, ..self.params() };
        Ok(harness::time_loop(self.fg_gpu, self.world, &params, &p.label, &mut |i| (p.op)(i))?.mean_us)
    }

    /// Every row of one foreground point: alone once, then per background size together.
    fn point(&mut self, p: &Point, out: &mut Output) -> Result<()> {
        let cfg = self.cfg;
        out.measuring(&format!("{} alone", p.label), &[], vec![self.keyed(&p.base, cfg.row_bg_sizes()[0])]);
        let fg_alone_mine = self.fg_alone(p, cfg.common.iters)?;
        let fg_alone = self.reduce(fg_alone_mine);
        let fg_alone_max = self.world_max(fg_alone_mine);
        if cfg.bg == BgOp::None {
            let mut wrong = None;
            for _ in 0..cfg.common.check {
                *wrong.get_or_insert(0) += (p.check)(self.seeds.new_seed())?;
            }
            let wrong = wrong.map(|w| self.world_sum(w));
            let row = Row {
                time_us: Some(fg_alone),
                alone_us: Some(fg_alone),
                fg_iters: Some(cfg.common.iters),
                wrong,
                background: Some(results::Background { op: BgOp::None, ..Default::default() }),
                ..self.bandwidths(p, fg_alone, fg_alone_mine)
            };
            out.rows(table::interference_line(&row), vec![row]);
            watchdog::beat();
            return Ok(());
        }
        for &size in &cfg.bg_sizes {
            out.measuring(&format!("{} against {} {size} B", p.label, cfg.bg), &[], vec![self.keyed(&p.base, size)]);
            self.bg.resize(size)?;
            let bg_alone_mine = measure::bg_alone(self.bg, self.world, cfg.common.iters, cfg.common.warmup)?;
            let bg_alone_max = self.world_max(bg_alone_mine);
            let capture = cfg.profile_bg == Some(size);
            // Together, with more background each time the foreground outlasted it, and planned
            // again from the times seen together where the background slowed more than the
            // foreground and fewer than BG_INSIDE of its iterations lay inside the window.
            let mut stretch = 2.0;
            let mut attempt = 0;
            let mut times = (fg_alone_max, bg_alone_max);
            let (marks, plan, overlap) = loop {
                let plan = measure::plan(times.0, times.1, cfg.common.iters, stretch);
                let fg_loop = || -> Result<()> { (0..plan.fg_iters).try_for_each(|i| (p.op)(i)) };
                let mut run = || {
                    let label = format!("{} together with {} {size}B", p.label, cfg.bg);
                    let _r = crate::profile::range(|| label);
                    measure::overlapped(self.fg_gpu, self.bg, self.world, plan.bg_iters, |b| b.launch(), fg_loop)
                };
                let ((), marks) = if capture { crate::profile::captured(run)? } else { run()? };
                let overlap = self.world_min(marks.overlap());
                let inside_mine = marks.bg_inside_us();
                let inside = self.world_min(inside_mine.map_or(0.0, |i| i.1 as f64));
                attempt += 1;
                if (overlap >= 1.0 && inside >= measure::BG_INSIDE as f64) || attempt == measure::ATTEMPTS {
                    break (marks, plan, overlap);
                }
                if overlap < 1.0 {
                    stretch *= 2.0;
                }
                let bg_together = inside_mine.map_or(marks.bg_us(), |i| i.0);
                times = (self.world_max(marks.fg_us(plan.fg_iters)), self.world_max(bg_together));
            };
            // The alone time over as many iterations as the together window held: a window's
            // fixed start (its first launch reaching an idle stream) weighs 1 / iterations in
            // either, and a different count would read as a slowdown that is not there.
            let fg_alone = if plan.fg_iters == cfg.common.iters {
                fg_alone
            } else {
                self.reduce(self.fg_alone(p, plan.fg_iters)?)
            };
            let (fg_wrong, bg_wrong, check_overlap) = self.check_together(p, fg_alone_max, bg_alone_max)?;
            let row = self.row(
                p,
                size,
                Measured { fg_alone, marks, plan, overlap, bg_alone_mine, fg_wrong, bg_wrong, check_overlap },
            );
            out.rows(table::interference_line(&row), vec![row]);
            watchdog::beat();
        }
        Ok(())
    }

    /// `-c` checked runs of the foreground, each while checked background iterations run beside
    /// it; wrong elements of each side summed over ranks, and the smallest overlap of the checks.
    fn check_together(
        &mut self,
        p: &Point,
        fg_alone_max: f64,
        bg_alone_max: f64,
    ) -> Result<(Option<u64>, Option<u64>, Option<f64>)> {
        if self.cfg.common.check == 0 {
            return Ok((None, None, None));
        }
        // A checked run also fills, verifies and synchronises: give the background at least
        // CHECK_COVER_US of work, or 20 foreground operations' worth.
        const CHECK_COVER_US: f64 = 50_000.0;
        let cover = CHECK_COVER_US.max(20.0 * fg_alone_max);
        let iters = ((cover / bg_alone_max.max(1e-3)).ceil() as u32).clamp(2, measure::MAX_BG_ITERS);
        let (mut fg_wrong, mut bg_wrong, mut overlap) = (0, 0, 1.0f64);
        for _ in 0..self.cfg.common.check {
            let seed = self.seeds.new_seed();
            self.bg.start_check(seed)?;
            let (w, marks) = measure::overlapped(
                self.fg_gpu,
                self.bg,
                self.world,
                iters,
                move |b| b.launch_checked(seed),
                || (p.check)(seed),
            )?;
            fg_wrong += w;
            bg_wrong += self.bg.finish_check()?;
            overlap = overlap.min(marks.overlap());
        }
        Ok((Some(self.world_sum(fg_wrong)), Some(self.world_sum(bg_wrong)), Some(self.world_min(overlap))))
    }

    /// The point's base row at `time_us` (reduced over ranks from each rank's `mine_us`): an
    /// alltoall foreground's nccl-tests bandwidths, an EP foreground's bytes (collective).
    fn bandwidths(&self, p: &Point, time_us: f64, mine_us: f64) -> Row {
        let (alg, bus) = match p.alltoall_bytes {
            Some((bytes, n)) => {
                let (a, b) = sizes::alltoall_bw(bytes, time_us, n);
                (Some(a), Some(b))
            }
            None => (None, None),
        };
        let size_bytes = match &p.sent {
            Some(sent) => {
                let times: Vec<f64> = self.world.allgather_f64(&[mine_us]).iter().map(|x| x[0]).collect();
                stats::of_timed_rank(&times, self.cfg.common.average, sent).round() as u64
            }
            None => p.base.size_bytes,
        };
        Row { size_bytes, algbw_gbps: alg, busbw_gbps: bus, status: Status::Ok, ..p.base.clone() }
    }

    /// One pair reduced over ranks into its row (every rank calls this; rank 0 keeps it).
    fn row(&self, p: &Point, size: u64, m: Measured) -> Row {
        let inside = m.marks.bg_inside_us();
        let together_mine = m.marks.fg_us(m.plan.fg_iters);
        let pair = Pair {
            size,
            ranks: self.bg.comm.nranks as u64,
            fg_alone: m.fg_alone,
            together: self.reduce(together_mine),
            fg_iters: m.plan.fg_iters,
            overlap: m.overlap,
            bg_alone: self.reduce(m.bg_alone_mine),
            bg_inside_us: self.reduce(inside.map_or(0.0, |i| i.0)),
            bg_inside_n: self.world_min(inside.map_or(0.0, |i| i.1 as f64)),
            check_overlap: m.check_overlap,
            fg_wrong: m.fg_wrong,
            bg_wrong: m.bg_wrong,
        };
        pair.row(self.cfg.bg, self.bandwidths(p, pair.together, together_mine))
    }

    /// The keys of a foreground's row (`base`) against a background of `size` bytes.
    fn keyed(&self, base: &Row, size: u64) -> Row {
        Row { background: Some(described(self.cfg.bg, size, self.bg.comm.nranks as u64)), ..base.clone() }
    }

    fn skipped(&self, base: Row, why: &str, out: &mut Output) {
        let rows = self
            .cfg
            .row_bg_sizes()
            .iter()
            .map(|&size| Row { status: Status::Skipped, reason: Some(why.into()), ..self.keyed(&base, size) })
            .collect();
        out.rows(None, rows);
    }

    fn sweep_alltoall(&mut self, fg: &Fg, out: &mut Output) -> Result<()> {
        let Foreground::Alltoall { impls, sizes: fg_sizes, dtype, register } = &self.cfg.fg else { unreachable!() };
        let n = fg.boot.size() as u64;
        let elt = dtype.size();
        let bytes = buffer_span(buffer_bytes(elt, fg_sizes, n), u64::MAX);
        let send = DevMem::alloc(bytes as usize)?;
        let recv = DevMem::alloc(bytes as usize)?;
        let reg = Registration::register(fg.comm, *register, &send, &recv)?;
        let mut r = crate::alltoall::Rank {
            boot: fg.boot,
            gpu: fg.gpu,
            comm: fg.comm,
            send,
            recv,
            reg,
            dtype: *dtype,
            ctas: self.cfg.ctas,
            gin: fg.env.gin.clone(),
            emulate_nodes: self.cfg.common.emulate_nodes,
            gin_request: self.cfg.fg_gin(),
        };
        let checker = std::cell::RefCell::new(Checker::new(fg.gpu, elt)?);
        checker.borrow().fill_timed(fg.gpu, &[r.send.ptr, r.recv.ptr], bytes / elt, fg.boot.rank() as u32)?;
        fg.gpu.stream.synchronize()?;
        let result = (|| -> Result<()> {
            for info in impls {
                let imp = (info.make)(&r)?;
                if info.real_gin() {
                    let granted = imp.as_ref().ok().and_then(|i| i.gin_contexts());
                    gin_transport::record_granted(self.world, &mut out.run.config, FG_GIN, info.name, granted);
                }
                for &size in fg_sizes {
                    let count = sizes::alltoall_count(size, elt, n);
                    // A section per foreground size: the rows' size column is the background's.
                    out.section(
                        &format!(
                            "foreground alltoall {} (-D {}) {} B per rank, registration {}",
                            info.name,
                            info.id,
                            n * count * elt,
                            r.reg.describe()
                        ),
                        &table::interference_header(self.cfg.bg == BgOp::None),
                    );
                    let base = Row {
                        impl_name: info.name.into(),
                        size_bytes: n * count * elt,
                        count,
                        dtype: dtype.as_str().into(),
                        placement: Placement::OutOfPlace,
                        cycle: out.cycle,
                        ..Default::default()
                    };
                    let imp = match &imp {
                        Err(why) => {
                            self.skipped(base, why, out);
                            continue;
                        }
                        Ok(imp) => imp,
                    };
                    if let Some(why) = imp.unsupported(count * elt) {
                        self.skipped(base, &why, out);
                        continue;
                    }
                    let step = Step::new(&r, imp.as_ref(), count, false, 1, self.cfg.common.iters);
                    let op = |i: u32| step.op(i);
                    let check = |seed: u32| step.check_once(&mut checker.borrow_mut(), seed, false);
                    let point = Point {
                        label: format!("{} {}B out-of-place", info.name, n * count * elt),
                        base,
                        op: &op,
                        check: &check,
                        alltoall_bytes: Some((n * count * elt, n)),
                        sent: None,
                    };
                    self.point(&point, out)?;
                }
                fg.gpu.stream.synchronize()?;
            }
            Ok(())
        })();
        fg.gpu.stream.synchronize()?;
        r.reg.release(fg.comm);
        result
    }

    fn sweep_ep(&mut self, fg: &Fg, out: &mut Output) -> Result<()> {
        let Foreground::Ep { impls, modes, shape, tokens, payload, seed, .. } = &self.cfg.fg else { unreachable!() };
        let n = fg.boot.size();
        shape.validate(n)?;
        let checks = Checks::new(fg.gpu)?;
        let spec = RoutingSpec { gen: Generator::Uniform, seed: *seed, masked: 0, ranks: n, check: None };
        for &mode in modes {
            let tokens = ep_tokens(tokens, mode);
            let max_tokens = *tokens.iter().max().unwrap();
            for info in impls {
                let c = crate::ep::Ctx {
                    boot: fg.boot,
                    gpu: fg.gpu,
                    comm: fg.comm,
                    shape: *shape,
                    payload: *payload,
                    mode,
                    ctas: self.cfg.ctas,
                    max_tokens,
                    emulate_nodes: self.cfg.common.emulate_nodes,
                    gin_request: self.cfg.fg_gin(),
                };
                let imp = (info.make)(&c, &fg.env.gin)?;
                if info.real_gin() {
                    let granted = imp.as_ref().ok().and_then(|i| i.gin_contexts());
                    gin_transport::record_granted(self.world, &mut out.run.config, FG_GIN, info.name, granted);
                }
                for &t in &tokens {
                    for phase in [Phase::Dispatch, Phase::Combine] {
                        let base = Row {
                            sms: imp.as_ref().ok().and_then(|i| i.sms()),
                            ..row_base(info.name, mode, phase, *payload, t, shape, out.cycle)
                        };
                        out.section(
                            &format!(
                                "foreground ep {} {} {} {t} tokens per rank, dispatch {}",
                                info.name,
                                mode.as_str(),
                                phase.as_str(),
                                payload.as_str()
                            ),
                            &table::interference_header(self.cfg.bg == BgOp::None),
                        );
                        let imp = match &imp {
                            Err(why) => {
                                self.skipped(base, why, out);
                                continue;
                            }
                            Ok(imp) => imp.as_ref(),
                        };
                        // A check changes the inputs (routing, token count) and restores them.
                        let ph = std::cell::RefCell::new(Phases::prepare(&c, imp, &spec, &checks, t)?);
                        // Bytes each rank sends in the phase.
                        let traffic = ph.borrow().layout().traffic(fg.boot.rank());
                        let sent: u64 = imp.bytes_to(&c, phase, &traffic).iter().sum();
                        let sent = self.world.allgather_f64(&[sent as f64]).iter().map(|x| x[0]).collect();
                        let op = |_: u32| {
                            let ph = ph.borrow();
                            if phase == Phase::Dispatch {
                                ph.dispatch()
                            } else {
                                ph.combine()
                            }
                        };
                        let check = |s: u32| {
                            let (d, cm) = ph.borrow_mut().check_once(&checks, s, false)?;
                            Ok(if phase == Phase::Dispatch { d } else { cm })
                        };
                        let point = Point {
                            label: ph.borrow().label(phase),
                            base,
                            op: &op,
                            check: &check,
                            alltoall_bytes: None,
                            sent: Some(sent),
                        };
                        self.point(&point, out)?;
                    }
                }
                fg.gpu.stream.synchronize()?;
                drop(imp);
                self.world.barrier();
            }
        }
        Ok(())
    }
}

struct Measured {
    fg_alone: f64,
    marks: Marks,
    plan: measure::Plan,
    overlap: f64,
    bg_alone_mine: f64,
    fg_wrong: Option<u64>,
    bg_wrong: Option<u64>,
    check_overlap: Option<f64>,
}

/// One (foreground, background size) pair once reduced over ranks: everything its row says.
struct Pair {
    size: u64,
    /// The background communicator's ranks.
    ranks: u64,
    fg_alone: f64,
    together: f64,
    /// Foreground operations in each timed loop, alone and together.
    fg_iters: u32,
    /// The smallest share of the foreground's timed window the background covered on any rank.
    overlap: f64,
    bg_alone: f64,
    /// The background's mean iteration wholly inside the foreground window, and the fewest such
    /// iterations on any rank.
    bg_inside_us: f64,
    bg_inside_n: f64,
    check_overlap: Option<f64>,
    fg_wrong: Option<u64>,
    bg_wrong: Option<u64>,
}

impl Pair {
    /// The pair's row on `fg`, the foreground's row at its together time.
    fn row(&self, op: BgOp, fg: Row) -> Row {
        // The background's together time needs whole iterations inside the window on every rank.
        let bg_together = (self.bg_inside_n > 0.0).then_some(self.bg_inside_us);
        let busbw = |t: f64| op.busbw(self.size, t, self.ranks);
        let mut notes = vec![];
        if self.overlap < 1.0 {
            notes.push(format!(
                "overlap incomplete: the background covered {:.1}% of the foreground's timed window",
                self.overlap * 100.0
            ));
        }
        if bg_together.is_none() {
            notes.push("no background iteration lay wholly inside the foreground window: background together time not measured".into());
        } else if self.bg_inside_n < measure::BG_INSIDE as f64 {
            notes.push(format!(
                "only {} background iteration(s) lay wholly inside the foreground window ({} wanted)",
                self.bg_inside_n,
                measure::BG_INSIDE
            ));
        }
        if let Some(o) = self.check_overlap.filter(|&o| o < 1.0) {
            notes.push(format!("checked with {:.1}% overlap", o * 100.0));
        }
        Row {
            time_us: Some(self.together),
            alone_us: Some(self.fg_alone),
            together_us: Some(self.together),
            slowdown: Some(self.together / self.fg_alone),
            overlap: Some(self.overlap),
            fg_iters: Some(self.fg_iters),
            wrong: self.fg_wrong.zip(self.bg_wrong).map(|(a, b)| a + b),
            reason: (!notes.is_empty()).then(|| notes.join("; ")),
            background: Some(results::Background {
                alone_us: Some(self.bg_alone),
                together_us: bg_together,
                slowdown: bg_together.map(|t| t / self.bg_alone),
                busbw_alone_gbps: Some(busbw(self.bg_alone)),
                busbw_together_gbps: bg_together.map(busbw),
                wrong: self.bg_wrong,
                ..described(op, self.size, self.ranks)
            }),
            ..fg
        }
    }
}

/// What a row says of its background before any figure (a skipped row too: the communicator it
/// would have run on).
fn described(op: BgOp, size: u64, ranks: u64) -> results::Background {
    results::Background {
        op,
        ranks,
        size_bytes: size,
        count: size / background::ELT,
        dtype: op.dtype().into(),
        redop: op.redop().into(),
        ..Default::default()
    }
}

/// The EP foreground's tokens per rank in `mode`: `--tokens`, or the mode's default.
fn ep_tokens(tokens: &Option<Vec<usize>>, mode: Mode) -> Vec<usize> {
    tokens.clone().unwrap_or_else(|| vec![mode.default_tokens()])
}

fn config_json(c: &Config) -> serde_json::Value {
    let fg = match &c.fg {
        Foreground::Alltoall { impls, sizes, dtype, register } => serde_json::json!({
            "kind": FgKind::Alltoall,
            "impls": impls.iter().map(|i| i.name).collect::<Vec<_>>(),
            "sizes": sizes,
            "datatype": dtype.as_str(),
            "local_register": *register as u32,
        }),
        Foreground::Ep { impls, modes, preset, shape, tokens, payload, seed } => serde_json::json!({
            "kind": FgKind::Ep,
            "impls": impls.iter().map(|i| i.name).collect::<Vec<_>>(),
            "modes": modes.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "preset": preset,
            "hidden": shape.hidden,
            "topk": shape.topk,
            "experts": shape.experts,
            // Per mode, as ep_perf records its sweeps.
            "tokens": modes.iter().map(|&m| (m.as_str(), ep_tokens(tokens, m))).collect::<std::collections::BTreeMap<_, _>>(),
            "dispatch_dtype": payload.as_str(),
            "routing": "uniform",
            "seed": seed,
        }),
    };
    serde_json::json!({
        "foreground": fg,
        "background": {"op": c.bg, "sizes": c.bg_sizes, "datatype": c.bg.dtype(), "redop": c.bg.redop()},
        "layout": c.layout,
        "ep": c.ep,
        "dp": c.dp,
        "comms": {"ep": c.ep_comm, "dp": c.dp_comm},
        "device_cta_count": c.ctas,
        "profile_size": c.profile_bg,
        "gate": "time_us is the foreground's together_us (alone_us without a background)",
        "timing": "alone: the standalone benchmark's loop (events around -n iterations); together: the foreground's loop (stretched to hold whole background iterations) while the background, on its own thread and stream, covers it; overlap and the background's together time from per-iteration events",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep_ctas_leave_the_background_its_sms() {
        // H100: 132 SMs; NCCL may take up to 64 CTAs unless told otherwise.
        assert!(ep_fits_beside_background(24, 132, None, None).is_ok());
        assert!(ep_fits_beside_background(68, 132, None, None).is_ok());
        let e = ep_fits_beside_background(69, 132, None, None).unwrap_err().to_string();
        assert!(e.contains("-V 69 and the background's up to 64 CTAs (NCCL's limit") && e.contains("-V 1..68"), "{e}");
        assert!(ep_fits_beside_background(124, 132, None, Some(8)).is_ok());
        assert!(ep_fits_beside_background(125, 132, None, Some(8))
            .unwrap_err()
            .to_string()
            .contains("(--dp-max-ctas)"));
        // NCCL_MAX_CTAS overrides the communicator's config; what NCCL would not read is ignored.
        assert!(ep_fits_beside_background(124, 132, Some("16"), Some(8))
            .unwrap_err()
            .to_string()
            .contains("up to 16 CTAs (NCCL_MAX_CTAS)"));
        assert!(ep_fits_beside_background(124, 132, Some("x"), Some(8)).is_ok());
        assert!(ep_fits_beside_background(68, 132, Some("1000"), None).is_ok());
    }

    #[test]
    fn the_foregrounds_gin_request_and_grant_land_in_config_comms() {
        let mut json = config_json(&cfg("-g 2 --fg alltoall -D gin -R 2 --ep-gin-contexts 2"));
        assert_eq!(json["comms"]["ep"]["gin"], serde_json::json!({"contexts": 2}));
        assert_eq!(json["comms"]["dp"].get("gin"), None, "the background has no device communicator");
        gin_transport::record_granted(&crate::bootstrap::threads::group(1)[0], &mut json, FG_GIN, "gin", Some(4));
        assert_eq!(json["comms"]["ep"]["gin"], serde_json::json!({"contexts": 2, "granted": {"gin": 4}}));
    }

    /// The configuration of `interference_perf LINE`.
    fn cfg(line: &str) -> Config {
        super::super::cli::tests::cfg(&line.split_whitespace().collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_preamble_describes_both_sides_the_layout_and_each_communicator() {
        let c = cfg("-g 4 --fg alltoall -D nvl,gin --size 2M --ep 2 -b 1M -e 16M --ep-gin-contexts 2 \
            --ep-stream-priority -1 --dp-max-ctas 8 -w 1 -n 5 -c 2");
        assert_eq!(
            c.describe(&Env { ranks: 4, ..Default::default() }),
            "# foreground: alltoall nvl,gin float bytes per rank [2097152], -R 2; device CTAs (SMs): impl default\n\
             # background: allreduce float sum, 1048576 to 16777216 bytes per rank (3 sizes)\n\
             # layout: EP 2 x DP 2: EP groups {0,1} {2,3}; DP groups {0,2} {1,3}\n\
             # EP communicator: NCCL defaults, stream priority -1, GIN request ginContextCount=2\n\
             # DP communicator: maxCTAs=8, stream priority default\n\
             # warmup iters: 1 iters: 5 validation: 2 (both sides checked while overlapped)\n"
        );
        let d = cfg("-g 2 --bg none").describe(&Env { ranks: 2, ..Default::default() });
        assert!(
            d.starts_with(
                "# foreground: ep nvl ll dispatch bf16 deepseek-v3 (hidden 7168 top-8 256 experts) tokens 128 LL / 4096 HT; device CTAs (SMs): 24\n\
                 # background: none (the foreground alone)\n"
            ),
            "{d}"
        );
    }

    #[test]
    fn the_results_config_records_the_background_sweep_and_the_layout() {
        let json = Benchmark::config_json(&cfg("-g 4 --ep 2 -b 1M -e 16M"));
        assert_eq!(
            json["background"],
            serde_json::json!({"op": "allreduce", "sizes": [1 << 20, 4 << 20, 16 << 20], "datatype": "float", "redop": "sum"})
        );
        assert_eq!(json["layout"], serde_json::json!({"ranks": 4, "ep": 2, "dp": 2}));
        assert_eq!(json["device_cta_count"], 24);
        let json = Benchmark::config_json(&cfg("--bg none"));
        assert_eq!(json["background"]["op"], "none");
        assert_eq!(json["background"]["sizes"], serde_json::json!([]));
    }

    #[test]
    fn require_gin_sees_the_foregrounds_impls_on_nccls_gin() {
        assert_eq!(Benchmark::real_gin_impls(&cfg("--fg alltoall -D nvl,gin")), ["gin"]);
        assert_eq!(Benchmark::real_gin_impls(&cfg("-D nvl,hybrid")), ["hybrid"]);
        assert!(Benchmark::real_gin_impls(&cfg("-D nvl")).is_empty());
    }

    #[test]
    fn the_footer_counts_wrong_rows_and_fails_on_any() {
        let footer = <Config as Benchmark>::footer;
        assert_eq!(
            footer(&results::Summary { rows_wrong: 0, ..Default::default() }),
            "# Out of bounds values : 0 OK\n#\n"
        );
        assert_eq!(
            footer(&results::Summary { rows_wrong: 2, ..Default::default() }),
            "# Out of bounds values : 2 FAILED\n#\n"
        );
    }

    fn pair() -> Pair {
        Pair {
            size: 1 << 20,
            ranks: 4,
            fg_alone: 10.0,
            together: 15.0,
            fg_iters: 480,
            overlap: 1.0,
            bg_alone: 20.0,
            bg_inside_us: 25.0,
            bg_inside_n: measure::BG_INSIDE as f64,
            check_overlap: Some(1.0),
            fg_wrong: Some(1),
            bg_wrong: Some(2),
        }
    }

    #[test]
    fn a_pair_row_holds_both_sides_slowdowns_and_the_backgrounds_busbw() {
        let fg = Row { busbw_gbps: Some(7.0), ..Default::default() };
        let r = pair().row(BgOp::AllReduce, fg);
        assert_eq!((r.time_us, r.alone_us, r.together_us, r.slowdown), (Some(15.0), Some(10.0), Some(15.0), Some(1.5)));
        assert_eq!((r.overlap, r.wrong, r.reason.as_deref(), r.busbw_gbps), (Some(1.0), Some(3), None, Some(7.0)));
        assert_eq!(r.fg_iters, Some(480));
        let b = r.background.unwrap();
        assert_eq!((b.op.as_str(), b.size_bytes, b.count, b.ranks), ("allreduce", 1 << 20, 1 << 18, 4));
        assert_eq!((b.alone_us, b.together_us, b.slowdown, b.wrong), (Some(20.0), Some(25.0), Some(1.25), Some(2)));
        // busbw = bytes / time x 2(n-1)/n: 1 MiB in 20 us on 4 ranks.
        let bus = |t: f64| 1048.576 / t * 1.5;
        assert_eq!((b.busbw_alone_gbps, b.busbw_together_gbps), (Some(bus(20.0)), Some(bus(25.0))));
    }

    #[test]
    fn a_pair_row_says_what_its_overlap_and_checks_lacked() {
        let p = Pair { overlap: 0.5, bg_inside_n: 0.0, check_overlap: Some(0.9), fg_wrong: None, ..pair() };
        let r = p.row(BgOp::AllReduce, Row::default());
        assert_eq!(
            r.reason.as_deref(),
            Some(
                "overlap incomplete: the background covered 50.0% of the foreground's timed window; \
                 no background iteration lay wholly inside the foreground window: background together time not measured; \
                 checked with 90.0% overlap"
            )
        );
        assert_eq!((r.wrong, r.slowdown), (None, Some(1.5)), "unchecked foreground: no wrong count");
        let b = r.background.unwrap();
        assert_eq!((b.together_us, b.slowdown, b.busbw_together_gbps), (None, None, None));
        let few = Pair { bg_inside_n: 1.0, ..pair() }.row(BgOp::AllReduce, Row::default());
        assert_eq!(
            few.reason.unwrap(),
            format!(
                "only 1 background iteration(s) lay wholly inside the foreground window ({} wanted)",
                measure::BG_INSIDE
            )
        );
    }
}
