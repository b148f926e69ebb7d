//! Rank 0's table text as the driver writes it, no GPU needed: each impl's section closes with
//! the footer of its own rows, once, in every cycle (`-N`), also when the run ends in error
//! mid-section; a section in which nothing ran has none. The text goes to the process's stdout,
//! so each case runs in a child process (this test binary again) whose stdout is read.
use ginbench::results::{Row, Status};
use std::process::Command;

const CHILD: &str = "GINBENCH_OUTPUT_TEST_CHILD";

fn row(impl_name: &str, busbw: f64) -> Row {
    Row {
        impl_name: impl_name.into(),
        time_us: Some(1.0),
        busbw_gbps: Some(busbw),
        wrong: Some(0),
        ..Default::default()
    }
}

/// In the child: alltoall_perf's Output over two cycles of two impls (`nvl` ran nothing), then
/// a third section ended by an error ("error") or not ("ok").
fn child(mode: &str) -> ! {
    use ginbench::alltoall::cli;
    use ginbench::driver::output::Output;
    let argv = ["alltoall_perf"].iter().map(|s| s.to_string()).collect();
    let a = ginbench::error::parse_args::<cli::Args>("alltoall_perf", argv).unwrap();
    let c = cli::Config::from_args(&a, String::new()).unwrap();
    let env = ginbench::results::Env::default();
    let mut out = Output::new::<cli::Config>(true, &c.common, env, "t".into(), serde_json::json!({}));
    for cycle in 0..2 {
        out.cycle = cycle;
        out.section(&format!("impl host cycle {cycle}"), "# header\n");
        out.rows(None, vec![row("host", 100.0 * f64::from(cycle + 1)), row("host", 300.0)]);
        out.section(&format!("impl nvl cycle {cycle}"), "# header\n");
        out.rows(None, vec![Row { status: Status::Skipped, reason: Some("no".into()), ..row("nvl", 0.0) }]);
    }
    out.section("impl last", "# header\n");
    out.rows(None, vec![row("last", 50.0)]);
    let error = (mode == "error").then(|| ginbench::error::Error::internal("stopped"));
    if error.is_some() {
        out.measuring("last 64 B", &[], vec![Row { impl_name: "last".into(), ..Default::default() }]);
    }
    out.finish(error.as_ref()).unwrap();
    std::process::exit(0)
}

/// The child's stdout, run in `mode`.
fn text(test: &str, mode: &str) -> String {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
    }
    let me = std::env::current_exe().expect("the test binary");
    let o = Command::new(me).args([test, "--exact", "--nocapture"]).env(CHILD, mode).output().expect("child runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The footer lines in order, each after the title of the section it closes.
fn footers(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut found = vec![];
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# impl ") {
            section = t.to_string();
        } else if let Some(bw) = line.strip_prefix("# Avg bus bandwidth    : ") {
            found.push(format!("{section}: {}", bw.trim()));
        }
    }
    found
}

#[test]
fn each_section_closes_with_its_own_footer_in_every_cycle() {
    let t = text("each_section_closes_with_its_own_footer_in_every_cycle", "ok");
    assert_eq!(footers(&t), ["host cycle 0: 200", "host cycle 1: 250", "last: 50"], "{t}");
    assert_eq!(t.matches("# Out of bounds values : 0 OK").count(), 3, "{t}");
}

#[test]
fn a_run_ending_in_error_closes_its_last_section_once() {
    let t = text("a_run_ending_in_error_closes_its_last_section_once", "error");
    assert_eq!(footers(&t), ["host cycle 0: 200", "host cycle 1: 250", "last: 50"], "{t}");
}
