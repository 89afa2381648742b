//! Markdown: one table per bench (median [min .. max] and the ratio to the baseline per
//! metric), what was skipped and why, notes; and the goals table when the document has goals.

use super::{goal_ratio, goal_status, num, ratio, Exporter, Output};
use crate::result::{Bench, Document};
use std::fmt::Write;
use std::io;

pub struct Markdown {
    pub name: String,
    /// Heading and preamble (the report's); none for a single workload.
    pub title: Option<String>,
}

pub fn bench_table(b: &Bench) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### {} — {}\n", b.workload, b.case);
    if !b.metrics.is_empty() {
        measured_table(&mut s, b);
    }
    for k in &b.skipped {
        let _ = writeln!(s, "- skipped **{}**: {}", k.competitor, k.reason);
    }
    for n in &b.notes {
        let _ = writeln!(s, "- {n}");
    }
    s.push('\n');
    s
}

/// The medians, spreads and ratios of a bench that measured something, and how many
/// repetitions.
fn measured_table(s: &mut String, b: &Bench) {
    let mut head = String::from("| competitor |");
    let mut rule = String::from("|---|");
    for m in &b.metrics {
        let _ = write!(head, " {} ({}) median [min .. max] |", m.metric.name, m.metric.unit);
        rule.push_str("---:|");
        if m.metric.compared {
            let _ = write!(head, " × {} |", m.baseline);
            rule.push_str("---:|");
        }
    }
    let _ = writeln!(s, "{head}\n{rule}");
    let names: Vec<&str> =
        b.metrics.first().map(|m| m.rows.iter().map(|r| r.competitor.as_str()).collect()).unwrap_or_default();
    for name in names {
        let mut line = format!("| {name} |");
        for m in &b.metrics {
            let row = m.row(name);
            match row {
                Some(r) => {
                    let _ = write!(line, " {} [{} .. {}] |", num(r.median), num(r.min), num(r.max));
                }
                None => line.push_str(" – |"),
            }
            if m.metric.compared {
                let _ = write!(line, " {} |", ratio(row.and_then(|r| r.ratio)));
            }
        }
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(
        s,
        "\n{} repetitions per competitor, interleaved; ratio > 1 means better than the baseline.",
        b.repetitions
    );
}

fn goals(doc: &Document) -> String {
    let mut s = String::from(
        "## Goals\n\nThe ratio is judged on the medians; in parentheses, the lowest and highest ratio of one \
         repetition against the baseline's repetition run beside it.\n\n\
         | issue | goal | measured (ufutex vs baseline) | ratio (per repetition) | target | status |\n\
         |---|---|---|---:|---:|---|\n",
    );
    for g in &doc.goals {
        let status = goal_status(g, "goal met", "**goal not met**");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            g.issue,
            g.goal,
            g.measured,
            goal_ratio(g),
            g.target,
            status
        );
    }
    s.push('\n');
    s
}

/// Every skip once per (workload, competitor, reason), with the cases it covered.
fn skipped_summary(doc: &Document) -> String {
    let mut groups: Vec<(String, String, String, Vec<String>)> = Vec::new();
    for b in &doc.benches {
        for k in &b.skipped {
            match groups.iter_mut().find(|g| g.0 == b.workload && g.1 == k.competitor && g.2 == k.reason) {
                Some(g) => g.3.push(b.case.clone()),
                None => groups.push((b.workload.clone(), k.competitor.clone(), k.reason.clone(), vec![b.case.clone()])),
            }
        }
    }
    let mut s = String::new();
    for (workload, competitor, reason, cases) in groups {
        let _ = writeln!(s, "- {workload}, **{competitor}**: {reason} ({} case(s): {})", cases.len(), cases.join("; "));
    }
    s
}

