//! Message sizes: parsing (`8`, `64K`, `2G`), the sweep (`-b -e -f -i`) and alltoall counts.
use crate::error::{Error, Result};

/// Largest buffer per rank a benchmark may ask for (1 TiB, beyond any GPU): a size typo such as
/// `-e 16T` is a usage error before anything is allocated, not an out-of-memory on the GPU.
pub const MAX_BYTES: u64 = 1 << 40;

/// What a count on the command line counts: its error messages say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Tokens,
}

/// Parse a byte count with an optional binary suffix K, M, G or T (case-insensitive), as
/// nccl-tests does: `-b 8 -e 2G`.
pub fn parse_size(s: &str) -> Result<u64> {
    parse_count(s, Unit::Bytes)
}

/// Parse a token count (tokens per rank), which takes the same suffixes: `-e 4K`.
pub fn parse_tokens(s: &str) -> Result<u64> {
    parse_count(s, Unit::Tokens)
}

fn parse_count(s: &str, unit: Unit) -> Result<u64> {
    let (what, how) = match unit {
        Unit::Bytes => ("size", "a whole number of bytes with an optional K, M, G or T suffix, e.g. 8, 64K, 2GB"),
        Unit::Tokens => ("token count", "a whole number of tokens per rank with an optional K suffix, e.g. 128, 4K"),
    };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(Error::usage(format!("invalid {what} '{s}'"), format!("give {how}")));
    }
    let mut prefix = suffix.to_ascii_uppercase();
    // Bytes may be written as 64KB, 64KiB or 8B too (nccl-tests reads only the letter after the
    // number, so 1MB is 1M there).
    if unit == Unit::Bytes {
        for unit_name in ["IB", "B"] {
            if let Some(p) = prefix.strip_suffix(unit_name).filter(|p| unit_name == "B" || !p.is_empty()) {
                prefix = p.to_string();
                break;
            }
        }
    }
    let shift = match prefix.as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            let units = if unit == Unit::Bytes { "K, M, G or T, with an optional B or iB" } else { "K" };
            return Err(Error::usage(
                format!("unknown {what} suffix '{suffix}' in '{s}'"),
                format!("use {units} (binary multiples: 1K = 1024)"),
            ));
        }
    };
    let too_large = || Error::usage(format!("{what} '{s}' is too large"), format!("give {how}"));
    let n: u64 = num.parse().map_err(|_| too_large())?;
    n.checked_mul(1u64 << shift).ok_or_else(too_large)
}

/// A sweep of bytes per rank (`-b -e -f -i`), bounded by [`MAX_BYTES`].
pub fn byte_sweep(min: u64, max: u64, factor: u64, step: u64) -> Result<Vec<u64>> {
    if max > MAX_BYTES {
        return Err(Error::usage(
            format!("-e {max} is above {MAX_BYTES} bytes (1 TiB) per rank"),
            "give bytes per rank that fit a GPU, e.g. -e 2G",
        ));
    }
    sweep(min, max, factor, step, "-i 1M")
}

/// The most points one `-b/-e/-f/-i` sweep may have: a typo such as `-e 99999T` must be an error
/// before anything is allocated, not a list that eats the machine.
pub const MAX_SWEEP: u64 = 10_000;

/// The sweep of requested sizes (or tokens), min to max: multiplied by `factor` when it is
/// above 1, else stepped by `step` (nccl-tests' `-f` and `-i`). `step_hint` is an example step
/// for the error messages (`-i 1M` for bytes, `-i 1` for tokens).
pub fn sweep(min: u64, max: u64, factor: u64, step: u64, step_hint: &str) -> Result<Vec<u64>> {
    if min > max {
        return Err(Error::usage(format!("-b {min} is larger than -e {max}"), "give -b no larger than -e"));
    }
    if factor == 0 {
        return Err(Error::usage("step factor -f is 0", "use -f 2 (doubling) or -f 1 with an -i step"));
    }
    if factor > 1 && min == 0 {
        return Err(Error::usage("-b 0 with a step factor never grows", "start at -b 1 or more"));
    }
    if factor == 1 && step == 0 && min < max {
        return Err(Error::usage(
            "step -i is 0 and factor -f is 1: the sweep never advances",
            format!("use -f 2 or {step_hint}"),
        ));
    }
    // A multiplicative sweep has at most 64 points; an additive one (max - min) / step + 1.
    let points = if factor > 1 { 0 } else { (max - min).checked_div(step).map_or(1, |k| k.saturating_add(1)) };
    if points > MAX_SWEEP {
        return Err(Error::usage(
            format!("-b {min} -e {max} in steps of {step} is {points} points (at most {MAX_SWEEP})"),
            "use -f 2 (doubling), a larger -i, or a smaller -e",
        ));
    }
    let mut out = vec![];
    let mut s = min;
    loop {
        out.push(s);
        let next = if factor > 1 { s.checked_mul(factor) } else { s.checked_add(step) };
        match next {
            Some(n) if n <= max && n > s => s = n,
            _ => break,
        }
    }
    Ok(out)
}

/// Per-peer element count for an alltoall of `size` bytes per rank, as nccl-tests computes it:
/// each peer's block is rounded down to a multiple of 16 bytes.
pub fn alltoall_count(size: u64, elt: u64, nranks: u64) -> u64 {
    let per_peer = size / elt / nranks;
    per_peer & !(16 / elt - 1)
}

