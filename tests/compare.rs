//! The regression gate: verdicts, fail-closed rules, outputs, exit codes, and a fuzzed loader.
use ginbench::gin_backend::Backend;
use ginbench::report::compare::{self, Verdict};
use ginbench::report::json;
use ginbench::results::*;
use std::process::Command;

mod common;
use common::{row, run};

/// `r` as a row that did not run: `status` (skipped | failed), `reason`, no measurements.
fn not_run(r: Row, status: Status, reason: &str) -> Row {
    Row {
        status,
        reason: (!reason.is_empty()).then(|| reason.into()),
        time_us: None,
        p50_us: None,
        p99_us: None,
        algbw_gbps: None,
        busbw_gbps: None,
        wrong: None,
        ..r
    }
}

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
    // One baseline run: the threshold alone decides, whatever the per-iteration p99 (at
    // launch-bound sizes its own events inflate it several times over).
    let b = run(vec![row("nvl", 1 << 30, 100.0, 104.0, 0), row("host", 1 << 30, 100.0, 300.0, 0)]);
    let c = run(vec![row("nvl", 1 << 30, 110.0, 112.0, 0), row("host", 1 << 30, 200.0, 212.0, 0)]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(verdict(&o, "nvl"), Verdict::Regression);
    assert_eq!(verdict(&o, "host"), Verdict::Regression);
    assert_eq!(o.findings[0].key, "alltoall host 1073741824 float out-of-place", "worst first");
    // a 150 % threshold lets both through
    assert!(compare::compare(&b, &c, 1.5).unwrap().passed);
    // faster is an improvement, never a failure
    let fast = run(vec![row("nvl", 1 << 30, 80.0, 81.0, 0), row("host", 1 << 30, 100.0, 101.0, 0)]);
    let o = compare::compare(&b, &fast, 0.05).unwrap();
    assert!(o.passed);
    assert_eq!(verdict(&o, "nvl"), Verdict::Improvement);
}

/// `(time, cycle)` rows of one key.
fn cycles(times: &[f64]) -> Vec<Row> {
    times.iter().enumerate().map(|(i, &t)| row("nvl", 1 << 30, t, t, i as u32)).collect()
}

#[test]
fn repeated_runs_define_the_spread() {
    // Baseline cycles 100, 112, 101 (mean 104.3): a candidate at 111 is +6 % but not slower than
    // the slowest baseline run, and within it the summary says so; at 115 it is a regression.
    let b = run(cycles(&[100.0, 112.0, 101.0]));
    let o = compare::compare(&b, &run(cycles(&[111.0, 111.0, 111.0])), 0.05).unwrap();
    assert!(o.passed);
    assert!(compare::render_text(&o).contains("but within the baseline's spread"));
    assert!(!compare::compare(&b, &run(cycles(&[115.0, 115.0, 115.0])), 0.05).unwrap().passed);
}

#[test]
fn a_partial_or_padded_candidate_fails() {
    let b = run(cycles(&[100.0, 100.0, 100.0]));
    // Cycles 1 and 2 lost (a run cut short): missing, even with cycle 0 as fast as ever.
    let o = compare::compare(&b, &run(cycles(&[100.0])), 0.05).unwrap();
    assert_eq!((o.passed, verdict(&o, "nvl")), (false, Verdict::Missing));
    assert!(o.findings[0].detail.contains("cycles [1, 2]"), "{:?}", o.findings[0]);
    // Rows added to a cycle would dilute the mean: bad input.
    let mut padded = cycles(&[200.0, 200.0, 200.0]);
    padded.extend(cycles(&[100.0, 100.0, 100.0]));
    let e = compare::compare(&b, &run(padded), 0.05).unwrap_err();
    assert!(e.contains("candidate: row 'alltoall nvl 1073741824 float out-of-place' is 2 times in cycle 0, 1 times in the baseline"), "{e}");
    // Where the baseline has them too (sizes that round to the same bytes), they compare.
    let twice = run([cycles(&[100.0]), cycles(&[100.0])].concat());
    assert!(compare::compare(&twice, &twice.clone(), 0.05).unwrap().passed);
    // A run that ended in error fails, whatever its rows; a baseline that did is refused.
    let mut cut = run(cycles(&[100.0, 100.0, 100.0]));
    cut.config["error"] = "timeout: no progress for 60 s".into();
    let o = compare::compare(&b, &cut, 0.05).unwrap();
    assert!(!o.passed && compare::render_text(&o).contains("the candidate run ended in error: timeout"));
    assert!(compare::to_junit(&o).contains("<failure message=\"the candidate run ended in error: timeout"));
    assert!(compare::compare(&cut, &b, 0.05).unwrap_err().contains("baseline run ended in error"));
}

