//! `ginbench report`: two runs side by side, with ratios, environment differences and plots.
use ginbench::report::sidebyside::{self, Labeled};
use ginbench::report::{compare, json, plots};
use ginbench::results::*;

mod common;

/// Two sizes of nvl at 100 × `scale` GB/s algbw, on a cluster described by `gpu` and `gin`.
fn run(gpu: &str, gin: GinKind, scale: f64) -> Run {
    let rows = [1u64 << 20, 1 << 30]
        .iter()
        .map(|&size| {
            let t = size as f64 / 1e3 / (100.0 * scale);
            common::row("nvl", size, t, t, 0)
        })
        .collect();
    let mut r = common::run(rows);
    r.env.ranks = 16;
    r.env.gpus = vec![Gpu { name: gpu.into(), ..Default::default() }];
    r.env.gin = Gin { kind: gin, reason: String::new(), connection: "full".into(), ..Default::default() };
    r
}

#[test]
fn two_clusters_side_by_side() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-{}", std::process::id()));
    let runs = vec![
        Labeled { label: "efa".into(), run: run("NVIDIA H200", GinKind::Proxy, 1.0) },
        Labeled { label: "ib".into(), run: run("NVIDIA H200", GinKind::Gdaki, 2.0) },
    ];
    sidebyside::write(&runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("| size (B) | efa busbw | ib busbw | ib / efa busbw | efa time | ib time |"), "{md}");
    assert!(md.contains("| 1073741824 | 75.00 | 150.0 | 2.00× |"), "{md}");
    assert!(md.contains("ib differs from efa: GIN type: proxy -> gdaki."), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<th>ib / efa busbw</th>") && html.contains("<img src=\"busbw_nvl_float_out_of_place.svg\""));
    for f in ["busbw_nvl_float_out_of_place.svg", "time_nvl_float_out_of_place.svg"] {
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains(">\nib\n<"), "{f}");
    }
    // A label with a `|` stays in its cell; settings that change the numbers are named.
    let mut graphs = run("NVIDIA H200", GinKind::Gdaki, 2.0);
    graphs.config = serde_json::json!({"cudagraph": 1});
    let piped = vec![
        Labeled { label: "efa|a".into(), run: run("NVIDIA H200", GinKind::Proxy, 1.0) },
        Labeled { label: "ib".into(), run: graphs },
    ];
    let piped_dir = dir.join("piped");
    sidebyside::write(&piped, &piped_dir).unwrap();
    let md = std::fs::read_to_string(piped_dir.join("report.md")).unwrap();
    assert!(md.contains("| size (B) | efa\\|a busbw | ib busbw | ib / efa\\|a busbw |"), "{md}");
    assert!(md.contains("cudagraph: - -> 1"), "{md}");
    // Nothing is written where a page cannot be: no chart replaced beside an old page.
    let blocked = dir.join("blocked");
    std::fs::create_dir_all(blocked.join("report.html")).unwrap();
    let e = sidebyside::write(&runs, &blocked).unwrap_err();
    assert!(e.contains("report.html: exists in") && e.contains("is not a regular file"), "{e}");
    assert_eq!(std::fs::read_dir(&blocked).unwrap().count(), 1, "only the folder in the way");
    // A file that fails part way (here the last page, a link into a folder that does not exist,
    // as a full disk would) leaves the earlier report whole: no chart of the new one beside it,
    // no temporary file.
    let before: Vec<_> =
        ["report.md", "busbw_nvl_float_out_of_place.svg"].map(|f| std::fs::read(piped_dir.join(f)).unwrap()).into();
    std::fs::remove_file(piped_dir.join("report.html")).unwrap();
    std::os::unix::fs::symlink("/nonexistent-ginbench-folder/report.html", piped_dir.join("report.html")).unwrap();
    let e = sidebyside::write(&runs, &piped_dir).unwrap_err();
    assert!(e.starts_with(&format!("writing the report into {} (left as it was)", piped_dir.display())), "{e}");
    let after: Vec<_> =
        ["report.md", "busbw_nvl_float_out_of_place.svg"].map(|f| std::fs::read(piped_dir.join(f)).unwrap()).into();
    assert!(before == after, "the earlier report changed");
    let names: Vec<_> = std::fs::read_dir(&piped_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!names.iter().any(|n| n.to_string_lossy().ends_with(".tmp")), "{names:?}");
    // A run of another benchmark is refused, not mixed in.
    let mut ep = run("NVIDIA H200", GinKind::None, 1.0);
    ep.benchmark = Kind::Ep;
    let bad =
        vec![Labeled { label: "a".into(), run: run("x", GinKind::None, 1.0) }, Labeled { label: "b".into(), run: ep }];
    assert!(sidebyside::write(&bad, &dir).unwrap_err().contains("a run of 'ep'"));
    // The command: bad input is exit 2 with one line.
    let p = dir.join("a.json");
    json::write(&p, &runs[0].run).unwrap();
    let gb = env!("CARGO_BIN_EXE_ginbench");
    let o = std::process::Command::new(gb)
        .args(["report", p.to_str().unwrap(), "/nonexistent.json", "-o", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim_end().lines().count(), 1);
    let labeled = |labels: &[&str]| {
        let mut c = std::process::Command::new(gb);
        c.args(["report", p.to_str().unwrap(), "-o", dir.to_str().unwrap()]);
        for l in labels {
            c.args(["--label", l]);
        }
        c.output().unwrap()
    };
    let o = labeled(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // A --label for every run names each; one more than the runs is bad input.
    let o = labeled(&["cluster-a"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("cluster-a busbw"), "{md}");
    let o = labeled(&["cluster-a", "cluster-b"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("2 --label given for 1 runs (one per run, in order)"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn impossible_or_unplottable_values_are_bad_input_not_a_hang() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gb = env!("CARGO_BIN_EXE_ginbench");
    // three cycles of every row, as `-N 3` writes them
    let with_times = |name: &str, t: f64| {
        let mut r = run("NVIDIA H200", GinKind::None, 1.0);
        r.rows = (0..3u32)
            .flat_map(|cycle| {
                r.rows.iter().map(move |row| Row {
                    cycle,
                    time_us: Some(t),
                    p50_us: Some(t),
                    p99_us: Some(t),
                    ..row.clone()
                })
            })
            .collect();
        r.config["run_cycles"] = 3.into();
        let p = dir.join(name);
        json::write(&p, &r).unwrap();
        p
    };
    // finite but so large that the mean or the axis range would overflow: refused, and promptly
    for (file, needles) in [
        (with_times("huge.json", 1e308), vec!["huge.json", "time_us", "above a week"]),
        (with_times("max.json", f64::MAX), vec!["max.json", "time_us", "above a week"]),
        (with_times("tiny.json", 1e-320), vec!["tiny.json", "time_us", "below 1 ns"]),
        (with_times("zero.json", 0.0), vec!["zero.json", "time_us", "alltoall nvl 1048576"]),
        (with_times("negative.json", -2.0), vec!["negative.json", "time_us"]),
    ] {
        let out = dir.join("out");
        let o = common::output_within(
            gb,
            &["report".as_ref(), file.as_os_str(), "-o".as_ref(), out.as_os_str()],
            std::time::Duration::from_secs(20),
        );
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        for n in needles {
            assert!(e.contains(n), "{n}: {e}");
        }
    }
    // the plot itself refuses a range it cannot compute, rather than looping: a log axis from
    // 1e-160 to 1e160 spans more than f64 holds, and its tick loop never ended
    for (y, log_y) in [(1e308, true), (1e308, false), (f64::MAX, false), (1e-310, true), (1e160, true), (1e-160, true)]
    {
        let s = [plots::Series { label: "a".into(), points: vec![(1024.0, y), (2048.0, 1.0)] }];
        let e = plots::line_chart("direct.svg", "t", plots::XAxis::Bytes, "y", &s, log_y).unwrap_err();
        assert!(e.contains("cannot be plotted"), "{e}");
    }
    // the widest spans it takes are drawn, promptly: times from 1 ns to a week, bandwidths from
    // 1e-100
    let mut wide = run("NVIDIA H200", GinKind::None, 1.0);
    for (i, r) in wide.rows.iter_mut().enumerate() {
        r.time_us = Some(if i % 2 == 0 { compare::MIN_TIME_US } else { compare::MAX_TIME_US });
        r.busbw_gbps = Some(if i % 2 == 0 { 1e100 } else { 1e-100 });
    }
    let p = dir.join("wide.json");
    json::write(&p, &wide).unwrap();
    let out = dir.join("wide");
    let o = common::output_within(
        gb,
        &["report".as_ref(), p.as_os_str(), "-o".as_ref(), out.as_os_str()],
        std::time::Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // the library refuses NaN too (JSON cannot carry it, a caller can)
    let mut nan = run("NVIDIA H200", GinKind::None, 1.0);
    nan.rows[0].time_us = Some(f64::NAN);
    let e = sidebyside::write(&[Labeled { label: "a".into(), run: nan }], &dir.join("nan")).unwrap_err();
    assert!(e.contains("time_us") && e.contains("NaN"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// LL dispatch (bf16 and fp8) and combine pairs in ep_perf's order, nvl then host: time and bw
/// scaled by `scale`; the combine after an fp8 dispatch is 10 % faster than the one after bf16.
fn ep(ranks: u64, scale: f64) -> Run {
    let mut rows = vec![];
    for dtype in ["bf16", "fp8"] {
        for imp in ["nvl", "host"] {
            for tokens in [1u64, 128] {
                let t = tokens as f64 * scale;
                let c = if dtype == "fp8" { 0.9 } else { 1.0 };
                rows.push(common::ep_row(imp, "ll", "dispatch", dtype, tokens, (10.0 + t, 100.0 * scale), ranks));
                rows.push(common::ep_row(imp, "ll", "combine", "bf16", tokens, ((20.0 + t) * c, 50.0 * scale), ranks));
            }
        }
    }
    common::ep_run(ranks as usize, rows)
}

#[test]
fn ep_runs_line_up_by_tokens_and_phase() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-ep-{}", std::process::id()));
    let runs = vec![Labeled { label: "x2".into(), run: ep(2, 1.0) }, Labeled { label: "x4".into(), run: ep(4, 2.0) }];
    sidebyside::write(&runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    // one section per (impl, mode, dispatch dtype), never a mix of phases on one line
    for h in
        ["## nvl LL, dispatch bf16", "## nvl LL, dispatch fp8", "## host LL, dispatch bf16", "## host LL, dispatch fp8"]
    {
        assert_eq!(md.matches(h).count(), 1, "{h}: {md}");
    }
    assert!(md.find("## nvl LL, dispatch bf16").unwrap() < md.find("## nvl LL, dispatch fp8").unwrap(), "{md}");
    assert!(md.contains("hidden 7168, top-8 of 256 experts"), "{md}");
    assert!(md.contains("deepep-ll: logical bytes / time"), "{md}");
    assert!(md.contains("| phase | tokens | x2 bw | x4 bw | x4 / x2 bw | x2 time | x4 time |"), "{md}");
    // rows of 2 and 4 ranks (different sizes) line up by tokens; bandwidth is bw_gbps
    let nvl_bf16 = section(&md, "## nvl LL, dispatch bf16");
    assert!(nvl_bf16.contains("| dispatch | 128 | 100.0 | 200.0 | 2.00× | 138.0 | 266.0 |"), "{nvl_bf16}");
    assert!(nvl_bf16.contains("| combine | 128 | 50.00 | 100.0 | 2.00× | 148.0 | 276.0 |"), "{nvl_bf16}");
    assert!(nvl_bf16.contains("| dispatch | 1 |"), "{nvl_bf16}");
    // the combine that followed an fp8 dispatch belongs to the fp8 section
    let nvl_fp8 = section(&md, "## nvl LL, dispatch fp8");
    assert!(nvl_fp8.contains("| combine | 128 | 50.00 | 100.0 | 2.00× | 133.2 | 248.4 |"), "{nvl_fp8}");
    assert!(!md.contains("| - | - |"), "{md}");
    // plots against tokens per rank, one line per run and phase
    for f in ["bw_ep_nvl_ll_bf16_7168x8x256.svg", "time_ep_nvl_ll_fp8_7168x8x256.svg"] {
        assert!(md.contains(&format!("]({f})")), "{f}: {md}");
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.contains("tokens per rank") && svg.contains("x4 combine") && svg.contains("x2 dispatch"), "{f}");
        // four data lines of two points each (2 runs × 2 phases), and their four legend strokes
        assert_eq!(svg.matches("stroke-width=\"2\" points=").count(), 8, "{f}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The text from heading `h` to the next heading.
fn section<'a>(md: &'a str, h: &str) -> &'a str {
    let s = &md[md.find(h).unwrap()..];
    &s[..s[3..].find("\n## ").map(|i| i + 3).unwrap_or(s.len())]
}

#[test]
fn sections_whose_names_differ_only_in_punctuation_get_their_own_plots() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-slugs-{}", std::process::id()));
    let mut r = run("NVIDIA H200", GinKind::None, 1.0);
    let mut other = r.rows.clone();
    for row in &mut other {
        row.impl_name = "nvl_ll".into();
        row.time_us = row.time_us.map(|t| t * 2.0);
    }
    for row in &mut r.rows {
        row.impl_name = "nvl-ll".into();
    }
    r.rows.extend(other);
    sidebyside::write(&[Labeled { label: "a".into(), run: r }], &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for f in ["busbw_nvl_ll_float_out_of_place.svg", "busbw_nvl_ll_float_out_of_place_2.svg"] {
        assert!(md.contains(f) && dir.join(f).exists(), "{f}: {md}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_best_impl_per_size_and_autos_time_against_it() {
    // a is faster at 1 KB, b at 1 MB; auto picks a at both: 1.00 at 1 KB, 2.00 at 1 MB.
    let rows = vec![
        common::row("a", 1 << 10, 2.0, 2.0, 0),
        common::row("b", 1 << 10, 3.0, 3.0, 0),
        common::row("auto", 1 << 10, 2.0, 2.0, 0),
        common::row("a", 1 << 20, 20.0, 20.0, 0),
        common::row("b", 1 << 20, 10.0, 10.0, 0),
        common::row("auto", 1 << 20, 20.0, 20.0, 0),
        common::row("a", 0, 1.0, 1.0, 0),
    ];
    let mut slow = common::run(rows.clone());
    slow.rows.retain(|r| r.impl_name != "auto");
    let runs = vec![Labeled { label: "x".into(), run: common::run(rows) }, Labeled { label: "y".into(), run: slow }];
    let md = report_md("best", &runs);
    let best = section(&md, "## Best impl per size (float, out-of-place)");
    assert!(
        best.contains("| size (B) | x best | x busbw | x auto ÷ best | y best | y busbw | y auto ÷ best |"),
        "{best}"
    );
    assert!(best.contains("| 1024 | a | 0.38 | 1.00 | a | 0.38 | - |"), "{best}");
    assert!(best.contains("| 1048576 | b | 78.64 | 2.00 | b | 78.64 | - |"), "{best}");
    assert!(!best.contains("| 0 |"), "size 0 has no best: {best}");
    // An unchecked row (NCCL's in-place alltoall times nothing) is no rival to checked ones; it
    // is the best only where nothing at its size was checked.
    let mut rows = vec![common::row("host", 1 << 10, 0.2, 0.2, 0), common::row("nvl-ll", 1 << 10, 3.0, 3.0, 0)];
    rows.push(common::row("host", 1 << 20, 0.3, 0.3, 0));
    rows[0].wrong = None;
    rows[2].wrong = None;
    let md = report_md("unchecked", &[Labeled { label: "x".into(), run: common::run(rows) }]);
    let best = section(&md, "## Best impl per size (float, out-of-place)");
    assert!(best.contains("| 1024 | nvl-ll |"), "{best}");
    assert!(best.contains("| 1048576 | host |"), "{best}");
}

#[test]
fn default_labels_are_distinct() {
    use std::path::PathBuf;
    let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
    assert_eq!(
        sidebyside::default_labels(&p(&["results/h200x2/ep/ll.json", "results/h200x4/ep/ll.json"])),
        ["h200x2/ll", "h200x4/ll"]
    );
    assert_eq!(sidebyside::default_labels(&p(&["x/ll.json", "y/ht.json"])), ["ll", "ht"]);
    assert_eq!(sidebyside::default_labels(&p(&["ll.json", "../old/ll.json"])), ["ll", "old/ll"]);
    assert_eq!(
        sidebyside::default_labels(&p(&["a/b/ll.json", "c/b/ll.json", "c/d/ll.json"])),
        ["a/b/ll", "c/b/ll", "c/d/ll"]
    );
    assert_eq!(sidebyside::default_labels(&p(&["ll.json", "./ll.json", "ht.json"])), ["ll", "ll#2", "ht"]);
    // A number a later label already has is skipped.
    let mut labels = ["x", "x", "x#2"].map(String::from);
    sidebyside::distinct(&mut labels);
    assert_eq!(labels, ["x", "x#3", "x#2"]);
}

#[test]
fn the_command_labels_colliding_files_and_refuses_mixed_benchmarks() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-labels-{}", std::process::id()));
    for (sub, ranks, scale) in [("h200x2", 2, 1.0), ("h200x4", 4, 2.0)] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        json::write(&dir.join(sub).join("ll.json"), &ep(ranks, scale)).unwrap();
    }
    let a2a = dir.join("a2a.json");
    json::write(&a2a, &run("NVIDIA H200", GinKind::None, 1.0)).unwrap();
    let gb = env!("CARGO_BIN_EXE_ginbench");
    let out = dir.join("out");
    let (x2, x4) = (dir.join("h200x2/ll.json"), dir.join("h200x4/ll.json"));
    let o = std::process::Command::new(gb).arg("report").args([&x2, &x4]).arg("-o").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| phase | tokens | h200x2/ll bw | h200x4/ll bw | h200x4/ll / h200x2/ll bw |"), "{md}");
    // an alltoall run beside an ep run: exit 2, one line
    let o = std::process::Command::new(gb).arg("report").args([&x2, &a2a]).arg("-o").arg(&out).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("a run of 'alltoall'") && e.contains("a run of 'ep'"), "{e}");
    // more labels than runs is bad input
    let o = std::process::Command::new(gb)
        .arg("report")
        .arg(&x2)
        .args(["--label", "a", "--label", "b", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The report.md of `runs`, written to a scratch folder of its own and removed again.
fn report_md(tag: &str, runs: &[Labeled]) -> String {
    let dir = std::env::temp_dir().join(format!("ginbench-report-{tag}-{}", std::process::id()));
    sidebyside::write(runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    md
}

#[test]
fn a_loopback_run_beside_a_network_run_is_flagged() {
    let mut lo = run("NVIDIA H200", GinKind::Proxy, 1.0);
    lo.env.gin.backend = ginbench::gin_backend::Backend::Loopback;
    lo.env.gin.nodes = 1;
    let runs = vec![
        Labeled { label: "ib".into(), run: run("NVIDIA H200", GinKind::Gdaki, 2.0) },
        Labeled { label: "loopback".into(), run: lo },
    ];
    let md = report_md("loopback", &runs);
    assert!(md.contains("WARNING: loopback against ib: GIN backend differs (nccl -> loopback)"), "{md}");
    assert!(md.contains("loopback, 1 node(s): not a network"), "{md}");
}

#[test]
fn a_debug_build_beside_a_release_build_is_flagged() {
    let mut dbg = run("NVIDIA H200", GinKind::Gdaki, 2.0);
    dbg.tool.build = "debug".into();
    let runs = vec![
        Labeled { label: "rel".into(), run: run("NVIDIA H200", GinKind::Gdaki, 1.0) },
        Labeled { label: "dbg".into(), run: dbg },
    ];
    let md = report_md("build", &runs);
    assert!(md.contains("WARNING: dbg is a debug build, beside runs that are not"), "{md}");
    assert!(md.contains("| build |") && md.contains("| debug |"), "{md}");
    // Whichever comes first, and beside a file from before builds were recorded too.
    let mut runs: Vec<Labeled> = runs.into_iter().rev().collect();
    runs[1].run.tool.build = String::new();
    let md = report_md("build-first", &runs);
    assert!(md.contains("WARNING: dbg is a debug build, beside runs that are not"), "{md}");
    runs[1].run.tool.build = "debug".into();
    assert!(!report_md("all-debug", &runs).contains("is a debug build"));
}

/// A run that ended in error says so: what it had not reached is missing, not absent by design.
#[test]
fn a_run_that_ended_in_error_is_flagged() {
    let mut r = run("NVIDIA H200", GinKind::Gdaki, 1.0);
    r.config = serde_json::json!({"error": "timeout: no progress for 20 s"});
    let md = report_md("error", &[Labeled { label: "cut".into(), run: r.clone() }]);
    assert!(md.contains("WARNING: cut ended in error (timeout: no progress for 20 s)"), "{md}");
    r.config = serde_json::json!({"error": " "});
    let md = report_md("error-empty", &[Labeled { label: "cut".into(), run: r }]);
    assert!(md.contains("WARNING: cut ended in error ((no message))"), "an empty message is an error too: {md}");
}

/// A run whose ranks took turns on shared GPUs is flagged: its times are not the operation's.
#[test]
fn a_run_whose_ranks_shared_gpus_is_flagged() {
    let mut r = run("NVIDIA H200", GinKind::Gdaki, 1.0);
    let gpu = |bus: &str| ginbench::results::Gpu { host: "h".into(), pci_bus_id: bus.into(), ..Default::default() };
    r.env.gpus = vec![gpu("a"), gpu("b"), gpu("a"), gpu("b")];
    let md = report_md("shared", &[Labeled { label: "vn".into(), run: r.clone() }]);
    assert!(md.contains("WARNING: vn is a run whose 4 of 4 ranks shared a GPU, so its times mean nothing."), "{md}");
    r.env.gpus[2].pci_bus_id = "c".into();
    r.env.gpus[3].pci_bus_id = "d".into();
    assert!(!report_md("own", &[Labeled { label: "vn".into(), run: r }]).contains("shared a GPU"));
}

#[test]
fn a_ceiling_report_ranks_no_patterns_and_names_its_ctas() {
    // `ginbench ceiling` loads no NCCL, and its patterns move different bytes: no best-impl table.
    let ceiling = |ctas: u32| {
        let mut r = run("NVIDIA H200", GinKind::None, 1.0);
        r.benchmark = Kind::Ceiling;
        r.env.nccl.library = 0;
        r.config["ctas"] = ctas.into();
        r
    };
    let runs =
        vec![Labeled { label: "v128".into(), run: ceiling(128) }, Labeled { label: "v32".into(), run: ceiling(32) }];
    let md = report_md("ceiling", &runs);
    assert!(!md.contains("Best impl per size"), "{md}");
    assert!(md.contains("| not loaded |") && !md.contains("0.0.0"), "{md}");
    assert!(md.contains("ctas: 128 -> 32"), "{md}");
}

/// Every field of a Row set, so that none is skipped in its JSON.
fn full_ep_row() -> Row {
    // Every field set, those of interference rows (an EP foreground) included.
    Row {
        busbw_gbps: Some(1.5),
        dispatch_dtype: Some("fp8".into()),
        reason: Some("a reason, with a comma and \"quotes\"".into()),
        cycle: 2,
        alone_us: Some(60.3123456789),
        together_us: Some(61.478912345),
        slowdown: Some(1.0193),
        overlap: Some(1.0),
        fg_iters: Some(480),
        ran: Some("nvl-ll128".into()),
        background: Some(Background {
            op: BgOp::AllReduce,
            size_bytes: 1 << 20,
            count: 1 << 18,
            dtype: "float".into(),
            redop: "sum".into(),
            ranks: 2,
            alone_us: Some(20.5),
            together_us: Some(30.75),
            slowdown: Some(1.5),
            busbw_alone_gbps: Some(51.15),
            busbw_together_gbps: Some(34.1),
            wrong: Some(0),
        }),
        ..common::ep_row("nvl", "ll", "dispatch", "fp8", 128, (61.478912345, 60.3123456789), 4)
    }
}

/// A JSON value as its CSV cell: strings bare, null empty, numbers as JSON writes them.
fn cell_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn csv_columns_are_the_json_fields() {
    use ginbench::report::csv as rcsv;
    let full = full_ep_row();
    let text = serde_json::to_string(&full).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // the JSON's keys, nested objects flattened as outer.inner
    let mut keys = vec![];
    for (k, x) in v.as_object().unwrap() {
        match x.as_object() {
            Some(o) => keys.extend(o.keys().map(|kk| format!("{k}.{kk}"))),
            None => keys.push(k.clone()),
        }
    }
    let out = rcsv::to_string(std::slice::from_ref(&full));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    for k in &keys {
        assert!(header.contains(k), "column {k} missing from {header:?}");
    }
    assert_eq!(header.len(), keys.len(), "{header:?} vs {keys:?}");
    // in the struct's field order, which is the order serde writes them
    let at = |c: &String| text.find(&format!("\"{}\":", c.split('.').next().unwrap())).unwrap();
    assert!(header.windows(2).all(|w| at(&w[0]) <= at(&w[1])), "{header:?}");
    assert_eq!(&header[..3], ["impl", "size_bytes", "count"]);
    // every column present even where the row has None (an alltoall row has no EP fields)
    let a2a = rcsv::to_string(&[common::row("nvl", 1 << 20, 10.0, 11.0, 0)]);
    assert_eq!(a2a.lines().next(), out.lines().next());
    let a2a_cells: Vec<String> =
        csv::Reader::from_reader(a2a.as_bytes()).records().next().unwrap().unwrap().iter().map(String::from).collect();
    assert_eq!(a2a_cells[header.iter().position(|h| h == "wire_bytes.nvl").unwrap()], "");
    // the EP row's values round-trip: every cell is its JSON value, numbers to the last digit
    let cells = reader.records().next().unwrap().unwrap();
    for (h, c) in header.iter().zip(cells.iter()) {
        let want = h.split('.').fold(&v, |v, k| &v[k]);
        assert_eq!(c, cell_of(want), "{h}");
        if let Some(n) = want.as_f64() {
            assert_eq!(c.parse::<f64>().unwrap(), n, "{h}");
        }
    }
    for (h, want) in [
        ("hidden", "7168"),
        ("topk", "8"),
        ("experts", "256"),
        ("wire_bytes.nvl", "128000"),
        ("time_us", "61.478912345"),
    ] {
        assert_eq!(&cells[header.iter().position(|x| x == h).unwrap()], want, "{h}");
    }
    assert!(header.contains(&"bw_definition".to_string()));
}

#[test]
fn wrong_rows_are_left_out_and_named() {
    // The second run doubled its 1 GB bandwidth, but with wrong elements: not a figure.
    let mut bad = run("NVIDIA H200", GinKind::Gdaki, 1.0);
    let r = &mut bad.rows[1];
    (r.wrong, r.time_us, r.busbw_gbps) = (Some(123456), r.time_us.map(|t| t / 2.0), r.busbw_gbps.map(|b| b * 2.0));
    let runs = vec![
        Labeled { label: "good".into(), run: run("NVIDIA H200", GinKind::Gdaki, 1.0) },
        Labeled { label: "bad".into(), run: bad },
    ];
    let md = report_md("wrong", &runs);
    assert!(md.contains("WARNING: bad has 1 rows with wrong data: they are left out"), "{md}");
    assert!(!md.contains("WARNING: good"), "a run without wrong rows is not warned about: {md}");
    assert!(md.contains("| 1073741824 | 75.00 | - | - |"), "{md}");
    assert!(md.contains("| bad | nvl (float, out-of-place) | wrong data |"), "{md}");
    // EP likewise.
    let mut bad = ep(4, 3.0);
    bad.rows[0].wrong = Some(7);
    let runs = vec![Labeled { label: "x".into(), run: ep(4, 1.0) }, Labeled { label: "y".into(), run: bad }];
    let md = report_md("wrong-ep", &runs);
    assert!(md.contains("WARNING: y has 1 rows with wrong data"), "{md}");
    assert!(md.contains("| y | nvl LL bf16 | wrong data |"), "{md}");
}

#[test]
fn bad_labels_empty_runs_and_missing_folders_are_refused() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one = |label: &str, run: Run| vec![Labeled { label: label.into(), run }];
    let a = run("NVIDIA H200", GinKind::None, 1.0);
    for label in ["", "a\nb", "tab\tbed", "line\u{2028}break", "bidi\u{202e}flip"] {
        let e = sidebyside::write(&one(label, a.clone()), &dir.join("out")).unwrap_err();
        assert!(e.contains("a label is one line of plain text"), "{e}");
    }
    let e = sidebyside::write(&one("a", common::run(vec![])), &dir.join("out")).unwrap_err();
    assert!(e.contains("a: the run has no rows: nothing to report"), "{e}");
    // The report's folder is made, not the folders above it.
    let deep = dir.join("no/such/out");
    let e = sidebyside::write(&one("a", a.clone()), &deep).unwrap_err();
    assert!(e.contains("does not exist") && !dir.join("no").exists(), "{e}");
    // A dangling link where the folder would go is named as such.
    let link = dir.join("dangling");
    std::os::unix::fs::symlink(dir.join("nowhere"), &link).unwrap();
    let e = sidebyside::write(&one("a", a.clone()), &link).unwrap_err();
    assert!(e.contains("exists and is not a folder"), "{e}");
    sidebyside::write(&one("a", a), &dir.join("out")).unwrap();
    assert!(dir.join("out/report.md").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cycles_are_averaged_per_size() {
    // Two cycles of one size: 10 µs and 30 µs average to 20 µs, and their busbw likewise.
    let rows = vec![common::row("nvl", 1 << 20, 10.0, 10.0, 0), common::row("nvl", 1 << 20, 30.0, 30.0, 1)];
    let md = report_md("mean", &[Labeled { label: "a".into(), run: common::run(rows) }]);
    assert!(md.contains("| 1048576 | 52.43 | 20.00 |"), "{md}");
}

#[test]
fn a_measured_row_without_busbw_shows_a_dash_not_zero() {
    let mut r = common::row("nvl", 1 << 20, 10.0, 10.0, 0);
    r.busbw_gbps = None;
    let md = report_md("no-busbw", &[Labeled { label: "a".into(), run: common::run(vec![r]) }]);
    assert!(md.contains("| 1048576 | - | 10.00 |"), "{md}");
}

#[test]
fn an_impls_table_holds_only_the_sizes_it_ran() {
    // a ran 1 KB only, b 1 MB only: neither table gets a line for the other's size.
    let rows = vec![common::row("a", 1 << 10, 2.0, 2.0, 0), common::row("b", 1 << 20, 10.0, 10.0, 0)];
    let md = report_md("sizes", &[Labeled { label: "x".into(), run: common::run(rows) }]);
    let a = section(&md, "## a (float, out-of-place)");
    assert!(a.contains("| 1024 | 0.38 | 2.00 |") && !a.contains("| 1048576 |"), "{a}");
    let b = section(&md, "## b (float, out-of-place)");
    assert!(b.contains("| 1048576 | 78.64 | 10.00 |") && !b.contains("| 1024 |"), "{b}");
}

#[test]
fn the_best_impl_table_has_no_auto_column_when_auto_did_not_run() {
    let rows = vec![common::row("a", 1 << 10, 2.0, 2.0, 0), common::row("b", 1 << 10, 3.0, 3.0, 0)];
    let md = report_md("no-auto", &[Labeled { label: "x".into(), run: common::run(rows) }]);
    let best = section(&md, "## Best impl per size (float, out-of-place)");
    assert!(best.contains("| size (B) | x best | x busbw |\n"), "{best}");
    assert!(best.contains("| 1024 | a | 0.38 |\n") && !best.contains("auto"), "{best}");
}

#[test]
fn ep_chart_names_turn_punctuation_into_underscores() {
    // gin-emu and hybrid-emu are real EP impls; their charts are named as alltoall ones are.
    let rows = vec![
        common::ep_row("gin-emu", "ll", "dispatch", "bf16", 128, (20.0, 100.0), 2),
        common::ep_row("gin-emu", "ll", "combine", "bf16", 128, (30.0, 50.0), 2),
    ];
    let md = report_md("ep-slug", &[Labeled { label: "a".into(), run: common::ep_run(2, rows) }]);
    for f in ["bw_ep_gin_emu_ll_bf16_7168x8x256.svg", "time_ep_gin_emu_ll_bf16_7168x8x256.svg"] {
        assert!(md.contains(&format!("]({f})")), "{f}: {md}");
    }
}

/// Gives the rows of `run` that `which` picks the bw definition `def`.
fn define_bw(run: &mut Run, which: impl Fn(&Row) -> bool, def: Option<&str>) {
    for row in run.rows.iter_mut().filter(|r| which(r)) {
        row.bw_definition = def.map(String::from);
    }
}

#[test]
fn each_ep_section_names_its_own_bw_definition() {
    let mut r = ep(2, 1.0);
    define_bw(&mut r, |r| r.impl_name == "host", Some("host bytes / time"));
    let md = report_md("ep-defs", &[Labeled { label: "a".into(), run: r }]);
    let nvl = section(&md, "## nvl LL, dispatch bf16");
    assert!(nvl.contains("\nbw: deepep-ll: logical bytes / time.\n"), "{nvl}");
    let host = section(&md, "## host LL, dispatch bf16");
    assert!(host.contains("\nbw: host bytes / time.\n"), "{host}");
}

#[test]
fn ep_sections_say_when_bw_definitions_differ_or_are_missing() {
    let mut other = ep(2, 1.0);
    define_bw(&mut other, |r| r.impl_name == "nvl", Some("wire bytes / time"));
    define_bw(&mut other, |r| r.impl_name == "host", None);
    let mut none = ep(2, 1.0);
    define_bw(&mut none, |r| r.impl_name == "host", None);
    let runs = vec![Labeled { label: "x".into(), run: none }, Labeled { label: "y".into(), run: other }];
    let md = report_md("ep-defs-differ", &runs);
    let nvl = section(&md, "## nvl LL, dispatch bf16");
    let want = "\nbw definitions differ: x: deepep-ll: logical bytes / time; y: wire bytes / time.\n";
    assert!(nvl.contains(want), "{nvl}");
    let host = section(&md, "## host LL, dispatch bf16");
    assert!(host.contains("\nbw: no definition recorded.\n"), "{host}");
}

#[test]
fn a_bw_definition_that_changes_within_one_run_is_named_twice() {
    // Dispatch and combine of one section measured under two definitions in the same run.
    let mut r = ep(2, 1.0);
    define_bw(&mut r, |r| r.phase == Some(Phase::Combine), Some("combine bytes / time"));
    let md = report_md("ep-defs-one-run", &[Labeled { label: "a".into(), run: r }]);
    let nvl = section(&md, "## nvl LL, dispatch bf16");
    let want = "\nbw definitions differ: a: deepep-ll: logical bytes / time; a: combine bytes / time.\n";
    assert!(nvl.contains(want), "{nvl}");
}

#[test]
fn an_ep_sections_table_holds_only_its_own_lines() {
    // nvl ran 128 tokens per rank, host 1: neither section gets a line for the other's.
    let rows = vec![
        common::ep_row("nvl", "ll", "dispatch", "bf16", 128, (20.0, 100.0), 2),
        common::ep_row("host", "ll", "dispatch", "bf16", 1, (30.0, 50.0), 2),
    ];
    let md = report_md("ep-lines", &[Labeled { label: "a".into(), run: common::ep_run(2, rows) }]);
    let nvl = section(&md, "## nvl LL, dispatch bf16");
    assert!(nvl.contains("| dispatch | 128 | 100.0 | 20.00 |") && !nvl.contains("| dispatch | 1 |"), "{nvl}");
    let host = section(&md, "## host LL, dispatch bf16");
    assert!(host.contains("| dispatch | 1 | 50.00 | 30.00 |") && !host.contains("| dispatch | 128 |"), "{host}");
}

#[test]
fn each_ep_phase_is_plotted_from_its_own_points() {
    // Dispatch at 1, 2 and 4 tokens per rank, combine at 128: the first line drawn (the
    // dispatch, in the first colour) has three points, the combine's one.
    let mut rows: Vec<Row> =
        [1, 2, 4].map(|t| common::ep_row("nvl", "ll", "dispatch", "bf16", t, (20.0, 100.0), 2)).into();
    rows.push(common::ep_row("nvl", "ll", "combine", "bf16", 128, (30.0, 50.0), 2));
    let dir = std::env::temp_dir().join(format!("ginbench-report-ep-points-{}", std::process::id()));
    sidebyside::write(&[Labeled { label: "a".into(), run: common::ep_run(2, rows) }], &dir).unwrap();
    let svg = std::fs::read_to_string(dir.join("bw_ep_nvl_ll_bf16_7168x8x256.svg")).unwrap();
    let points = |colour: &str| {
        let l = svg.lines().find(|l| l.contains(&format!("stroke=\"{colour}\" stroke-width=\"2\" points="))).unwrap();
        l.split("points=\"").nth(1).unwrap().split_whitespace().filter(|p| p.contains(',')).count()
    };
    assert_eq!((points("#1F77B4"), points("#FF7F0E")), (3, 1), "{svg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_row_that_did_not_run_is_explained_by_its_status_even_with_a_wrong_count() {
    // "wrong data" is for rows that ran; a skipped row keeps its own reason.
    let mut r = run("NVIDIA H200", GinKind::None, 1.0);
    (r.rows[0].status, r.rows[0].reason, r.rows[0].wrong) = (Status::Skipped, Some("no GIN".into()), Some(3));
    let md = report_md("skipped-wrong", &[Labeled { label: "a".into(), run: r }]);
    assert!(md.contains("| a | nvl (float, out-of-place) | skipped: no GIN |"), "{md}");
}

#[test]
fn not_measured_names_each_section_once_per_reason() {
    let skip = |imp: &str, size: u64, why: &str| Row {
        status: Status::Skipped,
        reason: Some(why.into()),
        ..common::row(imp, size, 1.0, 1.0, 0)
    };
    let rows = vec![
        common::row("ce", 1 << 20, 10.0, 10.0, 0),
        skip("nvl", 1 << 20, "no GIN"),
        skip("nvl", 1 << 30, "no GIN"),
        skip("host", 1 << 20, "no GIN"),
        skip("host", 1 << 30, "too big"),
    ];
    let md = report_md("not-measured", &[Labeled { label: "a".into(), run: common::run(rows) }]);
    let t = section(&md, "## Not measured");
    assert!(t.contains("| a | nvl (float, out-of-place), host (float, out-of-place) | skipped: no GIN |\n"), "{t}");
    assert!(t.contains("| a | host (float, out-of-place) | skipped: too big |\n"), "{t}");
    assert_eq!(t.matches("| a |").count(), 2, "{t}");
}

#[test]
fn a_zero_busbw_gets_no_ratio() {
    // Size 0 moves nothing: its busbw is 0 in both runs, and 0 / 0 is no ratio.
    let runs =
        ["x", "y"].map(|l| Labeled { label: l.into(), run: common::run(vec![common::row("nvl", 0, 1.0, 1.0, 0)]) });
    let md = report_md("zero-busbw", &runs);
    assert!(md.contains("| 0 | 0.00 | 0.00 | - | 1.00 | 1.00 |\n"), "{md}");
}

#[test]
fn the_markdown_report_has_one_title_and_sections_under_it() {
    let md = report_md("title", &[Labeled { label: "a".into(), run: run("NVIDIA H200", GinKind::None, 1.0) }]);
    assert!(md.starts_with("# ginbench report\n\n"), "{md}");
    assert!(!md.contains("\n# ") && md.contains("\n## nvl (float, out-of-place)\n"), "{md}");
}

/// The texts an SVG shows, in order.
fn svg_texts(svg: &str) -> Vec<&str> {
    svg.split("<text")
        .skip(1)
        .map(|s| s.split('>').nth(1).unwrap_or("").split('<').next().unwrap_or("").trim())
        .collect()
}

#[test]
fn plots_label_the_x_axis_in_bytes_or_tokens_per_rank() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-ticks-{}", std::process::id()));
    sidebyside::write(&[Labeled { label: "a".into(), run: run("NVIDIA H200", GinKind::None, 1.0) }], &dir).unwrap();
    let svg = std::fs::read_to_string(dir.join("busbw_nvl_float_out_of_place.svg")).unwrap();
    let t = svg_texts(&svg);
    assert!(
        t.contains(&"bytes per rank") && t.windows(6).any(|w| w == ["1M", "4M", "16M", "64M", "256M", "1G"]),
        "{t:?}"
    );
    // Tokens: the axis starts half a step below 1 token, where there is no label.
    let ep_dir = dir.join("ep");
    sidebyside::write(&[Labeled { label: "a".into(), run: ep(2, 1.0) }], &ep_dir).unwrap();
    let svg = std::fs::read_to_string(ep_dir.join("bw_ep_nvl_ll_bf16_7168x8x256.svg")).unwrap();
    let t = svg_texts(&svg);
    let ticks = ["", "1", "2", "4", "8", "16", "32", "64", "128", "256"];
    assert!(t.contains(&"tokens per rank") && t.windows(10).any(|w| w == ticks), "{t:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn human_bytes_names_sizes_as_the_axis_shows_them() {
    for (v, want) in [
        (8.0, "8"),
        (1023.0, "1023"),
        (1024.0, "1K"),
        (1536.0, "1.5K"),
        (65536.0, "64K"),
        (3.0 * 1048576.0, "3M"),
        (2147483648.0, "2G"),
        (1.5 * 1073741824.0, "1.5G"),
    ] {
        assert_eq!(plots::human_bytes(v), want, "{v}");
    }
}

#[test]
fn a_one_rank_run_is_reported_without_a_busbw_plot() {
    // One rank has no peer: its busbw of 0 is left out of the plot, not drawn on a 0..0 axis.
    let mut r = common::run(vec![Row { busbw_gbps: Some(0.0), ..common::row("nvl", 1 << 20, 10.0, 10.0, 0) }]);
    r.env.ranks = 1;
    let md = report_md("one-rank", &[Labeled { label: "a".into(), run: r }]);
    assert!(!md.contains("busbw_nvl_float_out_of_place.svg"), "{md}");
    assert!(md.contains("](time_nvl_float_out_of_place.svg)") && md.contains("| 1048576 | 0.00 | 10.00 |"), "{md}");
}

#[test]
fn plots_scale_the_y_axis_to_the_data() {
    // busbw on a linear axis from 0 with headroom; time on a log axis where it spans decades
    // (times from 10 ns to 700 µs here, 10 µs to 10 ms in `run`), the top decade in the headroom.
    let rows = vec![
        common::row("nvl", 1 << 10, 0.01, 0.01, 0),
        common::row("nvl", 1 << 20, 100.0, 100.0, 0),
        common::row("nvl", 1 << 30, 700.0, 700.0, 0),
    ];
    let y_ticks = |run: Run, tag: &str| {
        let dir = std::env::temp_dir().join(format!("ginbench-report-y-{tag}-{}", std::process::id()));
        sidebyside::write(&[Labeled { label: "a".into(), run }], &dir).unwrap();
        let ticks = ["busbw", "time"].map(|k| {
            let svg = std::fs::read_to_string(dir.join(format!("{k}_nvl_float_out_of_place.svg"))).unwrap();
            let t = svg_texts(&svg);
            // between the axis descriptions and the first x tick
            let from = t.iter().position(|s| *s == "bytes per rank").unwrap() + 1;
            let to = t.iter().position(|s| s.ends_with(['K', 'M', 'G'])).unwrap();
            t[from..to].join(" ")
        });
        std::fs::remove_dir_all(&dir).unwrap();
        ticks
    };
    assert_eq!(
        y_ticks(common::run(rows), "wide"),
        ["0.0 200.0 400.0 600.0 800.0 1000.0 1200.0", "0.01 0.1 1.0 10.0 100.0 1000.0"]
    );
    assert_eq!(
        y_ticks(run("NVIDIA H200", GinKind::None, 1.0), "run"),
        ["0.0 10.0 20.0 30.0 40.0 50.0 60.0 70.0 80.0", "10.0 100.0 1000.0 10000.0"]
    );
}
