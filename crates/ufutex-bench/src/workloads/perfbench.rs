//! The kernel's own `perf bench futex` (hash, wake, wake-parallel, requeue), unmodified, run
//! as it is and under `LD_PRELOAD=libufutex_preload.so`, repetitions interleaved: a second
//! opinion on ours, from a tool we did not write. Each repetition is one run of perf; its
//! summary line is the sample.
//!
//! Needs `perf` (Debian's `linux-perf`) and the preload library, looked for beside this
//! executable (`cargo build --release -p ufutex-preload` puts it there) or at
//! `UFUTEX_PRELOAD_SO`; without either, the benchmark says why and is skipped.
//!
//! With `--shared`, perf's `-S`: its words are process-shared, so the kernel's runs use its
//! shared futex, and the preload library's send them to ufutex's shared table
//! (`UFUTEX_PRELOAD_SHARED=table`; perf's words are in its own memory, keyed by process and
//! address). The cases are named with `, shared`, as every `--shared` bench is.

use super::{checked_output, Common, SHARED_SUFFIX};
use crate::result::{Bench, Metric, MetricResult, Skip};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One perf benchmark: its arguments, what its summary line reports, and how to read it.
struct PerfCase {
    args: &'static str,
    metric: Metric,
    /// The summary line starts with this; the sample is the number after `before`.
    line: &'static str,
    before: &'static str,
}

/// The competitor that runs perf under `LD_PRELOAD=libufutex_preload.so`.
pub const PRELOAD: &str = "ufutex-preload";

fn cases() -> Vec<PerfCase> {
    vec![
        PerfCase {
            args: "hash -r 1",
            metric: Metric::higher("operations", "ops/s"),
            line: "Averaged",
            before: "Averaged",
        },
        PerfCase { args: "wake -t 16", metric: Metric::lower("wake all", "ms"), line: "Wokeup", before: "in" },
        PerfCase {
            args: "wake-parallel -t 16 -w 2",
            metric: Metric::lower("per-thread latency", "ms"),
            line: "Avg per-thread",
            before: "in",
        },
        PerfCase { args: "requeue -t 128", metric: Metric::lower("requeue all", "ms"), line: "Requeued", before: "in" },
    ]
}

/// Why a competitor that runs through the preload library cannot, when [`preload_library`] finds
/// none.
pub const PRELOAD_MISSING: &str =
    "libufutex_preload.so not found (cargo build --profile dist -p ufutex-preload, beside this binary)";

/// The preload library: `UFUTEX_PRELOAD_SO`, else beside this executable.
pub fn preload_library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("UFUTEX_PRELOAD_SO") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join("libufutex_preload.so")).filter(|p| p.is_file())
}

/// Sets `cmd` to run under the preload library `so` (its shared table if `table`), or under no
/// preload at all: whatever preload or preload setting the caller's environment carries is
/// cleared first, so that the kernel's run is the plain kernel and the library's run is ours.
pub fn preload_env(cmd: &mut Command, so: Option<&Path>, table: bool) {
    for var in ["LD_PRELOAD", "UFUTEX_PRELOAD", "UFUTEX_PRELOAD_SHARED", "UFUTEX_PRELOAD_STATS"] {
        cmd.env_remove(var);
    }
    if let Some(so) = so {
        cmd.env("LD_PRELOAD", so);
        if table {
            cmd.env("UFUTEX_PRELOAD_SHARED", "table");
        }
    }
}

/// Why this benchmark cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    let perf = Command::new("perf").arg("--version").output();
    if !perf.is_ok_and(|o| o.status.success()) {
        return Some("perf is not installed (Debian: linux-perf)".into());
    }
    if preload_library().is_none() {
        return Some(PRELOAD_MISSING.into());
    }
    None
}

/// The number in perf's summary line: the first number after the word `before`.
pub fn parse(output: &str, line: &str, before: &str) -> Option<f64> {
    let l = output.lines().rev().find(|l| l.trim_start().starts_with(line))?;
    let mut words = l.split_whitespace().skip_while(|w| *w != before).skip(1);
    words.find_map(|w| w.trim_end_matches(',').parse::<f64>().ok())
}

/// One perf run, under the preload library or not, on process-shared words (`-S`, the preload
/// library in its table mode) if `shared`: its sample.
fn once(case: &PerfCase, preload: Option<&PathBuf>, shared: bool) -> io::Result<f64> {
    let mut cmd = Command::new("perf");
    cmd.arg("bench").arg("futex").args(case.args.split_whitespace());
    if shared {
        cmd.arg("-S");
    }
    preload_env(&mut cmd, preload.map(PathBuf::as_path), shared);
    let out = checked_output(&mut cmd, || format!("perf bench futex {}", case.args))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse(&text, case.line, case.before)
        .ok_or_else(|| io::Error::other(format!("perf bench futex {}: no summary line in {text:?}", case.args)))
}

