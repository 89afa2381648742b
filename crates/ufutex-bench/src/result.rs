//! The one serializable result type every workload produces and every exporter reads.

use crate::line_trip::LineTrips;
use crate::pause_exits::PauseLoops;
use crate::stats;
use serde::{Deserialize, Serialize};

/// Which direction is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// What a workload measures, e.g. "call" in "ns", lower is better.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    pub better: Better,
    /// Whether competitors are compared on it (a ratio to the baseline). Not for a metric that
    /// is a ratio already, of one competitor's own numbers (e.g. its rate at T threads over its
    /// rate at one): a ratio of two such ratios says nothing of either competitor.
    #[serde(default = "compared")]
    pub compared: bool,
}

fn compared() -> bool {
    true
}

impl Metric {
    pub fn lower(name: &str, unit: &str) -> Self {
        Metric { name: name.into(), unit: unit.into(), better: Better::Lower, compared: true }
    }
    pub fn higher(name: &str, unit: &str) -> Self {
        Metric { name: name.into(), unit: unit.into(), better: Better::Higher, compared: true }
    }
    /// A ratio within each competitor, higher better, not compared across competitors.
    pub fn own_ratio(name: &str) -> Self {
        Metric { compared: false, ..Metric::higher(name, "×") }
    }
}

/// One competitor's samples of one metric (one sample per repetition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub competitor: String,
    pub samples: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many times better than the baseline's median (> 1 = better), if it ran.
    pub ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    pub metric: Metric,
    /// The competitor ratios are taken against (usually "kernel").
    pub baseline: String,
    pub rows: Vec<Row>,
}

impl MetricResult {
    pub fn new(metric: Metric, baseline: &str, samples: Vec<(String, Vec<f64>)>) -> Self {
        // No baseline for a metric competitors are not compared on: its rows carry no ratio.
        let base = samples.iter().find(|(c, _)| c == baseline && metric.compared).map(|(_, s)| stats::median(s));
        let rows = samples
            .into_iter()
            .map(|(competitor, s)| {
                let median = stats::median(&s);
                let ratio = base.filter(|b| b.is_finite() && *b > 0.0 && median > 0.0).map(|b| match metric.better {
                    Better::Lower => b / median,
                    Better::Higher => median / b,
                });
                Row { competitor, median, min: stats::min(&s), max: stats::max(&s), samples: s, ratio }
            })
            .collect();
        MetricResult { metric, baseline: baseline.into(), rows }
    }

    pub fn row(&self, competitor: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.competitor == competitor)
    }
}

/// A competitor that did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skip {
    pub competitor: String,
    pub reason: String,
}

/// One workload at one set of parameters, every competitor side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bench {
    pub workload: String,
    /// The parameters, e.g. "waiters=128".
    pub case: String,
    pub repetitions: usize,
    pub metrics: Vec<MetricResult>,
    pub skipped: Vec<Skip>,
    pub notes: Vec<String>,
}

impl Bench {
    /// A bench of the report's own that measured nothing: its notes alone.
    pub fn notes_only(workload: &str, case: &str, notes: Vec<String>) -> Bench {
        Bench {
            workload: workload.into(),
            case: case.into(),
            repetitions: 0,
            metrics: Vec::new(),
            skipped: Vec::new(),
            notes,
        }
    }

    pub fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics.iter().find(|m| m.metric.name == name)
    }
}

/// The machine a run was made on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub kernel: String,
    pub cpu_model: String,
    /// The CPU's vendor (`vendor_id` of /proc/cpuinfo: AuthenticAMD, GenuineIntel, ...).
    #[serde(default)]
    pub vendor: String,
    /// Family, model and stepping (/proc/cpuinfo), which tell apart hosts whose model name is
    /// the same ("Intel(R) Xeon(R) Processor" covers several generations).
    #[serde(default)]
    pub cpu_id: String,
    /// What ufutex calibrated on this host: ns per spin hint (its spins are budgeted in time).
    #[serde(default)]
    pub spin_hint_ns: u64,
    /// Whether ufutex's wakes leave out their fence here (`membarrier` works; else both sides
    /// of the protocol fence).
    #[serde(default)]
    pub wakes_fence_free: bool,
    /// Whether and where the hypervisor stops a loop of `pause`s (`pause_exits.rs`), measured
    /// by `report` once, after its steps; not measured elsewhere.
    #[serde(default)]
    pub pause_loops: PauseLoops,
    /// The cache-line round trips between two CPUs that `report` sampled between its steps
    /// (`line_trip.rs`); empty elsewhere.
    #[serde(default)]
    pub line_trips: LineTrips,
}

