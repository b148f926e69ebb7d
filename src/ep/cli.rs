//! `ep_perf` command line: nccl-tests flags where they mean the same, and the layer's own.
use super::metrics::Mode;
use super::registry::{self, EpImplInfo};
use super::routing::{Generator, RoutingSpec};
use super::shape::{self, Payload, Shape};
use crate::driver::cli::{help_footer, list, Asked, CommonArgs, GinArgs, VERSION};
use crate::driver::Common;
use crate::error::{Error, Result};
use crate::gin_transport::GinRequest;
use crate::harness::sizes;
use clap::Parser;

const AFTER_HELP: &str = "\
Tokens per rank (-b/-e/-i/-f) default to 128 in LL mode and 4096 in HT mode. Routing is seeded
and the same for every impl; every rank can rebuild every other rank's routing, so the check
needs no communication.

Modes: ll (fixed capacity per (expert, source), no host sync, CUDA-graph capturable) and ht
(count exchange, then rows once per destination rank). Dispatch sends BF16 or FP8 e4m3 with one
f32 scale per 128 channels (-d); combine is BF16 (fp32 accumulation). In HT mode FP8 input is
quantized before timing (as DeepEP's HT takes FP8 input); in LL mode quantization is timed.

Impls (--list-impls): gin and hybrid need GIN (their rows are skipped with the reason where NCCL
has none); gin-emu and hybrid-emu run the same kernels on --emulate-nodes N virtual nodes of one
host, with GIN emulated over NVLink between them.

Bandwidth is DeepEP's logical definition (named in the JSON as bw_definition); wire_bytes are the
bytes one rank really sends to other ranks, by link class.

--profile-size takes tokens per rank (one of the sweep's); -V defaults to 24 CTAs (= SMs).";

#[derive(Parser, Debug, Clone)]
#[command(name = "ep_perf", version = VERSION, disable_version_flag = true, about = "MoE expert-parallel dispatch / combine latency and bandwidth", after_help = help_footer(AFTER_HELP), args_override_self = true, allow_negative_numbers = true)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Mode(s): ll, ht, or both comma-separated
    #[arg(long = "mode", default_value = "ll,ht")]
    pub mode: String,
    /// Layer preset: deepseek-v3, qwen3-30b-a3b, mixtral
    #[arg(long = "preset", default_value = "deepseek-v3")]
    pub preset: String,
    /// Hidden size (overrides the preset; a multiple of 128, at most 65536)
    #[arg(long = "hidden")]
    pub hidden: Option<usize>,
    /// Experts per token (overrides the preset; 1..=15)
    #[arg(long = "topk")]
    pub topk: Option<usize>,
    /// Experts in total (overrides the preset; at most 16384)
    #[arg(long = "experts")]
    pub experts: Option<usize>,
    /// Minimum tokens per rank (default: 128 LL, 4096 HT; a K suffix is 1024 tokens)
    #[arg(short = 'b', long = "mintokens")]
    pub min_tokens: Option<String>,
    /// Maximum tokens per rank (default: -b; given alone, -b defaults to the smaller of it and
    /// the mode's default)
    #[arg(short = 'e', long = "maxtokens")]
    pub max_tokens: Option<String>,
    /// Additive token step, used when -f is 1
    #[arg(short = 'i', long = "steptokens", default_value = "1")]
    pub step: String,
    /// Multiplicative token step (1 = use -i)
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub stepfactor: u64,
    /// Dispatch payload(s): bf16, fp8, or both comma-separated
    #[arg(short = 'd', long = "datatype", default_value = "bf16")]
    pub datatype: String,
    /// Routing: uniform, hot:RATIO, zipf:S, group-limited:GROUPS:KEEP
    #[arg(long = "routing", default_value = "uniform")]
    pub routing: String,
    /// Distinct top-k entries per rank set to -1 (dropped; fewer than tokens × top-k)
    #[arg(long = "masked", default_value_t = 0)]
    pub masked: usize,
    /// Routing seed
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// Implementation(s), comma-separated, or `all` (see --list-impls)
    #[arg(short = 'D', long = "impl", default_value = "host,nvl")]
    pub implementation: String,
    #[command(flatten)]
    pub gin: GinArgs,
}

/// Default SMs for device kernels: the 24-SM budget the EP figures are quoted at (as DeepEP's).
pub const DEFAULT_CTAS: u32 = 24;

#[derive(Debug, Clone)]
pub struct Config {
    pub common: Common,
    pub modes: Vec<Mode>,
    pub preset: String,
    pub shape: Shape,
    /// Tokens per rank swept in each mode of `modes`.
    pub tokens: Vec<(Mode, Vec<usize>)>,
    pub payloads: Vec<Payload>,
    pub gen: Generator,
    pub masked: usize,
    pub seed: u64,
    pub impls: Vec<&'static EpImplInfo>,
    /// CTAs (= SMs) of the device kernels: `-V`, or [`DEFAULT_CTAS`].
    pub ctas: u32,
    /// `--profile-size`: tokens per rank whose timed loops are captured.
    pub profile_tokens: Option<usize>,
    /// `--gin-*`: what gin and hybrid ask of their device communicators.
    pub gin: GinRequest,
}

impl Config {
    pub fn from_args(a: &Args, command: String) -> Result<Config> {
        let modes = list(&a.mode, "mode", Mode::parse)?;
        let shape = shape::resolve(&a.preset, a.hidden, a.topk, a.experts)?;
        let step = sizes::parse_tokens(&a.step)?;
        let min = a.min_tokens.as_deref().map(sizes::parse_tokens).transpose()?;
        let max = a.max_tokens.as_deref().map(sizes::parse_tokens).transpose()?;
        for t in min.into_iter().chain(max) {
            shape::check_tokens(t, "e.g. -b 1 -e 256")?;
        }
        // As nccl-tests' -b / -e: an absent -b is the mode's default (or -e, where that is
        // smaller), an absent -e is -b. The step is checked even for one point: `-f 0` never runs.
        let tokens = modes
            .iter()
            .map(|&m| {
                let default = m.default_tokens() as u64;
                let b = min.unwrap_or_else(|| max.map_or(default, |e| e.min(default)));
                let sweep = sizes::sweep(b, max.unwrap_or(b), a.stepfactor, step, "-i 1")?;
                Ok((m, sweep.into_iter().map(|t| t as usize).collect()))
            })
            .collect::<Result<Vec<_>>>()?;
        let payloads = list(&a.datatype, "datatype", Payload::parse)?;
        let gen = Generator::parse(&a.routing)?;
        gen.validate(shape.experts, shape.topk)?;
        let impls = registry::resolve(&a.implementation)?;
        let asked = Asked::new(&a.implementation, &impls);
        let common = Common::from_args(&a.common, asked, command)?;
        shape.validate(common.ranks.unwrap_or(0))?;
        let gin = a.gin.request(asked.real_gin)?;
        let mut cfg = Config {
            ctas: if common.ctas == 0 { DEFAULT_CTAS } else { common.ctas },
            common,
            modes,
            preset: a.preset.clone(),
            shape,
            tokens,
            payloads,
            gen,
            masked: a.masked,
            seed: a.seed,
            impls,
            profile_tokens: None,
            gin,
        };
        let swept: Vec<usize> = cfg.modes.iter().flat_map(|&m| cfg.tokens_for(m)).collect();
        let fewest = swept.iter().copied().min().unwrap_or(1);
        if a.masked >= fewest * shape.topk {
            return Err(Error::usage(
                format!(
                    "--masked {} leaves none of the {} top-k entries of {fewest} tokens per rank",
                    a.masked,
                    fewest * shape.topk
                ),
                "mask fewer entries than tokens × top-k",
            ));
        }
        if let Some(p) = a.common.profile_size.as_deref() {
            let t = sizes::parse_tokens(p)? as usize;
            if !swept.contains(&t) {
                return Err(Error::usage(
                    format!("--profile-size {t} is not one of the sweep's tokens per rank"),
                    "give tokens the -b/-e/-f sweep visits",
                ));
            }
            cfg.profile_tokens = Some(t);
        }
        Ok(cfg)
    }

    /// Tokens per rank swept in `mode`.
    pub fn tokens_for(&self, mode: Mode) -> Vec<usize> {
        self.tokens.iter().find(|(m, _)| *m == mode).map(|(_, t)| t.clone()).unwrap_or_default()
    }

    pub fn routing(&self, ranks: usize) -> RoutingSpec {
        RoutingSpec { gen: self.gen.clone(), seed: self.seed, masked: self.masked, ranks, check: None }
    }
}

/// Parse argv as the program does (`driver::program`); for tests.
#[cfg(test)]
pub fn parse(argv: Vec<String>) -> Result<Args> {
    crate::error::parse_args(<Config as crate::driver::Benchmark>::PROG, argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Exit;

    fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["ep_perf".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        Config::from_args(&parse(v)?, args.join(" "))
    }

    #[test]
    fn defaults_follow_the_reference_benchmarks() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.shape, Shape { hidden: 7168, topk: 8, experts: 256 });
        assert_eq!(c.modes, vec![Mode::Ll, Mode::Ht]);
        assert_eq!(c.tokens_for(Mode::Ll), vec![128]);
        assert_eq!(c.tokens_for(Mode::Ht), vec![4096]);
        assert!(AFTER_HELP.contains("default to 128 in LL mode and 4096 in HT mode"), "--help tells the defaults");
        assert_eq!(c.payloads, vec![Payload::Bf16]);
        assert_eq!(c.impls.iter().map(|i| i.name).collect::<Vec<_>>(), vec!["host", "nvl"]);
        assert_eq!(c.ctas, 24);
    }

    #[test]
    fn overrides_and_sweeps() {
        let c = cfg(&["--preset", "mixtral", "--topk", "1", "-b", "1", "-e", "256", "-d", "bf16,fp8", "-D", "all"])
            .unwrap();
        assert_eq!(c.shape, Shape { hidden: 4096, topk: 1, experts: 8 });
        assert_eq!(c.tokens_for(Mode::Ht), vec![1, 2, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(c.payloads, vec![Payload::Bf16, Payload::Fp8]);
        assert_eq!(c.impls.len(), registry::IMPLS.len());
        // As nccl-tests: -e alone sweeps from -b's default (or from -e, where that is smaller).
        let c = cfg(&["-e", "512"]).unwrap();
        assert_eq!((c.tokens_for(Mode::Ll), c.tokens_for(Mode::Ht)), (vec![128, 256, 512], vec![512]));
        let c = cfg(&["-b", "1024"]).unwrap();
        assert_eq!((c.tokens_for(Mode::Ll), c.tokens_for(Mode::Ht)), (vec![1024], vec![1024]));
        assert!(cfg(&["--mode", "ll", "-e", "1024", "--profile-size", "256"]).is_ok(), "256 is swept");
        assert_eq!(cfg(&["-b", "64", "-e", "32"]).unwrap_err().msg, "-b 64 is larger than -e 32");
    }

    #[test]
    fn masked_may_leave_a_single_top_k_entry() {
        // LL's 128 tokens × top-k 8 = 1024 entries: masking 1023 leaves one (1024 is refused below).
        assert_eq!(cfg(&["--masked", "1023", "--mode", "ll"]).unwrap().masked, 1023);
        // The fewest tokens of the sweep bound it: 4 tokens × top-k 2 = 8 entries.
        let c = cfg(&["--preset", "mixtral", "-b", "4", "-e", "16", "--masked", "7"]).unwrap();
        assert_eq!((c.masked, c.tokens_for(Mode::Ht)), (7, vec![4, 8, 16]));
        let e = cfg(&["--preset", "mixtral", "-b", "4", "-e", "16", "--masked", "8"]).unwrap_err();
        assert!(e.to_string().contains("--masked 8 leaves none of the 8 top-k entries of 4 tokens"), "{e}");
    }

    #[test]
    fn gin_flags_reach_the_gin_impls() {
        assert_eq!(cfg(&[]).unwrap().gin, GinRequest::default());
        let c = cfg(&["-D", "nvl,hybrid", "--gin-contexts", "1"]).unwrap();
        assert_eq!(c.gin, GinRequest { contexts: Some(1), gin_type: None });
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for (args, needle) in [
            (vec!["--mode", "fast"], "unknown mode"),
            (vec!["--preset", "gpt"], "unknown preset"),
            (vec!["--hidden", "100"], "multiple of 128"),
            (vec!["--topk", "0"], "--topk 0"),
            (vec!["-b", "0"], "tokens per rank"),
            (vec!["-b", "70000"], "tokens per rank"),
            (vec!["-b", "64", "-e", "32"], "-b 64 is larger than -e 32"),
            (vec!["-d", "fp4"], "unknown dispatch dtype"),
            (vec!["--routing", "hot"], "bad routing"),
            (vec!["--routing", "group-limited:7:1"], "does not fit"),
            (vec!["-D", "deepep"], "unknown implementation"),
            (vec!["-a", "9"], "9 is not in 0..=3"),
            (vec!["-n", "0"], "--iters"),
            (vec!["-n", "1000001"], "1..=1000000"),
            (vec!["-N", "4294967295"], "--run_cycles"),
            (vec!["-G", "2000000"], "--cudagraph"),
            (vec!["--mode", ""], "empty mode"),
            (vec!["-D", "gin-emu"], "--emulate-nodes"),
            (vec!["-D", "hybrid-emu", "--emulate-nodes", "0"], "--emulate-nodes 0"),
            // Checks that need only the command line come before any GPU is touched.
            (vec!["--experts", "7", "--topk", "2", "-g", "4"], "does not divide over 4 ranks"),
            (vec!["-D", "gin-emu", "--emulate-nodes", "3", "-g", "4"], "--emulate-nodes 3 does not divide"),
            (vec!["-f", "0"], "step factor -f is 0"),
            (vec!["-b", "1", "-e", "8", "-f", "1", "-i", "0"], "the sweep never advances"),
            (vec!["--masked", "2000", "--mode", "ll"], "--masked 2000 leaves none of the 1024"),
            (vec!["--masked", "1024", "--mode", "ll"], "--masked 1024 leaves none of the 1024"),
            (vec!["-n", "-1"], "--iters"),
            (vec!["-J", "/nonexistent/dir/x.json"], "does not exist"),
            (vec!["--profile-size", "77"], "not one of the sweep"),
            (vec!["--gin-contexts", "4"], "--gin-contexts applies to the impls on NCCL's GIN"),
            (vec!["-D", "gin", "--gin-contexts", "2000"], "'--gin-contexts <N>': 2000 is not in 1..=1024"),
        ] {
            let e = cfg(&args).unwrap_err();
            assert_eq!(e.exit, Exit::Usage, "{args:?}: {e}");
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
            assert!(!e.to_string().contains('\n'), "{args:?}: {e}");
        }
    }
}
