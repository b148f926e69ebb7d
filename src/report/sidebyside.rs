//! `ginbench report RUN...`: runs side by side (e.g. an EFA cluster against an InfiniBand one):
//! the environments and what differs, then for alltoall the best impl per size (and `auto`'s
//! time against it) and per implementation a table of busbw and time per size, for EP
//! (`ep_perf`) per (impl, mode, dispatch dtype, layer shape) a table of bw and time per phase
//! and tokens per rank, with ratios to the first run, and SVG plots, and what was not measured
//! (skipped, failed or wrong); written as Markdown and HTML.
use super::plots::{self, Series};
use crate::alltoall::registry::AUTO;
use crate::gin_backend::Backend;
use crate::results::{Kind, Mode, Phase, Placement, Row, Run, Status};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

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

/// The report's charts, each under a distinct SVG name: slugs turn punctuation into `_`, so two
/// sections (e.g. impls `nvl-ll` and `nvl_ll`) could otherwise share a file. They are kept in
/// memory until the whole report has been drawn.
#[derive(Default)]
struct PlotDir {
    taken: HashSet<String>,
    svgs: Vec<(String, String)>,
}

impl PlotDir {
    /// Draw a chart into `{stem}.svg` (or `{stem}_2.svg`, ... when taken); the image block to
    /// show, if the chart had data.
    fn chart(
        &mut self,
        stem: &str,
        title: &str,
        x: plots::XAxis,
        y: &str,
        series: &[Series],
        log_y: bool,
    ) -> Result<Option<Block>, String> {
        let mut file = format!("{stem}.svg");
        for n in 2.. {
            if self.taken.insert(file.clone()) {
                break;
            }
            file = format!("{stem}_{n}.svg");
        }
        let Some(svg) = plots::line_chart(&file, title, x, y, series, log_y)? else { return Ok(None) };
        self.svgs.push((file.clone(), svg));
        Ok(Some(Block::Image(file)))
    }
}

/// A row the tables and plots show: it ran, has a time, and no element was wrong (a wrong row's
/// time is not a figure: it goes to "Not measured").
fn measured(r: &Row) -> bool {
    r.status == Status::Ok && r.time_us.is_some() && !r.is_wrong()
}

/// Mean over cycles of the measured rows' time and busbw, and whether every one was checked, per
/// (impl, dtype, placement, size).
type Stats = BTreeMap<(String, String, Placement, u64), (f64, Option<f64>, bool)>;

