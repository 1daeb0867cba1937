//! Percentiles of a sample (nearest-rank, so every figure reported is a measured value).

/// The median and 99th percentile of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median.
    pub p50: f64,
    /// 99th percentile (the largest value for fewer than 100 samples).
    pub p99: f64,
    /// Sample count.
    pub n: usize,
}

/// The `pct`-th percentile (1..=100) of non-empty sorted `xs`, by nearest rank.
fn rank(sorted: &[f64], pct: usize) -> f64 {
    let n = sorted.len();
    let idx = (pct * n).div_ceil(100);
    sorted[idx.clamp(1, n) - 1]
}

/// Summarise `xs`; None when empty.
pub fn summarize(mut xs: Vec<f64>) -> Option<Summary> {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(Summary {
        p50: rank(&xs, 50),
        p99: rank(&xs, 99),
        n: xs.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = summarize((1..=200).map(f64::from).rev().collect()).unwrap();
        assert_eq!((s.p50, s.p99, s.n), (100.0, 198.0, 200));
        let s = summarize(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.p50, s.p99), (2.0, 3.0));
        assert!(summarize(vec![f64::NAN]).is_none());
    }
}
