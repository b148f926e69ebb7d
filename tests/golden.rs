//! Table, JSON and CSV rendering against golden files; JSON round trip and loader errors.
//! Regenerate the golden files with GINBENCH_BLESS=1 after an intended format change, and read
//! the diff.
use ginbench::report::{csv, json, table};
use ginbench::results::*;
use std::collections::BTreeMap;

mod common;
use common::golden;

fn row(impl_name: &str, size: u64, placement: Placement, time: Option<f64>, wrong: Option<u64>, status: Status) -> Row {
    let n = 4.0;
    let (alg, bus) = match time {
        Some(t) => (Some(size as f64 / 1e3 / t), Some(size as f64 / 1e3 / t * (n - 1.0) / n)),
        None => (None, None),
    };
    Row {
        impl_name: impl_name.into(),
        size_bytes: size,
        count: size / 4 / 4,
        dtype: "float".into(),
        placement,
        time_us: time,
        p50_us: time.map(|t| t * 0.99),
        p99_us: time.map(|t| t * 1.2),
        algbw_gbps: alg,
        busbw_gbps: bus,
        wrong,
        status,
        reason: match status {
            Status::Skipped => Some("in place not supported: push kernels store into peers' buffers".into()),
            _ if wrong.is_none() => Some("not checked: NCCL does not define in-place alltoall".into()),
            _ => None,
        },
        cycle: 0,
        mode: None,
        phase: None,
        tokens: None,
        ..Default::default()
    }
}

fn sample() -> Run {
    let mut vars = BTreeMap::new();
    vars.insert("NCCL_NVLS_ENABLE".to_string(), "0".to_string());
    let rows = vec![
        row("host", 1048576, Placement::OutOfPlace, Some(40.1234), Some(0), Status::Ok),
        row("host", 1048576, Placement::InPlace, Some(40.52), None, Status::Ok),
        row("nvl", 2147483648, Placement::OutOfPlace, Some(4519.94), Some(0), Status::Ok),
        row("nvl", 2147483648, Placement::InPlace, None, None, Status::Skipped),
    ];
    Run {
        schema: SCHEMA.into(),
        benchmark: Kind::Alltoall,
        tool: Tool { version: "0.1.0".into(), git: "abc123".into(), build: "release".into() },
        command: "alltoall_perf -g 4 -D host,nvl -R 2 -b 1M -e 2G -f 2048".into(),
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: Some("2026-11-21T10:00:05Z".into()),
        env: Env {
            ranks: 4,
            hosts: vec!["node1".into()],
            gpus: (0..4)
                .map(|r| Gpu {
                    rank: r,
                    name: "NVIDIA H200".into(),
                    host: "node1".into(),
                    device: r,
                    pci_bus_id: format!("00000000:00:0{}.0", 6 + r),
                    memory_bytes: 150_000_000_000,
                    cpus: 16,
                })
                .collect(),
            driver: "580.159.04".into(),
            cuda: "13.0".into(),
            nccl: NcclInfo { header: 22809, library: 22809, path: "/opt/nccl/lib/libnccl.so.2".into() },
            gin: Gin {
                kind: GinKind::None,
                reason: "GIN not supported.".into(),
                connection: "none".into(),
                backend: ginbench::gin_backend::Backend::Nccl,
                plugin: String::new(),
                nodes: 1,
            },
            network: Network {
                kind: "socket".into(),
                devices: vec![NetDevice { name: "eth0".into(), kind: "ethernet".into(), detail: String::new() }],
            },
            vars,
        },
        config: serde_json::json!({"iters": 20}),
        summary: Some(Summary::of(&rows)),
        rows,
    }
}

fn render_table(run: &Run, style: table::Style) -> String {
    let mut s = table::header(style);
    for pair in run.rows.chunks(2) {
        s += &table::line(&pair[0], &pair[1], style).unwrap_or_default();
        s += &pair.iter().filter_map(table::reason).collect::<String>();
    }
    let sum = run.summary.clone().unwrap();
    s + &table::footer(sum.rows_wrong, Some(sum.avg_busbw_gbps))
}

#[test]
fn table_matches_nccl_tests_layout() {
    let run = sample();
    let t = render_table(&run, table::Style::default());
    // The three header lines exactly as nccl-tests prints them (its format strings), so
    // existing parsers keep working.
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[1], "#                                                              out-of-place                       in-place          ");
    assert_eq!(lines[2], "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ");
    assert_eq!(lines[3], "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ");
    assert_eq!(lines[4], "     1048576         65536     float    none      -1    40.12   26.13   19.60       0    40.52   25.88   19.41    N/A");
    golden("table.txt", &t);
    golden("table_per_iter.txt", &render_table(&run, table::Style { cputime: true, per_iter: true }));
}

#[test]
fn json_and_csv_match_golden_and_round_trip() {
    let run = sample();
    let text = json::to_string(&run);
    golden("run.json", &text);
    assert_eq!(json::parse(&text).unwrap(), run);
    golden("rows.csv", &csv::to_string(&run.rows));
    // every required field of ginbench/1 is present
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for k in ["schema", "benchmark", "tool", "command", "started_at", "env", "rows"] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    for k in ["ranks", "hosts", "gpus", "driver", "cuda", "nccl", "gin", "network", "vars"] {
        assert!(v["env"].get(k).is_some(), "missing env.{k}");
    }
    for k in [
        "impl",
        "size_bytes",
        "count",
        "dtype",
        "placement",
        "time_us",
        "p50_us",
        "p99_us",
        "algbw_gbps",
        "busbw_gbps",
        "wrong",
        "status",
        "reason",
    ] {
        assert!(v["rows"][0].get(k).is_some(), "missing rows[].{k}");
    }
    assert_eq!(v["env"]["gin"]["type"], "none");
}

#[test]
fn loader_rejects_foreign_and_malformed_json() {
    assert!(json::parse("not json").unwrap_err().contains("not JSON"));
    assert!(json::parse(r#"{"version": 3, "results": []}"#).unwrap_err().contains("no \"schema\""));
    assert!(json::parse(r#"{"schema": "ginbench/9"}"#).unwrap_err().contains("ginbench/9"));
    assert!(json::parse(r#"{"schema": "ginbench/1", "rows": 7}"#).unwrap_err().contains("invalid ginbench/1"));
}

#[test]
fn results_files_are_written_atomically() {
    let dir = std::env::temp_dir().join(format!("ginbench-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("out.json");
    std::fs::write(&p, "old").unwrap();
    json::write(&p, &sample()).unwrap();
    assert!(json::parse(&std::fs::read_to_string(&p).unwrap()).is_ok());
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name() != "out.json").collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert!(json::write(&dir.join("no/such/dir/x.json"), &sample()).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_outputs_writes_json_and_csv_and_names_both() {
    let dir = std::env::temp_dir().join(format!("ginbench-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = sample();
    let (j, c) = (dir.join("run.json"), dir.join("rows.csv"));
    let shown = ginbench::report::write_outputs(&run, Some(&j), Some(&c)).unwrap();
    assert_eq!(shown, [format!("# Wrote JSON to {}\n", j.display()), format!("# Wrote CSV to {}\n", c.display())]);
    assert_eq!(json::parse(&std::fs::read_to_string(&j).unwrap()).unwrap(), run);
    assert_eq!(std::fs::read_to_string(&c).unwrap(), csv::to_string(&run.rows));
    // A folder that does not exist is an error naming the file, not a silent success.
    let e = ginbench::report::write_outputs(&run, None, Some(&dir.join("no/such/rows.csv"))).unwrap_err();
    assert!(e.starts_with("writing ") && e.contains("rows.csv"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
