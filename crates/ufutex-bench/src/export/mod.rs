//! Exporters: one trait, one impl per format. Each turns a [`Document`] into named files.

pub mod json;
pub mod markdown;
pub mod svg;

use crate::result::Document;
use std::io;

/// A rendered file: its name and contents.
pub struct Output {
    pub name: String,
    pub contents: String,
}

pub trait Exporter {
    fn export(&self, doc: &Document) -> io::Result<Vec<Output>>;
}

/// Human-friendly number: 3 significant digits, k/M/G suffixes.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, " G")
    } else if a >= 1e6 {
        (v / 1e6, " M")
    } else if a >= 1e4 {
        (v / 1e3, " k")
    } else {
        (v, "")
    };
    let ax = x.abs();
    let s = if ax >= 100.0 {
        format!("{x:.0}")
    } else if ax >= 10.0 {
        format!("{x:.1}")
    } else if ax >= 0.1 || ax == 0.0 {
        format!("{x:.2}")
    } else {
        // Three significant digits below 0.1 (perf's milliseconds: 0.0571, not 0.06).
        let decimals = (2 - ax.log10().floor() as i32).clamp(3, 9) as usize;
        format!("{x:.decimals$}")
    };
    format!("{s}{suffix}")
}

/// A goal's judged ratio, followed by the range of its per-repetition ratios when it has one.
pub fn goal_ratio(g: &crate::result::Goal) -> String {
    match g.spread {
        Some((lo, hi)) => format!("{} ({}–{})", ratio(g.ratio), ratio(Some(lo)), ratio(Some(hi))),
        None => ratio(g.ratio),
    }
}

/// A goal's verdict in words; `met`/`not met` are the caller's, marked when the per-repetition
/// ratios fall on both sides of the target.
pub fn goal_status(g: &crate::result::Goal, met: &str, unmet: &str) -> String {
    let flips = if g.straddles { " (the repetitions fall on both sides)" } else { "" };
    match g.met {
        Some(true) => format!("{met}{flips}"),
        Some(false) => format!("{unmet}{flips}"),
        None => "not measured".into(),
    }
}

/// A ratio as "12.3×".
pub fn ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 100.0 => format!("{r:.0}×"),
        Some(r) if r >= 10.0 => format!("{r:.1}×"),
        Some(r) => format!("{r:.2}×"),
        None => "–".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(123.4), "123");
        assert_eq!(num(12_345.0), "12.3 k");
        assert_eq!(num(2_500_000.0), "2.50 M");
        assert_eq!(num(f64::NAN), "–");
        assert_eq!(num(0.5), "0.50");
        assert_eq!(num(0.0571), "0.0571");
        assert_eq!(num(0.004), "0.00400");
        assert_eq!(num(0.0), "0.00");
        assert_eq!(ratio(Some(25.04)), "25.0×");
        assert_eq!(ratio(None), "–");
    }
}
