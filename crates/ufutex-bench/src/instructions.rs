//! `instructions`: the fast paths of `fastpath`, and the failing waitvs of one entry and of 128
//! that `waitv` times (for the competitors that have waitv), in instructions per call, counted
//! by valgrind's callgrind: a figure that does not move with the host's noise (issue 14), beside
//! the ns that do.
//!
//! Method: this binary re-executes itself as the hidden `count-calls` under
//! `valgrind --tool=callgrind`, one competitor per run, running exactly N iterations of every
//! [`Body`] (the loops `fastpath` times, with no clock read), then once more per body with 2N of
//! that one. Callgrind's `Collected : <Ir>` total of each run is read from its stderr, and
//!
//! ```text
//! per call = (Ir(that body 2N, the others N) − Ir(every body N)) / N
//! ```
//!
//! so start-up, one-time costs (first touches, lazily built tables) and the other bodies cancel.
//! The figure includes the loop around each call (the word's index, `black_box`): the store and
//! load `AfterStore` is set against is counted too, for scale.
//!
//! What it does not count: callgrind sees user space only. A competitor that makes a syscall
//! (kernel, atomic-wait) is counted up to its `syscall` instruction and from its return, not the
//! kernel's work. A syscall valgrind does not know (3.19 knows neither of futex2's `futex_wake`
//! and `futex_wait`) fails with ENOSYS without reaching the kernel: such a competitor is listed as
//! skipped, with the reason.

use crate::competitor::{dispatch, Op, UfutexC, SHARED_BASELINE};
use crate::progress::Progress;
use crate::result::{Bench, Metric, MetricResult, Skip};
use crate::workloads::fastpath::{self, Body, Path, Waitv};
use crate::workloads::{skip_reason, Common};
use std::ffi::OsString;
use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use ufutex::Slots;

/// Where this binary finds valgrind: this variable's value, else `valgrind` on the PATH.
pub const VALGRIND_ENV: &str = "UFUTEX_BENCH_VALGRIND";

/// The bench's case label (its table's heading in the report).
pub const CASE: &str = "fast paths, instructions per call (valgrind callgrind; user space only)";

/// The valgrind to run, and what `--version` says.
struct Valgrind {
    program: OsString,
    version: String,
}

fn find_valgrind() -> Result<Valgrind, String> {
    let program = std::env::var_os(VALGRIND_ENV).unwrap_or_else(|| "valgrind".into());
    let shown = program.to_string_lossy().into_owned();
    match Command::new(&program).arg("--version").stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => {
            Ok(Valgrind { version: String::from_utf8_lossy(&o.stdout).trim().to_string(), program })
        }
        Ok(o) => Err(format!("`{shown} --version` failed ({})", o.status)),
        Err(e) => Err(format!("valgrind not found ({shown}: {e}); .ci/setup installs it")),
    }
}

/// Callgrind's total of instructions executed, from its stderr: the first number of the
/// `==pid== Collected : 5128618` line, or, failing that, of `==pid== I   refs:      5,128,618`.
pub fn collected(stderr: &str) -> Option<u64> {
    let after =
        |key: &str| stderr.lines().find_map(|l| l.split_once(key)).and_then(|(_, v)| v.split_whitespace().next());
    after("Collected :").or_else(|| after("I   refs:")).and_then(|v| v.replace(',', "").parse().ok())
}

/// Instructions per iteration, when `doubled` ran `extra` iterations more than `base` and
/// nothing else differed.
pub fn per_call(base: u64, doubled: u64, extra: usize) -> Result<f64, String> {
    if extra == 0 {
        return Err("no extra calls to divide by".into());
    }
    if doubled <= base {
        return Err(format!("{extra} more calls counted {doubled} ≤ {base} instructions"));
    }
    Ok((doubled - base) as f64 / extra as f64)
}

/// An instruction count for words: to a tenth, no trailing ".0" (`68`, `67.3`).
pub fn instr(v: f64) -> String {
    format!("{}", (v * 10.0).round() / 10.0)
}

/// What a `count-calls` child prints on stdout, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// It ran every count; whether ufutex's wakes left out their fence in that process.
    Counted { fence_free: bool },
    /// The competitor cannot run there (under valgrind: a syscall it does not know).
    Unsupported(String),
}

impl Reply {
    pub fn line(&self) -> String {
        match self {
            Reply::Counted { fence_free } => format!("counted fence-free={fence_free}"),
            Reply::Unsupported(why) => format!("unsupported {why}"),
        }
    }

