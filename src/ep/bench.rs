//! `ep_perf`: for every mode, dispatch payload, impl and tokens per rank: time dispatch and
//! combine, check both against the host reference, and hand the rows to the driver.
use super::cli::Config;
use super::device::{Checks, Inputs};
use super::metrics::{self, Mode, Phase};
use super::reference::Layout;
use super::routing::{Routing, RoutingSpec};
use super::shape::{Payload, Shape};
use super::{Ctx, EpImpl};
use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::driver::cli::Entry;
use crate::driver::{self, Benchmark, Output, RankCtx};
use crate::error::Result;
use crate::gin_transport;
use crate::harness::check::{Break, Seeds};
use crate::harness::{self, watchdog, LoopParams};
use crate::nccl::Comm;
use crate::report::table;
use crate::results::{Env, Placement, Row, Status};

/// What every EP row says of its operation (ep_perf's and interference_perf's): a combine's own
/// dtype is always BF16, and `dispatch_dtype` names the payload of the dispatch it followed.
pub fn row_base(name: &str, mode: Mode, phase: Phase, payload: Payload, tokens: usize, s: &Shape, cycle: u32) -> Row {
    Row {
        impl_name: name.into(),
        count: (tokens * s.hidden) as u64,
        dtype: if phase == Phase::Dispatch { payload.as_str() } else { Payload::Bf16.as_str() }.into(),
        placement: Placement::OutOfPlace,
        mode: Some(mode),
        phase: Some(phase),
        dispatch_dtype: Some(payload.as_str().into()),
        tokens: Some(tokens as u64),
        hidden: Some(s.hidden as u64),
        topk: Some(s.topk as u64),
        experts: Some(s.experts as u64),
        cycle,
        ..Default::default()
    }
}

impl Benchmark for Config {
    const PROG: &'static str = "ep_perf";
    const KIND: crate::results::Kind = crate::results::Kind::Ep;
    driver::command_line!(super::cli::Args);

    fn list_impls() -> String {
        let mut list: String = super::registry::IMPLS.iter().map(|i| format!("{:<12} {}\n", i.name, i.about)).collect();
        list += "\n";
        for (name, s) in super::shape::PRESETS {
            list += &format!("preset {name:<14} hidden {:>5}  top-{:<2} {:>4} experts\n", s.hidden, s.topk, s.experts);
        }
        list
    }

    fn common(&self) -> &driver::Common {
        &self.common
    }

    fn config_json(&self) -> serde_json::Value {
        config_json(self)
    }

    fn real_gin_impls(&self) -> Vec<&'static str> {
        driver::cli::real_gin_names(&self.impls)
    }

    fn describe(&self, env: &Env) -> String {
        let (c, s) = (&self.common, &self.shape);
        format!(
            "# layer {}: hidden {} top-{} {} experts ({} per rank); routing {} seed {} masked {}\n# warmup iters: {} iters: {} validation: {} graph: {} device CTAs (SMs): {}\n",
            self.preset,
            s.hidden,
            s.topk,
            s.experts,
            s.experts / env.ranks.max(1),
            self.gen.name(),
            self.seed,
            self.masked,
            c.warmup,
            c.iters,
            c.check,
            c.graph_launches,
            self.ctas
        )
    }

    fn check_gpu(&self, gpu: &Gpu) -> Result<()> {
        super::check_ctas(gpu, self.ctas)
    }

    fn sweep(&self, ctx: &RankCtx, out: &mut Output) -> Result<()> {
        self.shape.validate(ctx.boot.size())?;
        if !self.real_gin_impls().is_empty() {
            crate::nccl::compat::enable_gin_early(ctx.comm, &ctx.env.gin)?;
        }
        let mut st = State {
            boot: ctx.boot,
            gpu: ctx.gpu,
            comm: ctx.comm,
            cfg: self,
            checks: Checks::new(ctx.gpu)?,
            seeds: Default::default(),
        };
        for cycle in 0..self.common.cycles {
            out.cycle = cycle;
            st.sweep(ctx.env, out)?;
        }
        Ok(())
    }
}

struct State<'a> {
    boot: &'a dyn Bootstrap,
    gpu: &'a Gpu,
    comm: &'a Comm,
    cfg: &'a Config,
    checks: Checks,
    /// Every checked run gets new values, so a row left over from an earlier run never passes.
    seeds: harness::check::Seeds,
}

