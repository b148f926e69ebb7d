//! `ep_perf`: bring ranks up, then for every mode, dispatch payload, impl and tokens per rank:
//! time dispatch and combine, check both against the host reference, report.
use super::cli::Config;
use super::device::{sm_count, Checks, Inputs};
use super::metrics::{self, Mode, Phase};
use super::reference::Layout;
use super::shape::Payload;
use super::{make, Ctx, EpImpl};
use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::error::{Error, Exit, Result};
use crate::harness::{self, stats, watchdog, LoopParams};
use crate::nccl::{self, Comm};
use crate::report::schema::{self, Env, Row, Run, Summary};
use crate::report::{self, table};

const PROG: &str = "ep_perf";

pub fn main(cfg: Config) -> Result<Exit> {
    let local_ranks = cfg.local_ranks;
    harness::ranks::run(PROG, local_ranks, move |boot, device| run_rank(boot, &cfg, device))
}

fn run_rank(boot: &dyn Bootstrap, cfg: &Config, device: usize) -> Result<Exit> {
    let (rank, n) = (boot.rank(), boot.size());
    let started_at = schema::now_rfc3339();
    let gpu = Gpu::open(device)?;
    cfg.shape.validate(n)?;
    crate::gin::check_nodes_divide(cfg.emulate_nodes, n)?;
    let sms = sm_count(&gpu)?;
    if cfg.ctas > sms {
        return Err(Error::usage(
            format!(
                "-V {} asks for more CTAs than the GPU's {sms} SMs (the kernels need every CTA resident)",
                cfg.ctas
            ),
            format!("use -V 1..{sms}"),
        ));
    }
    let gin = nccl::probe_gin(boot)?;
    let comm = Comm::bootstrap(boot)?;
    watchdog::beat();
    let env = crate::envinfo::gather(boot, &gpu, gin)?;
    let mut out = Output::new(rank == 0, cfg, env, started_at);
    out.preamble();

    let checks = Checks::new(&gpu)?;
    let mut st = State { boot, gpu: &gpu, comm: &comm, cfg, checks, seed: 0 };
    let result = st.sweep(&mut out);
    let exit = match &result {
        Ok(()) if out.rows.iter().any(|r| r.wrong.unwrap_or(0) > 0) => Exit::WrongData,
        Ok(()) => Exit::Ok,
        Err(e) => e.exit,
    };
    out.finish(result.as_ref().err())?;
    gpu.stream.synchronize()?;
    result.map(|_| exit)
}

struct State<'a> {
    boot: &'a dyn Bootstrap,
    gpu: &'a Gpu,
    comm: &'a Comm,
    cfg: &'a Config,
    checks: Checks,
    /// Seed of the last checked run: every checked run gets new values, so a row left over from
    /// an earlier run never passes.
    seed: u32,
}

/// One phase on one rank.
struct Measured {
    timing: harness::Timing,
    wrong: Option<u64>,
    logical_bytes: u64,
    sent_bytes: u64,
    wire: metrics::Wire,
}