#[test]
fn combines_after_bf16_and_fp8_dispatches_are_different_rows() {
    // ep_perf -d bf16,fp8: each combine (dtype bf16) follows its dispatch.
    let ep = |combine_after_fp8: f64| {
        let mut r = run(vec![
            common::ep_row("nvl", "ll", "dispatch", "bf16", 128, (50.0, 100.0), 4),
            common::ep_row("nvl", "ll", "combine", "bf16", 128, (40.0, 100.0), 4),
            common::ep_row("nvl", "ll", "dispatch", "fp8", 128, (30.0, 100.0), 4),
            common::ep_row("nvl", "ll", "combine", "bf16", 128, (combine_after_fp8, 100.0), 4),
        ]);
        r.benchmark = Kind::Ep;
        r
    };
    let o = compare::compare(&ep(40.0), &ep(44.0), 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(verdict(&o, "combine tokens=128 after-dispatch=fp8"), Verdict::Regression);
    assert_eq!(verdict(&o, "combine tokens=128 after-dispatch=bf16"), Verdict::Unchanged);
    // Losing the combine after FP8 is a missing row, not one cycle fewer of a shared key.
    let mut lost = ep(40.0);
    lost.rows.pop();
    assert_eq!(verdict(&compare::compare(&ep(40.0), &lost, 0.05).unwrap(), "after-dispatch=fp8"), Verdict::Missing);
    // Rows that name their dispatch (dispatch_dtype, written since) match by it, whatever their
    // order: here the combines come last, the one after FP8 first.
    let named = |combine_after_fp8: f64| {
        let mut r = ep(40.0);
        r.rows.swap(1, 2);
        r.rows.swap(2, 3);
        r.rows[3].time_us = Some(combine_after_fp8);
        for (row, d) in r.rows.iter_mut().zip(["bf16", "fp8", "fp8", "bf16"]) {
            row.dispatch_dtype = Some(d.into());
        }
        r
    };
    let o = compare::compare(&named(40.0), &named(44.0), 0.05).unwrap();
    assert_eq!(verdict(&o, "combine tokens=128 after-dispatch=bf16"), Verdict::Regression);
    assert_eq!(verdict(&o, "combine tokens=128 after-dispatch=fp8"), Verdict::Unchanged);
}

/// An EP row whose timed rank (`-a`) sent nothing, as a rank that skewed routing left without
/// tokens, still timed the operation: it is gated, not set aside as zero bytes.
#[test]
fn an_ep_row_of_zero_bytes_is_still_gated() {
    let idle = |time| Row {
        size_bytes: 0,
        algbw_gbps: Some(0.0),
        ..common::ep_row("nvl", "ll", "combine", "bf16", 1, (time, 0.0), 4)
    };
    let b = common::ep_run(4, vec![idle(10.0)]);
    let c = common::ep_run(4, vec![idle(20.0)]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert_eq!(verdict(&o, "combine tokens=1"), Verdict::Regression, "{o:?}");
}

#[test]
fn a_candidate_that_skipped_the_check_or_changed_settings_does_not_pass() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let mut unchecked = b.clone();
    unchecked.rows[0].wrong = None;
    let o = compare::compare(&b, &unchecked, 0.05).unwrap();
    assert_eq!((o.passed, verdict(&o, "nvl")), (false, Verdict::Unchecked));
    // Settings that change what a time means, or another layout of ranks: refused.
    for (field, value) in [
        ("cudagraph", 1),
        ("average", 2),
        ("report_cputime", 1),
        ("agg_iters", 10),
        ("local_register", 2),
        ("ctas", 32),
    ] {
        let (mut x, mut y) = (b.clone(), b.clone());
        x.config = serde_json::json!({ field: 0 });
        y.config = serde_json::json!({ field: value });
        let e = compare::compare(&x, &y, 0.05).unwrap_err();
        assert!(e.contains(&format!("{field}: 0 -> {value}")), "{e}");
    }
    // The GIN resources asked are a setting; what NCCL granted may change with its version.
    let gin = |asked: u32, granted: u32| {
        let mut r = b.clone();
        r.config = serde_json::json!({"gin": {"contexts": asked, "granted": {"gin": granted}}});
        r
    };
    let e = compare::compare(&gin(2, 2), &gin(4, 4), 0.05).unwrap_err();
    assert!(e.contains("gin.contexts: 2 -> 4"), "{e}");
    assert!(compare::compare(&gin(2, 2), &gin(2, 1), 0.05).unwrap().passed);
    // So too for interference_perf's foreground communicator, beside the knobs of both.
    let comms = |asked: u32, granted: u32, dp_max_ctas: u32| {
        let mut r = b.clone();
        r.config = serde_json::json!({"comms": {
            "ep": {"nccl": {}, "stream_priority": null, "gin": {"contexts": asked, "granted": {"gin": granted}}},
            "dp": {"nccl": {"max_ctas": dp_max_ctas}, "stream_priority": null},
        }});
        r
    };
    let e = compare::compare(&comms(2, 2, 8), &comms(4, 4, 8), 0.05).unwrap_err();
    assert!(e.contains("comms.ep.gin.contexts: 2 -> 4"), "{e}");
    let e = compare::compare(&comms(2, 2, 8), &comms(2, 2, 16), 0.05).unwrap_err();
    assert!(e.contains(r#"comms.dp.nccl: {"max_ctas":8} -> {"max_ctas":16}"#), "{e}");
    assert!(compare::compare(&comms(2, 4, 8), &comms(2, 2, 8), 0.05).unwrap().passed);
    let mut wider = b.clone();
    wider.env.ranks = 8;
    assert!(compare::compare(&b, &wider, 0.05).unwrap_err().contains("ranks / hosts: 4 / 0 -> 8 / 0"));
    // Iteration counts only change the precision.
    let mut longer = b.clone();
    longer.config = serde_json::json!({"iters": 1000});
    assert!(compare::compare(&b, &longer, 0.05).unwrap().passed);
}

#[test]
fn junit_carries_environment_differences_and_no_control_characters() {
    let b = run(vec![row("nvl\u{1}\u{1b}[31m", 1 << 20, 10.0, 10.0, 0)]);
    let mut c = b.clone();
    c.env.nccl.library = 23203;
    c.rows[0].time_us = Some(20.0);
    let x = compare::to_junit(&compare::compare(&b, &c, 0.05).unwrap());
    assert!(x.contains("<property name=\"environment differs\" value=\"NCCL library: 0 -&gt; 23203\" />"), "{x}");
    assert!(x.contains("nvl\\u{1}\\u{1b}[31m") && !x.chars().any(|ch| ch.is_control() && ch != '\n'), "{x}");
    // Nor the noncharacters XML 1.0 leaves out of its character set.
    let refused = compare::refused_junit("impl nvl\u{fffe}\u{ffff}: bad");
    assert!(refused.contains("nvl\\u{fffe}\\u{ffff}") && !refused.contains(['\u{fffe}', '\u{ffff}']), "{refused}");
}

#[test]
fn a_baseline_with_wrong_data_is_no_reference() {
    // Its broken row was fast (a kernel that wrote nothing): a correct candidate would read as a
    // regression, and a slow one beside a slow broken row would pass.
    let mut b = run(vec![row("nvl", 1 << 20, 1.0, 1.0, 0), row("host", 1 << 20, 20.0, 20.0, 0)]);
    b.rows[0].wrong = Some(3);
    let c = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("host", 1 << 20, 20.0, 20.0, 0)]);
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("baseline row 'alltoall nvl 1048576 float out-of-place' (cycle 0) has 3 wrong elements"), "{e}");
    b.rows[0].wrong = Some(0);
    assert!(compare::compare(&b, &c, 0.05).is_ok());
}

#[test]
fn fails_closed() {
    let b = run(vec![
        row("nvl", 1 << 20, 10.0, 10.0, 0),
        row("host", 1 << 20, 20.0, 20.0, 0),
        row("auto", 1 << 20, 5.0, 5.0, 0),
    ]);
    let skipped = not_run(row("host", 1 << 20, 1.0, 1.0, 0), Status::Skipped, "GIN unavailable");
    let mut wrong = row("auto", 1 << 20, 5.0, 5.0, 0);
    wrong.wrong = Some(3);
    let new_skipped = not_run(row("gin", 1 << 20, 1.0, 1.0, 0), Status::Skipped, "");
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
fn one_failed_cycle_among_good_ones_fails_the_gate() {
    let cycles = |n| (0..n).map(|c| row("host", 1 << 27, 100.0, 100.0, c)).collect::<Vec<_>>();
    let b = run(cycles(3));
    for (status, v) in [(Status::Failed, Verdict::Failed), (Status::Skipped, Verdict::NewlySkipped)] {
        let mut c = cycles(3);
        c[1] = not_run(c[1].clone(), status, "NCCL error");
        let o = compare::compare(&b, &run(c), 0.05).unwrap();
        assert!(!o.passed, "{status:?}");
        assert_eq!(verdict(&o, "host"), v);
        assert!(o.findings[0].detail.contains("1 of 3 cycles"), "{}", o.findings[0].detail);
    }
    // As many skipped cycles as the baseline had are not new.
    let mut bs = cycles(3);
    bs[2] = not_run(bs[2].clone(), Status::Skipped, "x");
    let mut c = cycles(3);
    c[1] = not_run(c[1].clone(), Status::Skipped, "x");
    assert!(compare::compare(&run(bs), &run(c), 0.05).unwrap().passed);
    // A failure fails the gate whatever the baseline did: failed there too, skipped there, or
    // not there at all.
    let mut bf = cycles(3);
    bf[2] = not_run(bf[2].clone(), Status::Failed, "NCCL error");
    let mut c = cycles(3);
    c[1] = not_run(c[1].clone(), Status::Failed, "NCCL error");
    let o = compare::compare(&run(bf), &run(c), 0.05).unwrap();
    assert_eq!((o.passed, verdict(&o, "host")), (false, Verdict::Failed));
    let skipped = |r: Row| not_run(r, Status::Skipped, "in place not supported");
    let failed = |r: Row| not_run(r, Status::Failed, "timeout");
    let b = run(vec![row("host", 1 << 27, 100.0, 100.0, 0), skipped(row("nvl", 1 << 27, 1.0, 1.0, 0))]);
    let c = run(vec![
        row("host", 1 << 27, 100.0, 100.0, 0),
        failed(row("nvl", 1 << 27, 1.0, 1.0, 0)),
        failed(row("nvl-ll128", 1 << 27, 1.0, 1.0, 0)),
    ]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(verdict(&o, "alltoall nvl 1"), Verdict::Failed);
    assert_eq!(verdict(&o, "nvl-ll128"), Verdict::Failed);
    assert!(compare::render_text(&o).contains("2 failed, 0 newly skipped"), "{}", compare::render_text(&o));
}

#[test]
fn rows_must_be_the_runs_cycles() {
    let with_cycles = |rows: Vec<Row>, n: u32| {
        let mut r = run(rows);
        r.config = serde_json::json!({ "run_cycles": n });
        r
    };
    let b = with_cycles(cycles(&[100.0, 100.0, 100.0]), 3);
    // The candidate's own three cycles slower, and extra fast cycles appended to pull the mean
    // down: refused, whether or not run_cycles was raised to match.
    let mut padded = cycles(&[300.0, 300.0, 300.0]);
    padded.extend((3..60).map(|c| row("nvl", 1 << 30, 10.0, 10.0, c)));
    let e = compare::compare(&b, &with_cycles(padded.clone(), 3), 0.05).unwrap_err();
    assert!(e.contains("is in cycle 3, but the run had 3 cycles (config.run_cycles)"), "{e}");
    let mut c = with_cycles(padded, 60);
    c.rows.push(row("host", 1 << 30, 10.0, 10.0, 0));
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("row 'alltoall host 1073741824 float out-of-place' is in 1 of the run's 60 cycles"), "{e}");
    // Nor may copies of a row in a cycle the baseline lacks outweigh a slow cycle in the mean.
    let mut padded = cycles(&[150.0, 90.0]);
    padded.extend((0..4).map(|_| row("nvl", 1 << 30, 90.0, 90.0, 1)));
    let e = compare::compare(&with_cycles(cycles(&[100.0]), 1), &with_cycles(padded, 2), 0.05).unwrap_err();
    assert!(e.contains("is 5 times in cycle 1 and 1 in cycle 0"), "{e}");
    // A run that ended in error may stop part way through a cycle.
    c.config["error"] = "timeout".into();
    assert!(compare::check_values(&c).is_ok());
    assert!(compare::check_values(&b).is_ok());
    // ... an error that is not a message is not read as none.
    c.config["error"] = serde_json::json!({"msg": "timeout"});
    assert!(compare::check_values(&c).unwrap_err().contains("config.error is {"));
    // Without a usable cycle count, cycles beyond the first cannot be told from rows added.
    let mut c = with_cycles(cycles(&[300.0, 300.0, 300.0]), 3);
    c.rows.extend((3..60).map(|c| row("nvl", 1 << 30, 10.0, 10.0, c)));
    for n in [serde_json::json!("3"), serde_json::json!(3.0), serde_json::json!(0), serde_json::Value::Null] {
        c.config["run_cycles"] = n.clone();
        let e = compare::compare(&b, &c, 0.05).unwrap_err();
        assert!(e.contains("config.run_cycles is"), "{n}: {e}");
    }
    c.config = serde_json::json!({});
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("config.run_cycles is missing"), "{e}");
    // Files from before it was recorded hold one cycle.
    let mut old = run(cycles(&[100.0]));
    old.config = serde_json::json!({});
    assert!(compare::check_values(&old).is_ok());
}

