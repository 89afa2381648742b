//! SVG plots, drawn by hand: line charts (slots sweep, waitv entries, lock critical-section
//! sweep) and grouped bar charts (ping-pong, fairness). Log scale where values span decades.

use super::{num, Exporter, Output};
use crate::result::{Bench, Document};
use std::fmt::Write;
use std::io;

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: &[&str] = &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// A series: a name and one value per x position (None = not measured).
pub type Series = (String, Vec<Option<f64>>);

pub struct Chart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub x_labels: Vec<String>,
    pub series: Vec<Series>,
    pub log_y: bool,
    pub bars: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

impl Chart<'_> {
    fn y_range(&self) -> (f64, f64) {
        let vals: Vec<f64> = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .filter(|v| v.is_finite() && (*v > 0.0 || !self.log_y))
            .collect();
        let (lo, hi) = vals.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        if vals.is_empty() {
            return (1.0, 10.0);
        }
        if self.log_y {
            (10f64.powf(lo.log10().floor()), 10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)))
        } else {
            (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 })
        }
    }

    fn y_pos(&self, v: f64, (lo, hi): (f64, f64)) -> f64 {
        let f = if self.log_y { (v.log10() - lo.log10()) / (hi.log10() - lo.log10()) } else { (v - lo) / (hi - lo) };
        TOP + (H - TOP - BOTTOM) * (1.0 - f.clamp(0.0, 1.0))
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            (W - RIGHT + LEFT) / 2.0,
            esc(self.title)
        );
        let range = self.y_range();
        let plot_w = W - LEFT - RIGHT;
        // Y grid and ticks.
        let ticks: Vec<f64> = if self.log_y {
            let (a, b) = (range.0.log10() as i32, range.1.log10() as i32);
            (a..=b).map(|e| 10f64.powi(e)).collect()
        } else {
            (0..=5).map(|i| range.0 + (range.1 - range.0) * i as f64 / 5.0).collect()
        };
        for t in ticks {
            let y = self.y_pos(t, range);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                esc(&num(t))
            );
        }
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (H - BOTTOM + TOP) / 2.0,
            esc(self.y_label)
        );
        let n = self.x_labels.len().max(1);
        let step = plot_w / n as f64;
        let x_at = |i: usize| LEFT + step * (i as f64 + 0.5);
        for (i, l) in self.x_labels.iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                x_at(i),
                H - BOTTOM + 18.0,
                esc(l)
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="#000"/>"##,
            H - BOTTOM,
            W - RIGHT,
            H - BOTTOM
        );
        let ns = self.series.len().max(1);
        for (k, (name, vals)) in self.series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            if self.bars {
                let bw = step * 0.8 / ns as f64;
                for (i, v) in vals.iter().enumerate() {
                    if let Some(v) = v.filter(|v| v.is_finite() && (*v > 0.0 || !self.log_y)) {
                        let x = x_at(i) - step * 0.4 + bw * k as f64;
                        let y = self.y_pos(v, range);
                        let _ = writeln!(
                            s,
                            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
                            bw * 0.95,
                            (H - BOTTOM - y).max(0.0),
                            esc(name),
                            num(v)
                        );
                    }
                }
            } else {
                let pts: Vec<String> = vals
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| {
                        v.filter(|v| v.is_finite() && *v > 0.0)
                            .map(|v| format!("{:.1},{:.1}", x_at(i), self.y_pos(v, range)))
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                    pts.join(" ")
                );
                for p in &pts {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#);
                }
            }
            let ly = TOP + 18.0 * k as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{}">{}</text>"#,
                W - RIGHT + 12.0,
                ly,
                W - RIGHT + 30.0,
                ly + 10.0,
                esc(name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Collect, for each bench in `benches` (one x position each), the median of `metric` per
/// competitor.
pub fn series_of(benches: &[&Bench], metric: &str, prefix: &str) -> Vec<Series> {
    let mut names: Vec<String> = Vec::new();
    for b in benches {
        for r in b.metric(metric).map(|m| m.rows.as_slice()).unwrap_or_default() {
            if !names.contains(&r.competitor) {
                names.push(r.competitor.clone());
            }
        }
    }
    names
        .into_iter()
        .map(|n| {
            let vals = benches.iter().map(|b| b.metric(metric).and_then(|m| m.row(&n)).map(|r| r.median)).collect();
            (format!("{prefix}{n}"), vals)
        })
        .collect()
}

/// The report's plots, from whatever benches the document holds.
pub struct Plots;

/// The private benches of `workload` whose case has every one of `case_has` (`--shared` runs
/// have plots of their own to come, not a place in these).
fn find<'a>(doc: &'a Document, workload: &str, case_has: &[&str]) -> Vec<&'a Bench> {
    doc.benches
        .iter()
        .filter(|b| b.workload == workload && !b.case.ends_with(crate::workloads::SHARED_SUFFIX))
        .filter(|b| case_has.iter().all(|c| b.case.contains(c)))
        .collect()
}

