//! interference_perf on a machine without GPUs: its command line, its rows (table, JSON, CSV
//! against golden files), the gate on them and the report.
use ginbench::report::compare::{self, Verdict};
use ginbench::report::sidebyside::{self, Labeled};
use ginbench::report::{csv, json, table};
use ginbench::results::*;
use std::process::Command;

mod common;
use common::{golden, interference_row, interference_run};

const BIN: &str = env!("CARGO_BIN_EXE_interference_perf");
const GB: &str = env!("CARGO_BIN_EXE_ginbench");

fn sample() -> Run {
    let mut skipped = interference_row(1 << 30, (1.0, 1.0), (1.0, 1.0), 0);
    skipped.impl_name = "gin".into();
    skipped.status = Status::Skipped;
    skipped.reason = Some("GIN unavailable: ncclDevCommCreate failed".into());
    (skipped.time_us, skipped.alone_us, skipped.together_us, skipped.slowdown, skipped.overlap) =
        (None, None, None, None, None);
    (skipped.algbw_gbps, skipped.busbw_gbps, skipped.wrong) = (None, None, None);
    skipped.background.as_mut().unwrap().alone_us = None;
    let b = skipped.background.as_mut().unwrap();
    (b.together_us, b.slowdown, b.busbw_alone_gbps, b.busbw_together_gbps, b.wrong) = (None, None, None, None, None);
    let mut partial = interference_row(1 << 30, (120.5, 250.25), (6100.0, 6500.0), 0);
    partial.overlap = Some(0.875);
    partial.reason = Some("overlap incomplete: the background covered 87.5% of the foreground's timed window".into());
    let mut none = interference_row(0, (120.5, 120.5), (1.0, 1.0), 0);
    (none.together_us, none.slowdown, none.overlap) = (None, None, None);
    none.background = Some(Background { op: BgOp::None, ..Default::default() });
    let rows = vec![
        interference_row(1 << 20, (120.5, 131.0), (20.25, 33.5), 0),
        interference_row(64 << 20, (120.5, 180.75), (410.0, 520.125), 0),
        partial,
        skipped,
        none,
    ];
    let mut r = interference_run(rows);
    r.summary = Some(Summary::of(&r.rows));
    r
}

#[test]
fn table_json_and_csv_match_golden() {
    let run = sample();
    let mut t = table::interference_header(false);
    for r in &run.rows {
        t += &table::interference_line(r).unwrap_or_default();
        t += &table::reason(r).unwrap_or_default();
    }
    t += &table::interference_header(true);
    golden("interference_table.txt", &t);
    // Every data line is numbers where nccl-tests prints numbers (type, redop and N/A aside).
    for l in t.lines().filter(|l| !l.starts_with('#')) {
        for (i, f) in l.split_whitespace().enumerate() {
            assert!(i == 2 || i == 3 || f == "N/A" || f.parse::<f64>().is_ok(), "'{f}' in '{l}'");
        }
    }
    let text = json::to_string(&run);
    golden("interference_run.json", &text);
    let back: Run = serde_json::from_str(&text).unwrap();
    assert_eq!(back.benchmark, Kind::Interference);
    assert_eq!(back.rows.len(), run.rows.len());
    for (a, b) in back.rows.iter().zip(&run.rows) {
        assert_eq!(
            (&a.background.as_ref().map(|b| (&b.op, b.size_bytes)), a.status),
            (&b.background.as_ref().map(|b| (&b.op, b.size_bytes)), b.status)
        );
        assert_eq!((a.alone_us, a.together_us, a.overlap), (b.alone_us, b.together_us, b.overlap));
    }
    let c = csv::to_string(&run.rows);
    golden("interference_rows.csv", &c);
    let header: Vec<&str> = c.lines().next().unwrap().split(',').collect();
    for col in [
        "alone_us",
        "together_us",
        "slowdown",
        "overlap",
        "background.op",
        "background.size_bytes",
        "background.busbw_together_gbps",
    ] {
        assert!(header.contains(&col), "CSV lacks {col}");
    }
}