fn stats(run: &Run) -> Stats {
    let mut acc: BTreeMap<(String, String, Placement, u64), Vec<&Row>> = BTreeMap::new();
    for r in run.rows.iter().filter(|r| measured(r)) {
        acc.entry((r.impl_name.clone(), r.dtype.clone(), r.placement, r.size_bytes)).or_default().push(r);
    }
    acc.into_iter()
        .map(|(k, rows)| {
            let t = mean(rows.iter().filter_map(|r| r.time_us)).unwrap_or(0.0);
            let checked = rows.iter().all(|r| r.wrong == Some(0));
            (k, (t, mean(rows.iter().filter_map(|r| r.busbw_gbps)), checked))
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
    for r in run.rows.iter().filter(|r| r.status == Status::Ok) {
        let bg_slowdown = r.background.as_ref().and_then(|b| b.slowdown);
        for (field, v) in [
            ("time_us", r.time_us),
            ("busbw_gbps", r.busbw_gbps),
            ("bw_gbps", r.bw_gbps),
            ("slowdown", r.slowdown),
            ("background.slowdown", bg_slowdown),
        ] {
            if let Some(v) = v.filter(|v| !plots::plottable(*v)) {
                return Err(format!(
                    "row '{}' (cycle {}): {field} {v:e} cannot be plotted: a plot axis holds values from {:e} to {:e}",
                    super::compare::key(run.benchmark, r),
                    r.cycle,
                    plots::PLOT_MIN,
                    plots::PLOT_MAX
                ));
            }
        }
    }
    Ok(())
}

/// A loud line for every run whose GIN backend is loopback while the first's is not (or the
/// reverse), and for every debug build beside a run that is not one (whichever comes first; a
/// file from before builds were recorded counts as not one).
fn mismatch_warnings(runs: &[Labeled]) -> Vec<Block> {
    let first = &runs[0];
    let mut doc: Vec<Block> = runs
        .iter()
        .skip(1)
        .filter_map(|l| {
            super::compare::loopback_mismatch(&first.run, &l.run)
                .map(|w| Block::Text(format!("WARNING: {} against {}: {w}.", l.label, first.label)))
        })
        .collect();
    let debug = |l: &&Labeled| l.run.tool.build == "debug";
    if runs.iter().any(|l| !debug(&l)) {
        doc.extend(runs.iter().filter(debug).map(|l| {
            Block::Text(format!(
                "WARNING: {} is a debug build, beside runs that are not: a debug build's launch-bound times can read high.",
                l.label
            ))
        }));
    }
    doc
}

fn env_table(runs: &[Labeled]) -> Table {
    let mut t = vec![vec![
        "run".to_string(),
        "started".into(),
        "ranks".into(),
        "hosts".into(),
        "GPUs".into(),
        "driver".into(),
        "NCCL".into(),
        "GIN".into(),
        "GIN backend".into(),
        "network".into(),
        "build".into(),
    ]];
    for l in runs {
        let e = &l.run.env;
        t.push(vec![
            l.label.clone(),
            l.run.started_at.clone(),
            e.ranks.to_string(),
            e.hosts.len().to_string(),
            e.gpu_summary(),
            e.driver.clone(),
            // `ginbench ceiling` runs without NCCL
            if e.nccl.library > 0 { crate::results::version_string(e.nccl.library) } else { "not loaded".into() },
            format!("{} ({})", e.gin.kind, if e.gin.connection.is_empty() { "-" } else { &e.gin.connection }),
            match e.gin.backend {
                Backend::Loopback => format!("loopback, {} node(s): not a network", e.gin.nodes),
                b => b.to_string(),
            },
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
            if l.run.tool.build.is_empty() { "-".into() } else { l.run.tool.build.clone() },
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

/// What every report starts with: heading, `intro`, the environments side by side, loopback and
/// build warnings and how each run's environment differs from the first's.
fn preamble(runs: &[Labeled], intro: String) -> Vec<Block> {
    let mut doc = vec![Block::Heading("ginbench report".into()), Block::Text(intro), Block::Table(env_table(runs))];
    doc.extend(mismatch_warnings(runs));
    for l in runs {
        if let Some(e) = l.run.error() {
            doc.push(Block::Text(format!(
                "WARNING: {} ended in error ({}): what it had not reached is missing from its tables.",
                l.label,
                crate::console::one_line(e)
            )));
        }
        if let Some(w) = super::compare::shared_gpus(&l.run) {
            doc.push(Block::Text(format!("WARNING: {} is a run whose {w}.", l.label)));
        }
        let wrong = l.run.rows.iter().filter(|r| r.is_wrong()).count();
        if wrong > 0 {
            doc.push(Block::Text(format!(
                "WARNING: {} has {wrong} rows with wrong data: they are left out of every table and plot (see \"Not measured\").",
                l.label
            )));
        }
    }
    for l in runs.iter().skip(1) {
        let mut d = super::compare::env_differences(&runs[0].run, &l.run);
        d.extend(super::compare::setting_differences(&runs[0].run, &l.run, shown_settings()));
        if !d.is_empty() {
            doc.push(Block::Text(format!("{} differs from {}: {}.", l.label, runs[0].label, d.join("; "))));
        }
    }
    doc
}

/// Settings whose differences a report names: those the gate refuses to compare across, and the
/// presets and iteration counts that say how the runs were made.
fn shown_settings() -> impl Iterator<Item = &'static str> {
    super::compare::SAME_SETTINGS.into_iter().chain(["/preset", "/foreground/preset", "/iters"])
}

fn build(runs: &[Labeled], charts: &mut PlotDir) -> Result<Vec<Block>, String> {
    let mut doc = preamble(
        runs,
        format!(
            "{} runs of `{}`; ratios are against the first run ({}). busbw in GB/s, time in µs, mean over `-N` cycles.",
            runs.len(),
            runs[0].run.benchmark,
            runs[0].label
        ),
    );
    let all: Vec<Stats> = runs.iter().map(|l| stats(&l.run)).collect();
    // A ceiling's patterns move different bytes: they are limits to read, not rivals to rank.
    if runs[0].run.benchmark != Kind::Ceiling {
        doc.extend(best_per_size(runs, &all));
    }
    // Placement's order puts out-of-place before in-place within an impl.
    let mut impls: Vec<(String, String, Placement)> =
        all.iter().flat_map(|s| s.keys().map(|k| (k.0.clone(), k.1.clone(), k.2))).collect();
    impls.sort();
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
                            let (t, bw, _) = s.get(&(imp.clone(), dtype.clone(), placement, z))?;
                            Some((z as f64, if busbw { (*bw)? } else { *t }))
                        })
                        .collect(),
                })
                .collect()
        };
        for (kind, busbw, y, log_y) in [("busbw", true, "busbw (GB/s)", false), ("time", false, "time (µs)", true)] {
            let title = format!("{imp} {placement}: {kind}");
            doc.extend(charts.chart(
                &format!("{kind}_{slug}"),
                &title,
                plots::XAxis::Bytes,
                y,
                &series(busbw),
                log_y,
            )?);
        }
        let mut t = vec![vec!["size (B)".to_string()]];
        for l in runs {
            t[0].push(format!("{} busbw", l.label));
        }
        for l in runs.iter().skip(1) {
            t[0].push(format!("{} / {} busbw", l.label, runs[0].label));
        }
        for l in runs {
            t[0].push(format!("{} time", l.label));
        }
        for &z in &sizes {
            let key = (imp.clone(), dtype.clone(), placement, z);
            let cells: Vec<Option<(f64, Option<f64>)>> =
                all.iter().map(|s| s.get(&key).map(|&(t, bw, _)| (t, bw))).collect();
            t.push(stat_row(vec![z.to_string()], &cells));
        }
        doc.push(Block::Table(t));
    }
    doc.extend(not_measured(runs, |run| {
        run.rows.iter().map(|r| (format!("{} ({}, {})", r.impl_name, r.dtype, r.placement), r)).collect()
    }));
    Ok(doc)
}

