//! SVG plots, drawn with `plotters` (SVG backend only): line charts (slots sweep, waitv
//! entries, lock critical-section sweep) and grouped bar charts (ping-pong, fairness). Log
//! scale where values span decades.

use super::{num, Exporter, Output};
use crate::result::{Bench, Document};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::io;

const SIZE: (u32, u32) = (760, 420);
/// Room right of the plot for the legend.
const LEGEND_W: u32 = 180;
const FONT: &str = "sans-serif";
/// Font sizes as `plotters` takes them: it draws text at size / 1.24 pixels (12 and 15 px).
const TEXT: f64 = 15.0;
const TITLE: f64 = 19.0;
/// Width of one category on the x axis, in axis units (integers, which `plotters` formats).
const CAT: i32 = 1000;
const COLORS: &[RGBColor] = &[
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// A series: a name and one value per x position (None = not measured).
pub type Series = (String, Vec<Option<f64>>);

/// One plot: categories along x (`x_labels`), one line or bar group per series.
pub struct Chart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub x_labels: Vec<String>,
    pub series: Vec<Series>,
    pub log_y: bool,
    pub bars: bool,
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

impl Chart<'_> {
    /// A value that can be drawn: finite, and positive on a log scale.
    fn plottable(&self, v: Option<f64>) -> Option<f64> {
        v.filter(|v| v.is_finite() && (*v > 0.0 || !self.log_y))
    }

    /// Whole decades on a log scale, 0 to 110% of the largest value otherwise.
    fn y_range(&self) -> (f64, f64) {
        let vals: Vec<f64> =
            self.series.iter().flat_map(|(_, v)| v.iter().filter_map(|v| self.plottable(*v))).collect();
        if vals.is_empty() {
            return (1.0, 10.0);
        }
        let (lo, hi) = vals.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        if self.log_y {
            let (lo, hi) = (lo.log10().floor(), hi.log10().ceil());
            (10f64.powf(lo), 10f64.powf(hi.max(lo + 1.0)))
        } else {
            (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 })
        }
    }

    /// The chart as an SVG document.
    ///
    /// # Errors
    ///
    /// Only if `plotters` reports a drawing error (the SVG backend writes to a string).
    pub fn render(&self) -> io::Result<String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            self.draw(&root).and_then(|()| root.present()).map_err(|e| io::Error::other(e.to_string()))?;
        }
        Ok(svg)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        // Category i spans x in [i, i + 1) * CAT; its label and its line points sit mid-way.
        let n = self.x_labels.len().max(1) as i32;
        let x = (0..n * CAT).with_key_points((0..n).map(|i| i * CAT + CAT / 2).collect());
        let (lo, hi) = self.y_range();
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(self.title, (FONT, TITLE))
            .margin(10)
            .margin_right(LEGEND_W)
            .x_label_area_size(30)
            .y_label_area_size(70);
        if self.log_y {
            self.plot(builder.build_cartesian_2d(x, (lo..hi).log_scale())?, lo)?;
        } else {
            self.plot(builder.build_cartesian_2d(x, lo..hi)?, lo)?;
        }
        // The legend, in the room right of the plot (plotters' own legend box is drawn inside
        // the plotting area, over the data).
        let left = (SIZE.0 - LEGEND_W) as i32 + 12;
        for (k, (name, _)) in self.series.iter().enumerate() {
            let (color, top) = (COLORS[k % COLORS.len()], 40 + 18 * k as i32);
            root.draw(&Rectangle::new([(left, top), (left + 12, top + 12)], color.filled()))?;
            root.draw(&Text::new(name.as_str(), (left + 18, top), (FONT, TEXT)))?;
        }
        Ok(())
    }

    /// Mesh and series on a chart whose y axis starts at `base`.
    fn plot<'a, DB, X, Y>(&self, mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>, base: f64) -> DrawResult<DB>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = i32> + ValueFormatter<i32>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let x_label = |x: &i32| self.x_labels.get((x / CAT) as usize).cloned().unwrap_or_default();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .x_label_formatter(&x_label)
            .y_label_formatter(&|v| num(*v))
            .y_desc(self.y_label)
            .label_style((FONT, TEXT))
            .axis_desc_style((FONT, TEXT))
            .draw()?;
        let bar_w = CAT * 8 / 10 / self.series.len().max(1) as i32;
        for (k, (_, vals)) in self.series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let points = vals.iter().enumerate().filter_map(|(i, v)| self.plottable(*v).map(|v| (i as i32 * CAT, v)));
            if self.bars {
                chart.draw_series(points.map(|(x, v)| {
                    let x0 = x + CAT / 10 + bar_w * k as i32;
                    Rectangle::new([(x0, base), (x0 + bar_w * 19 / 20, v)], color.filled())
                }))?;
            } else {
                let points: Vec<(i32, f64)> = points.map(|(x, v)| (x + CAT / 2, v)).collect();
                chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?;
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            }
        }
        Ok(())
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
        let mut add = |name: &str, chart: Chart<'_>| -> io::Result<()> {
            if chart.series.iter().any(|(_, v)| v.iter().any(Option::is_some)) {
                out.push(Output { name: name.into(), contents: chart.render()? });
            }
            Ok(())
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
        )?;
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
        )?;
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
        )?;
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
            )?;
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
            )?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Metric, MetricResult};

    /// Well-formed enough for a browser: one `<svg>` root, every opened tag closed in order,
    /// no stray `<` in text.
    fn assert_well_formed(svg: &str) {
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        let mut open = Vec::new();
        for tag in svg.split('<').skip(1) {
            let tag = tag.split_once('>').unwrap_or_else(|| panic!("unclosed <{tag}")).0;
            let name = tag.trim_start_matches('/').split_whitespace().next().unwrap_or("");
            if tag.starts_with('/') {
                assert_eq!(open.pop(), Some(name), "</{name}> closes the wrong tag");
            } else if !tag.ends_with('/') {
                open.push(name);
            }
        }
        assert!(open.is_empty(), "left open: {open:?}");
    }

    fn chart(log_y: bool, bars: bool) -> Chart<'static> {
        Chart {
            title: "t <&>",
            y_label: "y",
            x_labels: vec!["a".into(), "b".into()],
            series: vec![("s".into(), vec![Some(1.0), Some(1000.0)]), ("u".into(), vec![None, Some(5.0)])],
            log_y,
            bars,
        }
    }

    #[test]
    fn charts_are_well_formed_svg_with_labels_and_legend() {
        for (log_y, bars) in [(true, false), (false, true), (true, true), (false, false)] {
            let svg = chart(log_y, bars).render().unwrap();
            assert_well_formed(&svg);
            for text in ["t &lt;&amp;&gt;", ">\ny\n<", ">\na\n<", ">\nb\n<", ">\ns\n<", ">\nu\n<"] {
                assert!(svg.contains(text), "log_y={log_y} bars={bars}: no {text:?} in {svg}");
            }
        }
        // A log axis from 1 to 1000 labels its decades.
        let svg = chart(true, false).render().unwrap();
        assert!(["1.00", "10.0", "100", "1000"].iter().all(|t| svg.contains(&format!(">\n{t}\n<"))), "{svg}");
        // Bars: one per measured value (3), beside the 2 legend swatches and the background.
        let svg = chart(false, true).render().unwrap();
        let fills = |c: &RGBColor| svg.matches(&format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2)).count();
        assert_eq!((fills(&COLORS[0]), fills(&COLORS[1])), (3, 2));
    }

    #[test]
    fn empty_charts_still_render() {
        let c = Chart { series: Vec::new(), x_labels: Vec::new(), ..chart(true, false) };
        assert_well_formed(&c.render().unwrap());
    }

    fn bench(workload: &str, case: &str, metric: &str, values: &[(&str, f64)]) -> Bench {
        let samples = values.iter().map(|(c, v)| (c.to_string(), vec![*v])).collect();
        Bench {
            workload: workload.into(),
            case: case.into(),
            repetitions: 1,
            metrics: vec![MetricResult::new(Metric::lower(metric, "x"), values[0].0, samples)],
            skipped: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_report_gets_one_plot_per_sweep() {
        let two = [("ufutex", 2.0e8), ("kernel", 3.0e6)];
        let mut benches = Vec::new();
        for slots in ["auto", "64"] {
            benches.push(bench(
                "hash-slots",
                &format!("slots={slots}, wait mismatch, threads=2"),
                "ops/s/thread",
                &two,
            ));
            benches.push(bench("hash-slots", &format!("slots={slots}, contend, 64 sleepers"), "ops/s/thread", &two));
        }
        for e in [1, 128] {
            benches.push(bench(
                "waitv",
                &format!("mismatch first, entries={e}"),
                "call",
                &[("ufutex", 3.0), ("kernel", 200.0)],
            ));
            benches.push(bench(
                "waitv",
                &format!("mismatch last, entries={e}"),
                "call",
                &[("ufutex", 9.0), ("kernel", 900.0)],
            ));
        }
        benches.push(bench(
            "ping-pong",
            "pairs=1 on 2 CPUs, pinned",
            "round trip",
            &[("ufutex", 300.0), ("kernel", 7e4)],
        ));
        benches.push(bench("ping-pong", "pairs=1 on 2 CPUs, pinned, shared", "round trip", &[("ufutex-shared", 1.0)]));
        for t in [1, 8] {
            for cs in ["5", "1us"] {
                let mut b =
                    bench("lock", &format!("threads={t} cs={cs}"), "throughput", &[("ufutex", 5e7), ("std", 1e7)]);
                b.metrics.push(MetricResult::new(
                    Metric::higher("min/max", ""),
                    "ufutex",
                    vec![("ufutex".into(), vec![0.5]), ("std".into(), vec![0.25])],
                ));
                benches.push(b);
            }
        }
        let out = Plots.export(&Document::new(benches)).unwrap();
        let names: Vec<&str> = out.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            ["slots-sweep.svg", "waitv-entries.svg", "ping-pong.svg", "lock-cs-8threads.svg", "fairness-8threads.svg"]
        );
        let has = |o: &Output, texts: &[&str]| texts.iter().all(|t| o.contents.contains(&format!(">\n{t}\n<")));
        assert!(has(&out[0], &["mismatch ufutex", "contend kernel", "auto", "64"]));
        assert!(has(&out[1], &["first ufutex", "last kernel", "1", "128"]));
        assert!(has(&out[2], &["ufutex", "kernel", "pairs=1 on 2 CPUs"]) && !out[2].contents.contains("ufutex-shared"));
        assert!(has(&out[3], &["ufutex", "std", "5", "1us", "acquisitions/s"]));
        assert!(has(&out[4], &["ufutex", "std", "min/max per-thread rate"]));
        for o in &out {
            assert_well_formed(&o.contents);
        }
        assert!(Plots.export(&Document::new(Vec::new())).unwrap().is_empty(), "no data, no plots");
    }
}
