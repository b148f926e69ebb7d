//! `ginbench report RUN...`: runs side by side (e.g. an EFA cluster against an InfiniBand one):
//! the environments and what differs, per implementation a table of busbw and time per size with
//! ratios to the first run, and SVG plots; written as Markdown and HTML.
use super::plots::{self, Series};
use super::schema::{Row, Run};
use std::collections::BTreeMap;
use std::path::Path;

pub struct Labeled {
    pub label: String,
    pub run: Run,
}

/// A table cell grid; the first row is the header.
type Table = Vec<Vec<String>>;

enum Block {
    Heading(String),
    Text(String),
    Table(Table),
    Image(String),
}

/// Mean over cycles of the ok rows' time and busbw, per (impl, dtype, placement, size).
type Stats = BTreeMap<(String, String, String, u64), (f64, Option<f64>)>;

fn stats(run: &Run) -> Stats {
    let mut acc: BTreeMap<(String, String, String, u64), Vec<&Row>> = BTreeMap::new();
    for r in run.rows.iter().filter(|r| r.status == "ok" && r.time_us.is_some()) {
        acc.entry((r.impl_name.clone(), r.dtype.clone(), r.placement.clone(), r.size_bytes)).or_default().push(r);
    }
    acc.into_iter()
        .map(|(k, rows)| {
            let t = mean(rows.iter().filter_map(|r| r.time_us)).unwrap_or(0.0);
            (k, (t, mean(rows.iter().filter_map(|r| r.busbw_gbps))))
        })
        .collect()
}

/// Mean of finite values, summed as v/n so that it cannot overflow; None when empty.
fn mean(v: impl Iterator<Item = f64> + Clone) -> Option<f64> {
    let n = v.clone().count();
    (n > 0).then(|| v.map(|x| x / n as f64).sum())
}

/// Every value a report plots (time, busbw, bw of ok rows) must fit a plot axis; the error names
/// the row and the field.
pub fn check_plottable(run: &Run) -> Result<(), String> {
    for r in run.rows.iter().filter(|r| r.status == "ok") {
        for (field, v) in [("time_us", r.time_us), ("busbw_gbps", r.busbw_gbps), ("bw_gbps", r.bw_gbps)] {
            if let Some(v) = v.filter(|v| !plots::plottable(*v)) {
                return Err(format!(
                    "row '{}' (cycle {}): {field} {v:e} cannot be plotted: a plot axis holds values from {:e} to {:e}",
                    super::compare::key(&run.benchmark, r),
                    r.cycle,
                    plots::PLOT_MIN,
                    plots::PLOT_MAX
                ));
            }
        }
    }
    Ok(())
}

fn env_table(runs: &[Labeled]) -> Table {
    let mut t = vec![vec![
        "run".to_string(),
        "started".into(),
        "ranks".into(),
        "hosts".into(),
        "GPU".into(),
        "driver".into(),
        "NCCL".into(),
        "GIN".into(),
        "network".into(),
    ]];
    for l in runs {
        let e = &l.run.env;
        t.push(vec![
            l.label.clone(),
            l.run.started_at.clone(),
            e.ranks.to_string(),
            e.hosts.len().to_string(),
            e.gpus.first().map(|g| g.name.clone()).unwrap_or_default(),
            e.driver.clone(),
            super::schema::version_string(e.nccl.library),
            format!("{} ({})", e.gin.kind, if e.gin.connection.is_empty() { "-" } else { &e.gin.connection }),
            format!(
                "{}{}",
                e.network.kind,
                e.network
                    .devices
                    .iter()
                    .filter(|d| d.kind != "ethernet")
                    .map(|d| format!(" {}", d.name))
                    .collect::<String>()
            ),
        ]);
    }
    t
}