    pub fn parse(stdout: &str) -> Option<Reply> {
        let line = stdout.lines().rev().find(|l| !l.trim().is_empty())?.trim();
        if let Some(why) = line.strip_prefix("unsupported ") {
            return Some(Reply::Unsupported(why.to_string()));
        }
        line.strip_prefix("counted fence-free=")?.parse().ok().map(|fence_free| Reply::Counted { fence_free })
    }
}

/// `count-calls --calls wake=N,…`: the bodies and their iteration counts, in order.
pub fn parse_counts(s: &str) -> Result<Vec<(Body, usize)>, String> {
    let keys = || Body::ALL.map(Body::key).join(", ");
    s.split(',')
        .map(|pair| {
            let (k, n) = pair.trim().split_once('=').ok_or_else(|| format!("{pair:?} is not BODY=N"))?;
            let body = Body::by_key(k.trim()).ok_or_else(|| format!("{k:?} is not one of {}", keys()))?;
            let n = n.trim().parse().map_err(|_| format!("{n:?} is not a number"))?;
            Ok((body, n))
        })
        .collect()
}

fn counts_arg(counts: &[(Body, usize)]) -> String {
    counts.iter().map(|(b, n)| format!("{}={n}", b.key())).collect::<Vec<_>>().join(",")
}

/// The hidden `count-calls`: `counts` on the one competitor of `common`, then the [`Reply`].
pub fn child(common: &Common, counts: &[(Body, usize)]) -> io::Result<()> {
    let comps = common.competitors()?;
    let [c] = comps.as_slice() else {
        return Err(io::Error::other("count-calls runs exactly one competitor (--impl NAME)"));
    };
    let reply = match skip_reason(c, &[Op::WaitWake]) {
        Some(why) => Reply::Unsupported(why),
        None => {
            dispatch!(c, c => fastpath::exact(c, counts, common.shared))?;
            Reply::Counted { fence_free: ufutex::wakes_fence_free() }
        }
    };
    println!("{}", reply.line());
    Ok(())
}

/// One run of the child under callgrind.
struct Run<'a> {
    /// The competitor's `--impl` name.
    competitor: &'a str,
    counts: Vec<(Body, usize)>,
}

fn slots_arg(s: Slots) -> String {
    match s {
        Slots::Auto => "auto".into(),
        Slots::Large => "large".into(),
        Slots::Fixed(n) => n.to_string(),
    }
}

/// The last lines of a failed run's stderr that are the program's own (not valgrind's `==pid==`).
fn tail(stderr: &str) -> String {
    let own: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("==") && !l.trim().is_empty()).collect();
    own[own.len().saturating_sub(3)..].join(" / ")
}

fn counted(vg: &Valgrind, common: &Common, run: &Run<'_>) -> Result<(u64, Reply), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut cmd = Command::new(&vg.program);
    cmd.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"]).arg(exe);
    cmd.args(["count-calls", "--quiet", "--impl", run.competitor, "--domain-slots"]);
    cmd.arg(slots_arg(common.domain_slots)).arg("--calls").arg(counts_arg(&run.counts));
    if common.shared {
        cmd.arg("--shared");
    }
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("running valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("under valgrind ({}): {}", out.status, tail(&stderr)));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reply = Reply::parse(&stdout).ok_or_else(|| format!("unexpected reply under valgrind: {stdout:?}"))?;
    let ir = collected(&stderr).ok_or("no `Collected :` total in valgrind's output")?;
    Ok((ir, reply))
}

/// `f` over every item, on up to `workers` threads at once (a count does not depend on what
/// else runs), results in order.
fn parallel<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().map(|r| r.expect("every item ran")).collect()
}

/// What one repetition found for one competitor: per body, instructions per iteration.
type Figures = Vec<(Body, f64)>;

/// A competitor that runs here: its `--impl` name, the name it reports, and the bodies it can
/// run (a competitor without wait-on-many has no waitv to count).
struct Active {
    arg: String,
    name: String,
    bodies: Vec<Body>,
}

