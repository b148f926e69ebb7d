//! `alltoall_perf` command line: nccl-tests flags with their meanings, plus ginbench's own.
use crate::alltoall::registry::{self, ImplInfo};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::harness::sizes;
use clap::Parser;
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Sizes take K, M, G suffixes (binary). Every flag that takes a number takes a value, as in nccl-tests
(`-c 1`, `-G 1`).

Ranks: under mpirun / srun each process is one rank (one GPU); otherwise one process runs
-t × -g ranks, one host thread per GPU.

Exit codes: 0 ok, 1 internal error, 2 CUDA error, 3 NCCL error, 4 timeout, 5 not implemented,
6 bad usage, 7 wrong data, 8 environment (no GPU / driver, no matching NCCL).

Environment: GINBENCH_NCCL_LIB=/path/libnccl.so.2 chooses the NCCL library (see README).";

#[derive(Parser, Debug, Clone)]
#[command(name = "alltoall_perf", version, about = "Alltoall bandwidth and latency (nccl-tests compatible)", after_help = AFTER_HELP, args_override_self = true)]
pub struct Args {
    /// Host threads per process (each drives -g GPUs)
    #[arg(short = 't', long = "nthreads", default_value_t = 1)]
    pub nthreads: usize,
    /// GPUs per thread
    #[arg(short = 'g', long = "ngpus", default_value_t = 1)]
    pub ngpus: usize,
    /// Minimum size in bytes per rank (K/M/G suffixes)
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
    /// Timed iterations per size
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Warm-up iterations per size (untimed)
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5)]
    pub warmup_iters: u32,
    /// Operations aggregated per iteration (one NCCL group for the host impl)
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1)]
    pub agg_iters: u32,
    /// Repeat the whole sweep N times
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1)]
    pub run_cycles: u32,
    /// Checked runs per size: 0 disables the correctness check
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u32,
    /// Datatype: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// 1: synchronize the stream after every operation
    #[arg(short = 'z', long = "blocking", default_value_t = 0)]
    pub blocking: u32,
    /// Capture the timed loop in a CUDA graph and launch it N times (0 = off)
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0)]
    pub cudagraph: u32,
    /// Time reduced over ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u32,
    /// Seconds a step (init, one size) may take before communicators are aborted (0 = off)
    #[arg(short = 'T', long = "timeout", default_value_t = 0)]
    pub timeout: u64,
    /// Buffer registration: 0 none, 1 ncclCommRegister, 2 symmetric window
    #[arg(short = 'R', long = "local_register", default_value_t = 0)]
    pub local_register: u32,
    /// Implementation(s): number or name, comma-separated, or `all` (see --list-impls)
    #[arg(short = 'D', long = "device_implementation", default_value = "0")]
    pub implementation: String,
    /// CTAs for device kernels (0 = the impl's tuned default)
    #[arg(short = 'V', long = "device_cta_count", default_value_t = 0)]
    pub cta_count: u32,
    /// Write results as JSON (schema ginbench/1) to FILE (`-` for stdout; the table then goes to stderr)
    #[arg(short = 'J', long = "output_file", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write result rows as CSV to FILE
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// 1: report host enqueue (CPU) time instead of completion time
    #[arg(short = 'C', long = "report_cputime", default_value_t = 0)]
    pub report_cputime: u32,
    /// 1: add per-iteration p50 / p99 columns to the table
    #[arg(short = 'I', long = "per_iter_timing", default_value_t = 0)]
    pub per_iter_timing: u32,
    /// Split this host's ranks into N virtual nodes for gin-emu / hybrid-emu (emulated GIN
    /// between them, NVLink inside them)
    #[arg(long = "emulate-nodes", value_name = "N")]
    pub emulate_nodes: Option<usize>,
    /// Fail (exit 8) instead of skipping gin / hybrid rows when GIN is unavailable
    #[arg(long = "require-gin")]
    pub require_gin: bool,
    /// Wrap this size's timed loop (out of place) in cuProfilerStart / Stop, for
    /// `nsys profile --capture-range=cudaProfilerApi` (use with one -D impl)
    #[arg(long = "profile-size", value_name = "SIZE")]
    pub profile_size: Option<String>,
    /// List the implementations and exit
    #[arg(long = "list-impls")]
    pub list_impls: bool,
}