fn num(v: f64) -> String {
    if v >= 1e7 {
        format!("{v:.3e}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn build(runs: &[Labeled], dir: &Path) -> Result<Vec<Block>, String> {
    let mut doc = vec![Block::Heading("ginbench report".into())];
    doc.push(Block::Text(format!(
        "{} runs of `{}`; ratios are against the first run ({}). busbw in GB/s, time in µs, mean over `-N` cycles.",
        runs.len(),
        runs[0].run.benchmark,
        runs[0].label
    )));
    doc.push(Block::Table(env_table(runs)));
    for l in runs.iter().skip(1) {
        let d = super::compare::env_differences(&runs[0].run, &l.run);
        if !d.is_empty() {
            doc.push(Block::Text(format!("{} differs from {}: {}.", l.label, runs[0].label, d.join("; "))));
        }
    }
    let all: Vec<Stats> = runs.iter().map(|l| stats(&l.run)).collect();
    let mut impls: Vec<(String, String, String)> =
        all.iter().flat_map(|s| s.keys().map(|k| (k.0.clone(), k.1.clone(), k.2.clone()))).collect();
    // Out-of-place before in-place within an impl.
    impls.sort_by(|a, b| (&a.0, &a.1, b.2.starts_with('o')).cmp(&(&b.0, &b.1, a.2.starts_with('o'))));
    impls.dedup();
    for (imp, dtype, placement) in impls {
        let sizes: Vec<u64> = {
            let mut v: Vec<u64> = all
                .iter()
                .flat_map(|s| s.keys().filter(|k| k.0 == imp && k.1 == dtype && k.2 == placement).map(|k| k.3))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        doc.push(Block::Heading(format!("{imp} ({dtype}, {placement})")));
        let slug = format!("{imp}_{dtype}_{placement}").replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let series = |busbw: bool| -> Vec<Series> {
            runs.iter()
                .zip(&all)
                .map(|(l, s)| Series {
                    label: l.label.clone(),
                    points: sizes
                        .iter()
                        .filter_map(|&z| {
                            let (t, bw) = s.get(&(imp.clone(), dtype.clone(), placement.clone(), z))?;
                            Some((z as f64, if busbw { (*bw)? } else { *t }))
                        })
                        .collect(),
                })
                .collect()
        };
        for (kind, busbw, y, log_y) in [("busbw", true, "busbw (GB/s)", false), ("time", false, "time (µs)", true)] {
            let file = format!("{kind}_{slug}.svg");
            if plots::line_chart(&dir.join(&file), &format!("{imp} {placement}: {kind}"), y, &series(busbw), log_y)? {
                doc.push(Block::Image(file));
            }
        }
        let mut t = vec![vec!["size (B)".to_string()]];
        for l in runs {
            t[0].push(format!("{} busbw", l.label));
        }
        for l in runs.iter().skip(1) {
            t[0].push(format!("{} / {}", l.label, runs[0].label));
        }
        for l in runs {
            t[0].push(format!("{} time", l.label));
        }
        for &z in &sizes {
            let cells: Vec<Option<(f64, Option<f64>)>> =
                all.iter().map(|s| s.get(&(imp.clone(), dtype.clone(), placement.clone(), z)).cloned()).collect();
            let mut row = vec![z.to_string()];
            row.extend(cells.iter().map(|c| c.and_then(|c| c.1).map(num).unwrap_or_else(|| "-".into())));
            let base = cells[0].and_then(|c| c.1).filter(|b| *b > 0.0);
            row.extend(cells.iter().skip(1).map(|c| match (base, c.and_then(|c| c.1)) {
                (Some(b), Some(v)) => format!("{:.2}×", v / b),
                _ => "-".into(),
            }));
            row.extend(cells.iter().map(|c| c.map(|c| num(c.0)).unwrap_or_else(|| "-".into())));
            t.push(row);
        }
        doc.push(Block::Table(t));
    }
    Ok(doc)
}

fn markdown(doc: &[Block]) -> String {
    let mut s = String::new();
    for b in doc {
        match b {
            Block::Heading(h) if s.is_empty() => s += &format!("# {h}\n\n"),
            Block::Heading(h) => s += &format!("## {h}\n\n"),
            Block::Text(t) => s += &format!("{t}\n\n"),
            Block::Image(f) => s += &format!("![{f}]({f})\n\n"),
            Block::Table(t) => {
                s += &format!("| {} |\n", t[0].join(" | "));
                s += &format!("|{}\n", "---|".repeat(t[0].len()));
                for r in &t[1..] {
                    s += &format!("| {} |\n", r.join(" | "));
                }
                s.push('\n');
            }
        }
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn html(doc: &[Block]) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ginbench report</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#eee}img{max-width:48%}</style></head><body>\n",
    );
    let mut first = true;
    for b in doc {
        match b {
            Block::Heading(h) => {
                s += &format!("<h{0}>{1}</h{0}>\n", if first { 1 } else { 2 }, esc(h));
                first = false;
            }
            Block::Text(t) => s += &format!("<p>{}</p>\n", esc(t).replace('`', "")),
            Block::Image(f) => s += &format!("<img src=\"{0}\" alt=\"{0}\">\n", esc(f)),
            Block::Table(t) => {
                s += "<table>\n<tr>";
                for h in &t[0] {
                    s += &format!("<th>{}</th>", esc(h));
                }
                s += "</tr>\n";
                for r in &t[1..] {
                    s += "<tr>";
                    for c in r {
                        s += &format!("<td>{}</td>", esc(c));
                    }
                    s += "</tr>\n";
                }
                s += "</table>\n";
            }
        }
    }
    s + "</body></html>\n"
}

/// Write report.md, report.html and the SVG plots into `dir`.
pub fn write(runs: &[Labeled], dir: &Path) -> Result<(), String> {
    if runs.is_empty() {
        return Err("no runs to report".into());
    }
    if let Some(l) = runs.iter().find(|l| l.run.benchmark != runs[0].run.benchmark) {
        return Err(format!(
            "{} is a '{}' run, {} a '{}' run",
            l.label, l.run.benchmark, runs[0].label, runs[0].run.benchmark
        ));
    }
    for l in runs {
        super::compare::check_values(&l.run)
            .and_then(|()| check_plottable(&l.run))
            .map_err(|e| format!("{}: {e}", l.label))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let doc = build(runs, dir)?;
    for (name, text) in [("report.md", markdown(&doc)), ("report.html", html(&doc))] {
        super::write_atomic(&dir.join(name), text.as_bytes()).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}