/// nccl-tests bandwidths for alltoall: algbw = bytes per rank / time; busbw = algbw·(n−1)/n.
/// `bytes` is what one rank sends in total, `time_us` in microseconds; results in GB/s (1e9).
pub fn alltoall_bw(bytes: u64, time_us: f64, nranks: u64) -> (f64, f64) {
    if time_us <= 0.0 {
        return (0.0, 0.0);
    }
    let algbw = bytes as f64 / 1e3 / time_us;
    (algbw, algbw * (nranks as f64 - 1.0) / nranks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        for (given, bytes) in [("1MB", 1 << 20), ("64KiB", 64 << 10), ("2gb", 2 << 30), ("8B", 8), ("8b", 8)] {
            assert_eq!(parse_size(given).unwrap(), bytes, "{given}");
        }
        for bad in ["1iB", "1BB", "1MBB", "B"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("1MBB").unwrap_err().msg, "unknown size suffix 'MBB' in '1MBB'", "the suffix as written");
        assert!(parse_tokens("1KB").is_err(), "tokens are no bytes");
    }

    #[test]
    fn token_counts_speak_of_tokens() {
        assert_eq!(parse_tokens("4K").unwrap(), 4096);
        for bad in ["-1", "x", "99999999999999G"] {
            let e = parse_tokens(bad).unwrap_err();
            assert!(
                e.msg.contains("token count")
                    && e.to_string().contains("tokens per rank")
                    && !e.to_string().contains("bytes"),
                "{e}"
            );
        }
    }

    #[test]
    fn rejects_bad_sizes() {
        let e = parse_size("8Q").unwrap_err();
        assert!(e.msg.contains("unknown size suffix 'Q'"), "{e}");
        assert!(parse_size("K").is_err());
        assert!(parse_size("-4").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep(8, 128, 4, 0, "-i 1M").unwrap(), vec![8, 32, 128]);
        assert_eq!(sweep(8, 100, 4, 0, "-i 1M").unwrap(), vec![8, 32]);
        assert_eq!(sweep(10, 30, 1, 10, "-i 1M").unwrap(), vec![10, 20, 30]);
        assert_eq!(sweep(5, 5, 0, 0, "-i 1M").unwrap_err().msg, "step factor -f is 0");
        assert_eq!(sweep(9, 8, 2, 0, "-i 1M").unwrap_err().msg, "-b 9 is larger than -e 8");
        assert!(sweep(1, 8, 1, 0, "-i 1M").is_err());
        assert_eq!(sweep(8, 8, 1, 0, "-i 1M").unwrap(), vec![8]);
        // nccl-tests' standard sweep -b 8 -e 2G -f 4: 8, 32, ..., 2^31: 15 sizes
        let s = sweep(8, 2 << 30, 4, 0, "-i 1M").unwrap();
        assert_eq!(s.len(), 15);
        assert_eq!(*s.last().unwrap(), 2 << 30);
    }

    #[test]
    fn sweeps_are_bounded_before_allocation() {
        // -e 99999T with the default -i 1M used to build a list of 10^11 sizes.
        let e = sweep(32 << 20, parse_size("99999T").unwrap(), 1, 1 << 20, "-i 1M").unwrap_err();
        assert!(e.msg.contains("points (at most 10000)"), "{e}");
        assert!(sweep(1, 1 << 30, 1, 1, "-i 1M").is_err());
        assert_eq!(sweep(1, MAX_SWEEP, 1, 1, "-i 1").unwrap().len() as u64, MAX_SWEEP);
        let e = sweep(1, 8, 1, 0, "-i 1").unwrap_err();
        assert!(e.fix.unwrap().contains("-i 1"));
    }

    #[test]
    fn factor_sweeps_start_above_zero_and_ignore_the_step() {
        // -b 0 -f 2 would stay at 0 and never reach -e; with -f 1 0 is a start like any other.
        assert_eq!(sweep(0, 8, 2, 0, "-i 1M").unwrap_err().msg, "-b 0 with a step factor never grows");
        assert_eq!(sweep(0, 2, 1, 1, "-i 1").unwrap(), vec![0, 1, 2]);
        // -i steps only a sweep with -f 1: -b 8 -e 16G -f 2 with alltoall_perf's default -i 1M is
        // 32 sizes, not 16385 additive points over the bound.
        assert_eq!(sweep(8, 16 << 30, 2, 1 << 20, "-i 1M").unwrap().len(), 32);
    }

    #[test]
    fn alltoall_counts_match_nccl_tests() {
        // float, 4 ranks: 8 bytes -> 0 elements; 1 MiB -> 65536 per peer
        assert_eq!(alltoall_count(8, 4, 4), 0);
        assert_eq!(alltoall_count(1 << 20, 4, 4), 65536);
        // per-peer blocks are multiples of 16 bytes
        assert_eq!(alltoall_count(1000, 4, 3), 80); // 83 -> 80
        assert_eq!(alltoall_count(1000, 1, 3), 320); // 333 -> 320
        assert_eq!(alltoall_count(1000, 8, 3), 40); // 41 -> 40
    }

    #[test]
    fn bandwidth_formula() {
        // 2 GiB per rank in 4495.6 us on 4 ranks: algbw 477.7, busbw 358.3 (DESIGN's example)
        let (alg, bus) = alltoall_bw(2147483648, 4495.6, 4);
        assert!((alg - 477.7).abs() < 0.05, "{alg}");
        assert!((bus - 358.3).abs() < 0.05, "{bus}");
        assert_eq!(alltoall_bw(100, 0.0, 4), (0.0, 0.0));
    }
}
