//! `interference_perf` command line: the common flags, the foreground (an `alltoall_perf` or an
//! `ep_perf` configuration, resolved through their registries), the background (a collective
//! and an nccl-tests-style size sweep), the EP × DP layout and each communicator's isolation
//! knobs.
use super::background;
use super::layout::Layout;
use crate::alltoall::registry::{self as a2a, ImplInfo};
use crate::driver::cli::{gin_flags, help_footer, list, numbered, real_gin_names, Asked, CommonArgs, VERSION};
use crate::driver::Common;
use crate::dtype::Dtype;
use crate::ep::metrics::Mode;
use crate::ep::registry::{self as ep, EpImplInfo};
use crate::ep::shape::{self, Payload, Shape};
use crate::error::{Error, Result};
use crate::gin_transport::GinRequest;
use crate::harness::sizes::{self, MAX_BYTES};
use crate::nccl::config::CommConfig;
use crate::nccl::RegisterMode;
use clap::Parser;
use serde::Serialize;

const AFTER_HELP: &str = "\
Runs a foreground operation (--fg: an ep_perf or an alltoall_perf configuration) and a background
collective (--bg) each on its own communicator and stream, first alone, then together, and reports
for every (foreground, background size) pair both sides' time alone and together and the slowdown.
The background is looped so that it covers the whole timed foreground window; the measured overlap
is reported and a row whose overlap is incomplete says so. Both sides are checked while they
overlap. With --bg none the foreground runs alone through the same code as ep_perf / alltoall_perf.

