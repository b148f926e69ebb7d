//! `ep_perf` command line: nccl-tests flags where they mean the same, and the layer's own.
use super::metrics::Mode;
use super::routing::{Generator, RoutingSpec};
use super::shape::{self, Payload, Shape};
use crate::error::{Error, Result};
use crate::harness::sizes;
use clap::Parser;
use std::path::PathBuf;

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

Exit codes: 0 ok, 1 internal error, 2 CUDA error, 3 NCCL error, 4 timeout, 5 not implemented,
6 bad usage, 7 wrong data, 8 environment (no GPU / driver, no matching NCCL).";

#[derive(Parser, Debug, Clone)]
#[command(name = "ep_perf", version, about = "MoE expert-parallel dispatch / combine latency and bandwidth", after_help = AFTER_HELP, args_override_self = true)]
pub struct Args {
    /// Host threads per process (each drives -g GPUs)
    #[arg(short = 't', long = "nthreads", default_value_t = 1)]
    pub nthreads: usize,
    /// GPUs per thread
    #[arg(short = 'g', long = "ngpus", default_value_t = 1)]
    pub ngpus: usize,
    /// Mode(s): ll, ht, or both comma-separated
    #[arg(long = "mode", default_value = "ll,ht")]
    pub mode: String,
    /// Layer preset: deepseek-v3, qwen3-30b-a3b, mixtral
    #[arg(long = "preset", default_value = "deepseek-v3")]
    pub preset: String,
    /// Hidden size (overrides the preset)
    #[arg(long = "hidden")]
    pub hidden: Option<usize>,
    /// Experts per token (overrides the preset)
    #[arg(long = "topk")]
    pub topk: Option<usize>,
    /// Experts in total (overrides the preset)
    #[arg(long = "experts")]
    pub experts: Option<usize>,
    /// Minimum tokens per rank (default: 128 LL, 4096 HT)
    #[arg(short = 'b', long = "mintokens")]
    pub min_tokens: Option<String>,
    /// Maximum tokens per rank (default: -b)
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
    /// Top-k entries per rank set to -1 (dropped)
    #[arg(long = "masked", default_value_t = 0)]
    pub masked: usize,
    /// Routing seed
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// Implementation(s), comma-separated, or `all` (see --list-impls)
    #[arg(short = 'D', long = "impl", default_value = "host,nvl")]
    pub implementation: String,
    /// Split this host's ranks into N virtual nodes for gin-emu / hybrid-emu (emulated GIN
    /// between them)
    #[arg(long = "emulate-nodes", value_name = "N")]
    pub emulate_nodes: Option<usize>,
    /// Timed iterations per phase
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Warm-up iterations per phase (untimed)
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5)]
    pub warmup_iters: u32,
    /// Checked runs per row: 0 disables the correctness check
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u32,
    /// Capture the timed loop in a CUDA graph and launch it N times (0 = off)
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0)]
    pub cudagraph: u32,
    /// Time reduced over ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u32,
    /// Seconds a step may take before the run is stopped (0 = off)
    #[arg(short = 'T', long = "timeout", default_value_t = 0)]
    pub timeout: u64,
    /// CTAs (= SMs) for device kernels (0 = 24)
    #[arg(short = 'V', long = "device_cta_count", default_value_t = 0)]
    pub cta_count: u32,
    /// Write results as JSON (schema ginbench/1) to FILE (`-` for stdout)
    #[arg(short = 'J', long = "output_file", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write result rows as CSV to FILE
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// List the implementations and presets, and exit
    #[arg(long = "list-impls")]
    pub list_impls: bool,
}

/// Default SMs for device kernels: the budget DESIGN §8 sets for EP.
pub const DEFAULT_CTAS: u32 = 24;

#[derive(Debug, Clone)]
pub struct Config {
    pub local_ranks: usize,
    pub modes: Vec<Mode>,
    pub preset: String,
    pub shape: Shape,
    /// Tokens per rank per mode; None: the mode's default.
    pub tokens: Option<Vec<usize>>,
    pub payloads: Vec<Payload>,
    pub gen: Generator,
    pub masked: usize,
    pub seed: u64,
    pub impls: Vec<&'static str>,
    /// `--emulate-nodes N`: virtual nodes for gin-emu / hybrid-emu.
    pub emulate_nodes: Option<usize>,
    pub iters: u32,
    pub warmup: u32,
    pub check: u32,
    pub graph_launches: u32,
    pub average: u32,
    pub timeout_s: u64,
    pub ctas: u32,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub command: String,
}

fn list<T>(text: &str, what: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let v: Vec<T> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse).collect::<Result<_>>()?;
    if v.is_empty() {
        return Err(Error::usage(format!("empty {what} list"), format!("give at least one {what}")));
    }
    Ok(v)
}

