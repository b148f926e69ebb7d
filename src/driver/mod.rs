//! The one run driver every benchmark shares (as nccl-tests' common.cu serves every collective):
//! ranks up, GPU and NCCL opened, the environment gathered, the preamble, the benchmark's sweep
//! (which hands measurements to [`Output`]), the footer, the results files and the exit code.
//! A benchmark is a [`Benchmark`]: its flags, its preamble lines and its sweep.
pub mod cli;
pub mod output;

use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::error::{Error, Exit, Result};
use crate::harness::{self, watchdog};
use crate::nccl::{self, Comm};
use crate::results::{Env, Summary};
pub use cli::{Common, CommonArgs};
pub use output::{Output, Reduced};

/// What one rank's sweep gets from the driver.
pub struct RankCtx<'a> {
    pub boot: &'a dyn Bootstrap,
    pub gpu: &'a Gpu,
    pub comm: &'a Comm,
    pub env: &'a Env,
}

pub trait Benchmark: Send + Sync + Sized + 'static {
    /// Program name, for messages.
    const PROG: &'static str;
    /// The results' `benchmark` field.
    const KIND: crate::results::Kind;
    /// The command line: this benchmark's flags and the shared ones.
    type Args: clap::Parser;
    /// The shared flags of `args`.
    fn common_args(args: &Self::Args) -> &CommonArgs;
    /// The run's settings from the command line (`command`, for the results), after every check
    /// that needs no GPU.
    fn configure(args: &Self::Args, command: String) -> Result<Self>;
    /// What `--list-impls` prints.
    fn list_impls() -> String;
    fn common(&self) -> &Common;
    /// The run's settings after defaults, for the JSON's `config` (the driver adds the shared
    /// flags', [`Common::config_json`]).
    fn config_json(&self) -> serde_json::Value;
    /// Names of the impls of this run that need NCCL's GIN (for `--require-gin`).
    fn real_gin_impls(&self) -> Vec<&'static str>;
    /// Lines of the preamble that describe this benchmark's settings.
    fn describe(&self, env: &Env) -> String;
    /// Checks that need the GPU (e.g. `-V` against its SMs), before NCCL starts.
    fn check_gpu(&self, _gpu: &Gpu) -> Result<()> {
        Ok(())
    }
    /// Every cycle (`-N`) of the sweep on one rank: measurements go to `out`.
    fn sweep(&self, ctx: &RankCtx, out: &mut Output) -> Result<()>;
    /// The closing lines of each impl's table, over its rows (nccl-tests' footer: wrong rows;
    /// `alltoall_perf` adds the mean bus bandwidth).
    fn footer(summary: &Summary) -> String {
        crate::report::table::footer(summary.rows_wrong, None)
    }
}

/// The command-line items of a [`Benchmark`] impl whose `Args` (`$args`) flatten the shared flags
/// as `common` and whose settings come from its `from_args(args, command)`.
macro_rules! command_line {
    ($args:ty) => {
        type Args = $args;

        fn common_args(args: &$args) -> &$crate::driver::CommonArgs {
            &args.common
        }

        fn configure(args: &$args, command: String) -> $crate::error::Result<Self> {
            Self::from_args(args, command)
        }
    };
}
pub(crate) use command_line;

/// A benchmark program's `main`: the command line, `--list-impls`, the run. Every failure is one
/// line and its exit code.
pub fn program<B: Benchmark>() -> ! {
    let run = || -> Result<Exit> {
        let argv = crate::error::utf8_args()?;
        let command = argv.join(" ");
        let args: B::Args = crate::error::parse_args(B::PROG, argv)?;
        if B::common_args(&args).list_impls {
            crate::console::out(&B::list_impls())?;
            return Ok(Exit::Ok);
        }
        main(B::configure(&args, command)?)
    };
    match run() {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => crate::error::die(B::PROG, &e),
    }
}

/// Run `bench` on every rank (threads or MPI processes); returns the process exit code.
pub fn main<B: Benchmark>(bench: B) -> Result<Exit> {
    let c = bench.common();
    let loopback = crate::gin_backend::select(c.gin_backend, c.emulate_nodes, cli::launcher_rank())?;
    if let Some(l) = loopback {
        crate::environment::set_gin_plugin(l);
    }
    watchdog::start(B::PROG, c.timeout_s, output::save_unfinished);
    let local = c.local_ranks;
    harness::ranks::run(B::PROG, local, move |boot, device| run_rank(&bench, boot, device))
}

fn run_rank<B: Benchmark>(bench: &B, boot: &dyn Bootstrap, device: usize) -> Result<Exit> {
    let c = bench.common();
    let started_at = crate::results::now_rfc3339();
    let gpu = Gpu::open(device)?;
    crate::gin_transport::check_nodes_divide(c.emulate_nodes, boot.size())?;
    bench.check_gpu(&gpu)?;
    let gin = nccl::probe_gin(boot)?;
    let comm = Comm::bootstrap(boot)?;
    watchdog::beat();
    let env = crate::environment::gather(boot, &gpu, gin)?;
    if c.require_gin && env.gin.kind == crate::results::GinKind::None {
        if let Some(name) = bench.real_gin_impls().first() {
            return Err(Error::env(
                format!("{name} needs GIN (--require-gin) and GIN is unavailable: {}", env.gin.reason),
                "run on nodes with an RDMA NIC and a GIN backend (NCCL_GIN_TYPE), or drop --require-gin",
            ));
        }
    }
    if c.gin_backend == crate::gin_backend::Backend::Loopback && env.gin.kind == crate::results::GinKind::None {
        // Chosen explicitly, so a plugin that did not load or refused to start is an error, not a
        // skipped row: most often a malformed GINBENCH_LOOPBACK_* variable.
        return Err(Error::env(
            format!("--gin-backend loopback: NCCL brought up no GIN through the plugin: {}", env.gin.reason),
            "NCCL_DEBUG=WARN shows the plugin's own line (it starts 'ginbench-loopback:'); check the GINBENCH_LOOPBACK_* variables",
        ));
    }
    let mut config = bench.config_json();
    if let serde_json::Value::Object(m) = &mut config {
        m.extend(c.config_json());
    }
    let mut out = Output::new::<B>(boot.rank() == 0, c, env.clone(), started_at, config);
    out.preamble(boot, &gpu, &bench.describe(&env));
    let ctx = RankCtx { boot, gpu: &gpu, comm: &comm, env: &env };
    let result = bench.sweep(&ctx, &mut out);
    let exit = match &result {
        Ok(()) if out.wrong_rows() > 0 => Exit::WrongData,
        Ok(()) => Exit::Ok,
        Err(e) => e.exit,
    };
    out.finish(result.as_ref().err())?;
    gpu.stream.synchronize()?;
    result.map(|_| exit)
}
