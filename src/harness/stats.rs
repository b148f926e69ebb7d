//! Reductions of per-rank timings, and percentiles of per-iteration samples (HdrHistogram).
use hdrhistogram::Histogram;

crate::driver::cli::numbered_enum! {
    /// nccl-tests `-a`: how a time is reduced over ranks, under nccl-tests' numbers (which the
    /// command line takes and the results' `config.average` keeps).
    Average { Rank0, Mean, Min, Max }
}

/// `values` (one a rank) reduced as `how` says.
pub fn reduce(values: &[f64], how: Average) -> f64 {
    match how {
        Average::Rank0 => values[0],
        Average::Min => values.iter().cloned().fold(f64::INFINITY, f64::min),
        Average::Max => values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        Average::Mean => values.iter().sum::<f64>() / values.len() as f64,
    }
}

/// Per-iteration time of the operation: the slowest rank's, since an alltoall ends when its last
/// rank does. `per_rank[r][i]` is rank r's sample i.
pub fn slowest_per_iteration(per_rank: &[Vec<f64>]) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..n).map(|i| per_rank.iter().map(|s| s[i]).fold(f64::NEG_INFINITY, f64::max)).collect()
}

/// p50 and p99 (µs) of samples in µs, recorded at nanosecond resolution, 4 significant digits.
/// Each is the middle of its histogram bucket: HdrHistogram's own answer is the bucket's top,
/// which read up to 0.1 % high at 3 digits (a p50 above the mean when every sample equals it).
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
    let at = |q| h.median_equivalent(h.value_at_quantile(q)) as f64 / 1000.0;
    Some((at(0.50), at(0.99)))
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
        assert_eq!(slowest_per_iteration(&[vec![1.0, 5.0], vec![2.0, 3.0]]), vec![2.0, 5.0]);
    }
    #[test]
    fn percentiles_of_known_samples() {
        let s: Vec<f64> = (1..=100).map(|i| i as f64).collect();
        let (p50, p99) = percentiles(&s).unwrap();
        assert!((p50 - 50.0).abs() < 0.1, "{p50}");
        assert!((p99 - 99.0).abs() < 0.1, "{p99}");
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