impl State<'_> {
    fn sweep(&mut self, out: &mut Output) -> Result<()> {
        let cfg = self.cfg;
        let n = self.boot.size();
        let spec = cfg.routing(n);
        let hosts = self.boot.allgather(crate::bootstrap::hostname().as_bytes());
        let same_host: Vec<bool> = hosts.iter().map(|h| *h == hosts[self.boot.rank()]).collect();
        for &mode in &cfg.modes {
            let tokens = cfg.tokens_for(mode);
            let max_tokens = *tokens.iter().max().unwrap();
            for &payload in &cfg.payloads {
                for &name in &cfg.impls {
                    let c = Ctx {
                        boot: self.boot,
                        gpu: self.gpu,
                        comm: self.comm,
                        shape: cfg.shape,
                        payload,
                        mode,
                        ctas: cfg.ctas,
                        max_tokens,
                        emulate_nodes: cfg.emulate_nodes,
                    };
                    let imp = make(name, &c, &out.run.env.gin)?;
                    let skip = match &imp {
                        Err(why) => Some(why.clone()),
                        Ok(imp) if cfg.graph_launches > 0 => {
                            imp.not_capturable().map(|w| format!("not CUDA-graph capturable: {w}"))
                        }
                        Ok(_) => None,
                    };
                    out.impl_header(name, mode, payload, imp.as_ref().ok().and_then(|i| i.sms()));
                    for &t in &tokens {
                        let rows = match (&skip, &imp) {
                            (Some(why), _) => {
                                [Phase::Dispatch, Phase::Combine].map(|p| out.skipped(name, mode, p, payload, t, why))
                            }
                            (None, Ok(imp)) => {
                                let routing: Vec<_> =
                                    (0..n).map(|r| spec.generate(r, t, cfg.shape.experts, cfg.shape.topk)).collect();
                                let layout = Layout { routing: &routing, local_experts: cfg.shape.local_experts(n) };
                                let [d, cm] = self.measure(&c, imp.as_ref(), &layout, t, &same_host)?;
                                [
                                    out.row(self.boot, name, mode, Phase::Dispatch, payload, t, imp.sms(), &d),
                                    out.row(self.boot, name, mode, Phase::Combine, payload, t, imp.sms(), &cm),
                                ]
                            }
                            (None, Err(_)) => unreachable!("a skipped impl has a reason"),
                        };
                        out.line(&rows[0], &rows[1]);
                        out.rows.extend(rows);
                        watchdog::beat();
                    }
                    if let Ok(imp) = imp {
                        self.gpu.stream.synchronize()?;
                        drop(imp);
                    }
                    self.boot.barrier();
                }
            }
        }
        Ok(())
    }

    fn measure(
        &mut self,
        c: &Ctx,
        imp: &dyn EpImpl,
        layout: &Layout,
        tokens: usize,
        same_host: &[bool],
    ) -> Result<[Measured; 2]> {
        let (gpu, cfg, me) = (self.gpu, self.cfg, self.boot.rank());
        let r = &layout.routing[me];
        let inp = Inputs::new(gpu, c.args(tokens), &r.idx, &r.weight)?;
        let all_sms = sm_count(gpu)?;
        // LL quantizes inside the timed dispatch (as DeepEP's LL kernels do); HT takes FP8 input.
        let quantize_timed = c.mode == Mode::Ll && c.payload == Payload::Fp8;
        inp.fill(gpu, 0)?;
        inp.quantize(gpu, all_sms)?;
        // One dispatch establishes the layout the expert output and the timed combines use.
        imp.dispatch(c, &inp)?;
        let rec = imp.received(c, &inp, layout)?;
        self.checks.expert(gpu, &inp.args, &rec, 0)?;
        gpu.stream.synchronize()?;
        drop(rec);

        let params = LoopParams {
            iters: cfg.iters,
            warmup: cfg.warmup,
            ops_per_iter: 1,
            blocking: false,
            graph_launches: cfg.graph_launches,
            capture: false,
        };
        let label = |p: Phase| format!("{} {} {} {tokens}", c.mode.name(), p.name(), c.payload.name());
        let dispatch = || -> Result<()> {
            if quantize_timed {
                inp.quantize(gpu, c.ctas)?;
            }
            imp.dispatch(c, &inp)
        };
        let td = harness::time_loop(gpu, self.boot, &params, &label(Phase::Dispatch), &mut |_| dispatch())?;
        let tc = harness::time_loop(gpu, self.boot, &params, &label(Phase::Combine), &mut |_| imp.combine(c, &inp))?;
        self.comm.async_error()?;

        let (mut wd, mut wc) = (None, None);
        for _ in 0..cfg.check {
            self.seed += 1;
            let seed = self.seed;
            let graph = cfg.graph_launches > 0;
            inp.fill(gpu, seed)?;
            if !quantize_timed {
                inp.quantize(gpu, all_sms)?;
            }
            harness::run_once(gpu, graph, &mut || dispatch())?;
            let mut bad = imp.check_layout(c, &inp, layout)?;
            let rec = imp.received(c, &inp, layout)?;
            bad += self.checks.rows(gpu, &inp.args, &rec, seed)?;
            self.checks.expert(gpu, &inp.args, &rec, seed)?;
            harness::run_once(gpu, graph, &mut || imp.combine(c, &inp))?;
            let badc = self.checks.combined(gpu, &inp, seed)?;
            *wd.get_or_insert(0) += bad;
            *wc.get_or_insert(0) += badc;
            if bad + badc > 0 {
                break;
            }
        }

        let tr = layout.traffic(me);
        let by_net = imp.over_network(c).unwrap_or_else(|| same_host.iter().map(|s| !s).collect());
        let phase = |p: Phase, timing: harness::Timing, wrong: Option<u64>| {
            let per_peer = imp.bytes_to(c, p, &tr);
            Measured {
                timing,
                wrong,
                logical_bytes: metrics::logical_bytes(c.mode, p, &c.shape, c.payload, &tr),
                sent_bytes: per_peer.iter().sum(),
                wire: metrics::split_wire(me, &per_peer, &by_net),
            }
        };
        Ok([phase(Phase::Dispatch, td, wd), phase(Phase::Combine, tc, wc)])
    }
}

