//! `ginbench report`: two runs side by side, with ratios, environment differences and plots.
use ginbench::report::schema::*;
use ginbench::report::sidebyside::{self, Labeled};
use ginbench::report::{json, plots};

mod common;

/// Two sizes of nvl at 100 × `scale` GB/s algbw, on a cluster described by `gpu` and `gin`.
fn run(gpu: &str, gin: &str, scale: f64) -> Run {
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
    r.env.gin = Gin { kind: gin.into(), reason: String::new(), connection: "full".into() };
    r
}

#[test]
fn two_clusters_side_by_side() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-{}", std::process::id()));
    let runs = vec![
        Labeled { label: "efa".into(), run: run("NVIDIA H200", "proxy", 1.0) },
        Labeled { label: "ib".into(), run: run("NVIDIA H200", "gdaki", 2.0) },
    ];
    sidebyside::write(&runs, &dir).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("| size (B) | efa busbw | ib busbw | ib / efa | efa time | ib time |"), "{md}");
    assert!(md.contains("| 1073741824 | 75.00 | 150.0 | 2.00× |"), "{md}");
    assert!(md.contains("ib differs from efa: GIN type: proxy -> gdaki."), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<th>ib / efa</th>") && html.contains("<img src=\"busbw_nvl_float_out_of_place.svg\""));
    for f in ["busbw_nvl_float_out_of_place.svg", "time_nvl_float_out_of_place.svg"] {
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains(">\nib\n<"), "{f}");
    }
    // A run of another benchmark is refused, not mixed in.
    let mut ep = run("NVIDIA H200", "none", 1.0);
    ep.benchmark = "ep".into();
    let bad = vec![Labeled { label: "a".into(), run: run("x", "none", 1.0) }, Labeled { label: "b".into(), run: ep }];
    assert!(sidebyside::write(&bad, &dir).unwrap_err().contains("'ep' run"));
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
    let o = std::process::Command::new(gb)
        .args(["report", p.to_str().unwrap(), "-o", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn impossible_or_unplottable_values_are_bad_input_not_a_hang() {
    let dir = std::env::temp_dir().join(format!("ginbench-report-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gb = env!("CARGO_BIN_EXE_ginbench");
    // three cycles of every row, as `-N 3` writes them
    let with_times = |name: &str, t: f64| {
        let mut r = run("NVIDIA H200", "none", 1.0);
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
        let p = dir.join(name);
        json::write(&p, &r).unwrap();
        p
    };
    // finite but so large that the mean or the axis range overflows: refused, and promptly
    for (file, needles) in [
        (with_times("huge.json", 1e308), vec!["huge.json", "time_us", "cannot be plotted"]),
        (with_times("max.json", f64::MAX), vec!["max.json", "time_us", "cannot be plotted"]),
        (with_times("tiny.json", 1e-320), vec!["tiny.json", "time_us", "cannot be plotted"]),
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
    // the plot itself refuses a range it cannot compute, rather than looping
    let svg = dir.join("direct.svg");
    for (y, log_y) in [(1e308, true), (1e308, false), (f64::MAX, false), (1e-310, true)] {
        let s = [plots::Series { label: "a".into(), points: vec![(1024.0, y), (2048.0, 1.0)] }];
        let e = plots::line_chart(&svg, "t", "y", &s, log_y).unwrap_err();
        assert!(e.contains("cannot be plotted"), "{e}");
    }
    // the library refuses NaN too (JSON cannot carry it, a caller can)
    let mut nan = run("NVIDIA H200", "none", 1.0);
    nan.rows[0].time_us = Some(f64::NAN);
    let e = sidebyside::write(&[Labeled { label: "a".into(), run: nan }], &dir.join("nan")).unwrap_err();
    assert!(e.contains("time_us") && e.contains("NaN"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