/// One run's (impl, time, busbw, checked) of one (dtype, placement), by size.
type BySize<'a> = BTreeMap<u64, Vec<(&'a String, f64, Option<f64>, bool)>>;

/// Per (dtype, placement): the fastest impl at each size in every run, its busbw, and `auto`'s
/// time over the best's where auto ran, so a crossover auto takes at the wrong size shows (the
/// crossovers are measured, and a new machine can move them).
fn best_per_size(runs: &[Labeled], all: &[Stats]) -> Vec<Block> {
    let groups: BTreeSet<(&String, &Placement)> = all.iter().flat_map(|s| s.keys().map(|k| (&k.1, &k.2))).collect();
    let has_auto = all.iter().any(|s| s.keys().any(|k| k.0 == AUTO));
    let mut doc = vec![];
    for (dtype, placement) in groups {
        // Each run's (impl, time, busbw) by size, indexed once: scanning every run per size took
        // time quadratic in the sizes (minutes at 10,000-point sweeps).
        let by_size: Vec<BySize> = all
            .iter()
            .map(|s| {
                let mut m: BTreeMap<u64, Vec<_>> = BTreeMap::new();
                for (k, v) in s.iter().filter(|(k, _)| (&k.1, &k.2) == (dtype, placement)) {
                    m.entry(k.3).or_default().push((&k.0, v.0, v.1, v.2));
                }
                m
            })
            .collect();
        // Size 0 moves nothing: no impl is best there.
        let sizes: BTreeSet<u64> = by_size.iter().flat_map(|m| m.keys().copied().filter(|&z| z > 0)).collect();
        let mut t = vec![vec!["size (B)".to_string()]];
        for l in runs {
            t[0].extend([format!("{} best", l.label), format!("{} busbw", l.label)]);
            if has_auto {
                t[0].push(format!("{} {AUTO} ÷ best", l.label));
            }
        }
        for z in sizes {
            let mut row = vec![z.to_string()];
            for m in &by_size {
                let here = m.get(&z).map_or(&[][..], Vec::as_slice);
                // Checked rows only, where the size has any: an unchecked row may time nothing
                // (NCCL's in-place alltoall, which it does not define).
                let any_checked = here.iter().any(|m| m.0 != AUTO && m.3);
                let best =
                    here.iter().filter(|m| m.0 != AUTO && (m.3 || !any_checked)).min_by(|a, b| a.1.total_cmp(&b.1));
                row.push(best.map_or("-".into(), |b| b.0.clone()));
                row.push(best.and_then(|b| b.2).map_or("-".into(), num));
                if has_auto {
                    let auto = here.iter().find(|m| m.0 == AUTO);
                    row.push(match (auto, best) {
                        (Some(a), Some(b)) if b.1 > 0.0 => format!("{:.2}", a.1 / b.1),
                        _ => "-".into(),
                    });
                }
            }
            t.push(row);
        }
        doc.push(Block::Heading(format!("Best impl per size ({dtype}, {placement})")));
        doc.push(Block::Text(format!(
            "The fastest impl at each size, among the checked rows where the size has any (an unchecked row may time nothing: NCCL does not define an in-place alltoall){}.",
            if has_auto { format!(", `{AUTO}` left out (it runs one of them); `{AUTO} ÷ best` is its time over the best's: above 1 where it picks another impl, or by noise") } else { String::new() }
        )));
        doc.push(Block::Table(t));
    }
    doc
}