/// Validated run configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub local_ranks: usize,
    pub sizes: Vec<u64>,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub iters: u32,
    pub warmup: u32,
    pub agg: u32,
    pub cycles: u32,
    pub check: u32,
    pub dtype: Dtype,
    pub blocking: bool,
    pub graph_launches: u32,
    pub average: u32,
    pub timeout_s: u64,
    pub register: u32,
    pub impls: Vec<&'static ImplInfo>,
    pub ctas: u32,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub cputime: bool,
    pub per_iter: bool,
    pub emulate_nodes: Option<usize>,
    pub require_gin: bool,
    pub profile_size: Option<u64>,
    pub command: String,
}

fn flag01(v: u32, flag: &str) -> Result<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::usage(format!("{flag} {v} is not 0 or 1"), format!("use {flag} 0 or {flag} 1"))),
    }
}

impl Config {
    pub fn from_args(a: &Args, command: String) -> Result<Config> {
        if a.nthreads == 0 || a.ngpus == 0 {
            return Err(Error::usage("-t and -g must be at least 1", "e.g. -t 1 -g 4"));
        }
        let min = sizes::parse_size(&a.minbytes)?;
        let max = sizes::parse_size(&a.maxbytes)?;
        let step = sizes::parse_size(&a.stepbytes)?;
        let sweep = sizes::sweep(min, max, a.stepfactor, step)?;
        if a.iters == 0 || a.agg_iters == 0 || a.run_cycles == 0 {
            return Err(Error::usage("-n, -m and -N must be at least 1", "e.g. -n 20 -m 1 -N 1"));
        }
        if a.average > 3 {
            return Err(Error::usage(format!("-a {} is not 0..3", a.average), "-a 0 rank 0, 1 average, 2 min, 3 max"));
        }
        if a.local_register > 2 {
            return Err(Error::usage(
                format!("-R {} is not 0, 1 or 2", a.local_register),
                "-R 0 none, 1 ncclCommRegister, 2 symmetric window",
            ));
        }
        let blocking = flag01(a.blocking, "-z")?;
        if blocking && a.cudagraph > 0 {
            return Err(Error::usage("-z 1 cannot be combined with -G", "drop one of them"));
        }
        let impls = registry::resolve(&a.implementation)?;
        if a.local_register != 2 {
            if let Some(i) = impls.iter().find(|i| i.needs_window) {
                return Err(Error::usage(
                    format!("implementation '{}' (-D {}) runs on symmetric windows", i.name, i.id),
                    "add -R 2",
                ));
            }
        }
        // nccl-tests caps -V at 128; H200 has 132 SMs and the NVLink kernels fit two CTAs per SM.
        let first_emu = impls.iter().map(|i| i.name).find(|n| n.ends_with("-emu"));
        crate::gin::check_emulate_nodes(a.emulate_nodes, a.implementation.trim() == "all", first_emu)?;
        let profile_size = a.profile_size.as_deref().map(sizes::parse_size).transpose()?;
        if let Some(p) = profile_size {
            if !sweep.contains(&p) {
                return Err(Error::usage(
                    format!("--profile-size {p} is not one of the sweep's sizes"),
                    "give a size the -b/-e/-f sweep visits, e.g. the value of -b",
                ));
            }
        }
        if a.cta_count > 1024 {
            return Err(Error::usage(format!("-V {} is above 1024", a.cta_count), "use -V 1..1024 (0 = default)"));
        }
        Ok(Config {
            local_ranks: a.nthreads * a.ngpus,
            sizes: sweep,
            min_bytes: min,
            max_bytes: max,
            iters: a.iters,
            warmup: a.warmup_iters,
            agg: a.agg_iters,
            cycles: a.run_cycles,
            check: a.check,
            dtype: Dtype::parse(&a.datatype)?,
            blocking,
            graph_launches: a.cudagraph,
            average: a.average,
            timeout_s: a.timeout,
            register: a.local_register,
            impls,
            ctas: a.cta_count,
            json: a.json.clone(),
            csv: a.csv.clone(),
            cputime: flag01(a.report_cputime, "-C")?,
            per_iter: flag01(a.per_iter_timing, "-I")?,
            emulate_nodes: a.emulate_nodes,
            require_gin: a.require_gin,
            profile_size,
            command,
        })
    }
}