impl Config {
    pub fn from_args(a: &Args, command: String) -> Result<Config> {
        if a.nthreads == 0 || a.ngpus == 0 {
            return Err(Error::usage("-t and -g must be at least 1", "e.g. -t 1 -g 4"));
        }
        let modes = list(&a.mode, "mode", |s| match s {
            "ll" => Ok(Mode::Ll),
            "ht" => Ok(Mode::Ht),
            _ => Err(Error::usage(format!("unknown mode '{s}'"), "use ll, ht or ll,ht")),
        })?;
        let p = shape::preset(&a.preset)?;
        let shape = Shape {
            hidden: a.hidden.unwrap_or(p.hidden),
            topk: a.topk.unwrap_or(p.topk),
            experts: a.experts.unwrap_or(p.experts),
        };
        shape.validate(0)?;
        let tokens = match (&a.min_tokens, &a.max_tokens) {
            (None, None) => None,
            (min, max) => {
                let min = sizes::parse_size(min.as_deref().or(max.as_deref()).unwrap())?;
                let max = max.as_deref().map(sizes::parse_size).transpose()?.unwrap_or(min);
                if min == 0 || min.max(max) as usize > shape::MAX_TOKENS {
                    return Err(Error::usage(
                        format!("tokens per rank must be in 1..={}", shape::MAX_TOKENS),
                        "e.g. -b 1 -e 256",
                    ));
                }
                let step = sizes::parse_size(&a.step)?;
                let sweep = sizes::sweep(min, max, a.stepfactor, step)?;
                Some(sweep.into_iter().map(|t| t as usize).collect())
            }
        };
        let payloads = list(&a.datatype, "datatype", Payload::parse)?;
        let gen = Generator::parse(&a.routing)?;
        gen.validate(shape.experts, shape.topk)?;
        let impls: Vec<&'static str> =
            if a.implementation.trim() == "all" {
                super::IMPLS.iter().map(|(n, _)| *n).collect()
            } else {
                list(&a.implementation, "implementation", |s| {
                    super::IMPLS.iter().map(|(n, _)| *n).find(|n| *n == s).ok_or_else(|| {
                        Error::usage(format!("unknown implementation '{s}'"), "see ep_perf --list-impls")
                    })
                })?
            };
        let first_emu = impls.iter().copied().find(|n| n.ends_with("-emu"));
        crate::gin::check_emulate_nodes(a.emulate_nodes, a.implementation.trim() == "all", first_emu)?;
        if a.iters == 0 {
            return Err(Error::usage("-n must be at least 1", "e.g. -n 20"));
        }
        if a.average > 3 {
            return Err(Error::usage(format!("-a {} is not 0..3", a.average), "-a 0 rank 0, 1 average, 2 min, 3 max"));
        }
        if a.cta_count > 1024 {
            return Err(Error::usage(format!("-V {} is above 1024", a.cta_count), "use -V 1..1024 (0 = 24)"));
        }
        Ok(Config {
            local_ranks: a.nthreads * a.ngpus,
            modes,
            preset: a.preset.clone(),
            shape,
            tokens,
            payloads,
            gen,
            masked: a.masked,
            seed: a.seed,
            impls,
            emulate_nodes: a.emulate_nodes,
            iters: a.iters,
            warmup: a.warmup_iters,
            check: a.check,
            graph_launches: a.cudagraph,
            average: a.average,
            timeout_s: a.timeout,
            ctas: if a.cta_count == 0 { DEFAULT_CTAS } else { a.cta_count },
            json: a.json.clone(),
            csv: a.csv.clone(),
            command,
        })
    }

    /// Tokens per rank swept in `mode`.
    pub fn tokens_for(&self, mode: Mode) -> Vec<usize> {
        self.tokens.clone().unwrap_or_else(|| vec![if mode == Mode::Ll { 128 } else { 4096 }])
    }

    pub fn routing(&self, ranks: usize) -> RoutingSpec {
        RoutingSpec { gen: self.gen.clone(), seed: self.seed, masked: self.masked, ranks }
    }
}

/// Parse argv; help and version print and exit 0, errors print one line and exit 6.
pub fn parse(argv: Vec<String>) -> Result<Args> {
    crate::error::parse_args("ep_perf", argv)
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
        assert_eq!(c.payloads, vec![Payload::Bf16]);
        assert_eq!(c.impls, vec!["host", "nvl"]);
        assert_eq!(c.ctas, 24);
    }

    #[test]
    fn overrides_and_sweeps() {
        let c = cfg(&["--preset", "mixtral", "--topk", "1", "-b", "1", "-e", "256", "-d", "bf16,fp8", "-D", "all"])
            .unwrap();
        assert_eq!(c.shape, Shape { hidden: 4096, topk: 1, experts: 8 });
        assert_eq!(c.tokens_for(Mode::Ht), vec![1, 2, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(c.payloads, vec![Payload::Bf16, Payload::Fp8]);
        assert_eq!(c.impls.len(), super::super::IMPLS.len());
        assert_eq!(cfg(&["-e", "512"]).unwrap().tokens, Some(vec![512]));
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
            (vec!["-b", "64", "-e", "32"], "larger than maximum"),
            (vec!["-d", "fp4"], "unknown dispatch dtype"),
            (vec!["--routing", "hot"], "bad routing"),
            (vec!["--routing", "group-limited:7:1"], "does not fit"),
            (vec!["-D", "deepep"], "unknown implementation"),
            (vec!["-a", "9"], "-a 9"),
            (vec!["-n", "0"], "-n must"),
            (vec!["--mode", ""], "empty mode"),
            (vec!["-D", "gin-emu"], "--emulate-nodes"),
            (vec!["-D", "hybrid-emu", "--emulate-nodes", "0"], "--emulate-nodes 0"),
        ] {
            let e = cfg(&args).unwrap_err();
            assert_eq!(e.exit, Exit::Usage, "{args:?}: {e}");
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
            assert!(!e.to_string().contains('\n'), "{args:?}: {e}");
        }
    }
}