/// Where an EP row belongs: one report section per (impl, mode, dispatch dtype, layer shape).
/// A combine row carries the combine's own dtype (always bf16), so it takes the dtype of the
/// dispatch it followed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct EpSection {
    imp: String,
    mode: Option<Mode>,
    dispatch: String,
    /// (hidden, top-k, experts)
    shape: (u64, u64, u64),
}

impl EpSection {
    /// e.g. "nvl LL bf16"
    fn name(&self) -> String {
        format!("{} {} {}", self.imp, mode_name(self.mode), self.dispatch)
    }

    fn title(&self) -> String {
        let (h, k, e) = self.shape;
        format!(
            "{} {}, dispatch {} (hidden {h}, top-{k} of {e} experts)",
            self.imp,
            mode_name(self.mode),
            self.dispatch
        )
    }

    fn slug(&self) -> String {
        let (h, k, e) = self.shape;
        format!("ep_{}_{}_{}_{h}x{k}x{e}", self.imp, mode_key(self.mode), self.dispatch)
            .replace(|c: char| !(c.is_ascii_alphanumeric() || c == 'x'), "_")
    }
}

/// A row's mode as the results name it (ll, ht), `-` for none.
fn mode_key(m: Option<Mode>) -> &'static str {
    m.map_or("-", Mode::as_str)
}

/// A mode as the report shows it: LL, HT.
fn mode_name(m: Option<Mode>) -> String {
    mode_key(m).to_uppercase()
}

/// Each EP row of `run` with its section.
fn ep_sections(run: &Run) -> Vec<(EpSection, &Row)> {
    run.rows
        .iter()
        .zip(run.dispatch_dtypes())
        .map(|(r, dispatch)| {
            let section = EpSection {
                imp: r.impl_name.clone(),
                mode: r.mode,
                dispatch: dispatch.into(),
                shape: (r.hidden.unwrap_or(0), r.topk.unwrap_or(0), r.experts.unwrap_or(0)),
            };
            (section, r)
        })
        .collect()
}

/// Mean time and bw of the measured rows per (section, phase, tokens).
type EpStats = BTreeMap<(EpSection, Option<Phase>, u64), (f64, Option<f64>)>;

fn ep_stats(run: &Run) -> EpStats {
    let mut acc: BTreeMap<(EpSection, Option<Phase>, u64), Vec<&Row>> = BTreeMap::new();
    for (sec, r) in ep_sections(run) {
        if measured(r) {
            acc.entry((sec, r.phase, r.tokens.unwrap_or(0))).or_default().push(r);
        }
    }
    acc.into_iter()
        .map(|(k, rows)| {
            let t = mean(rows.iter().filter_map(|r| r.time_us)).unwrap_or(0.0);
            (k, (t, mean(rows.iter().filter_map(|r| r.bw_gbps))))
        })
        .collect()
}

/// Position of each value in order of first appearance, for a stable, run-like order.
fn first_seen<'a>(values: impl Iterator<Item = &'a str>) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for v in values {
        let n = m.len();
        m.entry(v.to_string()).or_insert(n);
    }
    m
}

