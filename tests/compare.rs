//! The regression gate: verdicts, fail-closed rules, outputs, exit codes, and a fuzzed loader.
use ginbench::report::compare::{self, Verdict};
use ginbench::report::json;
use ginbench::report::schema::*;
use std::process::Command;

mod common;
use common::{row, run};

fn verdict(o: &compare::Outcome, key_part: &str) -> Verdict {
    o.findings.iter().find(|f| f.key.contains(key_part)).unwrap_or_else(|| panic!("no {key_part}")).verdict
}

#[test]
fn identical_runs_pass() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 11.0, 0), row("host", 1 << 20, 20.0, 22.0, 0)]);
    let o = compare::compare(&b, &b.clone(), 0.05).unwrap();
    assert!(o.passed);
    assert!(o.findings.iter().all(|f| f.verdict == Verdict::Unchanged));
}

#[test]
fn slower_beyond_threshold_and_spread_is_a_regression() {
    let b = run(vec![row("nvl", 1 << 30, 100.0, 104.0, 0), row("host", 1 << 30, 100.0, 130.0, 0)]);
    // nvl: +10 % and beyond p99 104 -> regression. host: +10 % but within its p99 of 130 -> not.
    let c = run(vec![row("nvl", 1 << 30, 110.0, 112.0, 0), row("host", 1 << 30, 110.0, 112.0, 0)]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(verdict(&o, "nvl"), Verdict::Regression);
    assert_eq!(verdict(&o, "host"), Verdict::Unchanged);
    assert_eq!(o.findings[0].verdict, Verdict::Regression, "worst first");
    // a 20 % threshold lets it through
    assert!(compare::compare(&b, &c, 0.20).unwrap().passed);
    // faster is an improvement, never a failure
    let fast = run(vec![row("nvl", 1 << 30, 80.0, 81.0, 0), row("host", 1 << 30, 100.0, 101.0, 0)]);
    let o = compare::compare(&b, &fast, 0.05).unwrap();
    assert!(o.passed);
    assert_eq!(verdict(&o, "nvl"), Verdict::Improvement);
}

#[test]
fn repeated_runs_define_the_spread() {
    // Baseline cycles 100, 112, 101 (mean 104.3): a candidate at 111 is +6 % but not slower than
    // the slowest baseline run; at 115 it is.
    let b = run(vec![
        row("nvl", 1 << 30, 100.0, 100.0, 0),
        row("nvl", 1 << 30, 112.0, 112.0, 1),
        row("nvl", 1 << 30, 101.0, 101.0, 2),
    ]);
    let c = run(vec![row("nvl", 1 << 30, 111.0, 111.0, 0)]);
    assert!(compare::compare(&b, &c, 0.05).unwrap().passed);
    let c = run(vec![row("nvl", 1 << 30, 115.0, 115.0, 0)]);
    assert!(!compare::compare(&b, &c, 0.05).unwrap().passed);
}

#[test]
fn fails_closed() {
    let b = run(vec![
        row("nvl", 1 << 20, 10.0, 10.0, 0),
        row("host", 1 << 20, 20.0, 20.0, 0),
        row("auto", 1 << 20, 5.0, 5.0, 0),
    ]);
    let mut skipped = row("host", 1 << 20, 0.0, 0.0, 0);
    skipped.status = "skipped".into();
    skipped.time_us = None;
    skipped.reason = Some("GIN unavailable".into());
    let mut wrong = row("auto", 1 << 20, 5.0, 5.0, 0);
    wrong.wrong = Some(3);
    let mut new_skipped = row("gin", 1 << 20, 0.0, 0.0, 0);
    new_skipped.status = "skipped".into();
    new_skipped.time_us = None;
    let c = run(vec![skipped, wrong, row("nvl-ll", 1 << 20, 3.0, 3.0, 0), new_skipped]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(verdict(&o, "alltoall nvl 1048576"), Verdict::Missing);
    assert_eq!(verdict(&o, "alltoall host"), Verdict::NewlySkipped);
    assert_eq!(verdict(&o, "alltoall auto"), Verdict::Wrong);
    assert_eq!(verdict(&o, "alltoall nvl-ll"), Verdict::New);
    assert_eq!(verdict(&o, "alltoall gin"), Verdict::NotCompared);
    let text = compare::render_text(&o);
    assert!(text.starts_with("ginbench compare: FAIL"), "{text}");
    assert!(text.contains("GIN unavailable"), "{text}");
    let junit = compare::to_junit(&o);
    assert_eq!(junit.matches("<failure").count(), 3, "{junit}");
    assert!(junit.contains("failures=\"3\""));
    let j: serde_json::Value = serde_json::from_str(&compare::to_json(&o)).unwrap();
    assert_eq!(j["passed"], false);
    assert_eq!(j["schema"], "ginbench-compare/1");
}

#[test]
fn bad_inputs() {
    assert_eq!(compare::parse_threshold("5%").unwrap(), 0.05);
    assert_eq!(compare::parse_threshold("12.5").unwrap(), 0.125);
    assert!(compare::parse_threshold("-1%").is_err());
    assert!(compare::parse_threshold("fast").is_err());
    let mut ep = run(vec![]);
    ep.benchmark = "ep".into();
    assert!(compare::compare(&run(vec![]), &ep, 0.05).unwrap_err().contains("cannot compare"));
}

/// Deterministic xorshift: reproducible fuzzing without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn loader_survives_mutated_input() {
    let seed_doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run.json")).unwrap();
    let base = json::parse(&seed_doc).unwrap();
    let tokens: [&[u8]; 9] = [b"null", b"-1", b"1e400", b"\"x\"", b"[]", b"{}", b"NaN", b"\xff", b"\"ok\""];
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let (mut parsed, mut rejected) = (0, 0);
    for _ in 0..3000 {
        let mut bytes = seed_doc.as_bytes().to_vec();
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() as usize) % bytes.len();
            match rng.next() % 4 {
                0 => bytes[at] = rng.next() as u8,
                1 => bytes.truncate(at),
                2 => {
                    let t = tokens[(rng.next() as usize) % tokens.len()];
                    bytes.splice(at..at, t.iter().cloned());
                }
                _ => {
                    let end = (at + 1 + (rng.next() as usize) % 16).min(bytes.len());
                    bytes.drain(at..end);
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        match json::parse(&String::from_utf8_lossy(&bytes)) {
            Ok(run) => {
                parsed += 1;
                // whatever parses must also compare without panicking
                let _ = compare::compare(&base, &run, 0.05);
                let _ = compare::compare(&run, &base, 0.05);
            }
            Err(e) => {
                rejected += 1;
                assert!(!e.is_empty());
            }
        }
    }
    assert!(parsed > 0 && rejected > 0, "parsed {parsed}, rejected {rejected}");
}

#[test]
fn exit_codes_of_the_command() {
    let gb = env!("CARGO_BIN_EXE_ginbench");
    let dir = std::env::temp_dir().join(format!("ginbench-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, r: &Run| {
        let p = dir.join(name);
        json::write(&p, r).unwrap();
        p
    };
    let base = write("base.json", &run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0)]));
    let same = write("same.json", &run(vec![row("nvl", 1 << 30, 100.5, 101.0, 0)]));
    let slow = write("slow.json", &run(vec![row("nvl", 1 << 30, 150.0, 151.0, 0)]));
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"version\": 3, \"results\": []}").unwrap();
    let out = |args: &[&std::path::Path], extra: &[&str]| {
        let mut c = Command::new(gb);
        c.arg("compare").args(args).args(extra);
        c.output().unwrap()
    };
    assert_eq!(out(&[&base, &same], &[]).status.code(), Some(0));
    let junit = dir.join("gate.xml");
    let o = out(&[&base, &slow], &["--junit", junit.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("regression"));
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<failure"));
    for bad in [
        out(&[&base, &junk], &[]),
        out(&[&base, &dir.join("absent.json")], &[]),
        out(&[&base, &same], &["--threshold", "x"]),
    ] {
        assert_eq!(bad.status.code(), Some(2));
        let e = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    let o = Command::new(gb).args(["compare", "only-one.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("CANDIDATE"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn loader_accepts_a_byte_order_mark() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run.json")).unwrap();
    let with_bom = format!("\u{feff}{doc}");
    assert_eq!(json::parse(&with_bom).unwrap(), json::parse(&doc).unwrap());
    // and through the command: a file saved by an editor that writes a BOM still compares
    let dir = std::env::temp_dir().join(format!("ginbench-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bom.json");
    std::fs::write(&p, with_bom).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).arg("compare").args([&p, &p]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_subcommand_is_bad_input() {
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("Usage: ginbench <COMMAND>"), "{e}");
    assert!(o.stdout.is_empty(), "usage goes to stderr");
    // asking for help is still a success, on stdout
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: ginbench <COMMAND>"));
}
