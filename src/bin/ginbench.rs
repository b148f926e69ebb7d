use clap::{Parser, Subcommand};
use ginbench::error::{die, Error, Exit};
use ginbench::sysinfo;

const PROG: &str = "ginbench";

#[derive(Parser)]
#[command(name = "ginbench", version, about = "ginbench: node report and results tools")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// What this node offers: NCCL, CUDA driver, GPUs and topology, network, GIN, variables.
    /// Exit 8 when no GPU or no matching NCCL was found.
    Env {
        /// Print the `env` object of the results schema as JSON instead
        #[arg(long)]
        json: bool,
    },
    /// Check the MPI bootstrap: run under mpirun / srun; every rank exchanges bytes with every
    /// other and reports its rank, host and local rank. No GPU needed.
    MpiCheck,
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        use clap::error::ErrorKind::*;
        if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
            let _ = e.print();
            std::process::exit(0);
        }
        let first =
            e.to_string().lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string();
        die(PROG, &Error::usage(first, "see ginbench --help"))
    });
    match cli.cmd {
        Cmd::Env { json } => {
            let r = sysinfo::collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&r.env).expect("env serializes"));
            } else {
                print!("{}", sysinfo::render(&r));
            }
            std::process::exit(if r.problems.is_empty() { 0 } else { Exit::Environment as i32 });
        }
        Cmd::MpiCheck => match ginbench::bootstrap::check::run() {
            Ok(line) => println!("{line}"),
            Err(e) => die(PROG, &e),
        },
    }
}
