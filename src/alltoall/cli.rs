//! `alltoall_perf` command line: nccl-tests flags with their meanings, plus ginbench's own.
use super::registry::{self, ImplInfo};
use crate::driver::cli::{help_footer, iterations, numbered, zero_or_one, Asked, CommonArgs, GinArgs, VERSION};
use crate::driver::Common;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::gin_transport::GinRequest;
use crate::harness::sizes;
use crate::nccl::RegisterMode;
use clap::Parser;

const AFTER_HELP: &str = "\
Sizes take K, M, G, T suffixes (binary). Every flag that takes a number takes a value, as in nccl-tests
(`-c 1`, `-G 1`).

Ranks: under mpirun / srun each process is one rank (one GPU); otherwise one process runs
-t × -g ranks, one host thread per GPU.

Environment: GINBENCH_NCCL_LIB=/path/libnccl.so.2 chooses the NCCL library (see README).";

#[derive(Parser, Debug, Clone)]
#[command(name = "alltoall_perf", version = VERSION, disable_version_flag = true, about = "Alltoall bandwidth and latency (nccl-tests compatible)", after_help = help_footer(AFTER_HELP), args_override_self = true, allow_negative_numbers = true)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Minimum size in bytes per rank (K/M/G/T suffixes, binary; 64K = 64KB = 64KiB)
    #[arg(short = 'b', long = "minbytes", default_value = "32M")]
    pub minbytes: String,
    /// Maximum size in bytes per rank
    #[arg(short = 'e', long = "maxbytes", default_value = "32M")]
    pub maxbytes: String,
    /// Additive size step, used when -f is 1
    #[arg(short = 'i', long = "stepbytes", default_value = "1M")]
    pub stepbytes: String,
    /// Multiplicative size step (1 = use -i)
    #[arg(short = 'f', long = "stepfactor", default_value_t = 1)]
    pub stepfactor: u64,
    /// Operations aggregated per iteration (one NCCL group for the host impl; 1..=1000000)
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1, value_parser = iterations(1))]
    pub agg_iters: u32,
    /// Datatype: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// 1: synchronize the stream after every iteration (its -m operations together)
    #[arg(short = 'z', long = "blocking", default_value = "0", value_parser = zero_or_one(), action = clap::ArgAction::Set)]
    pub blocking: bool,
    /// Buffer registration: 0 none, 1 ncclCommRegister, 2 symmetric window
    #[arg(short = 'R', long = "local_register", default_value = "0", value_parser = numbered(RegisterMode::ALL))]
    pub local_register: RegisterMode,
    /// Implementation(s): number or name, comma-separated, or `all` (see --list-impls)
    #[arg(short = 'D', long = "device_implementation", default_value = "0")]
    pub implementation: String,
    /// 1: report host enqueue (CPU) time instead of completion time
    #[arg(short = 'C', long = "report_cputime", default_value = "0", value_parser = zero_or_one(), action = clap::ArgAction::Set)]
    pub report_cputime: bool,
    #[command(flatten)]
    pub gin: GinArgs,
}

/// Validated run configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub common: Common,
    pub sizes: Vec<u64>,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub agg: u32,
    pub dtype: Dtype,
    pub blocking: bool,
    pub register: RegisterMode,
    pub impls: Vec<&'static ImplInfo>,
    pub cputime: bool,
    pub profile_size: Option<u64>,
    /// `--gin-*`: what gin and hybrid ask of their device communicators.
    pub gin: GinRequest,
}

impl Config {
    pub fn from_args(a: &Args, command: String) -> Result<Config> {
        let min = sizes::parse_size(&a.minbytes)?;
        let max = sizes::parse_size(&a.maxbytes)?;
        let step = sizes::parse_size(&a.stepbytes)?;
        let sweep = sizes::byte_sweep(min, max, a.stepfactor, step)?;
        let impls = registry::resolve(&a.implementation)?;
        let asked = Asked::new(&a.implementation, &impls);
        let common = Common::from_args(&a.common, asked, command)?;
        registry::check_registration(a.local_register, &impls)?;
        let blocking = a.blocking;
        if blocking && common.graph_launches > 0 {
            return Err(Error::usage("-z 1 cannot be combined with -G", "drop one of them"));
        }
        let gin = a.gin.request(asked.real_gin)?;
        let profile_size = a.common.profile_size.as_deref().map(sizes::parse_size).transpose()?;
        if let Some(p) = profile_size {
            if !sweep.contains(&p) {
                return Err(Error::usage(
                    format!("--profile-size {p} is not one of the sweep's sizes"),
                    "give a size the -b/-e/-f sweep visits, e.g. the value of -b",
                ));
            }
        }
        Ok(Config {
            common,
            sizes: sweep,
            min_bytes: min,
            max_bytes: max,
            agg: a.agg_iters,
            dtype: Dtype::parse(&a.datatype)?,
            blocking,
            register: a.local_register,
            impls,
            cputime: a.report_cputime,
            profile_size,
            gin,
        })
    }
}