#[test]
fn an_ok_row_has_a_time_and_every_cycle_keeps_its_check() {
    let b = run(cycles(&[100.0, 100.0, 100.0]));
    // A cycle whose time was removed does not silently drop out of the mean.
    let mut c = b.clone();
    c.rows[1].time_us = None;
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("(cycle 1): status ok without a time_us"), "{e}");
    // Checked in every baseline cycle, in only one of the candidate's: unchecked.
    let mut c = b.clone();
    c.rows[1].wrong = None;
    c.rows[2].wrong = None;
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert_eq!((o.passed, verdict(&o, "nvl")), (false, Verdict::Unchecked));
    assert!(o.findings[0].detail.contains("not in 2 of the candidate's 3 cycles"), "{}", o.findings[0].detail);
    // As many unchecked cycles as the baseline had are not new.
    let mut b1 = b.clone();
    b1.rows[0].wrong = None;
    let mut c = b.clone();
    c.rows[2].wrong = None;
    assert!(compare::compare(&b1, &c, 0.05).unwrap().passed);
}

#[test]
fn a_time_below_a_nanosecond_or_above_a_week_is_bad_input() {
    let b = run(vec![row("nvl", 1 << 30, 100.0, 100.0, 0)]);
    let mut c = b.clone();
    c.rows[0].time_us = Some(5e-324);
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("time_us is 5e-324: below 1 ns"), "{e}");
    c.rows[0].time_us = Some(compare::MIN_TIME_US);
    assert!(compare::check_values(&c).is_ok());
    // A huge baseline time would pass any candidate as an improvement.
    let mut huge = b.clone();
    huge.rows[0].time_us = Some(1e300);
    let e = compare::compare(&huge, &b, 0.05).unwrap_err();
    assert!(e.contains("baseline: row 'alltoall nvl") && e.contains("time_us is 1e300: above a week"), "{e}");
    huge.rows[0].time_us = Some(compare::MAX_TIME_US);
    assert!(compare::check_values(&huge).is_ok());
}

#[test]
fn every_gpu_counts_in_the_environment() {
    let gpu = |name: &str| Gpu { name: name.into(), ..Default::default() };
    let mut b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    b.env.gpus = (0..4).map(|_| gpu("NVIDIA H200")).collect();
    let mut c = b.clone();
    for g in &mut c.env.gpus[1..] {
        g.name = "NVIDIA H100".into();
    }
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert_eq!(o.env_differences, ["GPUs: 4× NVIDIA H200 -> 1× NVIDIA H200 + 3× NVIDIA H100"]);
}

/// Ranks of virtual nodes on a smaller host take turns on their GPU: such a run is checked, but
/// its times are not the operation's, and the gate refuses it on either side. Its GPUs are
/// counted once each.
#[test]
fn a_run_whose_ranks_shared_gpus_is_not_gated() {
    let gpu = |host: &str, bus: &str| Gpu {
        name: "NVIDIA H200".into(),
        host: host.into(),
        pci_bus_id: bus.into(),
        ..Default::default()
    };
    let mut own = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    own.env.gpus = vec![gpu("h", "a"), gpu("h", "b"), gpu("h", "c"), gpu("h", "d")];
    let mut shared = own.clone();
    shared.env.gpus = vec![gpu("h", "a"), gpu("h", "b"), gpu("h", "a"), gpu("h", "b")];
    assert_eq!(shared.env.gpu_summary(), "2× NVIDIA H200");
    assert!(compare::compare(&own, &own, 0.05).unwrap().passed);
    for (b, c, which) in [(&own, &shared, "candidate"), (&shared, &own, "baseline")] {
        let e = compare::compare(b, c, 0.05).unwrap_err();
        assert!(e.starts_with(&format!("{which}: 4 of 4 ranks shared a GPU, so its times mean nothing")), "{e}");
    }
}

#[test]
fn the_variables_nccl_reads_and_the_cuda_version_are_environment_differences() {
    let vars = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    b.env.cuda = "13.0".into();
    b.env.vars = vars(&[
        ("NCCL_PROTO", "Simple"),
        ("NCCL_VERSION", "2.28.3-1"),
        ("NCCL_NET_PLUGIN", "/opt/a/libnccl-net-ginbench.so"),
        ("GINBENCH_BIN", "a"),
    ]);
    let mut c = b.clone();
    c.env.cuda = "13.1".into();
    c.env.vars = vars(&[
        ("NCCL_VERSION", "2.28.9-1"),
        ("NCCL_NET_PLUGIN", "/home/b/libnccl-net-ginbench.so"),
        ("GINBENCH_BIN", "b"),
        ("FI_EFA_USE_DEVICE_RDMA", "1"),
        ("OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK", "1"),
        ("GINBENCH_LOOPBACK_CHAOS", "3"),
        ("GINBENCH_NCCL_LIB", "/elsewhere/libnccl.so.2"),
        ("GINBENCH_TOOLCHAIN", "/home/b/tc"),
    ]);
    b.env.vars.insert("GINBENCH_NCCL_LIB".into(), "/opt/nccl/lib/libnccl.so.2".into());
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert_eq!(
        o.env_differences,
        [
            "CUDA: 13.0 -> 13.1",
            "FI_EFA_USE_DEVICE_RDMA: - -> 1",
            "GINBENCH_LOOPBACK_CHAOS: - -> 3",
            "NCCL_PROTO: Simple -> -",
            "OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK: - -> 1"
        ]
    );
    assert!(o.passed, "flagged, not refused");
    // Threads of one process against a process per rank.
    let (mut threads, mut mpi) = (b.clone(), b.clone());
    threads.config["local_ranks"] = 4.into();
    mpi.config["local_ranks"] = 1.into();
    assert_eq!(compare::compare(&threads, &mpi, 0.05).unwrap().env_differences, ["ranks per process: 4 -> 1"]);
}