/// Rank 0's output: the table as it goes, JSON / CSV at the end.
struct Output<'c> {
    print: bool,
    cfg: &'c Config,
    run: Run,
    rows: Vec<Row>,
    json_stdout: bool,
    reasons_shown: std::collections::HashSet<String>,
}

impl<'c> Output<'c> {
    fn new(print: bool, cfg: &'c Config, env: Env, started_at: String) -> Self {
        let json_stdout = cfg.json.as_deref() == Some(std::path::Path::new("-"));
        let run = Run::start("ep", &cfg.command, started_at, env, config_json(cfg));
        Output { print, cfg, run, rows: vec![], json_stdout, reasons_shown: Default::default() }
    }

    fn emit(&self, s: &str) {
        if !self.print {
            return;
        }
        report::print_text(self.json_stdout, s);
    }

    fn preamble(&self) {
        let e = &self.run.env;
        let c = self.cfg;
        let s = &c.shape;
        let mut t = format!(
            "# ginbench {} ({}) ep_perf nccl-headers={} nccl-library={} nccl-path={}\n",
            self.run.tool.version, self.run.tool.git, e.nccl.header, e.nccl.library, e.nccl.path
        );
        t += &format!(
            "# ranks {} hosts {} gin: {} ({})\n# layer {}: hidden {} top-{} {} experts ({} per rank); routing {} seed {} masked {}\n",
            e.ranks,
            e.hosts.len(),
            e.gin.kind,
            e.gin.reason,
            c.preset,
            s.hidden,
            s.topk,
            s.experts,
            s.experts / e.ranks.max(1),
            c.gen.name(),
            c.seed,
            c.masked
        );
        t += &format!(
            "# warmup iters: {} iters: {} validation: {} graph: {} device CTAs (SMs): {}
",
            c.warmup, c.iters, c.check, c.graph_launches, c.ctas
        );
        for g in &e.gpus {
            t += &format!(
                "#  Rank {:2} on {:>10} device {:2} [{}] {}\n",
                g.rank, g.host, g.device, g.pci_bus_id, g.name
            );
        }
        self.emit(&t);
    }

    fn impl_header(&mut self, name: &str, mode: Mode, payload: Payload, sms: Option<u32>) {
        self.reasons_shown.clear();
        let sms = sms.map(|s| format!("{s} SMs")).unwrap_or_else(|| "NCCL kernels".into());
        self.emit(&format!(
            "#\n# impl {name}, mode {}, dispatch {} / combine bf16, {sms}\n",
            mode.name(),
            payload.name()
        ));
        self.emit(&table::ep_header());
    }

    fn base(&self, name: &str, mode: Mode, phase: Phase, payload: Payload, tokens: usize) -> Row {
        let s = &self.cfg.shape;
        Row {
            impl_name: name.into(),
            count: (tokens * s.hidden) as u64,
            dtype: if phase == Phase::Dispatch { payload.name() } else { "bf16" }.into(),
            placement: "out-of-place".into(),
            mode: Some(mode.name().into()),
            phase: Some(phase.name().into()),
            tokens: Some(tokens as u64),
            hidden: Some(s.hidden as u64),
            topk: Some(s.topk as u64),
            experts: Some(s.experts as u64),
            bw_definition: Some(metrics::bw_definition(mode).into()),
            ..Default::default()
        }
    }