fn ep_build(runs: &[Labeled], charts: &mut PlotDir) -> Result<Vec<Block>, String> {
    let mut doc = preamble(
        runs,
        format!(
            "{} runs of `ep`; ratios are against the first run ({}). Rows line up by (impl, mode, phase, tokens per rank, dtype), \
             not by bytes, which depend on the rank count; a combine belongs with the dispatch it followed. \
             bw is `bw_gbps` in GB/s under the definition each section names, time in µs, mean over `-N` cycles.",
            runs.len(),
            runs[0].label
        ),
    );
    let all: Vec<EpStats> = runs.iter().map(|l| ep_stats(&l.run)).collect();
    let every_row = || runs.iter().flat_map(|l| l.run.rows.iter());
    let mode_at = first_seen(every_row().map(|r| mode_key(r.mode)));
    let impl_at = first_seen(every_row().map(|r| r.impl_name.as_str()));
    let dtype_at = first_seen(every_row().map(|r| r.dtype.as_str()));
    let mut sections: Vec<EpSection> = all.iter().flat_map(|s| s.keys().map(|k| k.0.clone())).collect();
    sections.sort_by_key(|s| {
        let at = |m: &HashMap<String, usize>, k: &str| m.get(k).copied();
        (at(&mode_at, mode_key(s.mode)), at(&impl_at, &s.imp), at(&dtype_at, &s.dispatch), s.shape)
    });
    sections.dedup();
    for sec in &sections {
        doc.push(Block::Heading(sec.title()));
        let mut defs: Vec<(String, String)> = vec![];
        for l in runs {
            for (s, r) in ep_sections(&l.run) {
                if let (true, Some(d)) = (&s == sec && measured(r), &r.bw_definition) {
                    if !defs.iter().any(|(lab, x)| lab == &l.label && x == d) {
                        defs.push((l.label.clone(), d.clone()));
                    }
                }
            }
        }
        let mut distinct: Vec<&String> = defs.iter().map(|d| &d.1).collect();
        distinct.dedup();
        doc.push(Block::Text(match distinct.as_slice() {
            [] => "bw: no definition recorded.".into(),
            [one] => format!("bw: {one}."),
            _ => format!(
                "bw definitions differ: {}.",
                defs.iter().map(|(l, d)| format!("{l}: {d}")).collect::<Vec<_>>().join("; ")
            ),
        }));
        // Dispatch before combine, each by tokens.
        let mut lines: Vec<(Option<Phase>, u64)> =
            all.iter().flat_map(|s| s.keys().filter(|k| &k.0 == sec).map(|k| (k.1, k.2))).collect();
        lines.sort();
        lines.dedup();
        let phases: Vec<Option<Phase>> = {
            let mut p: Vec<Option<Phase>> = lines.iter().map(|l| l.0).collect();
            p.dedup();
            p
        };
        let phase_name = |p: Option<Phase>| p.map_or("-", Phase::as_str);
        let cell = |s: &EpStats, phase: Option<Phase>, tokens: u64| s.get(&(sec.clone(), phase, tokens)).cloned();
        // One line per run and phase.
        let series = |bw: bool| -> Vec<Series> {
            let mut v = vec![];
            for (l, s) in runs.iter().zip(&all) {
                for &ph in &phases {
                    let points = lines
                        .iter()
                        .filter(|(p, _)| *p == ph)
                        .filter_map(|&(p, t)| {
                            let (time, b) = cell(s, p, t)?;
                            Some((t as f64, if bw { b? } else { time }))
                        })
                        .collect();
                    v.push(Series { label: format!("{} {}", l.label, phase_name(ph)), points });
                }
            }
            v
        };
        for (kind, bw, y, log_y) in [("bw", true, "bw (GB/s)", false), ("time", false, "time (µs)", true)] {
            let title = format!("{} {}, dispatch {}: {kind}", sec.imp, mode_name(sec.mode), sec.dispatch);
            let stem = format!("{kind}_{}", sec.slug());
            doc.extend(charts.chart(&stem, &title, plots::XAxis::Tokens, y, &series(bw), log_y)?);
        }
        let mut t = vec![vec!["phase".to_string(), "tokens".into()]];
        t[0].extend(runs.iter().map(|l| format!("{} bw", l.label)));
        t[0].extend(runs.iter().skip(1).map(|l| format!("{} / {} bw", l.label, runs[0].label)));
        t[0].extend(runs.iter().map(|l| format!("{} time", l.label)));
        for &(phase, tokens) in &lines {
            let cells: Vec<Option<(f64, Option<f64>)>> = all.iter().map(|s| cell(s, phase, tokens)).collect();
            t.push(stat_row(vec![phase_name(phase).into(), tokens.to_string()], &cells));
        }
        doc.push(Block::Table(t));
    }
    doc.extend(not_measured(runs, |run| ep_sections(run).into_iter().map(|(s, r)| (s.name(), r)).collect()));
    Ok(doc)
}

/// What no table shows, so that a missing line or section is explained: per run and reason (not
/// ok, or wrong data), which `what` (section) it hit.
fn not_measured<'a>(runs: &'a [Labeled], what: impl Fn(&'a Run) -> Vec<(String, &'a Row)>) -> Vec<Block> {
    let mut t = vec![vec!["run".to_string(), "not measured".into(), "why".into()]];
    for l in runs {
        let mut by_why: Vec<(String, Vec<String>)> = vec![];
        for (what, r) in what(&l.run).into_iter().filter(|(_, r)| !measured(r)) {
            let why = match r.wrong.filter(|&w| w > 0) {
                Some(_) if r.status == Status::Ok => "wrong data".to_string(),
                _ => format!("{}{}", r.status, r.reason.as_ref().map(|w| format!(": {w}")).unwrap_or_default()),
            };
            match by_why.iter_mut().find(|(w, _)| *w == why) {
                Some((_, v)) if !v.contains(&what) => v.push(what),
                Some(_) => {}
                None => by_why.push((why, vec![what])),
            }
        }
        t.extend(by_why.into_iter().map(|(why, what)| vec![l.label.clone(), what.join(", "), why]));
    }
    if t.len() == 1 {
        return vec![];
    }
    vec![Block::Heading("Not measured".into()), Block::Table(t)]
}