/// What a pair of EP rows (dispatch, combine) is about.
#[derive(Clone, Copy)]
struct At<'a> {
    name: &'a str,
    mode: Mode,
    payload: Payload,
    tokens: usize,
    cycle: u32,
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
    fn sweep(&mut self, env: &Env, out: &mut Output) -> Result<()> {
        let cfg = self.cfg;
        let n = self.boot.size();
        let spec = cfg.routing(n);
        let hosts = self.boot.allgather(crate::bootstrap::hostname().as_bytes());
        let same_host: Vec<bool> = hosts.iter().map(|h| *h == hosts[self.boot.rank()]).collect();
        for &mode in &cfg.modes {
            let tokens = cfg.tokens_for(mode);
            let max_tokens = *tokens.iter().max().unwrap();
            for &payload in &cfg.payloads {
                for info in &cfg.impls {
                    let name = info.name;
                    let c = Ctx {
                        boot: self.boot,
                        gpu: self.gpu,
                        comm: self.comm,
                        shape: cfg.shape,
                        payload,
                        mode,
                        ctas: cfg.ctas,
                        max_tokens,
                        emulate_nodes: cfg.common.emulate_nodes,
                        gin_request: cfg.gin,
                    };
                    let imp = (info.make)(&c, &env.gin)?;
                    if info.real_gin() {
                        let granted = imp.as_ref().ok().and_then(|i| i.gin_contexts());
                        gin_transport::record_granted(self.boot, &mut out.run.config, GIN, name, granted);
                    }
                    let skip = match &imp {
                        Err(why) => Some(why.clone()),
                        Ok(imp) if cfg.common.graph_launches > 0 => {
                            imp.not_capturable().map(|w| format!("not CUDA-graph capturable: {w}"))
                        }
                        Ok(_) => None,
                    };
                    let sms = imp.as_ref().ok().and_then(|i| i.sms());
                    let sms_text = sms.map(|s| format!("{s} SMs")).unwrap_or_else(|| "NCCL kernels".into());
                    out.section(
                        &format!(
                            "impl {name}, mode {}, dispatch {} / combine bf16, {sms_text}",
                            mode.as_str(),
                            payload.as_str()
                        ),
                        &table::ep_header(),
                    );
                    for &t in &tokens {
                        let at = At { name, mode, payload, tokens: t, cycle: out.cycle };
                        let rows = match (&skip, &imp) {
                            (Some(why), _) => [Phase::Dispatch, Phase::Combine].map(|p| self.skipped(at, p, why)),
                            (None, Ok(imp)) => {
                                let text = format!("{name} {} {} {t} tokens", mode.as_str(), payload.as_str());
                                out.measuring(
                                    &text,
                                    &[],
                                    [Phase::Dispatch, Phase::Combine].map(|p| self.base(at, p)).into(),
                                );
                                let [d, cm] = self.measure(&c, imp.as_ref(), &spec, t, &same_host)?;
                                [self.row(at, Phase::Dispatch, sms, &d), self.row(at, Phase::Combine, sms, &cm)]
                            }
                            (None, Err(_)) => unreachable!("a skipped impl has a reason"),
                        };
                        out.rows(table::ep_line(&rows[0], &rows[1]), rows.into());
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
        spec: &RoutingSpec,
        tokens: usize,
        same_host: &[bool],
    ) -> Result<[Measured; 2]> {
        let (gpu, cfg, me) = (self.gpu, self.cfg, self.boot.rank());
        let mut ph = Phases::prepare(c, imp, spec, &self.checks, tokens)?;
        let params = LoopParams {
            iters: cfg.common.iters,
            warmup: cfg.common.warmup,
            ops_per_iter: 1,
            blocking: false,
            graph_launches: cfg.common.graph_launches,
            capture: cfg.profile_tokens == Some(tokens),
        };
        let td = harness::time_loop(gpu, self.boot, &params, &ph.label(Phase::Dispatch), &mut |_| ph.dispatch())?;
        let tc = harness::time_loop(gpu, self.boot, &params, &ph.label(Phase::Combine), &mut |_| ph.combine())?;
        self.comm.async_error()?;

        let (mut wd, mut wc) = (None, None);
        for _ in 0..cfg.common.check {
            let (bad, badc) = ph.check_once(&self.checks, self.seeds.new_seed(), cfg.common.graph_launches > 0)?;
            *wd.get_or_insert(0) += bad;
            *wc.get_or_insert(0) += badc;
            // No early stop: a rank that stopped at its wrong values would leave its peers
            // waiting for it in the next checked dispatch.
        }

        let tr = ph.layout().traffic(me);
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

    fn base(&self, at: At, phase: Phase) -> Row {
        let At { name, mode, payload, tokens, cycle } = at;
        Row {
            bw_definition: Some(metrics::bw_definition(mode).into()),
            ..row_base(name, mode, phase, payload, tokens, &self.cfg.shape, cycle)
        }
    }

    fn skipped(&self, at: At, phase: Phase, why: &str) -> Row {
        Row { status: Status::Skipped, reason: Some(why.into()), ..self.base(at, phase) }
    }

    /// Reduce one phase over ranks (every rank calls this; rank 0 keeps the row).
    fn row(&self, at: At, phase: Phase, sms: Option<u32>, m: &Measured) -> Row {
        let extras = [m.logical_bytes as f64, m.sent_bytes as f64, m.wire.nvl as f64, m.wire.net as f64];
        let red = driver::output::reduce(self.boot, self.cfg.common.average, &m.timing, m.wrong, &extras);
        // The bytes and the time of one rank (per -a; with -a 1 the means): `size_bytes` / time
        // is `algbw` as on every row, DeepEP's logical bytes / time is `bw`.
        let gbps = |bytes: f64| bytes / red.time_us / 1e3;
        let sent = red.timed_extras[1].round() as u64;
        Row {
            size_bytes: sent,
            time_us: Some(red.time_us),
            p50_us: red.p50_us,
            p99_us: red.p99_us,
            algbw_gbps: Some(gbps(sent as f64)),
            bw_gbps: Some(gbps(red.timed_extras[0])),
            wrong: red.wrong,
            status: Status::Ok,
            wire_bytes: Some(metrics::Wire { nvl: red.extras[2].round() as u64, net: red.extras[3].round() as u64 }),
            sms,
            ..self.base(at, phase)
        }
    }
}

/// One EP measurement's operations on one rank: the inputs, the timed dispatch and combine, and
/// the checked run. `ep_perf` and `interference_perf`'s foreground both go through it, so they
/// time the same code.
pub struct Phases<'a> {
    pub c: &'a Ctx<'a>,
    pub imp: &'a dyn EpImpl,
    spec: RoutingSpec,
    /// Every rank's routing of the timed runs.
    routing: Vec<Routing>,
    pub inp: Inputs,
    /// A check's decoy dispatches read these (`check_once`), made by the first check that runs
    /// them, so runs without checks (`-c 0`) neither allocate nor fill them.
    decoy: Option<Inputs>,
    quantize: Quantize,
    all_sms: u32,
}

/// Where the FP8 rows a dispatch sends are made.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Quantize {
    /// Nowhere apart: BF16, or an LL dispatch kernel that quantizes as it sends.
    InDispatch,
    /// LL: the quantize kernel, launched first inside the timed dispatch (DeepEP's LL kernels
    /// quantize inside theirs).
    Timed,
    /// HT: before timing (HT takes FP8 input).
    Before,
}

impl<'a> Phases<'a> {
    /// The inputs for `tokens` per rank routed by `spec`, and one dispatch that establishes the
    /// layout the expert output and the timed combines use.
    pub fn prepare(
        c: &'a Ctx<'a>,
        imp: &'a dyn EpImpl,
        spec: &RoutingSpec,
        checks: &Checks,
        tokens: usize,
    ) -> Result<Phases<'a>> {
        let gpu = c.gpu;
        let routing = spec.every_rank(tokens, c.shape.experts, c.shape.topk);
        let inp = Inputs::new(gpu, c.args(tokens))?;
        let quantize = match (c.payload, c.mode) {
            (Payload::Bf16, _) => Quantize::InDispatch,
            (Payload::Fp8, Mode::Ll) if imp.quantizes_ll() => Quantize::InDispatch,
            (Payload::Fp8, Mode::Ll) => Quantize::Timed,
            (Payload::Fp8, Mode::Ht) => Quantize::Before,
        };
        let mut ph =
            Phases { c, imp, spec: spec.clone(), routing, inp, decoy: None, quantize, all_sms: gpu.sm_count()? };
        ph.establish(checks)?;
        Ok(ph)
    }

    /// Every rank's routing of the timed runs, and where it sends each selection.
    pub fn layout(&self) -> Layout<'_> {
        self.layout_of(&self.routing)
    }

    fn layout_of<'r>(&self, routing: &'r [Routing]) -> Layout<'r> {
        Layout { routing, local_experts: self.c.shape.local_experts(routing.len()) }
    }

    /// The timed runs' routing, token count and values (seed 0) in the inputs, one dispatch of
    /// them, and the expert output the timed combines reduce. Returns after the GPU finished.
    fn establish(&mut self, checks: &Checks) -> Result<()> {
        let me = self.c.boot.rank();
        self.inp.args.tokens = self.routing[me].tokens as i32;
        let (c, gpu, inp) = (self.c, self.c.gpu, &self.inp);
        inp.route(gpu, &self.routing[me])?;
        inp.fill(gpu, 0)?;
        if self.quantize != Quantize::InDispatch {
            inp.quantize(gpu, self.all_sms)?;
        }
        self.imp.dispatch(c, inp)?;
        let rec = self.imp.received(c, inp, &self.layout())?;
        checks.expert(gpu, &inp.args, &rec, 0)?;
        gpu.stream.synchronize()?;
        Ok(())
    }

    /// The NVTX label of a phase's loops.
    pub fn label(&self, p: Phase) -> String {
        let c = self.c;
        format!("{} {} {} {}", c.mode, p, c.payload.as_str(), self.inp.args.tokens)
    }

    /// The timed dispatch (with LL FP8, its quantization).
    pub fn dispatch(&self) -> Result<()> {
        self.dispatch_of(&self.inp)
    }

    fn dispatch_of(&self, inp: &Inputs) -> Result<()> {
        if self.quantize == Quantize::Timed {
            inp.quantize(self.c.gpu, self.c.ctas)?;
        }
        self.imp.dispatch(self.c, inp)
    }

    /// Values for `seed` in `inp`, and where HT takes FP8 input, their quantization.
    fn values(&self, inp: &Inputs, seed: u32) -> Result<()> {
        inp.fill(self.c.gpu, seed)?;
        if self.quantize == Quantize::Before {
            inp.quantize(self.c.gpu, self.all_sms)?;
        }
        Ok(())
    }

    /// The timed combine, of the layout of the last dispatch.
    pub fn combine(&self) -> Result<()> {
        self.imp.combine(self.c, &self.inp)
    }

    /// One checked run: four rounds of a checked dispatch and combine (captured in a CUDA graph
    /// with `graph`), each with new values ([`Seeds::round`]) and a routing of its own
    /// (`RoutingSpec::for_check`, whose `tokens_of` gives each round its token counts), so
    /// neither a row nor any layout output left over from an earlier run passes; then the timed
    /// routing back.
    ///
    /// Each checked launch follows decoy launches of the same kernel with no host sync between,
    /// as the timed loop runs them, so its start races the last one's tail on the other ranks.
    /// Decoy dispatches read inputs of their own, another routing of the same token counts
    /// with other values (`RoutingSpec::for_decoy`), so the checked dispatch follows them with
    /// nothing between, and a row or layout output only a decoy wrote reads wrong. Decoy
    /// combines reduce the previous expert output; the expert pass between them and the
    /// checked combine changes what it must read. The device kernels alternate between two
    /// halves of their buffers and signals from one launch to the next, so the decoys per round
    /// ([`ROUND_DECOYS`]: 1, 2, 2, 2) put the checked launches on alternate halves: the two
    /// full rounds (1 and 2) check both halves full. Wrong (dispatch, combine) on this rank;
    /// returns after the GPU finished.
    pub fn check_once(&mut self, checks: &Checks, seed: u32, graph: bool) -> Result<(u64, u64)> {
        let (c, gpu, me) = (self.c, self.c.gpu, self.c.boot.rank());
        let (mut bad, mut badc) = (0, 0);
        let run = checks.brk != Break::NoOp;
        if run && self.decoy.is_none() {
            self.decoy = Some(Inputs::new(gpu, self.inp.args)?);
        }
        for (round, &decoys) in ROUND_DECOYS.iter().enumerate() {
            let seed = Seeds::round(seed, round);
            let spec = self.spec.for_check(seed);
            let routing = spec.every_rank(self.routing[me].tokens, c.shape.experts, c.shape.topk);
            let tokens = routing[me].tokens;
            for inp in std::iter::once(&mut self.inp).chain(&mut self.decoy) {
                inp.args.tokens = tokens as i32;
            }
            let inp = &self.inp;
            let layout = self.layout_of(&routing);
            inp.route(gpu, &routing[me])?;
            self.values(inp, seed)?;
            // Made above where the checked operations run: none under no-op.
            if let Some(decoy) = &self.decoy {
                decoy.route(gpu, &spec.for_decoy().generate(me, tokens, c.shape.experts, c.shape.topk))?;
                self.values(decoy, !seed)?;
                harness::run_once(gpu, graph, &mut || {
                    (0..decoys).try_for_each(|_| self.dispatch_of(decoy))?;
                    self.dispatch_of(inp)
                })?;
            }
            let moved: Vec<Routing>;
            let reference = if checks.brk == Break::Layout {
                moved = routing.iter().map(|r| r.with_first_moved(c.shape.experts)).collect();
                self.layout_of(&moved)
            } else {
                self.layout_of(&routing)
            };
            bad += self.imp.check_layout(c, inp, &reference)?;
            let rec = self.imp.received(c, inp, &layout)?;
            bad += checks.rows(gpu, &inp.args, &rec, seed)?;
            if run {
                inp.out.poison(gpu)?;
                harness::run_once(gpu, graph, &mut || {
                    (0..decoys).try_for_each(|_| self.combine())?;
                    checks.expert(gpu, &inp.args, &rec, seed)?;
                    self.combine()
                })?;
            }
            badc += checks.combined(gpu, inp, seed)?;
        }
        self.establish(checks)?;
        Ok((bad, badc))
    }
}

