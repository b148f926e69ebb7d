use ginbench::ep::{cli, registry, shape};
use ginbench::error::die;

const PROG: &str = "ep_perf";

fn main() {
    let argv = ginbench::error::utf8_args().unwrap_or_else(|e| die(PROG, &e));
    let command = argv.join(" ");
    let args = cli::parse(argv).unwrap_or_else(|e| die(PROG, &e));
    if args.common.list_impls {
        let mut list: String = registry::IMPLS.iter().map(|i| format!("{:<12} {}\n", i.name, i.about)).collect();
        list += "\n";
        for (name, s) in shape::PRESETS {
            list += &format!("preset {name:<14} hidden {:>5}  top-{:<2} {:>4} experts\n", s.hidden, s.topk, s.experts);
        }
        return ginbench::console::out(&list).unwrap_or_else(|e| die(PROG, &e));
    }
    let cfg = cli::Config::from_args(&args, command).unwrap_or_else(|e| die(PROG, &e));
    match ginbench::driver::main(cfg) {
        Ok(code) => std::process::exit(code as i32),
        Err(e) => die(PROG, &e),
    }
}