impl Machine {
    pub fn detect() -> Self {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| cpuinfo_field(&cpuinfo, name).unwrap_or("unknown").to_string();
        let (cpu_model, vendor) = (field("model name"), field("vendor_id"));
        let cpu_id =
            format!("family {}, model {}, stepping {}", field("cpu family"), field("model"), field("stepping"));
        let spin_hint_ns = ufutex::calibrated_spin_hint_ns();
        let wakes_fence_free = ufutex::wakes_fence_free();
        Machine {
            cpus: crate::sys::online_cpus(),
            kernel,
            cpu_model,
            vendor,
            cpu_id,
            spin_hint_ns,
            wakes_fence_free,
            pause_loops: PauseLoops::NotMeasured,
            line_trips: LineTrips::default(),
        }
    }
}

/// The value of the first line of /proc/cpuinfo text whose key is exactly `name` ("model" is
/// not "model name").
fn cpuinfo_field<'a>(cpuinfo: &'a str, name: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// Everything one command produced: what `--json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub tool: String,
    pub command: String,
    pub date_utc: String,
    pub machine: Machine,
    pub benches: Vec<Bench>,
    /// The project's goals, judged from the benches (filled by `report`).
    #[serde(default)]
    pub goals: Vec<Goal>,
}

/// One project goal and whether this run met it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub issue: String,
    pub goal: String,
    /// What was compared, in words with the medians.
    pub measured: String,
    /// The ratio judged (> 1 = ufutex better), if measured.
    pub ratio: Option<f64>,
    pub target: String,
    /// `None` when it could not be measured in this run.
    pub met: Option<bool>,
    /// The lowest and highest ratio of one repetition against the baseline's repetition run
    /// beside it, where the two were interleaved: how far the judged ratio moves within a run.
    #[serde(default)]
    pub spread: Option<(f64, f64)>,
    /// Whether those per-repetition ratios fall on both sides of the target (or, for a band,
    /// outside it while the medians fall inside): a verdict that may flip from run to run.
    #[serde(default)]
    pub straddles: bool,
}

impl Document {
    pub fn new(benches: Vec<Bench>) -> Self {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        Document {
            tool: format!("ufutex-bench {}", env!("CARGO_PKG_VERSION")),
            command,
            date_utc: utc_now(),
            machine: Machine::detect(),
            benches,
            goals: Vec::new(),
        }
    }
}

/// The current UTC time as "YYYY-MM-DD HH:MM:SS" (civil-from-days, no time crate).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_point_the_right_way() {
        let lower = MetricResult::new(
            Metric::lower("t", "ns"),
            "kernel",
            vec![("kernel".into(), vec![100.0]), ("x".into(), vec![10.0, 20.0, 30.0])],
        );
        assert_eq!(lower.row("x").unwrap().ratio, Some(5.0));
        assert_eq!(lower.row("x").unwrap().min, 10.0);
        let higher = MetricResult::new(
            Metric::higher("r", "ops/s"),
            "kernel",
            vec![("kernel".into(), vec![2.0]), ("x".into(), vec![8.0])],
        );
        assert_eq!(higher.row("x").unwrap().ratio, Some(4.0));
        let none = MetricResult::new(Metric::higher("r", "ops/s"), "kernel", vec![("x".into(), vec![8.0])]);
        assert_eq!(none.row("x").unwrap().ratio, None);
    }

    #[test]
    fn cpuinfo_keys_match_exactly() {
        let text = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\nmodel name\t: Intel(R) Xeon(R) Processor\nstepping\t: 1\n";
        assert_eq!(cpuinfo_field(text, "model"), Some("167"));
        assert_eq!(cpuinfo_field(text, "model name"), Some("Intel(R) Xeon(R) Processor"));
        assert_eq!(cpuinfo_field(text, "cpu family"), Some("6"));
        assert_eq!(cpuinfo_field(text, "microcode"), None);
    }

    #[test]
    fn utc_date_is_well_formed() {
        let d = utc_now();
        assert_eq!(d.len(), 19);
        assert!(d.starts_with("20"));
    }
}