/// Decoy launches before each round's checked dispatch and combine. A round of d decoys takes
/// d + 1 launches, so after round 0's checked launch on one half, each next round's lands on the
/// other.
const ROUND_DECOYS: [usize; 4] = [1, 2, 2, 2];

/// Where the JSON's config holds the GIN request, and what NCCL granted.
const GIN: &str = "/gin";

fn config_json(c: &Config) -> serde_json::Value {
    serde_json::json!({
        "modes": c.modes.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "preset": c.preset,
        "hidden": c.shape.hidden,
        "topk": c.shape.topk,
        "experts": c.shape.experts,
        "tokens": c.tokens.iter().map(|(m, t)| (m.as_str(), t)).collect::<std::collections::BTreeMap<_, _>>(),
        "dispatch_dtypes": c.payloads.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "routing": c.gen.name(),
        "masked": c.masked,
        "seed": c.seed,
        "impls": c.impls.iter().map(|i| i.name).collect::<Vec<_>>(),
        "cudagraph": c.common.graph_launches,
        "device_cta_count": c.ctas,
        "profile_tokens": c.profile_tokens,
        "gin": c.gin,
        "order": c.impls.iter().map(|i| (i.name, i.order)).collect::<std::collections::BTreeMap<_, _>>(),
        "fp8_quantization": "LL: inside the timed dispatch (nvl: in its dispatch kernel; the others: a quantize kernel launched first); HT: before timing (HT takes FP8 input)",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gin_request_and_grant_land_in_config() {
        let argv = ["ep_perf", "-D", "gin", "--gin-contexts", "2"];
        let args = super::super::cli::parse(argv.map(String::from).to_vec()).unwrap();
        let mut json = config_json(&Config::from_args(&args, String::new()).unwrap());
        assert_eq!(json["gin"], serde_json::json!({"contexts": 2}));
        gin_transport::record_granted(&crate::bootstrap::threads::group(1)[0], &mut json, GIN, "gin", Some(4));
        assert_eq!(json["gin"], serde_json::json!({"contexts": 2, "granted": {"gin": 4}}));
    }
}
