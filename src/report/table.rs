//! The nccl-tests table: same columns, widths and number formats, so existing parsers keep
//! working. Extra columns (per-iteration p50 / p99) appear only with `-I 1`.
use crate::results::{BgOp, Row, Status};

#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// `-C 1`: the time column holds host enqueue time.
    pub cputime: bool,
    /// `-I 1`: p50 / p99 columns after each #wrong.
    pub per_iter: bool,
}

/// nccl-tests' getFloatStr: `%.2f`, else `%.1f`, `%.0f`, then exponent forms, to fit `width`.
pub fn fit(v: f64, width: usize) -> String {
    for s in [format!("{v:.2}"), format!("{v:.1}"), format!("{v:.0}"), c_exp(v, 1), c_exp(v, 0)] {
        if s.len() <= width {
            return s;
        }
    }
    c_exp(v, 0)
}

/// C's `%.Ne`: mantissa, `e`, sign, at least two exponent digits.
fn c_exp(v: f64, prec: usize) -> String {
    let s = format!("{v:.prec$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = exp.parse().unwrap_or(0);
    format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// C's `%g` (6 significant digits, trailing zeros removed).
pub fn c_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (mant, e) = s.split_once('e').unwrap();
        let mant = trim_zeros(mant);
        let e: i32 = e.parse().unwrap();
        return format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}"))
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

pub fn header(style: Style) -> String {
    let t = if style.cputime { "cputime" } else { "time" };
    let mut out = String::from("#\n");
    if style.per_iter {
        out += &format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:^49}  {:^49}\n",
            "", "", "", "", "", "out-of-place (+ per-iteration)", "in-place (+ per-iteration)"
        );
    } else {
        out += &format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
            "", "", "", "", ""
        );
    }
    let mut cols = format!("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "size", "count", "type", "redop", "root");
    let mut units = format!("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "(B)", "(elements)", "", "", "");
    for _ in 0..2 {
        cols += &format!("  {t:>7}  {:>6}  {:>6}  {:>6}", "algbw", "busbw", "#wrong");
        units += &format!("  {:>7}  {:>6}  {:>6}  {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
        if style.per_iter {
            cols += &format!("  {:>7}  {:>7}", "p50", "p99");
            units += &format!("  {:>7}  {:>7}", "(us)", "(us)");
        }
    }
    out += &cols;
    out += " \n";
    out += &units;
    out += " \n";
    out
}

fn placement(r: &Row, style: Style) -> String {
    if r.status != Status::Ok {
        // A placement that did not run (its reason is on a `#` line): `nan` where nccl-tests
        // always prints a number, so parsers that convert every column still read the line,
        // and `N/A` in #wrong as nccl-tests prints for an unchecked run.
        let mut s = format!("  {:>7}  {:>6}  {:>6}  {:>6}", "nan", "nan", "nan", "N/A");
        if style.per_iter {
            s += &format!("  {:>7}  {:>7}", "nan", "nan");
        }
        return s;
    }
    let mut s = format!(
        "  {:>7}  {:>6}  {:>6}",
        fit(r.time_us.unwrap_or(0.0), 7),
        fit(r.algbw_gbps.unwrap_or(0.0), 6),
        fit(r.busbw_gbps.unwrap_or(0.0), 6)
    );
    match r.wrong {
        Some(w) => s += &format!("  {:>6}", c_g(w as f64)),
        None => s += "    N/A",
    }
    if style.per_iter {
        let p = |v: Option<f64>| v.map(|v| fit(v, 7)).unwrap_or_else(|| "N/A".into());
        s += &format!("  {:>7}  {:>7}", p(r.p50_us), p(r.p99_us));
    }
    s
}

/// One size: the out-of-place and in-place measurements on one line (nccl-tests layout), or
/// None when neither ran (their reasons go on `#` lines: see `reason`).
pub fn line(out: &Row, inp: &Row, style: Style) -> Option<String> {
    if out.status != Status::Ok && inp.status != Status::Ok {
        return None;
    }
    let mut s = format!("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", out.size_bytes, out.count, out.dtype, "none", -1);
    s += &placement(out, style);
    s += &placement(inp, style);
    s.push('\n');
    Some(s)
}

/// The comment line explaining a row that did not run (print each reason once per table).
pub fn reason(r: &Row) -> Option<String> {
    (r.status != Status::Ok).then(|| format!("# {}: {}\n", r.status, r.reason.as_deref().unwrap_or("no reason given")))
}

/// nccl-tests' closing lines: wrong rows and, where the table has one, the mean bus bandwidth.
pub fn footer(wrong_rows: u64, avg_busbw: Option<f64>) -> String {
    let mut s = format!("# Out of bounds values : {} {}\n", wrong_rows, if wrong_rows > 0 { "FAILED" } else { "OK" });
    if let Some(bw) = avg_busbw {
        s += &format!("# Avg bus bandwidth    : {} \n", c_g(bw));
    }
    s + "#\n"
}

/// EP table header: one line per tokens-per-rank, dispatch and combine side by side (as
/// nccl-tests puts out-of-place and in-place side by side).
pub fn ep_header() -> String {
    let mut s = String::from("#\n");
    s += &format!("# {:>8}  {:>12}  {:>5}  {:^48}  {:^48}\n", "", "", "", "dispatch", "combine");
    let group = format!("  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}", "time", "p50", "p99", "bw", "#wrong");
    let units = format!("  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}", "(us)", "(us)", "(us)", "(GB/s)", "");
    s += &format!("# {:>8}  {:>12}  {:>5}{group}{group} \n", "tokens", "size", "type");
    s += &format!("# {:>8}  {:>12}  {:>5}{units}{units} \n", "(/rank)", "(B)", "");
    s
}

fn ep_group(r: &Row) -> String {
    if r.status != Status::Ok {
        return format!("  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}", "nan", "nan", "nan", "nan", "N/A");
    }
    let f = |v: Option<f64>| v.map(|v| fit(v, 8)).unwrap_or_else(|| "N/A".into());
    let wrong = r.wrong.map(|w| c_g(w as f64)).unwrap_or_else(|| "N/A".into());
    format!("  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}", f(r.time_us), f(r.p50_us), f(r.p99_us), f(r.bw_gbps), wrong)
}

/// One EP line: tokens per rank, bytes the rank sends in dispatch, dispatch payload type, then
/// the dispatch and combine measurements; None when neither ran.
pub fn ep_line(dispatch: &Row, combine: &Row) -> Option<String> {
    if dispatch.status != Status::Ok && combine.status != Status::Ok {
        return None;
    }
    Some(format!(
        "{:>10}  {:>12}  {:>5}{}{}\n",
        dispatch.tokens.unwrap_or(0),
        dispatch.size_bytes,
        dispatch.dtype,
        ep_group(dispatch),
        ep_group(combine)
    ))
}

/// The interference table's columns: the background's size, count, type and reduction first
/// (nccl-tests' leading columns), then both sides alone and together. Without a background
/// (`alone_only`) the foreground's time alone and #wrong.
pub fn interference_header(alone_only: bool) -> String {
    let mut s = String::from("#\n");
    if alone_only {
        s += &format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>10}  {:>6}\n",
            "size", "count", "type", "redop", "fg alone", "#wrong"
        );
        s += &format!("# {:>10}  {:>12}  {:>8}  {:>6}  {:>10}  {:>6}\n", "(B)", "(elements)", "", "", "(us)", "");
        return s;
    }
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:^28}  {:^28}  {:^18}\n",
        "background", "", "", "", "foreground", "background", "background busbw"
    );
    let cols =
        ["alone", "together", "slowdown", "alone", "together", "slowdown", "alone", "together", "overlap", "#wrong"];
    let units = ["(us)", "(us)", "", "(us)", "(us)", "", "(GB/s)", "(GB/s)", "(%)", ""];
    let row = |first: [&str; 4], rest: [&str; 10]| {
        let mut l = format!("# {:>10}  {:>12}  {:>8}  {:>6}", first[0], first[1], first[2], first[3]);
        for (i, c) in rest.iter().enumerate() {
            l += &format!("  {c:>w$}", w = if i >= 8 { [7, 6][i - 8] } else { 8 });
        }
        l + "\n"
    };
    s += &row(["size", "count", "type", "redop"], cols);
    s += &row(["(B)", "(elements)", "", ""], units);
    s
}

