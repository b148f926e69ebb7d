//! SVG plots for `ginbench report`: one chart per implementation (alltoall) or per EP section,
//! one line per run (and phase).
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// A line: label and (x, y) points, x ascending.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Ten colours (matplotlib's tab10); a second round of series is drawn dashed.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The smallest and largest value a plot takes: an axis needs headroom around its data (margins,
/// whole decades on a log axis), and values near the ends of f64 leave none, so that the axis
/// computation overflows to infinity or underflows to zero; the span of a log axis must stay
/// finite too (1e-160 beside 1e160 made plotters' tick loop run forever). Times in µs and
/// bandwidths in GB/s lie far inside.
pub const PLOT_MIN: f64 = 1e-100;
pub const PLOT_MAX: f64 = 1e100;

/// Whether `v` can be drawn: zero (left out of the plot) or finite within PLOT_MIN..=PLOT_MAX.
pub fn plottable(v: f64) -> bool {
    v == 0.0 || (PLOT_MIN..=PLOT_MAX).contains(&v)
}

/// What the x axis counts; it is drawn on a log2 scale either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Bytes per rank (alltoall): ticks as 8, 64K, 2G.
    Bytes,
    /// Tokens per rank (EP): ticks as plain numbers.
    Tokens,
}

impl XAxis {
    fn desc(self) -> &'static str {
        match self {
            XAxis::Bytes => "bytes per rank",
            XAxis::Tokens => "tokens per rank",
        }
    }

    fn tick(self, v: f64) -> String {
        match self {
            XAxis::Bytes => human_bytes(v),
            // the axis starts half a step below 1 token: no tick label there
            XAxis::Tokens if v < 1.0 => String::new(),
            XAxis::Tokens => format!("{v:.0}"),
        }
    }
}

/// A chart against `x` on a log axis (ticks at powers of two); `log_y` for times (when they span
/// more than a decade or so). Returns the SVG text, or None when there is nothing to plot; `name`
/// is the file it is for, in errors.
pub fn line_chart(
    name: &str,
    title: &str,
    x: XAxis,
    y_desc: &str,
    series: &[Series],
    log_y: bool,
) -> Result<Option<String>, String> {
    // x is plotted as log2(x) on a linear axis, so ticks land on powers of two.
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s.points.iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).map(|p| (p.0.log2(), p.1)).collect(),
        })
        .collect();
    let pts: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().cloned()).collect();
    if pts.is_empty() {
        return Ok(None);
    }
    let err = |e: &dyn std::fmt::Display| format!("plotting {name}: {e}");
    if let Some(p) = pts.iter().find(|p| !(plottable(p.0.exp2()) && plottable(p.1))) {
        return Err(err(&format_args!(
            "({}, {}) cannot be plotted: a plot axis holds values from {PLOT_MIN:e} to {PLOT_MAX:e}",
            p.0.exp2(),
            p.1
        )));
    }
    let (xmin, xmax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    // A log axis labels only whole decades: use it only when the data spans several.
    let log_y = log_y && ymax / ymin > 30.0;
    let (ylo, yhi) = if log_y { (ymin / 1.5, ymax * 1.5) } else { (0.0, ymax * 1.1) };
    // Guaranteed by the bounds above; checked again because an infinite or empty range makes the
    // axis computation loop forever.
    if !(ylo.is_finite() && yhi.is_finite() && yhi > ylo && (!log_y || ylo > 0.0)) {
        return Err(err(&format_args!("y axis {ylo}..{yhi} cannot be plotted")));
    }
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 20)).margin(14).x_label_area_size(44).y_label_area_size(64);
    let xr = (xmin - 0.5).floor()..(xmax + 0.5).ceil();
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc(x.desc())
                .y_desc(y_desc)
                .x_label_formatter(&|v| x.tick(2f64.powf(v.round())))
                .draw()
                .map_err(|e| err(&e))?;
            for (i, s) in series.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                let (p, style) = (s.points.clone(), c.stroke_width(2));
                if (i / COLORS.len()) % 2 == 0 {
                    chart
                        .draw_series(LineSeries::new(p.clone(), style))
                        .map_err(|e| err(&e))?
                        .label(s.label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                } else {
                    chart
                        .draw_series(DashedLineSeries::new(p.clone(), 8, 5, style))
                        .map_err(|e| err(&e))?
                        .label(s.label.clone())
                        .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, style));
                }
                chart.draw_series(p.into_iter().map(|q| Circle::new(q, 3, c.filled()))).map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if log_y {
        draw!(b.build_cartesian_2d(xr, (ylo..yhi).log_scale()));
    } else {
        draw!(b.build_cartesian_2d(xr, ylo..yhi));
    }
    root.present().map_err(|e| err(&e))?;
    drop(root);
    Ok(Some(svg))
}

/// 8 -> "8", 65536 -> "64K", 2^31 -> "2G".
pub fn human_bytes(v: f64) -> String {
    let (n, unit) = if v >= (1u64 << 30) as f64 {
        (v / (1u64 << 30) as f64, "G")
    } else if v >= (1 << 20) as f64 {
        (v / (1 << 20) as f64, "M")
    } else if v >= 1024.0 {
        (v / 1024.0, "K")
    } else {
        (v, "")
    };
    if (n - n.round()).abs() < 0.05 {
        format!("{:.0}{unit}", n)
    } else {
        format!("{n:.1}{unit}")
    }
}
