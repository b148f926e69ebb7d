use ginbench::error::die;
use ginbench::{alltoall, cli, harness::watchdog};

const PROG: &str = "alltoall_perf";

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let command = argv.join(" ");
    let args = cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.list_impls {
        for i in alltoall::registry::IMPLS {
            println!("{:>2}  {:<12} {}", i.id, i.name, i.about);
        }
        return;
    }
    let cfg = cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    watchdog::start(PROG, cfg.timeout_s);
    match alltoall::bench::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
