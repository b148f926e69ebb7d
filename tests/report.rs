//! `ginbench report`: two runs side by side, with ratios, environment differences and plots.
use ginbench::report::json;
use ginbench::report::schema::*;
use ginbench::report::sidebyside::{self, Labeled};

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
    r.env.gin = Gin { kind: gin.into(), reason: String::new(), connection: "full".into(), ..Default::default() };
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
