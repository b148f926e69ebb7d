//! CSV output: one line per result row, the row fields of schema ginbench/1 as columns.
use super::schema::Row;
use std::path::Path;

pub fn to_string(rows: &[Row]) -> String {
    let mut w = csv::Writer::from_writer(vec![]);
    w.write_record([
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
        "cycle",
        "mode",
        "phase",
        "tokens",
        "bw_gbps",
        "wire_nvl_bytes",
        "wire_net_bytes",
        "sms",
    ])
    .expect("in-memory CSV");
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    for r in rows {
        w.write_record([
            r.impl_name.clone(),
            r.size_bytes.to_string(),
            r.count.to_string(),
            r.dtype.clone(),
            r.placement.clone(),
            opt(r.time_us),
            opt(r.p50_us),
            opt(r.p99_us),
            opt(r.algbw_gbps),
            opt(r.busbw_gbps),
            r.wrong.map(|w| w.to_string()).unwrap_or_default(),
            r.status.clone(),
            r.reason.clone().unwrap_or_default(),
            r.cycle.to_string(),
            r.mode.clone().unwrap_or_default(),
            r.phase.clone().unwrap_or_default(),
            r.tokens.map(|t| t.to_string()).unwrap_or_default(),
            opt(r.bw_gbps),
            r.wire_bytes.map(|w| w.nvl.to_string()).unwrap_or_default(),
            r.wire_bytes.map(|w| w.net.to_string()).unwrap_or_default(),
            r.sms.map(|s| s.to_string()).unwrap_or_default(),
        ])
        .expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("CSV is UTF-8")
}

pub fn write(path: &Path, rows: &[Row]) -> std::io::Result<()> {
    super::write_atomic(path, to_string(rows).as_bytes())
}