/// The foreground each interference row of `run` measures: one report section each. A combine
/// (always bf16) is named with the dispatch it followed, as compare keys it.
fn fg_sections(run: &Run) -> Vec<(String, &Row)> {
    let title = |r: &Row, dispatch: &str| match (r.mode, r.phase, r.tokens) {
        (m @ Some(_), Some(p @ Phase::Combine), Some(k)) => {
            format!(
                "{} {} {p}, {k} tokens per rank, {} after a {dispatch} dispatch",
                r.impl_name,
                mode_name(m),
                r.dtype
            )
        }
        (m @ Some(_), Some(p), Some(k)) => {
            format!("{} {} {p}, {k} tokens per rank, {}", r.impl_name, mode_name(m), r.dtype)
        }
        _ => format!("{} {} B {}", r.impl_name, r.size_bytes, r.dtype),
    };
    run.rows.iter().zip(run.dispatch_dtypes()).map(|(r, d)| (title(r, d), r)).collect()
}

/// Mean over cycles per (foreground, background size): foreground slowdown, background slowdown,
/// foreground together time.
type InterferenceStats = BTreeMap<(String, u64), (f64, Option<f64>, f64)>;

fn interference_stats(run: &Run) -> InterferenceStats {
    let mut acc: BTreeMap<(String, u64), Vec<&Row>> = BTreeMap::new();
    for (fg, r) in fg_sections(run).into_iter().filter(|(_, r)| measured(r) && r.slowdown.is_some()) {
        let size = r.background.as_ref().map(|b| b.size_bytes).unwrap_or(0);
        acc.entry((fg, size)).or_default().push(r);
    }
    acc.into_iter()
        .map(|(k, rows)| {
            let fg = mean(rows.iter().filter_map(|r| r.slowdown)).unwrap_or(0.0);
            let bg = mean(rows.iter().filter_map(|r| r.background.as_ref()?.slowdown));
            let t = mean(rows.iter().filter_map(|r| r.together_us)).unwrap_or(0.0);
            (k, (fg, bg, t))
        })
        .collect()
}

/// Interference runs: per foreground, the slowdown of each side against the background's size,
/// plotted and tabled, run beside run.
fn interference_build(runs: &[Labeled], charts: &mut PlotDir) -> Result<Vec<Block>, String> {
    let mut doc = preamble(
        runs,
        format!(
            "{} runs of `interference`; slowdown is together / alone (1.00 = no interference) for the foreground (fg) \
             and the background (bg) against the background's size per rank; time is the foreground's together time \
             in µs; mean over `-N` cycles. Ratios are against the first run ({}).",
            runs.len(),
            runs[0].label
        ),
    );
    let all: Vec<InterferenceStats> = runs.iter().map(|l| interference_stats(&l.run)).collect();
    let fgs = foregrounds(runs, all.iter().flat_map(|s| s.keys().map(|k| &k.0)));
    for fg in &fgs {
        doc.push(Block::Heading(format!("foreground {fg}")));
        let mut sizes: Vec<u64> = all.iter().flat_map(|s| s.keys().filter(|k| &k.0 == fg).map(|k| k.1)).collect();
        sizes.sort();
        sizes.dedup();
        let mut series = vec![];
        for (l, s) in runs.iter().zip(&all) {
            let pick = |bg: bool| -> Vec<(f64, f64)> {
                sizes
                    .iter()
                    .filter_map(|&z| {
                        let (f, b, _) = s.get(&(fg.clone(), z))?;
                        Some((z as f64, if bg { (*b)? } else { *f }))
                    })
                    .collect()
            };
            series.push(Series { label: format!("{} fg", l.label), points: pick(false) });
            series.push(Series { label: format!("{} bg", l.label), points: pick(true) });
        }
        let slug = format!("slowdown_{fg}").replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let (title, y) = (format!("{fg}: slowdown"), "slowdown (together / alone)");
        doc.extend(charts.chart(&slug, &title, plots::XAxis::Bytes, y, &series, false)?);
        let mut t = vec![vec!["background size (B)".to_string()]];
        for l in runs {
            t[0].extend([format!("{} fg slowdown", l.label), format!("{} bg slowdown", l.label)]);
        }
        for l in runs.iter().skip(1) {
            t[0].push(format!("{} / {} fg slowdown", l.label, runs[0].label));
        }
        for l in runs {
            t[0].push(format!("{} fg time", l.label));
        }
        for &z in &sizes {
            let cells: Vec<Option<(f64, Option<f64>, f64)>> =
                all.iter().map(|s| s.get(&(fg.clone(), z)).cloned()).collect();
            let mut row = vec![z.to_string()];
            for c in &cells {
                row.push(c.map(|c| format!("{:.3}", c.0)).unwrap_or_else(|| "-".into()));
                row.push(c.and_then(|c| c.1).map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into()));
            }
            for c in cells.iter().skip(1) {
                row.push(match (cells[0], c) {
                    (Some(a), Some(b)) if a.0 > 0.0 => format!("{:.2}×", b.0 / a.0),
                    _ => "-".into(),
                });
            }
            row.extend(cells.iter().map(|c| c.map(|c| num(c.2)).unwrap_or_else(|| "-".into())));
            t.push(row);
        }
        doc.push(Block::Table(t));
    }
    if fgs.is_empty() {
        doc.push(Block::Text("No row measured a slowdown (runs without a background have none to plot).".into()));
    }
    doc.extend(alone_table(runs));
    doc.extend(not_measured(runs, fg_sections));
    Ok(doc)
}