fn after<'a>(case: &'a str, key: &str) -> &'a str {
    case.split(key).nth(1).and_then(|r| r.split([',', ' ']).next()).unwrap_or("?")
}

impl Exporter for Plots {
    fn export(&self, doc: &Document) -> io::Result<Vec<Output>> {
        let mut out = Vec::new();
        let mut add = |name: &str, chart: Chart<'_>| {
            if chart.series.iter().any(|(_, v)| v.iter().any(Option::is_some)) {
                out.push(Output { name: name.into(), contents: chart.render() });
            }
        };
        // Slots sweep: both modes on one plot.
        let eagain = find(doc, "hash-slots", &["wait mismatch"]);
        let contend = find(doc, "hash-slots", &["contend"]);
        let labels: Vec<String> =
            eagain.iter().chain(&contend).map(|b| after(&b.case, "slots=").to_string()).fold(Vec::new(), |mut v, l| {
                if !v.contains(&l) {
                    v.push(l);
                }
                v
            });
        let mut series = Vec::new();
        for (mode, bs) in [("mismatch ", &eagain), ("contend ", &contend)] {
            let aligned: Vec<Option<&Bench>> =
                labels.iter().map(|l| bs.iter().find(|b| after(&b.case, "slots=") == l).copied()).collect();
            for name in ["ufutex", "kernel"] {
                let vals = aligned
                    .iter()
                    .map(|b| b.and_then(|b| b.metric("ops/s/thread")).and_then(|m| m.row(name)).map(|r| r.median))
                    .collect();
                series.push((format!("{mode}{name}"), vals));
            }
        }
        add(
            "slots-sweep.svg",
            Chart {
                title: "hash: ops/s per thread vs table slots",
                y_label: "ops/s per thread",
                x_labels: labels,
                series,
                log_y: true,
                bars: false,
            },
        );
        // waitv entries.
        let mut series = Vec::new();
        let mut labels = Vec::new();
        for mode in ["mismatch first", "mismatch last"] {
            let bs = find(doc, "waitv", &[mode]);
            labels = bs.iter().map(|b| after(&b.case, "entries=").to_string()).collect();
            series.extend(series_of(&bs, "call", &format!("{} ", &mode[9..])));
        }
        add(
            "waitv-entries.svg",
            Chart {
                title: "failing waitv: ns per call vs entries",
                y_label: "ns per call",
                x_labels: labels,
                series,
                log_y: true,
                bars: false,
            },
        );
        // Ping-pong.
        let bs = find(doc, "ping-pong", &[]);
        let labels = bs.iter().map(|b| b.case.split(',').next().unwrap_or("").to_string()).collect();
        add(
            "ping-pong.svg",
            Chart {
                title: "ping-pong: ns per round trip",
                y_label: "ns per round trip",
                x_labels: labels,
                series: series_of(&bs, "round trip", ""),
                log_y: true,
                bars: true,
            },
        );
        // Lock sweep and fairness at each thread count > 1.
        let mut threads: Vec<String> =
            find(doc, "lock", &[]).iter().map(|b| after(&b.case, "threads=").to_string()).collect();
        threads.dedup();
        for t in threads.iter().filter(|t| *t != "1") {
            let bs = find(doc, "lock", &[&format!("threads={t} ")]);
            let labels: Vec<String> = bs.iter().map(|b| after(&b.case, "cs=").to_string()).collect();
            let title = format!("lock, {t} threads: acquisitions/s vs critical section");
            add(
                &format!("lock-cs-{t}threads.svg"),
                Chart {
                    title: &title,
                    y_label: "acquisitions/s",
                    x_labels: labels.clone(),
                    series: series_of(&bs, "throughput", ""),
                    log_y: true,
                    bars: false,
                },
            );
            let title = format!("lock fairness, {t} threads: slowest/fastest thread");
            add(
                &format!("fairness-{t}threads.svg"),
                Chart {
                    title: &title,
                    y_label: "min/max per-thread rate",
                    x_labels: labels,
                    series: series_of(&bs, "min/max", ""),
                    log_y: false,
                    bars: true,
                },
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_svg() {
        let c = Chart {
            title: "t <&>",
            y_label: "y",
            x_labels: vec!["a".into(), "b".into()],
            series: vec![("s".into(), vec![Some(1.0), Some(1000.0)]), ("u".into(), vec![None, Some(5.0)])],
            log_y: true,
            bars: false,
        };
        let svg = c.render();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        let bars = Chart { bars: true, log_y: false, ..c }.render();
        assert_eq!(bars.matches("<title>").count(), 3);
    }
}
