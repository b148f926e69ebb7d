//! Reductions of per-rank timings, and percentiles of per-iteration samples (HdrHistogram).
use hdrhistogram::Histogram;

crate::driver::cli::numbered_enum! {
    /// nccl-tests `-a`: how a time is reduced over ranks, under nccl-tests' numbers (which the
    /// command line takes and the results' `config.average` keeps).
    Average { Rank0, Mean, Min, Max }
}

/// `values` (one a rank) reduced as `how` says.
pub fn reduce(values: &[f64], how: Average) -> f64 {
    of_timed_rank(values, how, values)
}

/// `values` (one a rank) of the rank whose time in `times` `how` picks (rank 0, the fastest or
/// the slowest), or their mean where no one rank's is shown (-a 1): what a figure divides by
/// that time, so it is one rank's over the same rank's time.
pub fn of_timed_rank(times: &[f64], how: Average, values: &[f64]) -> f64 {
    match chosen_rank(times, how) {
        Some(r) => values[r],
        None => values.iter().sum::<f64>() / values.len() as f64,
    }
}

/// The rank whose value `reduce` returns; None for the mean, which is no one rank's.
fn chosen_rank(values: &[f64], how: Average) -> Option<usize> {
    let by = |a: &(usize, &f64), b: &(usize, &f64)| a.1.total_cmp(b.1);
    match how {
        Average::Rank0 => Some(0),
        Average::Min => values.iter().enumerate().min_by(by).map(|(r, _)| r),
        Average::Max => values.iter().enumerate().max_by(by).map(|(r, _)| r),
        Average::Mean => None,
    }
}

/// Per-iteration time of the operation: the slowest rank's, since an alltoall ends when its last
/// rank does. `per_rank[r][i]` is rank r's sample i.
pub fn slowest_per_iteration(per_rank: &[Vec<f64>]) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..n).map(|i| per_rank.iter().map(|s| s[i]).fold(f64::NEG_INFINITY, f64::max)).collect()
}

/// p50 and p99 (µs) of samples in µs, ranked as nccl-tests ranks them: p50 the sample at sorted
/// index n/2 (the upper median of an even count), p99 the nearest rank ceil(0.99 n). Samples are
/// recorded at nanosecond resolution, 4 significant digits, and each answer is the middle of its
/// HdrHistogram bucket: the bucket's top, at 3 digits, put a p50 above the mean when every sample
/// equals it.
pub fn percentiles(samples_us: &[f64]) -> Option<(f64, f64)> {
    if samples_us.is_empty() {
        return None;
    }
    // 1 ns to 1 hour; saturating_record clamps anything beyond (a fixed-bound histogram does not
    // resize, and an auto-resizing one would clamp to its initial range). u32 counts hold the
    // most samples a run can take (-n is at most 10^6).
    let mut h = Histogram::<u32>::new_with_bounds(1, 3_600_000_000_000, 4).expect("valid bounds");
    for &s in samples_us {
        h.saturating_record((s * 1000.0).round().max(1.0) as u64);
    }
    // The k-th smallest sample (1-based), in integers: a quantile times n in floating point can
    // land a hair above a whole rank and pick the next one.
    let kth = |k: u64| {
        let mut seen = 0u64;
        let v = h.iter_recorded().find(|v| {
            seen += u64::from(v.count_at_value());
            seen >= k
        });
        h.median_equivalent(v.expect("k is at most the count").value_iterated_to()) as f64 / 1000.0
    };
    let n = h.len();
    Some((kth(n / 2 + 1), kth((99 * n).div_ceil(100))))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn reductions() {
        let v = [1.0, 2.0, 6.0];
        assert_eq!(reduce(&v, Average::Rank0), 1.0);
        assert_eq!(reduce(&v, Average::Mean), 3.0);
        assert_eq!(reduce(&v, Average::Min), 1.0);
        assert_eq!(reduce(&v, Average::Max), 6.0);
        assert_eq!(chosen_rank(&[3.0, 1.0, 6.0], Average::Min), Some(1));
        assert_eq!(chosen_rank(&[3.0, 1.0, 6.0], Average::Max), Some(2));
        assert_eq!(chosen_rank(&v, Average::Mean), None);
        let (times, bytes) = ([3.0, 1.0, 6.0], [30.0, 10.0, 80.0]);
        assert_eq!(of_timed_rank(&times, Average::Min, &bytes), 10.0, "the fastest rank's");
        assert_eq!(of_timed_rank(&times, Average::Max, &bytes), 80.0, "the slowest rank's");
        assert_eq!(of_timed_rank(&times, Average::Mean, &bytes), 40.0, "no one rank's: the mean");
        assert_eq!(slowest_per_iteration(&[vec![1.0, 5.0], vec![2.0, 3.0]]), vec![2.0, 5.0]);
    }
    #[test]
    fn percentiles_of_known_samples() {
        let s: Vec<f64> = (1..=100).map(|i| i as f64).collect();
        let (p50, p99) = percentiles(&s).unwrap();
        // nccl-tests' ranks: sorted[n / 2] and sorted[ceil(0.99 n) - 1].
        assert!((p50 - 51.0).abs() < 0.01, "{p50}");
        assert!((p99 - 99.0).abs() < 0.01, "{p99}");
        let (p50, p99) = percentiles(&[4.0, 1.0, 3.0]).unwrap();
        assert!((p50 - 3.0).abs() < 0.01 && (p99 - 4.0).abs() < 0.01, "{p50} {p99}");
        let (p50, p99) = percentiles(&[2.0, 1.0]).unwrap();
        assert!((p50 - 2.0).abs() < 0.01 && (p99 - 2.0).abs() < 0.01, "{p50} {p99}");
        let s: Vec<f64> = (1..=1000).map(|i| i as f64).collect();
        assert_eq!(percentiles(&s).map(|(a, b)| (a.round(), b.round())), Some((501.0, 990.0)));
        assert!(percentiles(&[]).is_none());
    }
    #[test]
    fn equal_samples_give_their_value() {
        for x in [0.5, 4.2, 97.3, 4495.6, 1.5e6] {
            let (p50, p99) = percentiles(&[x; 20]).unwrap();
            for p in [p50, p99] {
                assert!((p - x).abs() <= 1e-4 * x, "{x}: {p}");
            }
        }
    }
}