Layout: ranks form EP groups of --ep consecutive ranks and DP groups of one rank per EP group
(Megatron's order): on 4 ranks, --ep 2 gives EP {0,1} {2,3} and DP {0,2} {1,3}. --dp equal to the
rank count puts DP over every rank (e.g. --ep 4 --dp 4: both communicators over the same ranks).
Both communicators are split from one over every rank (ncclCommSplit), each with its own
ncclConfig_t (--ep-* / --dp-* knobs; unset knobs keep NCCL's defaults and its NCCL_* variables).
--ep-gin-contexts / --ep-gin-type shape the device communicator of a foreground gin or hybrid
(per process instead: NCCL_GIN_NCONTEXTS on NCCL 2.28 - 2.29, NCCL_GIN_TYPE; see README).

-V sets the foreground device kernels' CTAs (= SMs; EP default 24); --dp-max-ctas bounds the CTAs of
NCCL's kernels for the background. An EP foreground's CTAs wait on each other, so -V and the most
the background may hold (NCCL_MAX_CTAS, else --dp-max-ctas, else 64) must fit the GPU's SMs.
--profile-size takes a background size: its together window is wrapped in cuProfilerStart / Stop
(nsys profile --capture-range=cudaProfilerApi). CUDA graphs (-G) and -I 1 are not offered here.";

/// The foreground operation's kind.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FgKind {
    /// ep_perf's dispatch and combine (one row per phase)
    Ep,
    /// alltoall_perf's alltoall
    Alltoall,
}

pub use crate::results::BgOp;

#[derive(Parser, Debug, Clone)]
#[command(name = "interference_perf", version = VERSION, disable_version_flag = true, about = "A foreground EP or alltoall operation against a concurrent background collective on another communicator: alone, together, slowdown", after_help = help_footer(AFTER_HELP), args_override_self = true, allow_negative_numbers = true, mut_arg("cudagraph", |a| a.hide(true)), mut_arg("per_iter_timing", |a| a.hide(true)), mut_arg("profile_size", |a| a.help("Wrap the together window of one background size in cuProfilerStart / Stop, for `nsys profile --capture-range=cudaProfilerApi`")))]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Foreground: ep (dispatch / combine) or alltoall
    #[arg(long = "fg", value_enum, default_value = "ep")]
    pub fg: FgKind,
    /// Foreground implementation(s), comma-separated, from ep_perf's or alltoall_perf's --list-impls
    #[arg(short = 'D', long = "impl", default_value = "nvl")]
    pub implementation: String,
    /// Foreground datatype: EP dispatch payload (bf16, fp8) or alltoall datatype (default bf16 / float)
    #[arg(short = 'd', long = "datatype")]
    pub datatype: Option<String>,
    /// alltoall foreground: bytes per rank, comma-separated (K/M/G/T suffixes; default 32M)
    #[arg(long = "size")]
    pub size: Option<String>,
    /// alltoall foreground: buffer registration, 0 none, 1 ncclCommRegister, 2 symmetric window
    /// (default 2)
    #[arg(short = 'R', long = "local_register", value_parser = numbered(RegisterMode::ALL))]
    pub local_register: Option<RegisterMode>,
    /// EP foreground: mode(s), ll and/or ht (default ll)
    #[arg(long = "mode")]
    pub mode: Option<String>,
    /// EP foreground: layer preset (deepseek-v3, qwen3-30b-a3b, mixtral; default deepseek-v3)
    #[arg(long = "preset")]
    pub preset: Option<String>,
    /// EP foreground: hidden size (overrides the preset; a multiple of 128, at most 65536)
    #[arg(long = "hidden")]
    pub hidden: Option<usize>,
    /// EP foreground: experts per token (overrides the preset; 1..=15)
    #[arg(long = "topk")]
    pub topk: Option<usize>,
    /// EP foreground: experts in total (overrides the preset; at most 16384)
    #[arg(long = "experts")]
    pub experts: Option<usize>,
    /// EP foreground: tokens per rank, comma-separated (default 128 LL, 4096 HT)
    #[arg(long = "tokens")]
    pub tokens: Option<String>,
    /// EP foreground: routing seed (uniform top-k routing, as ep_perf's default; default 1)
    #[arg(long = "seed")]
    pub seed: Option<u64>,
    /// Background collective: allreduce, or none
    #[arg(long = "bg", value_enum, default_value = "allreduce")]
    pub bg: BgOp,
    /// Background: minimum bytes per rank (default 1M)
    #[arg(short = 'b', long = "minbytes")]
    pub minbytes: Option<String>,
    /// Background: maximum bytes per rank (default 1G)
    #[arg(short = 'e', long = "maxbytes")]
    pub maxbytes: Option<String>,
    /// Background: additive size step, used when -f is 1 (default 1M)
    #[arg(short = 'i', long = "stepbytes")]
    pub stepbytes: Option<String>,
    /// Background: multiplicative size step (1 = use -i; default 4)
    #[arg(short = 'f', long = "stepfactor")]
    pub stepfactor: Option<u64>,
    /// Ranks per EP group (default: every rank)
    #[arg(long = "ep")]
    pub ep: Option<usize>,
    /// Ranks per DP group (default: ranks / --ep; or the rank count for DP over every rank)
    #[arg(long = "dp")]
    pub dp: Option<usize>,
    #[command(flatten)]
    pub ep_knobs: EpKnobs,
    #[command(flatten)]
    pub ep_gin: EpGinArgs,
    #[command(flatten)]
    pub dp_knobs: DpKnobs,
}

