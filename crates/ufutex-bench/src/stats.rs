//! Small statistics over samples.

/// The median (mean of the middle two for an even count); NaN for no samples.
pub fn median(xs: &[f64]) -> f64 {
    percentile(xs, 50.0)
}

/// The p-th percentile by linear interpolation between closest ranks; NaN for no samples.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

pub fn min(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NAN, f64::min)
}

pub fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NAN, f64::max)
}

pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Standard deviation relative to the mean, in percent (population form, as perf prints).
pub fn rel_stddev_pct(xs: &[f64]) -> f64 {
    let m = mean(xs);
    if xs.is_empty() || m == 0.0 {
        return f64::NAN;
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    100.0 * var.sqrt() / m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(min(&[3.0, 1.0]), 1.0);
        assert_eq!(max(&[3.0, 1.0]), 3.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 100.0), 5.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn relative_stddev() {
        assert_eq!(rel_stddev_pct(&[5.0, 5.0, 5.0]), 0.0);
        assert!((rel_stddev_pct(&[1.0, 3.0]) - 50.0).abs() < 1e-9);
    }
}