    fn skipped(&self, name: &str, mode: Mode, phase: Phase, payload: Payload, tokens: usize, why: &str) -> Row {
        Row { status: "skipped".into(), reason: Some(why.into()), ..self.base(name, mode, phase, payload, tokens) }
    }

    /// Reduce one phase over ranks (every rank calls this; rank 0 keeps the row).
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        boot: &dyn Bootstrap,
        name: &str,
        mode: Mode,
        phase: Phase,
        payload: Payload,
        tokens: usize,
        sms: Option<u32>,
        m: &Measured,
    ) -> Row {
        let mut mine = vec![
            m.timing.mean_us,
            m.wrong.map(|w| w as f64).unwrap_or(-1.0),
            m.logical_bytes as f64,
            m.sent_bytes as f64,
            m.wire.nvl as f64,
            m.wire.net as f64,
        ];
        mine.extend(&m.timing.samples_us);
        let all = boot.allgather_f64(&mine);
        let pick = |i: usize| all.iter().map(|v| v[i]).collect::<Vec<f64>>();
        let mean = |i: usize| pick(i).iter().sum::<f64>() / all.len() as f64;
        let time = stats::reduce(&pick(0), self.cfg.average);
        let samples: Vec<Vec<f64>> = all.iter().map(|v| v[6..].to_vec()).collect();
        let pct = stats::percentiles(&stats::slowest_per_iteration(&samples));
        let wrong = m.wrong.map(|_| pick(1).iter().map(|&w| w.max(0.0) as u64).sum());
        let bw = mean(2) / time / 1e3;
        Row {
            size_bytes: mean(3).round() as u64,
            time_us: Some(time),
            p50_us: pct.map(|p| p.0),
            p99_us: pct.map(|p| p.1),
            algbw_gbps: Some(bw),
            bw_gbps: Some(bw),
            wrong,
            status: "ok".into(),
            wire_bytes: Some(metrics::Wire { nvl: mean(4).round() as u64, net: mean(5).round() as u64 }),
            sms,
            ..self.base(name, mode, phase, payload, tokens)
        }
    }

    fn line(&mut self, d: &Row, c: &Row) {
        let mut s = table::ep_line(d, c);
        s += &table::new_reasons(&mut self.reasons_shown, &[d, c]);
        self.emit(&s);
    }

    fn finish(&mut self, error: Option<&Error>) -> Result<()> {
        if !self.print {
            return Ok(());
        }
        let summary = Summary::of(&self.rows);
        self.emit(&format!(
            "# Out of bounds values : {} {}\n#\n",
            summary.rows_wrong,
            if summary.rows_wrong > 0 { "FAILED" } else { "OK" }
        ));
        self.run.finish(std::mem::take(&mut self.rows), summary, error.map(|e| e.to_string()));
        for line in report::write_outputs(&self.run, self.cfg.json.as_deref(), self.cfg.csv.as_deref())
            .map_err(Error::internal)?
        {
            self.emit(&line);
        }
        Ok(())
    }
}

fn config_json(c: &Config) -> serde_json::Value {
    serde_json::json!({
        "local_ranks": c.local_ranks,
        "modes": c.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "preset": c.preset,
        "hidden": c.shape.hidden,
        "topk": c.shape.topk,
        "experts": c.shape.experts,
        "tokens": c.tokens,
        "dispatch_dtypes": c.payloads.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "routing": c.gen.name(),
        "masked": c.masked,
        "seed": c.seed,
        "impls": c.impls,
        "emulate_nodes": c.emulate_nodes,
        "iters": c.iters,
        "warmup_iters": c.warmup,
        "check": c.check,
        "cudagraph": c.graph_launches,
        "average": c.average,
        "timeout_s": c.timeout_s,
        "device_cta_count": c.ctas,
        "order": {
            "host": "deterministic: per source rank, per local expert, tokens in order",
            "nvl-ll": "per local expert, source ranks in order; inside one (expert, source) segment rows are in arrival order (not deterministic), checked as sets",
            "nvl-ht": "deterministic: (source rank, token) order",
            "gin": "as nvl (gin, hybrid and their -emu forms run the nvl protocols)",
        },
        "fp8_quantization": "LL: inside the timed dispatch; HT: before timing (HT takes FP8 input)",
    })
}