impl Exporter for Markdown {
    fn export(&self, doc: &Document) -> io::Result<Vec<Output>> {
        let mut s = String::new();
        if let Some(t) = &self.title {
            let m = &doc.machine;
            let _ = writeln!(s, "# {t}\n");
            let _ = writeln!(
                s,
                "- date (UTC): {}\n- command: `{}`\n- machine: {} CPUs, {} ({}, {}), Linux {}\n- calibrated by ufutex: {} ns per spin hint; wakes {}\n- loops of `pause`: {}\n- a cache line to the other CPU and back: {}\n- {}\n",
                doc.date_utc,
                doc.command,
                m.cpus,
                m.cpu_model,
                m.vendor,
                m.cpu_id,
                m.kernel,
                m.spin_hint_ns,
                if m.wakes_fence_free { "without a fence (membarrier works)" } else { "with a fence (no membarrier)" },
                m.pause_loops.describe(),
                m.line_trips.describe(),
                doc.tool
            );
            if !doc.goals.is_empty() {
                s.push_str(&goals(doc));
            }
            let skipped = skipped_summary(doc);
            if !skipped.is_empty() {
                let _ = writeln!(s, "## Skipped, and why\n\n{skipped}");
            }
            s.push_str("## Results\n\n");
        }
        for b in &doc.benches {
            s.push_str(&bench_table(b));
        }
        Ok(vec![Output { name: self.name.clone(), contents: s }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Metric, MetricResult, Skip};

    #[test]
    fn tables_show_medians_spread_ratios_and_skips() {
        let mut b = Bench {
            workload: "w".into(),
            case: "c=1".into(),
            repetitions: 2,
            metrics: vec![MetricResult::new(
                Metric::lower("call", "ns"),
                "kernel",
                vec![("kernel".into(), vec![300.0, 310.0]), ("ufutex".into(), vec![3.0, 4.0])],
            )],
            skipped: vec![Skip { competitor: "x".into(), reason: "no waitv".into() }],
            notes: vec!["a note".into()],
        };
        let t = bench_table(&b);
        assert!(t.contains("| ufutex | 3.50 [3.00 .. 4.00] | 87.1× |"), "{t}");
        assert!(t.contains("- skipped **x**: no waitv"));
        assert!(t.contains("- a note"));
        b.case = "c=2".into();
        let mut doc = Document::new(vec![b.clone(), b]);
        doc.benches[0].case = "c=1".into();
        let s = skipped_summary(&doc);
        assert_eq!(s.lines().count(), 1, "{s}");
        assert!(s.contains("(2 case(s): c=1; c=2)"), "{s}");
    }

    #[test]
    fn a_ratio_within_each_competitor_gets_no_baseline_column() {
        let samples = || vec![("kernel".to_string(), vec![1.0, 1.2]), ("ufutex".to_string(), vec![1.8, 2.0])];
        let b = Bench {
            workload: "w".into(),
            case: "threads=2".into(),
            repetitions: 2,
            metrics: vec![
                MetricResult::new(Metric::higher("rate", "ops/s"), "kernel", samples()),
                MetricResult::new(Metric::own_ratio("vs 1 thread"), "kernel", samples()),
            ],
            skipped: vec![],
            notes: vec![],
        };
        assert_eq!(b.metrics[1].row("ufutex").unwrap().ratio, None);
        let t = bench_table(&b);
        assert!(
            t.contains("| rate (ops/s) median [min .. max] | × kernel | vs 1 thread (×) median [min .. max] |\n"),
            "{t}"
        );
        assert!(t.contains("|---|---:|---:|---:|\n"), "{t}");
        assert!(t.contains("| ufutex | 1.90 [1.80 .. 2.00] | 1.73× | 1.90 [1.80 .. 2.00] |\n"), "{t}");
    }

    #[test]
    fn a_bench_that_measured_nothing_is_its_notes_alone() {
        let b = Bench {
            workload: "report".into(),
            case: "wall time per step".into(),
            repetitions: 0,
            metrics: vec![],
            skipped: vec![],
            notes: vec!["2 steps in 1.0 s, longest first".into()],
        };
        assert_eq!(bench_table(&b), "### report — wall time per step\n\n- 2 steps in 1.0 s, longest first\n\n");
    }
}