/// Foreground section names, each once, in the order the runs' impls first appear.
fn foregrounds<'a>(runs: &[Labeled], names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let order = first_seen(runs.iter().flat_map(|l| l.run.rows.iter()).map(|r| r.impl_name.as_str()));
    let mut fgs: Vec<String> = names.cloned().collect();
    fgs.sort_by_key(|f| (order.get(f.split(' ').next().unwrap_or("")).copied(), f.clone()));
    fgs.dedup();
    fgs
}

/// Each foreground's time alone, run beside run: every row that ran records it, with or without
/// a background, so runs of `--bg none` are read here, and set against the standalone benchmark
/// (or another run) show what the harness adds.
fn alone_table(runs: &[Labeled]) -> Vec<Block> {
    let alone: Vec<BTreeMap<String, f64>> = runs
        .iter()
        .map(|l| {
            let mut acc: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for (fg, r) in fg_sections(&l.run).into_iter().filter(|(_, r)| measured(r)) {
                acc.entry(fg).or_default().extend(r.alone_us);
            }
            acc.into_iter().filter_map(|(fg, v)| Some((fg, mean(v.into_iter())?))).collect()
        })
        .collect();
    let fgs = foregrounds(runs, alone.iter().flat_map(|a| a.keys()));
    if fgs.is_empty() {
        return vec![];
    }
    let mut t = vec![vec!["foreground".to_string()]];
    t[0].extend(runs.iter().map(|l| format!("{} alone time", l.label)));
    t[0].extend(runs.iter().skip(1).map(|l| format!("{} / {} time", l.label, runs[0].label)));
    for fg in &fgs {
        let cells: Vec<Option<f64>> = alone.iter().map(|a| a.get(fg).copied()).collect();
        let mut row = vec![fg.clone()];
        row.extend(cells.iter().map(|c| c.map(num).unwrap_or_else(|| "-".into())));
        row.extend(cells.iter().skip(1).map(|c| match (cells[0], c) {
            (Some(a), Some(b)) => format!("{:.2}×", b / a),
            _ => "-".into(),
        }));
        t.push(row);
    }
    vec![
        Block::Heading("Foregrounds alone".into()),
        Block::Text(
            "Each foreground's time alone in µs, the mean over its rows (every background size) and `-N` cycles."
                .into(),
        ),
        Block::Table(t),
    ]
}

/// `first` cells, then each run's bandwidth, the ratio of each later run's to the first's, and
/// each run's time.
fn stat_row(first: Vec<String>, cells: &[Option<(f64, Option<f64>)>]) -> Vec<String> {
    let mut row = first;
    row.extend(cells.iter().map(|c| c.and_then(|c| c.1).map(num).unwrap_or_else(|| "-".into())));
    let base = cells[0].and_then(|c| c.1).filter(|b| *b > 0.0);
    row.extend(cells.iter().skip(1).map(|c| match (base, c.and_then(|c| c.1)) {
        (Some(b), Some(v)) => format!("{:.2}×", v / b),
        _ => "-".into(),
    }));
    row.extend(cells.iter().map(|c| c.map(|c| num(c.0)).unwrap_or_else(|| "-".into())));
    row
}