/// Parse argv as the program does (`driver::program`); for tests.
#[cfg(test)]
pub fn parse(argv: Vec<String>) -> Result<Args> {
    crate::error::parse_args(<Config as crate::driver::Benchmark>::PROG, argv)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::Exit;
    use crate::harness::stats::Average;

    /// The configuration of `alltoall_perf ARGS`.
    pub(crate) fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["alltoall_perf".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        let a = parse(v)?;
        Config::from_args(&a, args.join(" "))
    }

    #[test]
    fn defaults_match_nccl_tests() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.sizes, vec![32 << 20]);
        assert_eq!(c.common.iters, 20);
        assert_eq!(c.common.check, 1);
        assert_eq!(c.dtype, Dtype::Float);
        assert_eq!(c.common.average, Average::Mean);
        assert_eq!(c.impls[0].name, "host");
        assert_eq!(c.common.local_ranks, 1);
    }

    #[test]
    fn parses_nccl_tests_style_flags() {
        let c =
            cfg(&["-b", "8", "-e", "2G", "-f", "4", "-R", "2", "-g", "4", "-n", "5", "-w", "1", "-c", "0"]).unwrap();
        assert_eq!(c.sizes.first(), Some(&8));
        assert_eq!(c.sizes.last(), Some(&(2 << 30)));
        assert_eq!(c.register, RegisterMode::Window);
        assert_eq!(c.common.local_ranks, 4);
        assert_eq!(c.common.check, 0);
        let c = cfg(&["-D", "host", "-t", "2", "-g", "2", "-G", "3", "-I", "1"]).unwrap();
        assert_eq!(c.common.local_ranks, 4);
        assert_eq!(c.common.graph_launches, 3);
        assert!(c.common.per_iter);
        // a later flag wins, so scripts can append overrides
        let c = cfg(&["-e", "1G", "-e", "2G"]).unwrap();
        assert_eq!(c.max_bytes, 2 << 30);
        // -z 1 is refused only with -G: alone it blocks after every operation.
        let c = cfg(&["-z", "1"]).unwrap();
        assert!(c.blocking);
        assert_eq!(c.common.graph_launches, 0);
    }

    #[test]
    fn gin_flags_reach_the_gin_impls() {
        assert_eq!(cfg(&[]).unwrap().gin, GinRequest::default());
        let c = cfg(&["-D", "gin,hybrid", "-R", "2", "--gin-contexts", "2"]).unwrap();
        assert_eq!(c.gin, GinRequest { contexts: Some(2), gin_type: None });
        assert!(cfg(&["-D", "all", "-R", "2", "--gin-contexts", "8"]).is_ok(), "-D all has gin and hybrid");
        let typed = cfg(&["-D", "hybrid", "-R", "2", "--gin-type", "efa-gda"]);
        if crate::nccl::compat::DEV_COMM_GIN_TYPE {
            assert_eq!(typed.unwrap().gin.gin_type, Some(crate::gin_transport::GinType::EfaGda));
        } else {
            let e = typed.unwrap_err();
            assert_eq!(e.exit, Exit::Usage);
            assert!(e.msg.contains("--gin-type needs NCCL 2.31.2 or later headers"), "{e}");
        }
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for (args, needle) in [
            (vec!["-b", "2G", "-e", "1G"], "is larger than -e 1073741824"),
            (vec!["-f", "0"], "step factor -f is 0"),
            (vec!["-b", "8X"], "unknown size suffix 'X'"),
            (vec!["-D", "warp-drive"], "unknown implementation 'warp-drive'"),
            (vec!["-D", "99"], "unknown implementation '99'"),
            (vec!["-R", "3"], "'--local_register <LOCAL_REGISTER>': 3 is not in 0..=2"),
            (vec!["-a", "7"], "7 is not in 0..=3"),
            (vec!["-z", "1", "-G", "1"], "-z 1 cannot"),
            (vec!["-d", "quaternion"], "unknown datatype"),
            (vec!["-t", "0"], "at least 1"),
            (vec!["--no-such-flag"], "--no-such-flag"),
            (vec!["-n", "many"], "many"),
            (vec!["-D", "gin-emu", "-R", "2"], "add --emulate-nodes"),
            (vec!["-b", "1M", "-e", "4M", "-f", "2", "--profile-size", "3M"], "not one of the sweep"),
            (vec!["-D", "hybrid-emu", "-R", "2", "--emulate-nodes", "0"], "--emulate-nodes 0"),
            (vec!["--gin-contexts", "2"], "--gin-contexts applies to the impls on NCCL's GIN"),
            // The emulated transports ask NCCL for no GIN.
            (
                vec!["-D", "gin-emu", "-R", "2", "-g", "2", "--emulate-nodes", "2", "--gin-contexts", "2"],
                "--gin-contexts applies",
            ),
            (vec!["-D", "gin", "-R", "2", "--gin-contexts", "0"], "'--gin-contexts <N>': 0 is not in 1..=1024"),
            (vec!["-D", "gin", "-R", "2", "--gin-contexts", "-1"], "--gin-contexts"),
            (vec!["-D", "gin", "-R", "2", "--gin-type", "rdma"], "rdma"),
        ] {
            let e = cfg(&args).unwrap_err();
            assert_eq!(e.exit, Exit::Usage, "{args:?}: {e}");
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
            assert!(e.fix.is_some(), "{args:?} has no fix: {e}");
            assert!(!e.to_string().contains('\n'), "{args:?}: multi-line error {e}");
        }
    }
}