/// One repetition over `active`: the base runs, then one run per (competitor, doubled body).
/// The store and load are counted once, with the first competitor.
fn repetition(
    vg: &Valgrind,
    common: &Common,
    active: &[Active],
    n: usize,
    progress: &Progress,
) -> Vec<(Result<Figures, String>, Option<bool>)> {
    let bodies = |i: usize| -> Vec<Body> {
        active[i].bodies.iter().copied().filter(|b| *b != Body::StoreLoad || i == 0).collect()
    };
    let base_counts = |i: usize| bodies(i).into_iter().map(|b| (b, n)).collect::<Vec<_>>();
    let base: Vec<Run<'_>> =
        active.iter().enumerate().map(|(i, c)| Run { competitor: &c.arg, counts: base_counts(i) }).collect();
    let done = AtomicUsize::new(0);
    let total = active.iter().enumerate().map(|(i, _)| 1 + bodies(i).len()).sum::<usize>();
    let step = |r: &Run<'_>| {
        let k = done.fetch_add(1, Ordering::Relaxed);
        progress.show(&format!("instructions {} under valgrind", r.competitor), k, total);
        counted(vg, common, r)
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let base_results = parallel(&base, workers, step);
    // The doubled runs of the competitors whose base run counted.
    let mut doubled = Vec::new();
    for (i, r) in base_results.iter().enumerate() {
        if let Ok((_, Reply::Counted { .. })) = r {
            for b in bodies(i) {
                let counts = base_counts(i).into_iter().map(|(x, m)| (x, if x == b { 2 * m } else { m })).collect();
                doubled.push((i, b, Run { competitor: &active[i].arg, counts }));
            }
        }
    }
    let runs: Vec<&Run<'_>> = doubled.iter().map(|(_, _, r)| r).collect();
    let doubled_results = parallel(&runs, workers, |r| step(r));
    progress.clear();
    base_results
        .into_iter()
        .enumerate()
        .map(|(i, base)| match base {
            Err(e) => (Err(e), None),
            Ok((_, Reply::Unsupported(why))) => (
                Err(format!(
                    "under {}: {why}; it runs natively here (valgrind fails the syscalls it does not know without \
                     entering the kernel)",
                    vg.version
                )),
                None,
            ),
            Ok((ir, Reply::Counted { fence_free })) => {
                let mine = doubled.iter().zip(&doubled_results).filter(|((j, _, _), _)| *j == i);
                let figures = mine
                    .map(|((_, b, _), r)| {
                        let (ir2, _) = r.as_ref().map_err(Clone::clone)?;
                        Ok((*b, per_call(ir, *ir2, n)?))
                    })
                    .collect::<Result<Figures, String>>();
                (figures, Some(fence_free))
            }
        })
        .collect()
}

/// Count every competitor of `common` under valgrind: one bench, a column per path. Without
/// valgrind, every competitor is listed as skipped, with the reason (the run does not fail).
pub fn run(common: &Common, n: usize) -> io::Result<Vec<Bench>> {
    let comps = common.competitors()?;
    let mut skipped: Vec<Skip> =
        common.left_out.iter().map(|(c, r)| Skip { competitor: c.clone(), reason: r.clone() }).collect();
    let mut active = Vec::new();
    for (c, arg) in comps.iter().zip(&common.impls) {
        match skip_reason(c, &[Op::WaitWake]) {
            Some(reason) => skipped.push(Skip { competitor: c.name(), reason }),
            None => {
                let bodies = Body::ALL.into_iter().filter(|b| skip_reason(c, b.ops()).is_none()).collect();
                active.push(Active { arg: arg.clone(), name: c.name(), bodies })
            }
        }
    }
    let mut notes = vec![
        "callgrind counts user space only: for a competitor that makes a syscall (kernel, kernel-shared, \
         atomic-wait) the figure is the call's user-space side (wrapper, syscall instruction, result \
         handling), not the kernel's work"
            .to_string(),
        format!(
            "per call = (instructions of a run with 2N calls of that path − of a run with N) / N, N = {n}, \
             every run a fresh process; start-up and one-time costs cancel; the loop around the call is included"
        ),
    ];
    let vg = match find_valgrind() {
        Ok(vg) => vg,
        Err(why) => {
            skipped.extend(active.into_iter().map(|c| Skip { competitor: c.name, reason: why.clone() }));
            notes.insert(0, format!("not counted: {why}"));
            return Ok(vec![bench(common, &[], skipped, notes)]);
        }
    };
    notes.push(format!("counted by {}", vg.version));
    let progress = Progress::new(common.quiet);
    let mut samples: Vec<Vec<Figures>> = active.iter().map(|_| Vec::new()).collect();
    let mut fence_free = Vec::new();
    for _ in 0..common.repetitions {
        let results = repetition(&vg, common, &active, n, &progress);
        let mut keep = Vec::new();
        for ((c, mut s), (r, fence)) in active.drain(..).zip(samples.drain(..)).zip(results) {
            fence_free.extend(fence);
            match r {
                Ok(f) => {
                    s.push(f);
                    keep.push((c, s));
                }
                Err(reason) => skipped.push(Skip { competitor: c.name, reason }),
            }
        }
        (active, samples) = keep.into_iter().unzip();
    }
    let samples: Vec<(String, Vec<Figures>)> = active.into_iter().map(|c| c.name).zip(samples).collect();
    notes.extend(store_load_note(&samples));
    notes.extend(fence_note(&fence_free));
    notes.extend(c_abi_note(&samples));
    Ok(vec![bench(common, &samples, skipped, notes)])
}