#[test]
fn wrong_counts_do_not_overflow() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("nvl", 1 << 20, 10.0, 10.0, 1)]);
    let mut c = b.clone();
    for r in &mut c.rows {
        r.wrong = Some(u64::MAX);
    }
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert_eq!(verdict(&o, "nvl"), Verdict::Wrong);
    assert!(o.findings[0].detail.starts_with(&u64::MAX.to_string()), "{}", o.findings[0].detail);
}

#[test]
fn bad_inputs() {
    assert_eq!(compare::parse_threshold("5%").unwrap(), 0.05);
    assert!(compare::parse_threshold("5%%").is_err());
    assert_eq!(compare::parse_threshold("-0").unwrap().to_string(), "0");
    let mut v: serde_json::Value = serde_json::from_str(&json::to_string(&run(vec![]))).unwrap();
    v["benchmark"] = "banana".into();
    assert!(json::parse(&v.to_string())
        .unwrap_err()
        .contains("unknown variant `banana`, expected one of `alltoall`, `ep`, `interference`, `ceiling`"));
    let mut no_ranks = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    no_ranks.env.ranks = 0;
    assert!(compare::check_values(&no_ranks).unwrap_err().contains("env.ranks is 0"));
    // A row of another benchmark appended to a run is foreign, not a new row.
    let mut mixed = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let mut ep_row = row("nvl", 1 << 20, 10.0, 10.0, 0);
    ep_row.phase = Some(Phase::Dispatch);
    mixed.rows.push(ep_row);
    assert!(compare::check_values(&mixed).unwrap_err().contains("is not a row of benchmark 'alltoall'"));
    assert_eq!(compare::parse_threshold("12.5").unwrap(), 0.125);
    assert!(compare::parse_threshold("-1%").is_err());
    assert!(compare::parse_threshold("fast").is_err());
    let mut ep = run(vec![]);
    ep.benchmark = Kind::Ep;
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
    // The summary names the threshold as given, not rounded to one the gate did not use.
    for (given, shown) in [
        ("5%", "threshold 5%"),
        ("2.5", "threshold 2.5%"),
        ("999.99%", "threshold 999.99%"),
        ("1000%", "threshold 1000%"),
        ("0.0000001%", "threshold 1e-7%"),
    ] {
        let o = out(&[&base, &same], &["--threshold", given]);
        assert!(String::from_utf8_lossy(&o.stdout).contains(shown), "{given}");
    }
    let junit = dir.join("gate.xml");
    let o = out(&[&base, &slow], &["--junit", junit.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("regression"));
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<failure"));
    // A pass, then a refused comparison into the same outputs: no PASS is left behind there.
    let json = dir.join("gate.json");
    let outputs = ["--junit", junit.to_str().unwrap(), "--json", json.to_str().unwrap()];
    assert_eq!(out(&[&base, &same], &outputs).status.code(), Some(0));
    assert!(std::fs::read_to_string(&json).unwrap().contains("\"passed\": true"));
    let no_folder = dir.join("absent/gate.xml");
    let json_inline = format!("--json={}", json.display());
    let cases: [(Vec<&str>, &std::path::Path, bool); 5] = [
        (outputs.to_vec(), &junk, false),
        ([&outputs[..], &["--threshold", "x"]].concat(), &same, false),
        // A flag clap refuses, written as --json=FILE too.
        (vec!["--junit", junit.to_str().unwrap(), &json_inline, "--thresold", "5"], &same, false),
        // One output that cannot be written: the other still gets the refusal.
        (vec!["--junit", no_folder.to_str().unwrap(), "--json", json.to_str().unwrap()], &slow, false),
        // The verdict cannot be shown (stdout is full): the outputs must not say it passed.
        (outputs.to_vec(), &same, true),
    ];
    for (refused, target, stdout_full) in &cases {
        // Each refusal replaces a PASS written just before it.
        assert_eq!(out(&[&base, &same], &outputs).status.code(), Some(0));
        let mut c = Command::new(gb);
        c.arg("compare").args([&base, *target]).args(refused);
        if *stdout_full {
            c.stdout(std::fs::File::create("/dev/full").unwrap());
        }
        assert_eq!(c.output().unwrap().status.code(), Some(2), "{refused:?}");
        let verdict: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(verdict["passed"], false, "{refused:?}");
        assert!(verdict["refused"].as_str().is_some_and(|r| !r.is_empty()), "{verdict}");
        if refused.contains(&junit.to_str().unwrap()) {
            let xml = std::fs::read_to_string(&junit).unwrap();
            assert!(xml.contains("failures=\"1\"") && xml.contains("<failure message=\"refused: "), "{xml}");
        }
    }
    assert!(!no_folder.exists());
    // A command line clap refuses is read word by word for its outputs, and only a new file or a
    // verdict is replaced: never an input a misplaced flag took for its value, nor a file named
    // after the next flag; a repeated flag's every value is.
    let base_text = std::fs::read_to_string(&base).unwrap();
    let gate = |args: &[&str]| Command::new(gb).arg("compare").args(args).current_dir(&dir).output().unwrap();
    for args in [&["--json", "base.json", "same.json"][..], &["base.json", "--junit", "same.json"]] {
        assert_eq!(gate(args).status.code(), Some(2), "{args:?}");
        assert_eq!(std::fs::read_to_string(&base).unwrap(), base_text, "{args:?}");
        assert!(json::parse(&std::fs::read_to_string(dir.join("same.json")).unwrap()).is_ok(), "{args:?}");
    }
    for (args, refused) in [
        (&["base.json", "same.json", "--json", "--junit", "gate.xml"][..], &["gate.xml"][..]),
        (&["base.json", "same.json", "--json", "v.json", "--json", "gate.json"], &["v.json", "gate.json"]),
    ] {
        // Earlier PASSes in every output first.
        assert_eq!(gate(&["base.json", "same.json", "--json", "v.json", "--junit", "gate.xml"]).status.code(), Some(0));
        std::fs::copy(dir.join("v.json"), dir.join("gate.json")).unwrap();
        for f in refused {
            assert!(!std::fs::read_to_string(dir.join(f)).unwrap().contains("refused"), "{f}");
        }
        assert_eq!(gate(args).status.code(), Some(2), "{args:?}");
        for f in refused {
            assert!(std::fs::read_to_string(dir.join(f)).unwrap().contains("refused"), "{args:?}: {f}");
        }
        assert!(!dir.join("--junit").exists(), "{args:?}");
    }
    for bad in [
        out(&[&base, &junk], &[]),
        out(&[&base, &dir.join("absent.json")], &[]),
        out(&[&base, &same], &["--threshold", "x"]),
        out(&[&base, &same], &["--threshold", "1000.01%"]),
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
fn text_from_the_input_files_keeps_errors_and_findings_on_one_line() {
    let dir = std::env::temp_dir().join(format!("ginbench-compare-lines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.json");
    json::write(&good, &run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0)])).unwrap();
    let mut bad = run(vec![row("nvl\nsecond line", 1 << 30, 100.0, 101.0, 0)]);
    bad.rows[0].time_us = Some(0.0);
    let bad_file = dir.join("bad.json");
    json::write(&bad_file, &bad).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).arg("compare").args([&good, &bad_file]).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.trim_end().lines().count() == 1 && e.contains("nvl\\nsecond line"), "{e}");
    // A gate's findings: one line each, the candidate's error too.
    let mut c = run(vec![row("nvl", 1 << 30, 300.0, 301.0, 0)]);
    c.config["error"] = "timeout:\n\u{1b}[32mPASS".into();
    let text =
        compare::render_text(&compare::compare(&run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0)]), &c, 0.05).unwrap());
    assert!(text.contains("ended in error: timeout:\\n\\u{1b}[32mPASS\n"), "{text}");
    assert!(!text.chars().any(|ch| ch.is_control() && ch != '\n'), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_results_file_over_1_gib_is_refused_for_its_size() {
    let dir = std::env::temp_dir().join(format!("ginbench-compare-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.json");
    json::write(&good, &run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0)])).unwrap();
    // Sparse files of NUL bytes: no disk space, and never valid JSON.
    let big = dir.join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    let compare_with = |len: u64| {
        file.set_len(len).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).arg("compare").args([&good, &big]).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!((o.status.code(), e.trim_end().lines().count()), (Some(2), 1), "{len} B: {e}");
        e
    };
    // One byte over the limit: refused for its size, before a byte of it is read.
    let e = compare_with((1 << 30) + 1);
    assert!(e.contains("big.json: over the 1 GiB a results file may have"), "{e}");
    // Under it: read, and refused for what it holds.
    let e = compare_with(1 << 20);
    assert!(e.contains("big.json: not JSON") && !e.contains("over the 1 GiB"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_subcommand_is_a_usage_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).output().unwrap();
    assert_eq!(o.status.code(), Some(6));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.starts_with("ginbench: error: no command given (fix: ginbench env | mpi-check"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(o.stdout.is_empty(), "errors go to stderr");
    // asking for help is still a success, on stdout
    let o = Command::new(env!("CARGO_BIN_EXE_ginbench")).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: ginbench <COMMAND>"));
}

#[test]
fn a_gate_that_compares_nothing_does_not_pass() {
    let c = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let e = compare::compare(&run(vec![]), &c, 0.05).unwrap_err();
    assert!(e.contains("baseline has no rows"), "{e}");
    let all_failed = run(vec![
        not_run(row("nvl", 1 << 20, 1.0, 1.0, 0), Status::Failed, "timeout"),
        not_run(row("host", 1 << 20, 1.0, 1.0, 0), Status::Failed, "x"),
    ]);
    let e = compare::compare(&all_failed, &c, 0.05).unwrap_err();
    assert!(e.contains("no ok row"), "{e}");
    // ok rows, but none that can be timed against the candidate: zero bytes only
    let zero = run(vec![row("nvl", 0, 3.0, 3.0, 0)]);
    let e = compare::compare(&zero, &zero.clone(), 0.05).unwrap_err();
    assert!(e.contains("compared no row"), "{e}");
    // nothing compared but a baseline row missing: that is a failure, not bad input
    let o = compare::compare(
        &run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]),
        &run(vec![row("host", 1 << 20, 1.0, 1.0, 0)]),
        0.05,
    )
    .unwrap();
    assert!(!o.passed);
}

