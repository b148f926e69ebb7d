//! The flags every benchmark shares (nccl-tests' where they overlap), validated once. Each
//! benchmark flattens [`CommonArgs`] into its own clap struct and adds its own flags.
use crate::error::{Error, Result};
use crate::gin_transport::GinTransport;
use crate::harness::stats::Average;
use std::path::{Path, PathBuf};

/// `--version`: the crate version and the git commit the binary was built from (as the JSON's
/// `tool` object).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GINBENCH_GIT"), ")");

/// A benchmark's `--help` footer: its own text, then the exit codes every benchmark shares.
pub fn help_footer(text: &str) -> String {
    format!(
        "{text}

Exit codes: 0 ok, 1 internal error, 2 CUDA error, 3 NCCL error, 4 timeout, 6 bad usage,
7 wrong data, 8 environment (no GPU / driver, no matching NCCL, no MPI library)."
    )
}

/// Most iterations, cycles, checked runs or graph launches a flag may ask for: every timed
/// iteration also gets a CUDA event (the per-iteration pass), so a count far beyond any real run
/// would exhaust memory or run for days instead of failing at once.
pub const MAX_ITERATIONS: u32 = 1_000_000;

/// An enum of a flag nccl-tests gives as a number from 0 (`-R`, `-a`): the variants take the
/// numbers in the order written (`as u32` gives them back), and `ALL` lists them in that order,
/// for [`numbered`].
macro_rules! numbered_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl $name {
            /// Every value, at its number.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
        }
    };
}
pub(crate) use numbered_enum;

/// Parser of a flag nccl-tests gives as a number from 0 (`-R`, `-a`): the number is the index of
/// its value in `values`, and a number outside names the range, not u32's.
pub fn numbered<T: Copy + Send + Sync + 'static>(
    values: &'static [T],
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::value_parser!(u32).range(0..=values.len() as i64 - 1).map(move |n| values[n as usize])
}

/// Parser of a 0 / 1 flag (`-z`, `-C`, `-I`, `--*-split-share`; nccl-tests spells its switches
/// so) into a bool. The flag takes its value (`action = Set`), as bool fields otherwise take none.
pub fn zero_or_one() -> impl clap::builder::TypedValueParser<Value = bool> {
    numbered(&[false, true])
}

/// Parser of an iteration-count flag: `least..=MAX_ITERATIONS`.
pub fn iterations(least: u32) -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(i64::from(least)..=i64::from(MAX_ITERATIONS))
}

#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Thread groups per process, as in nccl-tests: the process runs -t × -g ranks, at most 4096
    /// (one host thread per GPU)
    #[arg(short = 't', long = "nthreads", default_value_t = 1)]
    pub nthreads: usize,
    /// GPUs per thread group
    #[arg(short = 'g', long = "ngpus", default_value_t = 1)]
    pub ngpus: usize,
    /// Timed iterations per measurement (1..=1000000)
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = iterations(1))]
    pub iters: u32,
    /// Warm-up iterations per measurement (untimed; at most 1000000)
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_parser = iterations(0))]
    pub warmup_iters: u32,
    /// Repeat the whole sweep N times (rows carry `cycle`; 1..=1000000)
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1, value_parser = iterations(1))]
    pub run_cycles: u32,
    /// Checked runs per measurement: 0 disables the correctness check (at most 1000000)
    #[arg(short = 'c', long = "check", default_value_t = 1, value_parser = iterations(0))]
    pub check: u32,
    /// Capture the timed loop in a CUDA graph and launch it N times (0 = off; at most 1000000)
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0, value_parser = iterations(0))]
    pub cudagraph: u32,
    /// Time reduced over ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum
    #[arg(short = 'a', long = "average", default_value = "1", value_parser = numbered(Average::ALL))]
    pub average: Average,
    /// Seconds a step (init, one measurement) may take before communicators are aborted and the
    /// run ends with exit 4, its results files holding the rows measured so far (0 = off; at most
    /// 604800, a week)
    #[arg(short = 'T', long = "timeout", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=604_800))]
    pub timeout: u64,
    /// CTAs for device kernels (0 = each impl's tuned default)
    #[arg(short = 'V', long = "device_cta_count", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub cta_count: u32,
    /// 1: add per-iteration p50 / p99 columns to the table, of completion time also with -C 1 (EP tables
    /// always show them)
    #[arg(short = 'I', long = "per_iter_timing", default_value = "0", value_parser = zero_or_one(), action = clap::ArgAction::Set)]
    pub per_iter_timing: bool,
    /// Write results as JSON (schema ginbench/1) to FILE (`-` for stdout; the table then goes to stderr)
    #[arg(short = 'J', long = "output_file", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write result rows as CSV to FILE
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Split this host's ranks into N virtual nodes for gin-emu / hybrid-emu (emulated GIN
    /// between them, NVLink inside them)
    #[arg(long = "emulate-nodes", value_name = "N")]
    pub emulate_nodes: Option<usize>,
    /// Fail (exit 8) instead of skipping gin / hybrid rows when GIN is unavailable
    #[arg(long = "require-gin")]
    pub require_gin: bool,
    /// GIN backend: `nccl` (what NCCL finds: a NIC's) or `loopback` (ginbench's plugin: GIN
    /// between this host's GPUs, no NIC; with --emulate-nodes under mpirun the processes become
    /// that many nodes to NCCL)
    #[arg(long = "gin-backend", value_enum, default_value = "nccl")]
    pub gin_backend: crate::gin_backend::Backend,
    /// Wrap one measurement's timed loop in cuProfilerStart / Stop, for
    /// `nsys profile --capture-range=cudaProfilerApi` (alltoall: a size; ep: tokens per rank)
    #[arg(long = "profile-size", value_name = "SIZE")]
    pub profile_size: Option<String>,
    /// List the implementations and exit
    #[arg(long = "list-impls")]
    pub list_impls: bool,
    /// Print the version (and the git commit it was built from) and exit
    #[arg(long = "version", action = clap::ArgAction::Version)]
    pub version: (),
}