fn store_load_note(samples: &[(String, Vec<Figures>)]) -> Option<String> {
    let figure = samples.iter().flat_map(|(_, reps)| reps).flatten().find(|(b, _)| *b == Body::StoreLoad)?.1;
    Some(format!(
        "for scale: the same loop with a store to the word and a load of another word instead of a call \
         counts {} instructions per iteration",
        instr(figure)
    ))
}

/// When the C ABI was counted: its failing wait's and waitv's reads of the caller's memory take
/// another path under valgrind (the fault-safe load is a call through a pointer there,
/// `ffi/fault.rs`; on Linux on x86-64 and aarch64 it is an inline load natively), so those counts
/// are above a native run's.
fn c_abi_note(samples: &[(String, Vec<Figures>)]) -> Option<String> {
    samples.iter().any(|(name, _)| name == UfutexC::NAME).then(|| {
        format!(
            "{}'s failing wait and waitv read the caller's memory through calls under valgrind{}: their counts \
             are that path's (its wakes read no word)",
            UfutexC::NAME,
            if cfg!(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))) {
                " and inline loads natively"
            } else {
                ", as natively here"
            }
        )
    })
}

/// Whether the counted wakes took the path a native run takes (membarrier works under valgrind).
fn fence_note(fence_free: &[bool]) -> Option<String> {
    let native = ufutex::wakes_fence_free();
    let under = *fence_free.first()?;
    let how = |f: bool| if f { "without a fence" } else { "with a fence" };
    Some(if fence_free.iter().all(|&f| f == native) {
        format!("ufutex's wakes ran {} under valgrind, as they do natively here", how(under))
    } else {
        format!(
            "ufutex's wakes ran {} under valgrind but {} natively: the wake figures are of the other path",
            how(under),
            how(native)
        )
    })
}