#[test]
fn impossible_values_are_bad_input() {
    let good = row("nvl", 1 << 20, 10.0, 11.0, 0);
    type Spoil = fn(&mut Row);
    let cases: [(&str, Spoil); 9] = [
        ("time_us", |r| r.time_us = Some(0.0)),
        ("time_us", |r| r.time_us = Some(-4.0)),
        ("time_us", |r| r.time_us = Some(f64::NAN)),
        ("p99_us", |r| r.p99_us = Some(f64::INFINITY)),
        ("p50_us", |r| r.p50_us = Some(-0.5)),
        ("busbw_gbps", |r| r.busbw_gbps = Some(f64::NAN)),
        ("algbw_gbps", |r| r.algbw_gbps = Some(0.0)),
        ("bw_gbps", |r| r.bw_gbps = Some(-1.0)),
        ("bw_gbps", |r| r.bw_gbps = Some(f64::NEG_INFINITY)),
    ];
    for (field, spoil) in cases {
        let mut bad = good.clone();
        spoil(&mut bad);
        let b = run(vec![good.clone()]);
        let c = run(vec![bad]);
        for (e, side) in [
            (compare::compare(&b, &c, 0.05).unwrap_err(), "candidate"),
            (compare::compare(&c, &b, 0.05).unwrap_err(), "baseline"),
        ] {
            assert!(
                e.contains(field) && e.contains("alltoall nvl 1048576 float out-of-place") && e.contains(side),
                "{field}: {e}"
            );
        }
    }
    // Zero bandwidth is right where nothing moves (zero bytes) or nothing crosses (busbw of one rank).
    let zero = row("nvl", 0, 3.0, 3.0, 0);
    assert_eq!(zero.busbw_gbps, Some(0.0));
    assert!(compare::check_values(&run(vec![zero])).is_ok());
    let mut one = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    one.env.ranks = 1;
    one.rows[0].busbw_gbps = Some(0.0);
    assert!(compare::check_values(&one).is_ok());
}

#[test]
fn not_compared_rows_are_listed_with_their_reason() {
    let mut skipped = not_run(row("nvl", 1 << 20, 1.0, 1.0, 0), Status::Skipped, "in place not supported");
    skipped.placement = Placement::InPlace;
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("nvl", 0, 3.0, 3.0, 0), skipped.clone()]);
    let c = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("nvl", 0, 3.0, 3.0, 0), skipped]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(o.passed);
    let text = compare::render_text(&o);
    assert!(text.contains("2 not compared"), "{text}");
    let line = |part: &str| {
        text.lines()
            .find(|l| l.contains("not-compared") && l.contains(part))
            .unwrap_or_else(|| panic!("no {part}: {text}"))
            .to_string()
    };
    assert!(line("alltoall nvl 0 float").contains("zero bytes"), "{text}");
    assert!(line("in-place").contains("skipped (in place not supported) in both"), "{text}");
    let junit = compare::to_junit(&o);
    assert_eq!(junit.matches("<skipped").count(), 2, "{junit}");
}

