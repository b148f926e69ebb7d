use ginbench::alltoall::{cli, registry};
use ginbench::error::die;

const PROG: &str = "alltoall_perf";

fn main() {
    let argv = ginbench::error::utf8_args().unwrap_or_else(|e| die(PROG, &e));
    let command = argv.join(" ");
    let args = cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.common.list_impls {
        let list: String =
            registry::IMPLS.iter().map(|i| format!("{:>2}  {:<12} {}\n", i.id, i.name, i.about)).collect();
        return ginbench::console::out(&list).unwrap_or_else(|e| die(PROG, &e));
    }
    let cfg = cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    match ginbench::driver::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