/// A GIN request ([`crate::gin_transport::GinRequest`]) as flags `--<p>-contexts N` and
/// `--<p>-type TYPE`; `$whose` names the device communicators they shape. alltoall_perf and
/// ep_perf take `--gin-*` ([`GinArgs`]), interference_perf `--ep-gin-*` (its foreground's).
macro_rules! gin_flags {
    ($name:ident, $p:literal, $whose:literal) => {
        #[derive(clap::Args, Debug, Clone, Default)]
        pub struct $name {
            #[arg(help = concat!(
                "GIN contexts to ask for ", $whose,
                " (ncclDevCommRequirements ginContextCount, a hint: the JSON records what NCCL granted)"
            ))]
            #[arg(id = concat!($p, "-contexts"), long = concat!($p, "-contexts"), value_name = "N")]
            #[arg(value_parser = clap::value_parser!(u32).range(1..=i64::from($crate::gin_transport::MAX_GIN_CONTEXTS)))]
            pub contexts: Option<u32>,
            #[arg(help = concat!(
                "GIN backend to ask for ", $whose, " (ncclDevCommRequirements ginType; needs NCCL >= 2.31.2 headers)"
            ))]
            #[arg(id = concat!($p, "-type"), long = concat!($p, "-type"), value_enum, value_name = "TYPE")]
            pub gin_type: Option<$crate::gin_transport::GinType>,
        }

        impl $name {
            /// The request, checked; `reaches_gin`: some impl of the run is on NCCL's GIN.
            pub fn request(&self, reaches_gin: bool) -> $crate::error::Result<$crate::gin_transport::GinRequest> {
                let r = $crate::gin_transport::GinRequest { contexts: self.contexts, gin_type: self.gin_type };
                r.validate(concat!("--", $p), reaches_gin)?;
                Ok(r)
            }
        }
    };
}
pub(crate) use gin_flags;

gin_flags!(GinArgs, "gin", "the device communicators of gin / hybrid");

/// What the driver needs of an implementation's registry entry (alltoall's and EP's).
pub trait Entry: 'static {
    fn name(&self) -> &'static str;
    /// The GIN transport it runs on, if any.
    fn gin(&self) -> Option<GinTransport>;
    /// Runs on GIN emulated between virtual nodes (`--emulate-nodes`).
    fn emulated(&self) -> bool {
        self.gin().is_some_and(GinTransport::emulated)
    }
    /// Needs NCCL's own GIN.
    fn real_gin(&self) -> bool {
        self.gin().is_some_and(|g| !g.emulated())
    }
}

/// The names of `impls` that need NCCL's own GIN (for `--require-gin`).
pub fn real_gin_names<E: Entry>(impls: &[&E]) -> Vec<&'static str> {
    impls.iter().filter(|i| i.real_gin()).map(|i| i.name()).collect()
}