#[test]
fn the_command_refuses_empty_failed_and_impossible_files() {
    let gb = env!("CARGO_BIN_EXE_ginbench");
    let dir = std::env::temp_dir().join(format!("ginbench-compare-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, r: &Run| {
        let p = dir.join(name);
        json::write(&p, r).unwrap();
        p
    };
    let good =
        write("good.json", &run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0), row("host", 1 << 30, 90.0, 91.0, 0)]));
    let empty = write("empty.json", &run(vec![]));
    let all_failed =
        write("failed.json", &run(vec![not_run(row("nvl", 1 << 30, 1.0, 1.0, 0), Status::Failed, "timeout")]));
    let mut zeros = run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0), row("host", 1 << 30, 90.0, 91.0, 0)]);
    for r in &mut zeros.rows {
        r.time_us = Some(0.0);
    }
    let zeros = write("zeros.json", &zeros);
    let mut negative = run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0), row("host", 1 << 30, 90.0, 91.0, 0)]);
    for r in &mut negative.rows {
        r.time_us = Some(-3.0);
        r.busbw_gbps = Some(-1.0);
    }
    let negative = write("negative.json", &negative);
    for (base, cand, needles) in [
        (&empty, &good, vec!["empty.json", "no rows"]),
        (&all_failed, &good, vec!["failed.json", "no ok row"]),
        (&good, &zeros, vec!["zeros.json", "alltoall", "1073741824", "time_us"]),
        (&good, &negative, vec!["negative.json", "time_us"]),
        (&zeros, &good, vec!["zeros.json", "time_us"]),
    ] {
        let o = Command::new(gb).arg("compare").args([base, cand]).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{base:?} {cand:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        for n in needles {
            assert!(e.contains(n), "{n}: {e}");
        }
    }
    // Outputs are checked before anything is compared, so no verdict is printed and lost; a
    // device is never read (it would be read forever) nor replaced.
    let same = dir.join("same.out");
    let missing = dir.join("no/such/dir/x.json");
    for (extra, needle) in [
        (vec!["--json".as_ref(), missing.as_os_str()], "does not exist"),
        (vec!["--json".as_ref(), same.as_os_str(), "--junit".as_ref(), same.as_os_str()], "both name"),
        (vec!["--junit".as_ref(), "/dev/null".as_ref()], "not a regular file"),
        (vec!["--json".as_ref(), good.as_os_str()], "--json and the baseline both name"),
        // Not stdout, and not a file named `-` either.
        (vec!["--json".as_ref(), "-".as_ref()], "--json writes a file, not stdout"),
    ] {
        let o = Command::new(gb).arg("compare").args([&good, &good]).args(&extra).current_dir(&dir).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!((o.status.code(), o.stdout.len()), (Some(2), 0), "{extra:?}: {e}");
        assert!(e.contains(needle) && e.trim_end().lines().count() == 1, "{extra:?}: {e}");
        // The refusal goes to no output the checks refused.
        assert!(!dir.join("-").exists(), "{extra:?}: a file named - was written");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    }
    // A refusal is never written, nor the file it would replace read, where the output is a
    // FIFO (which open() would wait on) or a device (/dev/zero would be read forever), whether
    // compare refused the outputs or clap the command line.
    let fifo = dir.join("out.fifo");
    if std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let limit = std::time::Duration::from_secs(20);
        for args in [
            vec!["compare".as_ref(), good.as_os_str(), good.as_os_str(), "--json".as_ref(), fifo.as_os_str()],
            vec!["compare".as_ref(), "--json".as_ref(), fifo.as_os_str(), good.as_os_str()],
            vec!["compare".as_ref(), "--json".as_ref(), "/dev/zero".as_ref(), good.as_os_str()],
        ] {
            let o = common::output_within(gb, &args, limit);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    let o = Command::new(gb).args(["compare".as_ref(), good.as_os_str(), "/dev/zero".as_ref()]).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("/dev/zero: a device, not a results file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_loopback_gin_run_is_never_gated_against_a_network_run() {
    let b = run(vec![row("gin", 1 << 20, 10.0, 11.0, 0)]);
    let mut c = b.clone();
    c.env.gin.backend = Backend::Loopback;
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("GIN backend differs (nccl -> loopback)"), "{e}");
    // Spelled otherwise, it is no backend the tools write: the file is refused as it loads.
    let mut odd: serde_json::Value = serde_json::from_str(&json::to_string(&b)).unwrap();
    odd["env"]["gin"]["backend"] = "Loopback".into();
    let e = json::parse(&odd.to_string()).unwrap_err();
    assert!(e.contains("unknown variant `Loopback`, expected `nccl` or `loopback`"), "{e}");
    // A file from before the field reads as NCCL's own.
    odd["env"]["gin"].as_object_mut().unwrap().remove("backend");
    assert_eq!(json::parse(&odd.to_string()).unwrap().env.gin.backend, Backend::Nccl);
    // Two loopback runs compare as usual, and say nothing about the backend.
    let o = compare::compare(&c, &c.clone(), 0.05).unwrap();
    assert!(o.passed && o.env_differences.is_empty());
}

#[test]
fn a_debug_build_is_never_gated_against_a_release_build() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 11.0, 0)]);
    let mut c = b.clone();
    c.tool.build = "debug".into();
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("build profile differs (release -> debug)"), "{e}");
    assert!(compare::compare(&c, &b, 0.05).unwrap_err().contains("(debug -> release)"));
    // A file from before the profile was recorded says nothing: it is gated as before.
    let mut old = b.clone();
    old.tool.build.clear();
    assert!(compare::compare(&old, &c, 0.05).unwrap().passed);
    let mut odd = b.clone();
    odd.tool.build = "Release".into();
    assert!(compare::compare(&b, &odd, 0.05).unwrap_err().contains("tool.build is 'Release'"));
}

#[test]
fn a_file_that_names_an_unknown_value_is_refused_where_it_does() {
    let mut v: serde_json::Value = serde_json::from_str(&json::to_string(&common::ep_run(
        2,
        vec![common::ep_row("nvl", "ll", "dispatch", "bf16", 128, (50.0, 100.0), 2)],
    )))
    .unwrap();
    v["rows"][0]["phase"] = "dispatch2".into();
    let text = serde_json::to_string_pretty(&v).unwrap();
    let e = json::parse(&text).unwrap_err();
    let line = text.lines().position(|l| l.contains("dispatch2")).unwrap() + 1;
    assert!(e.contains("unknown variant `dispatch2`") && e.contains(&format!("line {line}")), "{e}");
    // Early files wrote "" for NCCL's own GIN backend.
    v["rows"][0]["phase"] = "dispatch".into();
    v["env"]["gin"]["backend"] = "".into();
    assert_eq!(json::parse(&v.to_string()).unwrap().env.gin.backend, Backend::Nccl);
}

/// A row only the candidate has, with wrong elements, fails the gate.
#[test]
fn a_new_row_with_wrong_elements_fails_the_gate() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let mut bad = row("host", 1 << 20, 10.0, 10.0, 0);
    bad.wrong = Some(3);
    let c = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), bad, row("auto", 1 << 20, 10.0, 10.0, 0)]);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed, "{}", compare::render_text(&o));
    let f = |part: &str| o.findings.iter().find(|f| f.key.contains(part)).unwrap().clone();
    assert_eq!((f("host").verdict, f("host").detail.as_str()), (Verdict::Wrong, "3 wrong elements"));
    assert_eq!((f("auto").verdict, f("auto").detail.as_str()), (Verdict::New, "not in the baseline"));
}