fn bench(common: &Common, samples: &[(String, Vec<Figures>)], skipped: Vec<Skip>, notes: Vec<String>) -> Bench {
    // Ratios against a competitor that stays in user space: a syscall's figure is only its part.
    let baseline = if common.shared { SHARED_BASELINE } else { "parking_lot_core" };
    let columns = Path::ALL
        .map(|path| (Body::Call(path), path.label()))
        .into_iter()
        .chain(Waitv::ALL.map(|w| (Body::Waitv(w), w.label())));
    let metrics = columns
        .map(|(body, label)| {
            // A competitor that did not run the body (no waitv) has no row.
            let per = samples
                .iter()
                .map(|(c, reps)| {
                    let v = reps.iter().filter_map(|f| f.iter().find(|(b, _)| *b == body)).map(|x| x.1);
                    (c.clone(), v.collect::<Vec<f64>>())
                })
                .filter(|(_, v)| !v.is_empty())
                .collect();
            MetricResult::new(Metric::lower(label, "instr"), baseline, per)
        })
        .collect();
    Bench {
        workload: "instructions".into(),
        case: common.case(CASE.into()),
        repetitions: common.repetitions,
        metrics,
        skipped,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callgrind 3.19's stderr at exit, as read.
    const SAMPLE: &str = "==20325== Callgrind, a call-graph generating cache profiler\n\
        ==20325== Command: ./target/release/ufutex-bench count-calls --impl ufutex\n\
        ==20325== \n\
        ==20325== For interactive control, run 'callgrind_control -h'.\n\
        ==20325== \n\
        ==20325== Events    : Ir\n\
        ==20325== Collected : 5128618\n\
        ==20325== \n\
        ==20325== I   refs:      5,128,618\n";

    #[test]
    fn the_total_is_read_from_callgrinds_stderr() {
        assert_eq!(collected(SAMPLE), Some(5_128_618));
        // More events than Ir: the first is Ir.
        assert_eq!(collected("==1== Events    : Ir Dr Dw\n==1== Collected : 900 300 200\n"), Some(900));
        // Without the Collected line (other tools' summary), the I refs line, commas dropped.
        assert_eq!(collected("==7== I   refs:      1,234,567\n"), Some(1_234_567));
        assert_eq!(collected("==7== Collected : many\n"), None);
        assert_eq!(collected("ufutex-bench: error: x\n"), None);
    }

    #[test]
    fn counts_read_as_integers_or_tenths() {
        assert_eq!((instr(68.0), instr(67.25), instr(0.04)), ("68".into(), "67.3".into(), "0".into()));
    }

    #[test]
    fn per_call_is_the_difference_over_the_extra_calls() {
        assert_eq!(per_call(5_000_000, 5_000_000 + 4096 * 17, 4096), Ok(17.0));
        assert_eq!(per_call(1000, 1150, 100), Ok(1.5));
        assert!(per_call(1000, 1000, 100).is_err());
        assert!(per_call(1000, 900, 100).is_err());
        assert!(per_call(1000, 2000, 0).is_err());
    }

    #[test]
    fn replies_round_trip() {
        for r in [
            Reply::Counted { fence_free: true },
            Reply::Counted { fence_free: false },
            Reply::Unsupported("futex_wake: ENOSYS (syscall missing on this kernel)".into()),
        ] {
            assert_eq!(Reply::parse(&format!("{}\n", r.line())), Some(r));
        }
        assert_eq!(Reply::parse(""), None);
        assert_eq!(Reply::parse("counted fence-free=maybe"), None);
    }

    #[test]
    fn counts_round_trip_and_bad_ones_say_why() {
        let counts =
            parse_counts("wake=4096, after-store=8192,wait-mismatch=1,waitv-one=2,waitv-last128=3,store-load=0")
                .unwrap();
        assert_eq!(counts[1], (Body::Call(Path::AfterStore), 8192));
        assert_eq!(counts[3], (Body::Waitv(Waitv::One), 2));
        assert_eq!(parse_counts(&counts_arg(&counts)).unwrap(), counts);
        assert!(parse_counts("wake").unwrap_err().contains("BODY=N"));
        assert!(parse_counts("nap=3").unwrap_err().contains("wake, after-store"));
        assert!(parse_counts("wake=x").unwrap_err().contains("number"));
    }

    #[test]
    fn parallel_keeps_the_order() {
        let items: Vec<usize> = (0..17).collect();
        assert_eq!(parallel(&items, 3, |x| x * 2), items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(parallel(&[] as &[usize], 2, |x| *x).is_empty());
    }

    #[test]
    fn the_bench_has_a_column_per_path_and_the_store_load_in_a_note() {
        let figures = vec![
            (Body::Call(Path::WakeNoWaiters), 20.0),
            (Body::Call(Path::AfterStore), 21.0),
            (Body::Call(Path::WaitMismatch), 25.0),
            (Body::Waitv(Waitv::One), 40.0),
            (Body::Waitv(Waitv::Last128), 900.0),
            (Body::StoreLoad, 6.0),
        ];
        let no_waitv: Vec<(Body, f64)> =
            figures.iter().copied().filter(|(b, _)| !matches!(b, Body::Waitv(_))).collect();
        let samples = vec![
            ("ufutex".to_string(), vec![figures.clone(), figures]),
            ("atomic-wait".to_string(), vec![no_waitv.clone(), no_waitv]),
        ];
        let common = Common {
            repetitions: 2,
            runtime: std::time::Duration::from_millis(1),
            impls: vec!["ufutex".into()],
            domain_slots: Slots::Auto,
            quiet: true,
            warmup: false,
            shared: false,
            left_out: Vec::new(),
        };
        let b = bench(&common, &samples, Vec::new(), Vec::new());
        let labels: Vec<&str> = b.metrics.iter().map(|m| m.metric.name.as_str()).collect();
        assert_eq!(labels, [Path::ALL.map(Path::label).as_slice(), &Waitv::ALL.map(Waitv::label)].concat());
        // The waitv columns: a row for each competitor that counted one.
        for (w, want) in [(Waitv::One, 40.0), (Waitv::Last128, 900.0)] {
            let waitv = b.metric(w.label()).unwrap();
            assert_eq!(waitv.row("ufutex").map(|r| r.median), Some(want));
            assert!(waitv.row("atomic-wait").is_none(), "no waitv, no row");
        }
        let wait = b.metric("wait, value mismatch").unwrap().row("ufutex").unwrap();
        assert_eq!((wait.samples.clone(), wait.min, wait.max), (vec![25.0, 25.0], 25.0, 25.0));
        assert!(store_load_note(&samples).unwrap().contains("counts 6 instructions"));
        assert_eq!(c_abi_note(&samples), None, "no C ABI counted");
        let with_c = vec![(UfutexC::NAME.to_string(), vec![vec![(Body::Call(Path::WaitMismatch), 60.0)]])];
        assert!(c_abi_note(&with_c).unwrap().starts_with("ufutex-c's failing wait and waitv read the caller's memory"));
    }
}