/// Labels for runs read from `paths`: the file stem, and where stems collide the path components
/// that tell the files apart (results/h200x2/ep/ll.json and results/h200x4/ep/ll.json become
/// h200x2/ll and h200x4/ll); files that cannot be told apart get #2, #3, ...
pub fn default_labels(paths: &[PathBuf]) -> Vec<String> {
    let parts: Vec<Vec<String>> = paths
        .iter()
        .map(|p| {
            let mut v: Vec<String> = p
                .parent()
                .map(|d| {
                    d.components()
                        .filter_map(|c| match c {
                            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.push(p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into()));
            v
        })
        .collect();
    let stem = |i: usize| parts[i].last().cloned().unwrap_or_default();
    let mut labels: Vec<String> = (0..paths.len()).map(stem).collect();
    let mut stems: Vec<String> = labels.clone();
    stems.sort();
    stems.dedup();
    for s in stems {
        let group: Vec<usize> = (0..paths.len()).filter(|&i| stem(i) == s).collect();
        if group.len() < 2 {
            continue;
        }
        // The folder `up` levels above the file, if the path has one.
        let folder = |i: usize, up: usize| parts[i].len().checked_sub(1 + up).map(|j| parts[i][j].clone());
        let depth = group.iter().map(|&i| parts[i].len()).max().unwrap_or(1);
        let mut kept: Vec<usize> = vec![];
        for up in 1..depth {
            let mut at: Vec<Option<String>> = group.iter().map(|&i| folder(i, up)).collect();
            at.sort();
            at.dedup();
            if at.len() < 2 {
                continue; // the same folder for all: says nothing
            }
            kept.push(up);
            let named: Vec<String> = group
                .iter()
                .map(|&i| {
                    let mut v: Vec<String> = kept.iter().rev().filter_map(|&u| folder(i, u)).collect();
                    v.push(s.clone());
                    v.join("/")
                })
                .collect();
            for (&i, n) in group.iter().zip(&named) {
                labels[i] = n.clone();
            }
            let mut u = named.clone();
            u.sort();
            u.dedup();
            if u.len() == named.len() {
                break;
            }
        }
    }
    distinct(&mut labels);
    labels
}

/// Make labels unique in place: a label seen before gets #2, #3, ...
pub fn distinct(labels: &mut [String]) {
    for i in 1..labels.len() {
        if labels[..i].contains(&labels[i]) {
            let base = labels[i].clone();
            let mut n = 2;
            while labels[..i].contains(&format!("{base}#{n}")) || labels[i + 1..].contains(&format!("{base}#{n}")) {
                n += 1;
            }
            labels[i] = format!("{base}#{n}");
        }
    }
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
                // A `|` in a cell (a label, a file name) would split it.
                let line = |r: &[String]| {
                    format!("| {} |\n", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "))
                };
                s += &line(&t[0]);
                s += &format!("|{}\n", "---|".repeat(t[0].len()));
                for r in &t[1..] {
                    s += &line(r);
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
            "{} is a run of '{}', {} a run of '{}'",
            l.label, l.run.benchmark, runs[0].label, runs[0].run.benchmark
        ));
    }
    for l in runs {
        if l.label.is_empty() || l.label.chars().any(crate::console::hidden) {
            return Err(format!(
                "label {:?}: a label is one line of plain text (no control, line-separator or bidirectional characters)",
                l.label
            ));
        }
        if l.run.rows.is_empty() {
            return Err(format!("{}: the run has no rows: nothing to report", l.label));
        }
        super::compare::check_values(&l.run)
            .and_then(|()| check_plottable(&l.run))
            .map_err(|e| format!("{}: {e}", l.label))?;
    }
    if let Some((_, l)) = runs.iter().enumerate().find(|(i, l)| runs[..*i].iter().any(|m| m.label == l.label)) {
        return Err(format!("two runs are labelled '{}': labels must differ", l.label));
    }
    // The report's own folder is made; the one it goes in must exist (as for -J and --junit).
    if std::fs::symlink_metadata(dir).is_ok() && !dir.is_dir() {
        return Err(format!("-o {}: exists and is not a folder", dir.display()));
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.exists() && !parent.is_dir() {
        return Err(format!("-o {}: folder {} does not exist", dir.display(), parent.display()));
    }
    // Everything is drawn before anything is written, and the files are written together: a
    // failure leaves the folder as it was (or no folder), never part of one report and part of
    // another.
    let mut charts = PlotDir::default();
    let doc = match runs[0].run.benchmark {
        Kind::Ep => ep_build(runs, &mut charts)?,
        Kind::Interference => interference_build(runs, &mut charts)?,
        Kind::Alltoall | Kind::Ceiling => build(runs, &mut charts)?,
    };
    let created = !dir.exists();
    if created {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let pages = [("report.md".to_string(), markdown(&doc)), ("report.html".to_string(), html(&doc))];
    if let Some((name, _)) =
        charts.svgs.iter().chain(&pages).find(|(n, _)| dir.join(n).exists() && !dir.join(n).is_file())
    {
        return Err(format!("{name}: exists in {} and is not a regular file", dir.display()));
    }
    let files: Vec<_> = charts.svgs.iter().chain(&pages).map(|(name, text)| (dir.join(name), text)).collect();
    super::write_all_atomic(files.iter().map(|(path, text)| (path.as_path(), text.as_bytes()))).map_err(|e| {
        if created {
            let _ = std::fs::remove_dir(dir);
        }
        format!("writing the report into {} (left as it was): {e}", dir.display())
    })
}
