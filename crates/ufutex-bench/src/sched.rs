//! The scheduler: runs one workload on every competitor, repetitions interleaved round-robin
//! (rep 1 of every competitor, then rep 2, ...), after one discarded warm-up run each, and
//! turns the samples into a [`Bench`].

use crate::progress::Progress;
use crate::result::{Bench, Metric, MetricResult, Skip};
use std::io;

pub struct Scheduler {
    pub repetitions: usize,
    pub warmup: bool,
    pub progress: Progress,
    /// Competitors left out before the run (e.g. no process-shared mode), added to every bench.
    pub left_out: Vec<Skip>,
}

/// The description of one bench before it runs.
pub struct Plan<'a> {
    pub workload: &'a str,
    pub case: String,
    pub metrics: Vec<Metric>,
    pub baseline: &'a str,
}

impl Scheduler {
    /// Run `run` on every item of `items` that `skip` does not exclude; `run` returns one value
    /// per metric of `plan`.
    pub fn run<T>(
        &self,
        plan: Plan<'_>,
        items: &[T],
        name: impl Fn(&T) -> String,
        skip: impl Fn(&T) -> Option<String>,
        mut run: impl FnMut(&T) -> io::Result<Vec<f64>>,
    ) -> io::Result<Bench> {
        let mut skipped = self.left_out.clone();
        let mut active = Vec::new();
        for item in items {
            match skip(item) {
                Some(reason) => skipped.push(Skip { competitor: name(item), reason }),
                None => active.push(item),
            }
        }
        let label = format!("{} {}", plan.workload, plan.case);
        if self.warmup {
            for (i, item) in active.iter().enumerate() {
                self.progress.show(&format!("{label} warm-up {}", name(item)), i, active.len());
                run(item)?;
            }
        }
        let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); plan.metrics.len()]; active.len()];
        let total = self.repetitions * active.len();
        for rep in 0..self.repetitions {
            for (i, item) in active.iter().enumerate() {
                self.progress.show(&format!("{label} {}", name(item)), rep * active.len() + i, total);
                let values = run(item)?;
                if values.len() != plan.metrics.len() {
                    return Err(io::Error::other(format!(
                        "{label}: {} values for {} metrics",
                        values.len(),
                        plan.metrics.len()
                    )));
                }
                for (m, v) in values.into_iter().enumerate() {
                    samples[i][m].push(v);
                }
            }
        }
        self.progress.clear();
        let metrics = plan
            .metrics
            .iter()
            .enumerate()
            .map(|(m, metric)| {
                let per = active.iter().zip(&samples).map(|(item, s)| (name(item), s[m].clone())).collect();
                MetricResult::new(metric.clone(), plan.baseline, per)
            })
            .collect();
        Ok(Bench {
            workload: plan.workload.into(),
            case: plan.case,
            repetitions: self.repetitions,
            metrics,
            skipped,
            notes: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_round_robin_and_records_skips() {
        let s = Scheduler { repetitions: 3, warmup: false, progress: Progress::disabled(), left_out: Vec::new() };
        let mut order = Vec::new();
        let plan = Plan { workload: "w", case: "c".into(), metrics: vec![Metric::lower("t", "ns")], baseline: "b" };
        let bench = s
            .run(
                plan,
                &["a", "b", "x"],
                |n| n.to_string(),
                |n| (*n == "x").then(|| "no".to_string()),
                |n| {
                    order.push(*n);
                    Ok(vec![if *n == "a" { 1.0 } else { 2.0 }])
                },
            )
            .unwrap();
        assert_eq!(order, ["a", "b", "a", "b", "a", "b"]);
        assert_eq!(bench.skipped, vec![Skip { competitor: "x".into(), reason: "no".into() }]);
        let m = &bench.metrics[0];
        assert_eq!(m.row("a").unwrap().samples, vec![1.0; 3]);
        assert_eq!(m.row("a").unwrap().ratio, Some(2.0));
    }

    #[test]
    fn wrong_value_count_is_an_error() {
        let s = Scheduler { repetitions: 1, warmup: true, progress: Progress::disabled(), left_out: Vec::new() };
        let plan = Plan { workload: "w", case: "c".into(), metrics: vec![Metric::lower("t", "ns")], baseline: "b" };
        assert!(s.run(plan, &[1], |_| "a".into(), |_| None, |_| Ok(vec![])).is_err());
    }
}
