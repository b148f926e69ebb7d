use ginbench::error::die;
use ginbench::{ep, harness::watchdog};

const PROG: &str = "ep_perf";

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let command = argv.join(" ");
    let args = ep::cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.list_impls {
        for (name, about) in ep::IMPLS {
            println!("{name:<12} {about}");
        }
        println!();
        for (name, s) in ep::shape::PRESETS {
            println!("preset {name:<14} hidden {:>5}  top-{:<2} {:>4} experts", s.hidden, s.topk, s.experts);
        }
        return;
    }
    let cfg = ep::cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    watchdog::start(PROG, cfg.timeout_s);
    match ep::bench::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