/// One interference line (None when the row did not run: its reason goes on a `#` line).
/// Values that could not be measured print as N/A, as nccl-tests prints an unchecked #wrong; a
/// measured row's note (an incomplete overlap) follows on a `#` line.
pub fn interference_line(r: &Row) -> Option<String> {
    if r.status != Status::Ok {
        return None;
    }
    let note = r.reason.as_ref().map(|w| format!("#   note: {w}\n")).unwrap_or_default();
    interference_data(r).map(|l| l + &note)
}

fn interference_data(r: &Row) -> Option<String> {
    let f = |v: Option<f64>, w: usize| v.map(|v| fit(v, w)).unwrap_or_else(|| "N/A".into());
    let wrong = r.wrong.map(|w| c_g(w as f64)).unwrap_or_else(|| "N/A".into());
    let Some(b) = r.background.as_ref().filter(|b| b.op != BgOp::None) else {
        return Some(format!(
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>10}  {:>6}\n",
            0,
            0,
            "none",
            "none",
            f(r.alone_us, 10),
            wrong
        ));
    };
    Some(format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>7}  {:>6}\n",
        b.size_bytes,
        b.count,
        b.dtype,
        b.redop,
        f(r.alone_us, 8),
        f(r.together_us, 8),
        f(r.slowdown, 8),
        f(b.alone_us, 8),
        f(b.together_us, 8),
        f(b.slowdown, 8),
        f(b.busbw_alone_gbps, 8),
        f(b.busbw_together_gbps, 8),
        f(r.overlap.map(|o| o * 100.0), 7),
        wrong
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What scripts written for nccl-tests do: split every data line on whitespace and convert
    /// the number columns (all but type, redop and a #wrong of N/A).
    fn parse_like_nccl_tests(table: &str) {
        for l in table.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            for (i, f) in l.split_whitespace().enumerate() {
                if i == 2 || i == 3 || f == "N/A" {
                    continue;
                }
                assert!(f.parse::<f64>().is_ok(), "column {i} '{f}' of '{l}' is not a number");
            }
        }
    }

    #[test]
    fn rows_that_did_not_run_keep_data_lines_numeric() {
        let ok = Row {
            size_bytes: 1 << 20,
            count: 65536,
            dtype: "float".into(),
            time_us: Some(40.0),
            algbw_gbps: Some(26.2),
            busbw_gbps: Some(19.7),
            wrong: Some(0),
            status: Status::Ok,
            ..Default::default()
        };
        let skipped = Row { status: Status::Skipped, reason: Some("in place not supported".into()), ..ok.clone() };
        for style in [Style::default(), Style { per_iter: true, cputime: false }] {
            let mut t = header(style);
            t += &line(&ok, &skipped, style).unwrap();
            t += &reason(&skipped).unwrap();
            t += &line(&skipped, &ok, style).unwrap();
            assert_eq!(line(&skipped, &skipped, style), None);
            parse_like_nccl_tests(&t);
        }
        let mut e = ep_header();
        e += &ep_line(&Row { tokens: Some(128), bw_gbps: Some(1.0), ..ok.clone() }, &skipped).unwrap();
        parse_like_nccl_tests(&e);
    }

    #[test]
    fn number_formats_follow_nccl_tests() {
        assert_eq!(fit(40.1234, 7), "40.12");
        assert_eq!(fit(12345.678, 7), "12345.7");
        assert_eq!(fit(1234567.0, 7), "1234567");
        assert_eq!(fit(123456789.0, 7), "1.2e+08");
        assert_eq!(fit(477.73, 6), "477.73");
        assert_eq!(fit(1477.73, 6), "1477.7");
        assert_eq!(c_g(0.0), "0");
        assert_eq!(c_g(42.123449), "42.1234");
        assert_eq!(c_g(1048576.0), "1.04858e+06");
        assert_eq!(c_g(3.0), "3");
    }

    #[test]
    fn ep_lines_align_with_the_header() {
        let d = Row {
            tokens: Some(128),
            size_bytes: 14680064,
            dtype: "bf16".into(),
            time_us: Some(41.5),
            p50_us: Some(41.0),
            p99_us: Some(44.25),
            bw_gbps: Some(353.7),
            wrong: Some(0),
            status: Status::Ok,
            ..Default::default()
        };
        let c = Row { status: Status::Skipped, ..d.clone() };
        let line = ep_line(&d, &c).unwrap();
        assert_eq!(
            line,
            "       128      14680064   bf16     41.50     41.00     44.25    353.70       0       nan       nan       nan       nan     N/A\n"
        );
        assert_eq!(ep_line(&c, &c), None, "nothing ran: no data line");
        // Columns end where the header's do.
        let header = ep_header();
        let cols = header.lines().nth(2).unwrap();
        let both = ep_line(&d, &d).unwrap();
        assert_eq!(cols.trim_end().len(), both.trim_end().len(), "{cols}\n{both}");
    }
}