/// A row of another benchmark in an EP file is foreign.
#[test]
fn an_ep_file_holds_only_ep_rows() {
    let ep = common::ep_row("nvl", "ll", "dispatch", "bf16", 128, (50.0, 100.0), 4);
    let mut plain = common::ep_run(4, vec![ep.clone(), row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    assert!(compare::check_values(&plain).unwrap_err().contains("is not a row of benchmark 'ep'"));
    plain.rows[1] = common::interference_row(1 << 20, (100.0, 120.0), (50.0, 60.0), 0);
    plain.rows[1].phase = Some(Phase::Dispatch);
    assert!(compare::check_values(&plain).unwrap_err().contains("is not a row of benchmark 'ep'"));
    assert!(compare::check_values(&common::ep_run(4, vec![ep])).is_ok());
}

/// Zero busbw on 4 ranks for a row that moves bytes is impossible; the one-rank exception is for
/// busbw only, not algbw.
#[test]
fn zero_busbw_is_bad_input_on_more_than_one_rank() {
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let mut c = b.clone();
    c.rows[0].busbw_gbps = Some(0.0);
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("busbw_gbps is 0: a row that moves bytes cannot have zero bandwidth"), "{e}");
    let mut one = b.clone();
    one.env.ranks = 1;
    one.rows[0].algbw_gbps = Some(0.0);
    assert!(compare::check_values(&one).unwrap_err().contains("algbw_gbps is 0"));
}

/// A zero slowdown is impossible; error messages show the value as written.
#[test]
fn zero_ratios_are_bad_input_and_errors_show_values_plainly() {
    let good = common::interference_run(vec![common::interference_row(1 << 20, (100.0, 120.0), (50.0, 60.0), 0)]);
    assert!(compare::check_values(&good).is_ok());
    for (field, spoil) in [
        ("slowdown", (|r: &mut Row| r.slowdown = Some(0.0)) as fn(&mut Row)),
        ("background.slowdown", |r: &mut Row| r.background.as_mut().unwrap().slowdown = Some(0.0)),
    ] {
        let mut bad = good.clone();
        spoil(&mut bad.rows[0]);
        let e = compare::check_values(&bad).unwrap_err();
        assert!(e.contains(&format!("{field} is 0: times must be finite and above 0")), "{e}");
    }
    let mut zero = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    zero.rows[0].time_us = Some(0.0);
    let e = compare::check_values(&zero).unwrap_err();
    assert!(e.contains("time_us is 0: times must be finite and above 0"), "{e}");
    let mut bg_wrong = good.clone();
    bg_wrong.rows[0].background.as_mut().unwrap().wrong = Some(7);
    let e = compare::check_values(&bg_wrong).unwrap_err();
    assert!(e.contains("background.wrong is 7: "), "{e}");
}

/// A background runs on at least one rank, but a skipped row only says what it would have run
/// (earlier builds wrote 0 there): a run with such a row is still a run the gate reads.
#[test]
fn only_a_background_that_ran_needs_its_ranks() {
    let ran = common::interference_row(1 << 20, (100.0, 120.0), (50.0, 60.0), 0);
    let mut skipped = not_run(Row { impl_name: "nvl-ll".into(), ..ran.clone() }, Status::Skipped, "too large");
    (skipped.alone_us, skipped.together_us, skipped.slowdown, skipped.overlap) = (None, None, None, None);
    skipped.background = Some(Background { ranks: 0, ..described(&ran) });
    let run = common::interference_run(vec![ran, skipped]);
    assert!(compare::check_values(&run).is_ok(), "{:?}", compare::check_values(&run));
    assert!(compare::compare(&run, &run, 0.05).unwrap().passed);
    let mut none = run.clone();
    none.rows[0].background.as_mut().unwrap().ranks = 0;
    let e = compare::check_values(&none).unwrap_err();
    assert!(e.contains("background.ranks is 0: a background runs on at least one rank"), "{e}");
}

/// A row's background without its figures: what a skipped row says of it.
fn described(r: &Row) -> Background {
    let b = r.background.clone().unwrap();
    Background {
        op: b.op,
        size_bytes: b.size_bytes,
        count: b.count,
        dtype: b.dtype,
        redop: b.redop,
        ..Default::default()
    }
}

/// "More than the threshold" and "slower than the slowest baseline run" are strict bounds:
/// 5/4 - 1 and 3/4 - 1 are exactly +-0.25.
#[test]
fn the_threshold_and_the_spread_are_strict_bounds() {
    let b = run(vec![row("nvl", 1 << 20, 4.0, 4.0, 0)]);
    for t in [5.0, 3.0] {
        let o = compare::compare(&b, &run(vec![row("nvl", 1 << 20, t, t, 0)]), 0.25).unwrap();
        assert!(o.passed, "{t}");
        assert_eq!((o.findings[0].verdict, o.findings[0].detail.as_str()), (Verdict::Unchanged, ""), "{t}");
    }
    // Baseline cycles 100, 100, 130 (mean 110): a candidate at 130 is +18 % but not slower than
    // the slowest baseline run.
    let o = compare::compare(&run(cycles(&[100.0, 100.0, 130.0])), &run(cycles(&[130.0, 130.0, 130.0])), 0.05).unwrap();
    assert!(o.passed, "{}", compare::render_text(&o));
    assert!(o.findings[0].detail.contains("within the baseline's spread"));
}

/// A row the baseline never checked is not "unchecked" in the candidate, even when the candidate
/// ran more of its cycles.
#[test]
fn a_row_the_baseline_never_checked_is_not_unchecked() {
    let mut unchecked = cycles(&[100.0, 100.0]);
    for r in &mut unchecked {
        r.wrong = None;
    }
    let mut b = unchecked.clone();
    b[0] = not_run(b[0].clone(), Status::Skipped, "x");
    let o = compare::compare(&run(b), &run(unchecked), 0.05).unwrap();
    assert!(o.passed, "{}", compare::render_text(&o));
}

/// A baseline whose only rows with a time failed has no ok row.
#[test]
fn a_baseline_of_failed_rows_with_times_is_refused() {
    let mut failed = row("nvl", 1 << 20, 10.0, 10.0, 0);
    failed.status = Status::Failed;
    let b = run(vec![failed]);
    assert!(compare::check_baseline(&b).unwrap_err().contains("no ok row"));
}

/// What the text, JSON and JUnit outputs say.
#[test]
fn the_outputs_say_what_the_gate_saw() {
    let skipped = |reason: &str| {
        let mut r = not_run(row("nvl", 1 << 20, 1.0, 1.0, 0), Status::Skipped, reason);
        r.placement = Placement::InPlace;
        r
    };
    let b = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("host", 1 << 20, 10.0, 10.0, 0), skipped("a")]);
    let c = run(vec![row("nvl", 1 << 20, 20.0, 20.0, 0), row("host", 1 << 20, 10.0, 10.0, 0), skipped("b")]);
    let o = compare::compare(&b, &c, 0.0).unwrap();
    let text = compare::render_text(&o);
    assert!(text.starts_with("ginbench compare: FAIL (threshold 0%)"), "{text}");
    assert!(text.contains("nvl 1048576 float out-of-place: 10.00 -> 20.00 us (busbw 78.6 -> 39.3 GB/s)"), "{text}");
    assert!(!text.contains("alltoall host"), "unchanged rows are not listed: {text}");
    assert!(text.contains("baseline skipped (a), candidate skipped (b)"), "{text}");
    let j: serde_json::Value = serde_json::from_str(&compare::to_json(&o)).unwrap();
    let nvl = j["findings"].as_array().unwrap().iter().find(|f| f["verdict"] == "regression").unwrap();
    assert_eq!(nvl["baseline_busbw_gbps"], 1048576.0 / 1e3 / 10.0 * 0.75);
    let junit = compare::to_junit(&o);
    assert!(junit.contains("tests=\"3\" failures=\"1\" skipped=\"1\""), "{junit}");
    // A candidate that ended in error is one more test case, and a failing one.
    let mut cut = b.clone();
    cut.config["error"] = "timeout".into();
    let junit = compare::to_junit(&compare::compare(&b, &cut, 0.05).unwrap());
    assert!(junit.contains("tests=\"4\" failures=\"1\" skipped=\"1\""), "{junit}");
    // An empty reason is no reason.
    let mut bare = skipped("");
    bare.reason = Some(String::new());
    let x = run(vec![row("nvl", 1 << 20, 10.0, 10.0, 0), bare]);
    let text = compare::render_text(&compare::compare(&x, &x.clone(), 0.05).unwrap());
    assert!(text.contains(": skipped in both"), "{text}");
    // The count of rows not compared, when nothing was.
    let zero = run(vec![row("nvl", 0, 3.0, 3.0, 0), row("host", 0, 3.0, 3.0, 0)]);
    let e = compare::compare(&zero, &zero.clone(), 0.05).unwrap_err();
    assert!(e.contains("(2 not compared"), "{e}");
}

/// The driver records the error that ended a run through Run::finish; the gate fails a candidate
/// by it. Row::is_wrong counts rows with wrong elements.
#[test]
fn a_finished_run_records_the_error_that_ended_it() {
    let mut r = Run::start(
        Kind::Alltoall,
        "alltoall_perf",
        "2026-11-21T10:00:00Z".into(),
        Env::default(),
        serde_json::json!({}),
    );
    let mut rows = vec![row("nvl", 1 << 20, 10.0, 10.0, 0), row("host", 1 << 20, 10.0, 10.0, 0)];
    rows[1].wrong = Some(2);
    r.finish(rows.clone(), Summary::of(&rows), Some("timeout".into()));
    assert_eq!((r.error(), r.rows.len(), r.finished_at.is_some()), (Some("timeout"), 2, true));
    assert_eq!(r.summary.unwrap().rows_wrong, 1);
    assert!(rows[1].is_wrong() && !rows[0].is_wrong());
}

/// An overlap within one percentage point of the baseline's is kept (1.0 - 0.01 is 0.99 exactly
/// in f64); two points is lost.
#[test]
fn an_overlap_within_a_point_of_the_baselines_is_kept() {
    let b = common::interference_run(vec![common::interference_row(1 << 20, (100.0, 120.0), (50.0, 60.0), 0)]);
    let mut c = b.clone();
    c.rows[0].overlap = Some(0.99);
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(o.passed, "{}", compare::render_text(&o));
    c.rows[0].overlap = Some(0.98);
    assert_eq!(compare::compare(&b, &c, 0.05).unwrap().findings[0].verdict, Verdict::OverlapLost);
}

