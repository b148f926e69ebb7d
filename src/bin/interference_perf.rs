use ginbench::error::die;
use ginbench::interference::cli;

const PROG: &str = "interference_perf";

fn main() {
    let argv = ginbench::error::utf8_args().unwrap_or_else(|e| die(PROG, &e));
    let command = argv.join(" ");
    let args = cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.common.list_impls {
        let mut list = String::from("foreground --fg ep (ep_perf's implementations):\n");
        for i in ginbench::ep::registry::IMPLS {
            list += &format!("  {:<12} {}\n", i.name, i.about);
        }
        list += "foreground --fg alltoall (alltoall_perf's implementations):\n";
        for i in ginbench::alltoall::registry::IMPLS {
            list += &format!("  {:>2} {:<12} {}\n", i.id, i.name, i.about);
        }
        list += "background --bg: allreduce (ncclAllReduce, float, sum), none\n";
        return ginbench::console::out(&list).unwrap_or_else(|e| die(PROG, &e));
    }
    let cfg = cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    match ginbench::driver::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