/// One communicator's knobs as flags; `$p` is the flag prefix.
macro_rules! knobs {
    ($name:ident, $p:literal, $who:literal) => {
        #[derive(clap::Args, Debug, Clone, Default)]
        pub struct $name {
            #[arg(help = concat!($who, " communicator: ncclConfig_t minCTAs"))]
            #[arg(id = concat!($p, "-min-ctas"), long = concat!($p, "-min-ctas"), value_name = "N")]
            pub min_ctas: Option<i32>,
            #[arg(help = concat!($who, " communicator: ncclConfig_t maxCTAs (NCCL kernels' SM budget)"))]
            #[arg(id = concat!($p, "-max-ctas"), long = concat!($p, "-max-ctas"), value_name = "N")]
            pub max_ctas: Option<i32>,
            #[arg(help = concat!($who, " communicator: ncclConfig_t cgaClusterSize"))]
            #[arg(id = concat!($p, "-cga-cluster-size"), long = concat!($p, "-cga-cluster-size"), value_name = "N")]
            pub cga_cluster_size: Option<i32>,
            #[arg(help = concat!($who, " communicator: ncclConfig_t splitShare (1: share the parent's resources)"))]
            #[arg(id = concat!($p, "-split-share"), long = concat!($p, "-split-share"), value_name = "0|1")]
            #[arg(value_parser = $crate::driver::cli::zero_or_one())]
            pub split_share: Option<bool>,
            #[arg(help = concat!($who, " communicator: ncclConfig_t netName (e.g. IB, Socket)"))]
            #[arg(id = concat!($p, "-net-name"), long = concat!($p, "-net-name"), value_name = "NAME")]
            pub net_name: Option<String>,
            #[arg(help = concat!($who, " communicator: ncclConfig_t trafficClass"))]
            #[arg(id = concat!($p, "-traffic-class"), long = concat!($p, "-traffic-class"), value_name = "TC")]
            pub traffic_class: Option<i32>,
            #[arg(help = concat!($who, " stream priority (CUDA: lower is more urgent; 0 default)"))]
            #[arg(id = concat!($p, "-stream-priority"), long = concat!($p, "-stream-priority"), value_name = "P")]
            pub stream_priority: Option<i32>,
        }

        impl $name {
            fn spec(&self) -> Result<CommSpec> {
                let nccl = CommConfig {
                    cga_cluster_size: self.cga_cluster_size,
                    min_ctas: self.min_ctas,
                    max_ctas: self.max_ctas,
                    split_share: self.split_share,
                    net_name: self.net_name.clone(),
                    traffic_class: self.traffic_class,
                };
                nccl.validate(concat!("--", $p))?;
                Ok(CommSpec { nccl, stream_priority: self.stream_priority, gin: None })
            }
        }
    };
}
knobs!(EpKnobs, "ep", "EP (foreground)");
knobs!(DpKnobs, "dp", "DP (background)");
gin_flags!(EpGinArgs, "ep-gin", "the foreground's gin / hybrid device communicator");

/// One communicator's isolation settings, as recorded in the JSON's `config.comms`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CommSpec {
    /// ncclConfig_t fields set (the rest are NCCL's defaults).
    pub nccl: CommConfig,
    /// CUDA stream priority of its stream; None: the default priority.
    pub stream_priority: Option<i32>,
    /// What its device communicator asks of GIN (the foreground's; the background has none). The
    /// JSON adds `granted` beside it once NCCL has answered (`gin_transport::record_granted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gin: Option<GinRequest>,
}

/// The foreground, resolved through its benchmark's registry.
#[derive(Debug, Clone)]
pub enum Foreground {
    Alltoall {
        impls: Vec<&'static ImplInfo>,
        sizes: Vec<u64>,
        dtype: Dtype,
        register: RegisterMode,
    },
    Ep {
        impls: Vec<&'static EpImplInfo>,
        modes: Vec<Mode>,
        preset: String,
        shape: Shape,
        tokens: Option<Vec<usize>>,
        payload: Payload,
        seed: u64,
    },
}