/// What a run's `-D` asks for, as far as the shared flags depend on it.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    /// The first `-emu` impl it names.
    pub first_emu: Option<&'static str>,
    /// `-D all`: every impl, each skipped where it cannot run.
    pub all: bool,
    /// Some impl on NCCL's GIN (gin, hybrid).
    pub real_gin: bool,
}

impl Asked {
    /// From `-D`'s text and the impls it resolved to.
    pub fn new<E: Entry>(spec: &str, impls: &[&E]) -> Asked {
        Asked {
            first_emu: impls.iter().find(|i| i.emulated()).map(|i| i.name()),
            all: spec.trim() == "all",
            real_gin: impls.iter().any(|i| i.real_gin()),
        }
    }
}

/// The shared settings, validated.
#[derive(Debug, Clone)]
pub struct Common {
    /// Ranks this process runs (-t × -g); 1 under an MPI launcher.
    pub local_ranks: usize,
    /// Ranks of the whole run when the command line or the launcher tells (threads: -t × -g;
    /// mpirun / srun: the world size they export); None when only MPI will tell.
    pub ranks: Option<usize>,
    pub iters: u32,
    pub warmup: u32,
    pub cycles: u32,
    pub check: u32,
    pub graph_launches: u32,
    pub average: Average,
    pub timeout_s: u64,
    /// `-V` as given: 0 = the impl's default.
    pub ctas: u32,
    pub per_iter: bool,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub emulate_nodes: Option<usize>,
    pub require_gin: bool,
    pub gin_backend: crate::gin_backend::Backend,
    pub command: String,
}

/// A comma-separated list, each item parsed; an empty list or item is an error, and a repeated
/// value (also one spelled two ways, e.g. bf16,bfloat16) is kept once, as a row measured twice
/// would pass for a second cycle. At most a sweep's points (`MAX_SWEEP`) distinct items.
pub fn list<T: PartialEq>(text: &str, what: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    if text.trim().is_empty() {
        return Err(Error::usage(format!("empty {what} list"), format!("give at least one {what}")));
    }
    let mut v: Vec<T> = vec![];
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(Error::usage(
                format!("empty item in the {what} list '{text}'"),
                "separate items with single commas",
            ));
        }
        let x = parse(item)?;
        if !v.contains(&x) {
            if v.len() as u64 == crate::harness::sizes::MAX_SWEEP {
                return Err(Error::usage(
                    format!("more than {} items in the {what} list", crate::harness::sizes::MAX_SWEEP),
                    "split the run",
                ));
            }
            v.push(x);
        }
    }
    Ok(v)
}

/// A `-D` value over a registry: `all`, or comma-separated items each naming one entry (`names`
/// says whether an item names an entry), each entry kept once, in the order given. `listing` is
/// what an unknown item's hint offers.
pub fn resolve_impls<T>(
    spec: &str,
    table: &'static [T],
    names: impl Fn(&T, &str) -> bool,
    listing: &str,
) -> Result<Vec<&'static T>> {
    if spec.trim() == "all" {
        return Ok(table.iter().collect());
    }
    let at = list(spec, "implementation", |item| {
        table.iter().position(|t| names(t, item)).ok_or_else(|| {
            Error::usage(format!("unknown implementation '{item}'"), format!("use -D all or one of {listing}"))
        })
    })?;
    Ok(at.into_iter().map(|k| &table[k]).collect())
}