/// Parse argv; help and version print and exit 0, errors print one line and exit 6.
pub fn parse(argv: Vec<String>) -> Result<Args> {
    crate::error::parse_args("alltoall_perf", argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Exit;

    fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["alltoall_perf".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        let a = parse(v)?;
        Config::from_args(&a, args.join(" "))
    }

    #[test]
    fn defaults_match_nccl_tests() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.sizes, vec![32 << 20]);
        assert_eq!(c.iters, 20);
        assert_eq!(c.check, 1);
        assert_eq!(c.dtype, Dtype::Float);
        assert_eq!(c.average, 1);
        assert_eq!(c.impls[0].name, "host");
        assert_eq!(c.local_ranks, 1);
    }

    #[test]
    fn parses_nccl_tests_style_flags() {
        let c =
            cfg(&["-b", "8", "-e", "2G", "-f", "4", "-R", "2", "-g", "4", "-n", "5", "-w", "1", "-c", "0"]).unwrap();
        assert_eq!(c.sizes.first(), Some(&8));
        assert_eq!(c.sizes.last(), Some(&(2 << 30)));
        assert_eq!(c.register, 2);
        assert_eq!(c.local_ranks, 4);
        assert_eq!(c.check, 0);
        let c = cfg(&["-D", "host", "-t", "2", "-g", "2", "-G", "3", "-I", "1"]).unwrap();
        assert_eq!(c.local_ranks, 4);
        assert_eq!(c.graph_launches, 3);
        assert!(c.per_iter);
        // a later flag wins, so scripts can append overrides
        let c = cfg(&["-e", "1G", "-e", "2G"]).unwrap();
        assert_eq!(c.max_bytes, 2 << 30);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for (args, needle) in [
            (vec!["-b", "2G", "-e", "1G"], "larger than maximum"),
            (vec!["-f", "0"], "step factor -f is 0"),
            (vec!["-b", "8X"], "unknown size suffix 'X'"),
            (vec!["-D", "warp-drive"], "unknown implementation 'warp-drive'"),
            (vec!["-D", "99"], "unknown implementation '99'"),
            (vec!["-R", "3"], "-R 3"),
            (vec!["-a", "7"], "-a 7"),
            (vec!["-z", "1", "-G", "1"], "-z 1 cannot"),
            (vec!["-d", "quaternion"], "unknown datatype"),
            (vec!["-t", "0"], "at least 1"),
            (vec!["--no-such-flag"], "--no-such-flag"),
            (vec!["-n", "many"], "many"),
            (vec!["-D", "gin-emu", "-R", "2"], "add --emulate-nodes"),
            (vec!["-b", "1M", "-e", "4M", "-f", "2", "--profile-size", "3M"], "not one of the sweep"),
            (vec!["-D", "hybrid-emu", "-R", "2", "--emulate-nodes", "0"], "--emulate-nodes 0"),
        ] {
            let e = cfg(&args).unwrap_err();
            assert_eq!(e.exit, Exit::Usage, "{args:?}: {e}");
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
            assert!(e.fix.is_some(), "{args:?} has no fix: {e}");
            assert!(!e.to_string().contains('\n'), "{args:?}: multi-line error {e}");
        }
    }
}