impl Foreground {
    /// Names of its impls on NCCL's GIN.
    pub fn real_gin_impls(&self) -> Vec<&'static str> {
        match self {
            Foreground::Alltoall { impls, .. } => real_gin_names(impls),
            Foreground::Ep { impls, .. } => real_gin_names(impls),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub common: Common,
    pub fg: Foreground,
    pub bg: BgOp,
    /// Background bytes per rank (empty with --bg none).
    pub bg_sizes: Vec<u64>,
    pub ep: Option<usize>,
    pub dp: Option<usize>,
    /// The layout, when the rank count is known from the command line or the launcher.
    pub layout: Option<Layout>,
    pub ep_comm: CommSpec,
    pub dp_comm: CommSpec,
    /// Foreground device kernels' CTAs: -V, or the EP default (24) for EP, 0 (impl default) for alltoall.
    pub ctas: u32,
    /// --profile-size: the background size whose together window is captured.
    pub profile_bg: Option<u64>,
}

impl Args {
    /// A flag of the foreground kind not chosen, or a background size with no background, would
    /// be ignored: it is refused, so that what a run measured is what its command line says.
    fn refuse_other_sides_flags(&self) -> Result<()> {
        let ep_shape = [
            ("--mode", self.mode.is_some()),
            ("--preset", self.preset.is_some()),
            ("--hidden", self.hidden.is_some()),
            ("--topk", self.topk.is_some()),
            ("--experts", self.experts.is_some()),
            ("--tokens", self.tokens.is_some()),
            ("--seed", self.seed.is_some()),
        ];
        let alltoall = [("--size", self.size.is_some()), ("--local_register", self.local_register.is_some())];
        let bg_sizes = [
            ("--minbytes", self.minbytes.is_some()),
            ("--maxbytes", self.maxbytes.is_some()),
            ("--stepbytes", self.stepbytes.is_some()),
            ("--stepfactor", self.stepfactor.is_some()),
        ];
        // (whether this run ignores the flags, each flag and whether it was given, why, the choice
        // that would use them)
        type Flags<'a> = &'a [(&'a str, bool)];
        let dp_knobs = [("--dp-* flags", self.dp_knobs.spec().is_ok_and(|s| s != CommSpec::default()))];
        let rules: [(bool, Flags, &str, &str); 4] = [
            (self.fg == FgKind::Alltoall, &ep_shape, "shapes the EP foreground; this run's is alltoall", "--fg ep"),
            (self.fg == FgKind::Ep, &alltoall, "sets the alltoall foreground; this run's is ep", "--fg alltoall"),
            (self.bg == BgOp::None, &bg_sizes, "sets background sizes; --bg none has none", "--bg allreduce"),
            (
                self.bg == BgOp::None,
                &dp_knobs,
                "shape the background's communicator; --bg none has none",
                "--bg allreduce",
            ),
        ];
        for (applies, flags, why, other) in rules {
            if let Some((flag, _)) = flags.iter().find(|f| applies && f.1) {
                return Err(Error::usage(format!("{flag} {why}"), format!("drop it, or use {other}")));
            }
        }
        Ok(())
    }
}

impl Config {
    pub fn from_args(a: &Args, command: String) -> Result<Config> {
        a.refuse_other_sides_flags()?;
        let (fg, asked) = match a.fg {
            FgKind::Alltoall => {
                let impls = a2a::resolve(&a.implementation)?;
                let dtype = Dtype::parse(a.datatype.as_deref().unwrap_or("float"))?;
                let sizes = list(a.size.as_deref().unwrap_or("32M"), "size", sizes::parse_size)?;
                if let Some(s) = sizes.iter().find(|&&s| s == 0 || s > MAX_BYTES) {
                    return Err(Error::usage(
                        format!("--size {s} is not in 1..={MAX_BYTES}"),
                        "give alltoall bytes per rank, e.g. --size 2M,128M",
                    ));
                }
                let register = a.local_register.unwrap_or(RegisterMode::Window);
                a2a::check_registration(register, &impls)?;
                let asked = Asked::new(&a.implementation, &impls);
                (Foreground::Alltoall { impls, sizes, dtype, register }, asked)
            }
            FgKind::Ep => {
                let impls = ep::resolve(&a.implementation)?;
                let modes =
                    a.mode.as_deref().map(|m| list(m, "mode", Mode::parse)).transpose()?.unwrap_or(vec![Mode::Ll]);
                let preset = a.preset.as_deref().unwrap_or("deepseek-v3");
                let shape = shape::resolve(preset, a.hidden, a.topk, a.experts)?;
                let tokens = a
                    .tokens
                    .as_deref()
                    .map(|t| list(t, "tokens", |s| shape::check_tokens(sizes::parse_tokens(s)?, "e.g. --tokens 128")))
                    .transpose()?;
                let payload = Payload::parse(a.datatype.as_deref().unwrap_or("bf16"))?;
                let asked = Asked::new(&a.implementation, &impls);
                let (preset, seed) = (preset.to_string(), a.seed.unwrap_or(1));
                let fg = Foreground::Ep { impls, modes, preset, shape, tokens, payload, seed };
                (fg, asked)
            }
        };
        let common = Common::from_args(&a.common, asked, command)?;
        if common.graph_launches > 0 {
            return Err(Error::usage(
                "-G is not offered by interference_perf",
                "drop -G (both sides run as streams of launches)",
            ));
        }
        if common.per_iter {
            return Err(Error::usage(
                "-I 1 is not offered by interference_perf (its table has no per-iteration columns)",
                "drop -I (the JSON rows carry both sides' alone and together times)",
            ));
        }
        let bg_sizes = match a.bg {
            BgOp::None => vec![],
            BgOp::AllReduce => {
                let min = sizes::parse_size(a.minbytes.as_deref().unwrap_or("1M"))?;
                let max = sizes::parse_size(a.maxbytes.as_deref().unwrap_or("1G"))?;
                let step = sizes::parse_size(a.stepbytes.as_deref().unwrap_or("1M"))?;
                if min == 0 {
                    return Err(Error::usage(
                        "-b 0: a background all-reduce moves one float at least",
                        "use -b, -e and -i in multiples of 4, from 4 (--bg none for no background)",
                    ));
                }
                let sweep = sizes::byte_sweep(min, max, a.stepfactor.unwrap_or(4), step)?;
                // The all-reduce is of floats: a size that is not whole floats would be timed and
                // reported as bytes it never moved.
                if let Some(s) = sweep.iter().find(|&&s| s == 0 || !s.is_multiple_of(background::ELT)) {
                    return Err(Error::usage(
                        format!("background size {s} is not a whole number of floats (4 bytes)"),
                        "use -b, -e and -i in multiples of 4 (--bg none for no background)",
                    ));
                }
                sweep
            }
        };
        let layout = common.ranks.map(|n| layout(n, a.ep, a.dp, common.emulate_nodes)).transpose()?;
        // With the world size unknown yet (a launcher that does not say it), the shape's own
        // limits are still checked here, as ep_perf does; the ranks' share after start.
        if let Foreground::Ep { shape, .. } = &fg {
            shape.validate(layout.as_ref().map_or(0, |l| l.ep))?;
        }
        let ctas = match (&fg, common.ctas) {
            (_, v) if v > 0 => v,
            (Foreground::Ep { .. }, _) => crate::ep::cli::DEFAULT_CTAS,
            (Foreground::Alltoall { .. }, _) => 0,
        };
        let profile_bg = a.common.profile_size.as_deref().map(sizes::parse_size).transpose()?;
        if let Some(p) = profile_bg {
            if a.bg == BgOp::None {
                return Err(Error::usage(
                    "--profile-size names a background size, and --bg none has no background",
                    "drop --profile-size, or give a background (--bg allreduce)",
                ));
            }
            if !bg_sizes.contains(&p) {
                return Err(Error::usage(
                    format!("--profile-size {p} is not one of the background sizes"),
                    "give a background size the -b/-e/-f sweep visits",
                ));
            }
        }
        let ep_comm = CommSpec { gin: Some(a.ep_gin.request(asked.real_gin)?), ..a.ep_knobs.spec()? };
        Ok(Config {
            common,
            fg,
            bg: a.bg,
            bg_sizes,
            ep: a.ep,
            dp: a.dp,
            layout,
            ep_comm,
            dp_comm: a.dp_knobs.spec()?,
            ctas,
            profile_bg,
        })
    }

    /// The layout for `ranks` (validated up front when the rank count was known).
    pub fn layout_for(&self, ranks: usize) -> Result<Layout> {
        layout(ranks, self.ep, self.dp, self.common.emulate_nodes)
    }
}

/// The EP × DP layout of `ranks`, with `--emulate-nodes` splitting each EP group (the foreground's
/// communicator, where the emulated transports run) into equal virtual nodes.
fn layout(ranks: usize, ep: Option<usize>, dp: Option<usize>, nodes: Option<usize>) -> Result<Layout> {
    let l = Layout::new(ranks, ep, dp)?;
    match nodes {
        Some(n) if !l.ep.is_multiple_of(n) => Err(Error::usage(
            format!("--emulate-nodes {n} does not divide an EP group of {} ranks into equal virtual nodes", l.ep),
            "use a divisor of --ep",
        )),
        _ => Ok(l),
    }
}

/// Parse argv as the program does (`driver::program`); for tests.
#[cfg(test)]
pub fn parse(argv: Vec<String>) -> Result<Args> {
    crate::error::parse_args(<Config as crate::driver::Benchmark>::PROG, argv)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::error::Exit;

    /// The configuration of `interference_perf ARGS`.
    pub(in crate::interference) fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["interference_perf".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        Config::from_args(&parse(v)?, args.join(" "))
    }

    #[test]
    fn defaults_are_ep_ll_against_an_allreduce_sweep() {
        let c = cfg(&["-g", "4"]).unwrap();
        let Foreground::Ep { impls, modes, tokens, payload, shape, preset, seed } = &c.fg else {
            panic!("EP foreground")
        };
        assert_eq!(impls[0].name, "nvl");
        assert_eq!(modes, &vec![Mode::Ll]);
        assert_eq!((preset.as_str(), *seed), ("deepseek-v3", 1));
        assert_eq!((tokens, *payload), (&None, Payload::Bf16));
        assert_eq!(shape.hidden, 7168);
        assert_eq!(c.bg, BgOp::AllReduce);
        assert_eq!(c.bg_sizes, vec![1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]);
        assert_eq!(c.layout, Some(Layout { ranks: 4, ep: 4, dp: 1 }));
        assert_eq!(c.ctas, 24);
        assert_eq!(c.ep_comm, CommSpec { gin: Some(GinRequest::default()), ..Default::default() });
    }

    #[test]
    fn alltoall_foreground_defaults() {
        let c = cfg(&["-g", "4", "--fg", "alltoall"]).unwrap();
        let Foreground::Alltoall { impls, sizes, register, .. } = &c.fg else { panic!("alltoall foreground") };
        assert_eq!(
            (impls[0].name, sizes.as_slice(), *register),
            ("nvl", [32u64 << 20].as_slice(), RegisterMode::Window)
        );
    }

    #[test]
    fn alltoall_foreground_layouts_and_knobs() {
        let c = cfg(&[
            "-g",
            "4",
            "--fg",
            "alltoall",
            "-D",
            "nvl,host",
            "--size",
            "2M,128M",
            "--ep",
            "2",
            "-b",
            "1M",
            "-e",
            "1G",
            "-f",
            "32",
            "--dp-max-ctas",
            "8",
            "--dp-split-share",
            "1",
            "--ep-net-name",
            "IB",
            "--ep-stream-priority",
            "-2",
        ])
        .unwrap();
        let Foreground::Alltoall { impls, sizes, dtype, register } = &c.fg else { panic!("alltoall foreground") };
        assert_eq!(impls.iter().map(|i| i.name).collect::<Vec<_>>(), ["nvl", "host"]);
        assert_eq!(sizes, &vec![2 << 20, 128 << 20]);
        assert_eq!((*dtype, *register), (Dtype::Float, RegisterMode::Window));
        assert_eq!(c.bg_sizes, vec![1 << 20, 32 << 20, 1 << 30]);
        assert_eq!(c.layout, Some(Layout { ranks: 4, ep: 2, dp: 2 }));
        assert_eq!(c.dp_comm.nccl.max_ctas, Some(8));
        assert_eq!(c.dp_comm.nccl.split_share, Some(true));
        assert_eq!(c.ep_comm.nccl.net_name.as_deref(), Some("IB"));
        assert_eq!(c.ep_comm.stream_priority, Some(-2));
        assert_eq!(c.ctas, 0);
        let c = cfg(&["-g", "4", "--ep", "4", "--dp", "4", "--bg", "none"]).unwrap();
        assert_eq!(c.layout, Some(Layout { ranks: 4, ep: 4, dp: 4 }));
        assert!(c.bg_sizes.is_empty());
        // The layer's experts divide over an EP group, not over every rank.
        assert!(cfg(&["-g", "4", "--ep", "2", "--experts", "6", "--topk", "2"]).is_ok());
        let c = cfg(&["-g", "2", "--profile-size", "4M", "-b", "1M", "-e", "16M"]).unwrap();
        assert_eq!(c.profile_bg, Some(4 << 20));
    }

    #[test]
    fn gin_knobs_shape_the_foregrounds_device_communicator() {
        let c = cfg(&["-g", "4", "--fg", "alltoall", "-D", "nvl,gin", "--ep-gin-contexts", "2"]).unwrap();
        assert_eq!(c.ep_comm.gin, Some(GinRequest { contexts: Some(2), gin_type: None }));
        assert_eq!(c.dp_comm.gin, None);
        let c = cfg(&["-g", "4", "-D", "hybrid", "--ep-gin-contexts", "1"]).unwrap();
        assert_eq!(c.ep_comm.gin.and_then(|g| g.contexts), Some(1));
        assert_eq!(cfg(&["-g", "4"]).unwrap().ep_comm.gin, Some(GinRequest::default()));
        let typed = cfg(&["-g", "4", "-D", "gin", "--ep-gin-type", "gdaki"]);
        if crate::nccl::compat::DEV_COMM_GIN_TYPE {
            assert_eq!(typed.unwrap().ep_comm.gin.and_then(|g| g.gin_type), Some(crate::gin_transport::GinType::Gdaki));
        } else {
            let e = typed.unwrap_err();
            assert_eq!(e.exit, Exit::Usage);
            assert!(e.msg.contains("--ep-gin-type needs NCCL 2.31.2 or later headers"), "{e}");
        }
    }

    #[test]
    fn bad_input_is_one_line_and_exit_6() {
        for (args, needle) in [
            (vec!["-g", "4", "--ep", "3"], "--ep 3 does not divide the 4 ranks"),
            (vec!["-g", "4", "--ep", "2", "--dp", "3"], "--dp 3 with --ep 2"),
            (vec!["-g", "4", "--bg", "reduce"], "reduce"),
            (vec!["--fg", "moe"], "moe"),
            (vec!["-D", "warp"], "unknown implementation 'warp'"),
            (vec!["--fg", "alltoall", "-D", "warp"], "unknown implementation 'warp'"),
            (vec!["--fg", "alltoall", "-R", "0"], "runs on symmetric windows"),
            (vec!["--fg", "alltoall", "--size", "0"], "--size 0"),
            (vec!["--fg", "alltoall", "-d", "quaternion"], "unknown datatype"),
            (vec!["--mode", "fast"], "unknown mode"),
            (vec!["--tokens", "0"], "tokens per rank 0"),
            (vec!["-d", "fp4"], "unknown dispatch dtype"),
            (vec!["--experts", "7", "--topk", "2", "-g", "4"], "does not divide over 4 ranks"),
            (vec!["-g", "4", "--ep", "2", "--experts", "5", "--topk", "2"], "does not divide over 2 ranks"),
            (vec!["-b", "2G", "-e", "1G"], "-b 2147483648 is larger than -e 1073741824"),
            (vec!["-f", "0"], "step factor -f is 0"),
            (vec!["-b", "0", "-e", "0", "-f", "1"], "-b 0: a background all-reduce moves one float at least"),
            (vec!["-b", "1", "-e", "1"], "background size 1 is not a whole number of floats"),
            (vec!["-b", "4", "-e", "12", "-f", "1", "-i", "6"], "background size 10 is not a whole number"),
            (
                vec!["--bg", "none", "--dp-max-ctas", "8"],
                "--dp-* flags shape the background's communicator; --bg none has none",
            ),
            (
                vec!["-g", "2", "--ep", "1", "--emulate-nodes", "2", "-D", "hybrid-emu", "--bg", "none"],
                "does not divide an EP group of 1 ranks",
            ),
            (vec!["-G", "1"], "-G is not offered"),
            (vec!["-I", "1"], "-I 1 is not offered"),
            (vec!["--dp-max-ctas", "0"], "--dp-max-ctas 0"),
            (vec!["--ep-min-ctas", "9", "--ep-max-ctas", "8"], "is above"),
            (vec!["--dp-split-share", "2"], "'--dp-split-share <0|1>': 2 is not in 0..=1"),
            (vec!["--dp-traffic-class", "300"], "--dp-traffic-class 300"),
            (vec!["--profile-size", "3M"], "not one of the background sizes"),
            (vec!["--ep", "-1"], "--ep"),
            (vec!["-J", "/nonexistent/dir/x.json"], "does not exist"),
            (vec!["-D", "gin-emu"], "--emulate-nodes"),
            (vec!["--ep-gin-contexts", "2"], "--ep-gin-contexts applies to the impls on NCCL's GIN"),
            (vec!["--fg", "alltoall", "-D", "nvl,host", "--ep-gin-contexts", "2"], "--ep-gin-contexts applies"),
            (vec!["-D", "gin", "--ep-gin-contexts", "0"], "'--ep-gin-contexts <N>': 0 is not in 1..=1024"),
            // The background runs NCCL's collectives: no device communicator, no GIN knobs.
            (vec!["-D", "gin", "--dp-gin-contexts", "2"], "--dp-gin-contexts"),
            // A flag the run would ignore is refused.
            (vec!["--fg", "alltoall", "--mode", "xx"], "--mode shapes the EP foreground; this run's is alltoall"),
            (vec!["--fg", "alltoall", "--tokens", "0"], "--tokens shapes the EP foreground"),
            (vec!["--fg", "ep", "--size", "0"], "--size sets the alltoall foreground; this run's is ep"),
            (vec!["-R", "1"], "--local_register sets the alltoall foreground"),
            (vec!["--bg", "none", "-f", "0"], "--stepfactor sets background sizes; --bg none has none"),
        ] {
            let e = cfg(&args).unwrap_err();
            assert_eq!(e.exit, Exit::Usage, "{args:?}: {e}");
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
            assert!(!e.to_string().contains('\n'), "{args:?}: multi-line {e}");
        }
    }

    #[test]
    fn device_cta_count_overrides_either_foregrounds_default() {
        // Without -V: EP's 24, alltoall's impl default (0); -V is what the foreground launches with.
        assert_eq!(cfg(&["-g", "4", "-V", "8"]).unwrap().ctas, 8);
        assert_eq!(cfg(&["-g", "4", "--fg", "alltoall", "-V", "16"]).unwrap().ctas, 16);
    }

    #[test]
    fn alltoall_size_may_be_max_bytes_but_not_above() {
        let c = cfg(&["--fg", "alltoall", "--size", "1T"]).unwrap();
        let Foreground::Alltoall { sizes, .. } = &c.fg else { panic!("alltoall foreground") };
        assert_eq!(sizes, &vec![MAX_BYTES]);
        let e = cfg(&["--fg", "alltoall", "--size", "2T"]).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert!(e.msg.contains("--size 2199023255552 is not in 1..=1099511627776"), "{e}");
    }

    #[test]
    fn emulated_nodes_that_divide_the_ep_group_are_accepted() {
        let c = cfg(&["-g", "4", "--emulate-nodes", "2", "-D", "hybrid-emu", "--bg", "none"]).unwrap();
        assert_eq!((c.layout, c.common.emulate_nodes), (Some(Layout { ranks: 4, ep: 4, dp: 1 }), Some(2)));
    }
}