/// A candidate whose background lost its together time (no background iteration lay wholly in
/// the foreground's window) is not judged on it, so it fails rather than passing unjudged; a
/// baseline that lacked it too is no loss.
#[test]
fn a_background_together_time_the_candidate_lost_fails() {
    let b = common::interference_run(vec![common::interference_row(1 << 20, (100.0, 120.0), (50.0, 60.0), 0)]);
    let mut c = b.clone();
    c.rows[0].background.as_mut().unwrap().together_us = None;
    c.rows[0].background.as_mut().unwrap().slowdown = None;
    c.rows[0].reason = Some("no background iteration lay wholly inside the window".into());
    let o = compare::compare(&b, &c, 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(o.findings[0].verdict, Verdict::OverlapLost);
    assert!(o.findings[0]
        .detail
        .contains("no background together time in 1 of 1 cycles, the baseline in 0: no background"));
    assert!(compare::compare(&c, &c, 0.05).unwrap().passed);
    // A row the baseline did not measure is new, whatever its background: not gated.
    let mut skipped = b.clone();
    skipped.rows.push(common::interference_row(2 << 20, (100.0, 120.0), (50.0, 60.0), 0));
    skipped.rows[1].status = Status::Skipped;
    (skipped.rows[1].time_us, skipped.rows[1].alone_us, skipped.rows[1].together_us) = (None, None, None);
    skipped.rows[1].slowdown = None;
    skipped.rows[1].overlap = None;
    let g = skipped.rows[1].background.as_mut().unwrap();
    (g.alone_us, g.together_us, g.slowdown) = (None, None, None);
    (g.busbw_alone_gbps, g.busbw_together_gbps) = (None, None);
    let mut runs = b.clone();
    runs.rows.push(c.rows[0].clone());
    runs.rows[1].background.as_mut().unwrap().size_bytes = 2 << 20;
    let o = compare::compare(&skipped, &runs, 0.05).unwrap();
    assert!(o.passed, "{}", compare::render_text(&o));
}

/// A foreground that keeps its time by taking the background's SMs or links still slows the
/// training step: the background's together time is gated by the same rule as the foreground's.
#[test]
fn a_slower_background_beside_an_unchanged_foreground_is_a_regression() {
    let row = |bg_together: f64| common::interference_row(1 << 20, (100.0, 120.0), (50.0, bg_together), 0);
    let b = common::interference_run(vec![row(60.0)]);
    let o = compare::compare(&b, &common::interference_run(vec![row(90.0)]), 0.05).unwrap();
    assert!(!o.passed);
    assert_eq!(o.findings[0].verdict, Verdict::Regression);
    assert!(
        o.findings[0].detail.contains("the background's together time +50.0% and beyond"),
        "{}",
        o.findings[0].detail
    );
    // Its times and change are the background's, as its verdict is.
    assert_eq!((o.findings[0].baseline_us, o.findings[0].candidate_us), (Some(60.0), Some(90.0)));
    assert!((o.findings[0].change.unwrap() - 0.5).abs() < 1e-9);
    // within the threshold, or faster, it passes
    for t in [62.0, 40.0] {
        assert!(compare::compare(&b, &common::interference_run(vec![row(t)]), 0.05).unwrap().passed, "{t}");
    }
    // and by the baseline's spread as the foreground is: 66 is +6.5 % but not beyond cycle 1's 70
    let cycles = |t: [f64; 2]| {
        (0..2).map(|c| common::interference_row(1 << 20, (100.0, 120.0), (50.0, t[c]), c as u32)).collect()
    };
    let b = common::interference_run(cycles([54.0, 70.0]));
    let mut spread = b.clone();
    spread.rows = cycles([66.0, 66.0]);
    assert!(compare::compare(&b, &spread, 0.05).unwrap().passed);
}

/// A named pipe nothing writes to would block `compare` / `report` in open() forever, and one
/// whose writer goes quiet without closing it in read(): they give up after 30 s with one line
/// (exit 2), and still read one whose writer comes later.
#[test]
fn a_named_pipe_without_a_writer_does_not_hang() {
    let gb = env!("CARGO_BIN_EXE_ginbench");
    let dir = std::env::temp_dir().join(format!("ginbench-compare-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.json");
    json::write(&good, &run(vec![row("nvl", 1 << 30, 100.0, 101.0, 0)])).unwrap();
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here
    }
    let limit = std::time::Duration::from_secs(60);
    let commands =
        [vec!["compare".as_ref(), good.as_os_str(), fifo.as_os_str()], vec!["report".as_ref(), fifo.as_os_str()]];
    // A writer that sends half a file and holds the pipe open until the command is done.
    let quiet = dir.join("quiet");
    assert!(std::process::Command::new("mkfifo").arg(&quiet).status().unwrap().success());
    let (done, wait_done) = std::sync::mpsc::channel::<()>();
    let (q, g) = (quiet.clone(), good.clone());
    let holder = std::thread::spawn(move || {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(&q).unwrap();
        let text = std::fs::read(&g).unwrap();
        w.write_all(&text[..text.len() / 2]).unwrap();
        let _ = wait_done.recv_timeout(limit);
    });
    // All three at once: each waits its 30 s.
    let outputs: Vec<_> = std::thread::scope(|s| {
        let mut hs: Vec<_> = commands.iter().map(|a| s.spawn(|| common::output_within(gb, a, limit))).collect();
        let a = ["compare".as_ref(), good.as_os_str(), quiet.as_os_str()];
        hs.push(s.spawn(move || common::output_within(gb, &a, limit)));
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    done.send(()).unwrap();
    holder.join().unwrap();
    for (o, why) in outputs.iter().zip([
        "a named pipe that nothing opened for writing within 30 s",
        "a named pipe that nothing opened for writing within 30 s",
        "a pipe that delivered nothing for 30 s and was not closed",
    ]) {
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains(why), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A writer that comes later is waited for.
    let (f, g) = (fifo.clone(), good.clone());
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::write(&f, std::fs::read(&g).unwrap()).unwrap();
    });
    let o = common::output_within(gb, &["compare".as_ref(), good.as_os_str(), fifo.as_os_str()], limit);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

/// EP rows match on their tokens: a build that counts an impl's bytes differently still compares
/// row for row (and a row of other tokens is still another row).
#[test]
fn ep_rows_match_on_tokens_not_bytes() {
    let rows = |bytes: u64, tokens: u64| {
        let mut r = common::ep_row("nvl", "ll", "dispatch", "bf16", tokens, (50.0, 100.0), 4);
        r.size_bytes = bytes;
        vec![r]
    };
    let b = common::ep_run(4, rows(116_864, 1));
    let o = compare::compare(&b, &common::ep_run(4, rows(32_800, 1)), 0.05).unwrap();
    assert!(o.passed, "{}", compare::render_text(&o));
    assert_eq!(o.findings[0].verdict, Verdict::Unchanged);
    assert!(!o.findings[0].key.contains("116864"), "{}", o.findings[0].key);
    let o = compare::compare(&b, &common::ep_run(4, rows(116_864, 2)), 0.05).unwrap();
    assert!(!o.passed);
    assert!(o.findings.iter().any(|f| f.verdict == Verdict::Missing), "{}", compare::render_text(&o));
}

/// A setting one file lacks (written before it existed) and the other holds as null is the same
/// setting, unset: no refusal.
#[test]
fn a_setting_absent_is_the_same_as_null() {
    let mut b = common::run(vec![common::row("nvl", 1 << 20, 10.0, 10.0, 0)]);
    let mut c = b.clone();
    b.config = serde_json::json!({"emulate_nodes": null});
    c.config = serde_json::json!({});
    assert!(compare::compare(&b, &c, 0.05).unwrap().passed);
    c.config = serde_json::json!({"emulate_nodes": 2});
    let e = compare::compare(&b, &c, 0.05).unwrap_err();
    assert!(e.contains("emulate_nodes: - -> 2"), "{e}");
}