impl Common {
    /// The settings of the shared flags every benchmark's JSON `config` holds.
    pub fn config_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        [
            ("local_ranks", json!(self.local_ranks)),
            ("iters", json!(self.iters)),
            ("warmup_iters", json!(self.warmup)),
            ("run_cycles", json!(self.cycles)),
            ("check", json!(self.check)),
            ("average", json!(self.average as u32)),
            ("timeout_s", json!(self.timeout_s)),
            ("emulate_nodes", json!(self.emulate_nodes)),
            ("require_gin", json!(self.require_gin)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Validate the shared flags against what `-D` asked for.
    pub fn from_args(a: &CommonArgs, asked: Asked, command: String) -> Result<Common> {
        if a.nthreads == 0 || a.ngpus == 0 {
            return Err(Error::usage("-t and -g must be at least 1", "e.g. -t 1 -g 4"));
        }
        let local_ranks = a.nthreads.checked_mul(a.ngpus).filter(|&r| r <= 4096).ok_or_else(|| {
            Error::usage(format!("-t {} × -g {} ranks in one process", a.nthreads, a.ngpus), "use -t × -g ≤ 4096")
        })?;
        let per_iter = a.per_iter_timing;
        let ranks = launcher_world_size().or((!crate::bootstrap::launched_by_mpi()).then_some(local_ranks));
        if ranks == Some(0) {
            return Err(Error::env(
                "the MPI launcher says the job has 0 ranks",
                "check its environment (OMPI_COMM_WORLD_SIZE, PMIX_SIZE, PMI_SIZE or SLURM_NTASKS)",
            ));
        }
        if crate::bootstrap::launched_by_mpi() && local_ranks != 1 {
            return Err(Error::usage(
                "under mpirun / srun each process is one rank",
                "drop -t / -g and start one process per GPU (mpirun -np <GPUs>)",
            ));
        }
        let loopback = a.gin_backend == crate::gin_backend::Backend::Loopback;
        // NCCL sees virtual nodes only where each process is one, with an NCCL_HOSTID made of the
        // launcher's rank and size: threads of one process are one node whatever
        // --emulate-nodes says.
        let per_process = launcher_rank().is_some();
        crate::gin_transport::check_emulate_nodes(
            a.emulate_nodes,
            asked.all,
            asked.first_emu,
            loopback && per_process,
        )?;
        // Loopback carries GIN for gin / hybrid, and with --emulate-nodes under mpirun NCCL's
        // traffic between the virtual nodes (so host runs on it too); else it changes nothing.
        let nccl_nodes = per_process && a.emulate_nodes.is_some();
        if loopback && !asked.real_gin && !asked.all && !nccl_nodes {
            return Err(Error::usage(
                "--gin-backend loopback carries GIN for gin / hybrid (or, with --emulate-nodes under mpirun / srun, NCCL's traffic between virtual nodes), and this run has neither",
                "drop it, or add gin / hybrid to -D",
            ));
        }
        if a.require_gin && !asked.real_gin {
            return Err(Error::usage(
                "--require-gin applies to the impls on NCCL's GIN (gin, hybrid), and this run has none",
                "drop it, or add gin / hybrid to -D",
            ));
        }
        if let Some(n) = ranks {
            crate::gin_transport::check_nodes_divide(a.emulate_nodes, n)?;
        }
        if let Some(p) = &a.json {
            if p != Path::new("-") {
                check_writable(p, "-J")?;
            }
        }
        if let Some(p) = &a.csv {
            if p == Path::new("-") {
                return Err(Error::usage(
                    "--csv - : CSV is written to a file",
                    "name a file (-J - puts JSON on stdout)",
                ));
            }
            check_writable(p, "--csv")?;
            if let Some(j) = &a.json {
                check_distinct((j, "-J"), (p, "--csv"))?;
            }
        }
        Ok(Common {
            local_ranks,
            ranks,
            iters: a.iters,
            warmup: a.warmup_iters,
            cycles: a.run_cycles,
            check: a.check,
            graph_launches: a.cudagraph,
            average: a.average,
            timeout_s: a.timeout,
            ctas: a.cta_count,
            per_iter,
            json: a.json.clone(),
            csv: a.csv.clone(),
            emulate_nodes: a.emulate_nodes,
            require_gin: a.require_gin,
            gin_backend: a.gin_backend,
            command,
        })
    }

    /// `-J -`: the JSON owns stdout and the table goes to stderr.
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some(Path::new("-"))
    }
}

/// The world size an MPI launcher exported for this process, if any.
fn launcher_world_size() -> Option<usize> {
    launcher_rank().map(|(_, n)| n)
}

/// (rank, ranks) as the MPI launcher exported them, before MPI is initialised: from the first
/// family of variables whose rank is set (Open MPI, PMIx, PMI, Slurm), that family alone, so a
/// PMIx launcher inside a Slurm allocation does not take the allocation's task count. None where
/// that family gives no size.
pub fn launcher_rank() -> Option<(usize, usize)> {
    const FAMILIES: [(&str, &str); 4] = [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMIX_RANK", "PMIX_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
    ];
    if !crate::bootstrap::launched_by_mpi() {
        return None;
    }
    let num = |v: &str| std::env::var(v).ok()?.trim().parse().ok();
    let (rank, size) = FAMILIES.iter().find(|(rank, _)| std::env::var_os(rank).is_some())?;
    Some((num(rank)?, num(size)?))
}

/// A results file must be writable before hours of measurement: its folder exists and takes a
/// new file, and the path names a file (not a folder, nor a device, FIFO or socket that writing
/// the results atomically would replace). A symbolic link is written through to its target.
pub fn check_writable(path: &Path, flag: &str) -> Result<()> {
    let shown = path.display();
    // `-` is stdout only for the benchmarks' -J (handled before this); elsewhere it would quietly
    // become a file named `-`.
    if path == Path::new("-") {
        return Err(Error::usage(format!("{flag} - : {flag} writes a file, not stdout"), "name a file"));
    }
    // `x.json/.` and `x.json/..` name folders too, though Path drops a trailing `.` and sees a
    // file name `x.json`: the rename at the end would fail, after the work.
    let text = path.as_os_str().to_string_lossy();
    let last = text.rsplit('/').next().unwrap_or("");
    if text.ends_with('/') || last == "." || last == ".." || path.is_dir() {
        return Err(Error::usage(format!("{flag} {shown} names a folder"), "give a file name"));
    }
    if path.exists() && !path.is_file() {
        return Err(Error::usage(
            format!("{flag} {shown} exists and is not a regular file"),
            "give the name of a new or regular file",
        ));
    }
    let target = crate::report::resolve_link(path)
        .map_err(|e| Error::usage(format!("{flag} {shown}: {e}"), "give a file name whose link resolves"))?;
    let dir = crate::report::folder_of(&target);
    if !dir.is_dir() {
        return Err(Error::usage(
            format!("{flag} {shown}: folder {} does not exist", dir.display()),
            "create the folder first, or write somewhere else",
        ));
    }
    // The name itself: one longer than Linux's NAME_MAX (what its usual file systems take) would
    // pass the folder probe and fail only when the results are written, after the run.
    const NAME_MAX: usize = 255;
    if target.file_name().is_some_and(|n| n.len() > NAME_MAX) {
        return Err(Error::usage(
            format!("{flag} {shown}: the file name is over the {NAME_MAX} bytes a name may have"),
            "give a shorter file name",
        ));
    }
    let (probe, _) = crate::report::temp_file(dir).map_err(|e| {
        Error::usage(format!("{flag} {shown}: cannot write in {}: {e}", dir.display()), "choose a writable folder")
    })?;
    // The probe is this process's: its owner is who we are.
    let me = std::fs::metadata(&probe).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let _ = std::fs::remove_file(&probe);
    if let (Ok(file), Ok(me)) = (std::fs::metadata(&target), me) {
        check_replaceable(&file, dir, me).map_err(|why| {
            Error::usage(
                format!("{flag} {shown} exists and {why}"),
                "give the name of a new file or one you may replace",
            )
        })?;
    }
    Ok(())
}

/// Why the results file `file` (in `dir`, checked by user `me`), which exists, could not be
/// replaced by the rename of the atomic write, which needs the folder's permission, not the
/// file's: a sticky folder (/tmp) keeps it for its owner.
fn check_replaceable(file: &std::fs::Metadata, dir: &Path, me: u32) -> std::result::Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    const STICKY: u32 = 0o1000;
    let sticky = std::fs::metadata(dir).is_ok_and(|d| d.mode() & STICKY != 0 && d.uid() != me);
    if sticky && me != 0 && file.uid() != me {
        return Err(format!("belongs to user {} in a sticky folder, which only its owner may replace", file.uid()));
    }
    Ok(())
}

