use ginbench::error::die;
use ginbench::interference::cli;

const PROG: &str = "interference_perf";

fn main() {
    let argv = ginbench::error::utf8_args().unwrap_or_else(|e| die(PROG, &e));
    let command = argv.join(" ");
    let args = cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.common.list_impls {
        println!("foreground --fg ep (ep_perf's implementations):");
        for i in ginbench::ep::registry::IMPLS {
            println!("  {:<12} {}", i.name, i.about);
        }
        println!("foreground --fg alltoall (alltoall_perf's implementations):");
        for i in ginbench::alltoall::registry::IMPLS {
            println!("  {:>2} {:<12} {}", i.id, i.name, i.about);
        }
        println!("background --bg: allreduce (ncclAllReduce, float, sum), none");
        return;
    }
    let cfg = cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    match ginbench::driver::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