#[test]
fn the_gate_keys_by_background_and_compares_together_times() {
    let base = sample();
    let o = compare::compare(&base, &base.clone(), 0.05).unwrap();
    assert!(o.passed);
    // Each background size is its own key.
    assert!(o.findings.iter().any(|f| f.key.ends_with("bg=allreduce:1048576")));
    assert!(o.findings.iter().any(|f| f.key.ends_with("bg=allreduce:67108864")));
    assert!(o.findings.iter().any(|f| f.key.ends_with("bg=none:0")));
    // The foreground slowed down by 30 % beside a 64 MB all-reduce: a regression, though its
    // alone time did not move.
    let mut slow = base.clone();
    let r = &mut slow.rows[1];
    r.together_us = Some(180.75 * 1.3);
    r.time_us = r.together_us;
    r.slowdown = Some(180.75 * 1.3 / 120.5);
    let o = compare::compare(&base, &slow, 0.05).unwrap();
    assert!(!o.passed);
    let f = o.findings.iter().find(|f| f.verdict == Verdict::Regression).unwrap();
    assert!(f.key.ends_with("bg=allreduce:67108864"), "{}", f.key);
    // A wrong background element fails the gate like a wrong foreground one.
    let mut wrong = base.clone();
    wrong.rows[0].wrong = Some(3);
    wrong.rows[0].background.as_mut().unwrap().wrong = Some(3);
    assert_eq!(compare::compare(&base, &wrong, 0.05).unwrap().findings[0].verdict, Verdict::Wrong);
    // A background that covered less of the foreground than the baseline's measured less
    // interference: its faster together time is no improvement.
    let mut thin = base.clone();
    let r = &mut thin.rows[0];
    (r.overlap, r.together_us, r.time_us) = (Some(0.02), Some(121.0), Some(121.0));
    let o = compare::compare(&base, &thin, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(o.findings[0].verdict, Verdict::OverlapLost);
    assert!(o.findings[0].detail.contains("covered 2.0% of the foreground's window, the baseline's 100.0%"));
    // A candidate that does not record the overlap cannot show it kept it.
    let mut unrecorded = base.clone();
    unrecorded.rows[0].overlap = None;
    let o = compare::compare(&base, &unrecorded, 0.05).unwrap();
    assert_eq!((o.passed, o.findings[0].verdict), (false, Verdict::OverlapLost));
    assert!(o.findings[0].detail.contains("does not record the background's overlap"), "{}", o.findings[0].detail);
}

#[test]
fn the_gate_refuses_other_group_sizes_even_without_a_layout() {
    // Under an MPI launch that does not export its size the layout is not known when the command
    // line is read (null), but the EP and DP group sizes asked for are.
    let mut base = sample();
    base.config = serde_json::json!({"layout": null, "ep": 8, "dp": null});
    let mut other = base.clone();
    other.config["ep"] = 16.into();
    let e = compare::compare(&base, &other, 0.05).unwrap_err();
    assert!(e.contains("ep: 8 -> 16"), "{e}");
    assert!(compare::compare(&base, &base.clone(), 0.05).unwrap().passed);
    // The foreground's settings sit under config.foreground: another seed, routing or shape is
    // refused as it is for ep_perf.
    base.config["foreground"] = serde_json::json!({"seed": 1, "routing": "uniform", "hidden": 7168});
    for (field, value) in [("seed", serde_json::json!(2)), ("routing", "hot:4".into()), ("hidden", 4096.into())] {
        let mut other = base.clone();
        other.config["foreground"][field] = value.clone();
        let e = compare::compare(&base, &other, 0.05).unwrap_err();
        assert!(e.contains(&format!("foreground.{field}: ")), "{e}");
    }
}

#[test]
fn impossible_interference_values_are_bad_input() {
    let base = sample();
    type Mutation = Box<dyn Fn(&mut Row)>;
    let mutations: Vec<(&str, Mutation)> = vec![
        ("slowdown", Box::new(|r| r.slowdown = Some(f64::NAN))),
        ("alone_us", Box::new(|r| r.alone_us = Some(0.0))),
        ("together_us", Box::new(|r| r.together_us = Some(f64::INFINITY))),
        ("overlap", Box::new(|r| r.overlap = Some(1.5))),
        ("background.slowdown", Box::new(|r| r.background.as_mut().unwrap().slowdown = Some(-1.0))),
        ("background.alone_us", Box::new(|r| r.background.as_mut().unwrap().alone_us = Some(0.0))),
        // Rows interference_perf would not write.
        ("time_us", Box::new(|r| r.time_us = r.alone_us)),
        (
            "no together_us",
            Box::new(|r| {
                (r.together_us, r.slowdown, r.time_us) = (None, None, r.alone_us);
            }),
        ),
        ("background.wrong", Box::new(|r| r.background.as_mut().unwrap().wrong = Some(7))),
        (
            "background.busbw_together_gbps",
            Box::new(|r| r.background.as_mut().unwrap().busbw_together_gbps = Some(0.0)),
        ),
    ];
    let dir = std::env::temp_dir().join(format!("ginbench-interference-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("base.json");
    json::write(&good, &base).unwrap();
    for (field, m) in mutations {
        let mut bad = base.clone();
        m(&mut bad.rows[0]);
        let e = compare::compare(&base, &bad, 0.05).unwrap_err();
        assert!(e.contains(field), "{field}: {e}");
        // The command: exit 2, one line (JSON writes NaN and infinity as null: finite ones only).
        if ["slowdown", "together_us"].contains(&field) {
            continue;
        }
        let p = dir.join("bad.json");
        json::write(&p, &bad).unwrap();
        let o = Command::new(GB).arg("compare").arg(&good).arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{field}");
        assert_eq!(String::from_utf8_lossy(&o.stderr).trim_end().lines().count(), 1);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_report_plots_slowdown_against_background_size() {
    let dir = std::env::temp_dir().join(format!("ginbench-interference-report-{}", std::process::id()));
    let a = sample();
    let mut b = sample();
    b.rows[1].slowdown = Some(2.0);
    let runs = vec![Labeled { label: "efa".into(), run: a }, Labeled { label: "ib".into(), run: b }];
    sidebyside::write(&runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## foreground nvl 33554432 B float"), "{md}");
    assert!(md.contains("| background size (B) | efa fg slowdown | efa bg slowdown | ib fg slowdown"), "{md}");
    // 64 MB: fg 180.75 / 120.5 = 1.500 in efa, 2.000 in ib (1.33× the first run).
    assert!(md.contains("| 67108864 | 1.500 | 1.269 | 2.000 | 1.269 | 1.33× |"), "{md}");
    let svg = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("slowdown_"));
    let svg = std::fs::read_to_string(svg.expect("a slowdown plot").path()).unwrap();
    assert!(svg.contains("efa fg") && svg.contains("ib bg"), "one line per run and side");
    // A combine is named with the dispatch it followed: after BF16 and after FP8 are two
    // sections, not one.
    let ep_fg = |dispatch: &str| {
        let mut d = interference_row(1 << 20, (50.0, 60.0), (20.0, 25.0), 0);
        (d.mode, d.phase, d.tokens, d.dtype) = (Some(Mode::Ll), Some(Phase::Dispatch), Some(128), dispatch.into());
        let mut c = d.clone();
        (c.phase, c.dtype) = (Some(Phase::Combine), "bf16".into());
        let mut r = interference_run(vec![d, c]);
        r.config = serde_json::json!({"foreground": {"dispatch_dtype": dispatch}});
        r
    };
    let ep_runs =
        vec![Labeled { label: "b".into(), run: ep_fg("bf16") }, Labeled { label: "f".into(), run: ep_fg("fp8") }];
    sidebyside::write(&ep_runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## foreground nvl LL combine, 128 tokens per rank, bf16 after a bf16 dispatch"), "{md}");
    assert!(md.contains("## foreground nvl LL combine, 128 tokens per rank, bf16 after a fp8 dispatch"), "{md}");
    // A dispatch foreground is named by its tokens per rank too, not by its bytes.
    assert!(md.contains("## foreground nvl LL dispatch, 128 tokens per rank, fp8\n"), "{md}");
    assert!(md.contains("foreground.dispatch_dtype: \"bf16\" -> \"fp8\""), "{md}");
    // An interference run is never set beside an alltoall run.
    let other = Labeled { label: "a2a".into(), run: common::run(vec![common::row("nvl", 1 << 20, 10.0, 11.0, 0)]) };
    assert!(sidebyside::write(&[runs.into_iter().next().unwrap(), other], &dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn command_line_errors_are_one_line_before_any_gpu() {
    for (args, needle) in [
        (vec!["-g", "4", "--ep", "3"], "--ep 3 does not divide the 4 ranks"),
        (vec!["-g", "4", "--ep", "2", "--dp", "3"], "--dp 3"),
        (vec!["--bg", "allgather"], "allgather"),
        (vec!["--dp-max-ctas", "100"], "--dp-max-ctas 100"),
        (vec!["-G", "1"], "-G is not offered"),
        (vec!["-e", "99999T"], "is above"),
        (vec!["--ep-gin-contexts", "4"], "--ep-gin-contexts applies to the impls on NCCL's GIN"),
        (vec!["-D", "gin", "--ep-gin-contexts", "0"], "'--ep-gin-contexts <N>': 0 is not in 1..=1024"),
        // The fixes they name lead somewhere: multiples of 4 from 4; no sweep to pick from.
        (vec!["-b", "0", "-e", "0"], "multiples of 4, from 4"),
        (vec!["--bg", "none", "--profile-size", "1M"], "drop --profile-size, or give a background"),
    ] {
        let o = Command::new(BIN).args(&args).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        assert!(!e.contains("panicked"));
    }
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    let h = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--fg",
        "--bg",
        "--ep",
        "--dp",
        "--dp-max-ctas",
        "--ep-net-name",
        "--dp-stream-priority",
        "--ep-gin-contexts <N>",
        "--ep-gin-type <TYPE>",
        "--profile-size",
        "Exit codes",
    ] {
        assert!(h.contains(flag), "--help lacks {flag}");
    }
    // Every knob says what it does (doc comments built by a macro once left them blank).
    let lines: Vec<&str> = h.lines().collect();
    let knobs: Vec<&[&str]> = lines
        .windows(2)
        .filter(|w| {
            let flag = w[0].trim_start();
            (flag.starts_with("--ep-") || flag.starts_with("--dp-")) && flag.contains(" <")
        })
        .collect();
    assert_eq!(knobs.len(), 16, "7 --ep-, 2 --ep-gin-, 7 --dp-: {knobs:?}");
    for w in knobs {
        assert!(w[1].trim().len() > 10, "{} has no help: {:?}", w[0].trim(), w[1]);
    }
    // A backend per device communicator needs NCCL 2.31.2 headers: an older build says so.
    if !ginbench::nccl::compat::DEV_COMM_GIN_TYPE {
        let o = Command::new(BIN).args(["-D", "gin", "--ep-gin-type", "gdaki"]).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{e}");
        assert!(e.contains("--ep-gin-type needs NCCL 2.31.2 or later headers"), "{e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    }
    let list = Command::new(BIN).arg("--list-impls").output().unwrap();
    assert_eq!(list.status.code(), Some(0));
    let l = String::from_utf8_lossy(&list.stdout);
    assert!(l.contains("nvl") && l.contains("nvl-ll") && l.contains("allreduce"), "{l}");
}

#[test]
fn the_report_leaves_wrong_rows_and_rows_without_a_slowdown_out_of_the_slowdowns() {
    let dir = std::env::temp_dir().join(format!("ginbench-interference-left-out-{}", std::process::id()));
    let mut wrong = interference_row(1 << 30, (100.0, 300.0), (20.0, 25.0), 0);
    wrong.wrong = Some(4);
    // a foreground measured without a background: no slowdown to show
    let mut alone = interference_row(0, (100.0, 100.0), (1.0, 1.0), 0);
    (alone.together_us, alone.slowdown, alone.overlap) = (None, None, None);
    alone.background = Some(Background { op: BgOp::None, ..Default::default() });
    let run = interference_run(vec![interference_row(1 << 20, (100.0, 150.0), (20.0, 25.0), 0), wrong, alone.clone()]);
    sidebyside::write(&[Labeled { label: "a".into(), run: run.clone() }], &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("| 1048576 | 1.500 | 1.250 | 150.0 |\n"), "{md}");
    assert!(!md.contains("\n| 1073741824 |") && !md.contains("\n| 0 |"), "{md}");
    assert!(md.contains("| a | nvl 33554432 B float | wrong data |"), "{md}");
    // ... but their alone times are read, so a run without a background is in the report too.
    alone.alone_us = Some(120.0);
    alone.time_us = Some(120.0);
    let none = interference_run(vec![alone]);
    sidebyside::write(&[Labeled { label: "a".into(), run }, Labeled { label: "none".into(), run: none }], &dir)
        .unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("| nvl 33554432 B float | 100.0 | 120.0 | 1.20× |\n"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}