/// Two results flags naming one file would leave only the last written.
pub fn check_distinct(a: (&Path, &str), b: (&Path, &str)) -> Result<()> {
    if crate::report::same_file(a.0, b.0) {
        return Err(Error::usage(
            format!("{} and {} both name {}", a.1, b.1, a.0.display()),
            "give each output its own file",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_holds_at_most_a_sweeps_points() {
        let n = crate::harness::sizes::MAX_SWEEP;
        let items = |k: u64| (1..=k).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        let parse = |s: &str| Ok(s.parse::<u64>().unwrap());
        assert_eq!(list(&items(n), "size", parse).unwrap().len() as u64, n);
        let e = list(&items(n + 1), "size", parse).unwrap_err();
        assert!(e.msg.contains("more than 10000 items in the size list"), "{e}");
    }

    #[test]
    fn results_targets_are_checked_up_front() {
        let dir = std::env::temp_dir();
        assert!(check_writable(&dir.join("ginbench-ok.json"), "-J").is_ok());
        let e = check_writable(Path::new("/nonexistent/dir/x.json"), "-J").unwrap_err();
        assert!(e.msg.contains("does not exist"), "{e}");
        let e = check_writable(&dir, "--csv").unwrap_err();
        assert!(e.msg.contains("names a folder"), "{e}");
        for p in ["x.json/.", "x.json/..", ".", ".."] {
            let e = check_writable(Path::new(p), "-J").unwrap_err();
            assert!(e.msg.contains("names a folder"), "{p}: {e}");
        }
        let e = check_writable(Path::new("x.json/"), "-J").unwrap_err();
        assert!(e.msg.contains("names a folder"), "{e}");
        let e = check_writable(Path::new("-"), "--junit").unwrap_err();
        assert!(e.msg.contains("writes a file, not stdout"), "{e}");
        let e = check_writable(Path::new("/dev/null"), "-J").unwrap_err();
        assert!(e.msg.contains("not a regular file"), "{e}");
        let e = check_distinct((Path::new("a.json"), "-J"), (Path::new("a.json"), "--csv")).unwrap_err();
        assert!(e.msg.contains("-J and --csv both name a.json"), "{e}");
        // Spelled differently, not yet existing: still one file.
        let (a, b) = (dir.join("ginbench-same.json"), dir.join(".").join("ginbench-same.json"));
        assert!(check_distinct((&a, "-J"), (&b, "--csv")).is_err());
        assert!(check_distinct((Path::new("a.json"), "-J"), (Path::new("a.csv"), "--csv")).is_ok());
        let e = check_writable(&dir.join("x".repeat(300)), "-J").unwrap_err();
        assert!(e.msg.contains("the file name is over the 255 bytes"), "{e}");
        assert!(check_writable(&dir.join("x".repeat(255)), "-J").is_ok());
    }

    /// An existing results file the atomic write could not replace is refused up front: in a
    /// sticky folder (as /tmp), one that belongs to another user. A read-only one is replaced.
    #[test]
    fn an_existing_results_file_must_be_replaceable() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("ginbench-sticky-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let file = dir.join("old.json");
        std::fs::write(&file, "{}").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let owner = meta.uid();
        assert!(check_replaceable(&meta, &dir, owner).is_ok(), "the owner may");
        let other = if owner == 1 { 2 } else { 1 };
        let e = check_replaceable(&meta, &dir, other).unwrap_err();
        assert!(e.contains("in a sticky folder, which only its owner may replace"), "{e}");
        assert!(check_replaceable(&meta, &dir, 0).is_ok(), "root may");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert!(check_writable(&file, "-J").is_ok(), "the rename replaces a read-only file");
        crate::report::write_atomic(&file, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The shared settings as alltoall_perf's command line gives them.
    fn common(args: &[&str]) -> Common {
        crate::alltoall::cli::tests::cfg(args).unwrap().common
    }

    #[test]
    fn the_shared_settings_reach_the_json_config() {
        let c = common(&["-g", "2", "-n", "7", "-w", "3", "-N", "2", "-c", "4", "-a", "2", "-T", "60"]);
        let m = c.config_json();
        for (k, v) in [
            ("local_ranks", 2),
            ("iters", 7),
            ("warmup_iters", 3),
            ("run_cycles", 2),
            ("check", 4),
            ("average", 2),
            ("timeout_s", 60),
        ] {
            assert_eq!(m[k], v, "{k}");
        }
        assert_eq!(m["emulate_nodes"], serde_json::Value::Null);
        assert_eq!(m["require_gin"], false);
        // -J - puts the JSON on stdout (and the table on stderr); without it stdout is the table's.
        assert!(common(&["-J", "-"]).json_to_stdout());
        assert!(!c.json_to_stdout());
    }

    #[test]
    fn require_gin_names_the_impls_on_nccls_gin() {
        let impls = crate::alltoall::registry::resolve("host,gin,gin-emu,hybrid,hybrid-emu").unwrap();
        assert_eq!(real_gin_names(&impls), vec!["gin", "hybrid"]);
        assert!(real_gin_names(&crate::alltoall::registry::resolve("host,gin-emu").unwrap()).is_empty());
    }

    #[test]
    fn without_a_launcher_there_is_no_launcher_rank() {
        if crate::bootstrap::launched_by_mpi() {
            return; // this test is about runs that no MPI launcher started
        }
        assert_eq!(launcher_rank(), None);
    }
}