pub fn run(common: &Common) -> io::Result<Vec<Bench>> {
    let skip = unavailable();
    let so = preload_library();
    let shared = common.shared;
    let (flag, suffix) = if shared { (" -S", SHARED_SUFFIX) } else { ("", "") };
    let how = if shared {
        "perf's own benchmark, unmodified, on process-shared words (-S); ufutex through \
         LD_PRELOAD=libufutex_preload.so with UFUTEX_PRELOAD_SHARED=table (its shared table)"
    } else {
        "perf's own benchmark, unmodified; ufutex through LD_PRELOAD=libufutex_preload.so"
    };
    let mut benches = Vec::new();
    for case in cases() {
        let mut bench = Bench {
            workload: "perf-bench".into(),
            case: format!("perf bench futex {}{flag}{suffix}", case.args),
            repetitions: common.repetitions,
            metrics: Vec::new(),
            skipped: Vec::new(),
            notes: vec![how.into()],
        };
        if let Some(why) = &skip {
            bench.skipped.push(Skip { competitor: "kernel and ufutex-preload".into(), reason: why.clone() });
            benches.push(bench);
            continue;
        }
        let (mut kernel, mut ufutex) = (Vec::new(), Vec::new());
        for rep in 0..common.repetitions {
            // Alternate which goes first, so neither always runs on a warmer machine.
            if rep % 2 == 0 {
                kernel.push(once(&case, None, shared)?);
                ufutex.push(once(&case, so.as_ref(), shared)?);
            } else {
                ufutex.push(once(&case, so.as_ref(), shared)?);
                kernel.push(once(&case, None, shared)?);
            }
        }
        let samples = vec![(PRELOAD.to_string(), ufutex), ("kernel".to_string(), kernel)];
        bench.metrics.push(MetricResult::new(case.metric.clone(), "kernel", samples));
        benches.push(bench);
    }
    Ok(benches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_perfs_summary_lines() {
        let hash = "[thread  0] futexes: ...\n\nAveraged 4847872 operations/sec (+- 0.77%), total secs = 2\n";
        assert_eq!(parse(hash, "Averaged", "Averaged"), Some(4847872.0));
        let wake = "[Run 10]: Wokeup 16 of 16 threads in 0.2 ms\nWokeup 16 of 16 threads in 0.3378 ms (+-9.52%)\n";
        assert_eq!(parse(wake, "Wokeup", "in"), Some(0.3378));
        let par = "Avg per-thread latency (waking 8/16 threads) in 0.0904 ms (+-20.59%)\n";
        assert_eq!(parse(par, "Avg per-thread", "in"), Some(0.0904));
        assert_eq!(parse("nothing here", "Requeued", "in"), None);
    }

    /// The environment each run is given, in order: `None` is a variable cleared.
    fn env_of(so: Option<&Path>, table: bool) -> Vec<(String, Option<String>)> {
        let mut cmd = Command::new("true");
        preload_env(&mut cmd, so, table);
        let s = |o: &std::ffi::OsStr| o.to_string_lossy().into_owned();
        let mut env: Vec<_> = cmd.get_envs().map(|(k, v)| (s(k), v.map(s))).collect();
        env.sort();
        env
    }

    #[test]
    fn runs_clear_the_callers_preload() {
        let cleared = |k: &str| (k.to_string(), None);
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        let so = Path::new("/x/libufutex_preload.so");
        let kernel = ["LD_PRELOAD", "UFUTEX_PRELOAD", "UFUTEX_PRELOAD_SHARED", "UFUTEX_PRELOAD_STATS"];
        assert_eq!(env_of(None, false), kernel.map(cleared).to_vec());
        assert_eq!(env_of(None, true), kernel.map(cleared).to_vec());
        let private = vec![
            set("LD_PRELOAD", "/x/libufutex_preload.so"),
            cleared("UFUTEX_PRELOAD"),
            cleared("UFUTEX_PRELOAD_SHARED"),
            cleared("UFUTEX_PRELOAD_STATS"),
        ];
        assert_eq!(env_of(Some(so), false), private);
        let mut table = private;
        table[2] = set("UFUTEX_PRELOAD_SHARED", "table");
        assert_eq!(env_of(Some(so), true), table);
    }
}
