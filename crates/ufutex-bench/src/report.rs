//! `report`: every workload at one scale, each in a fresh child process (so one workload's
//! table sizes, PR_FUTEX_HASH settings and thread counts never leak into the next), merged
//! into one document: report.md, report.json and SVG plots, plus the goals judged.

use crate::competitor::{UfutexC, NAMES};
use crate::export::{json::Json, markdown::Markdown, svg::Plots, Exporter};
use crate::line_trip::LineTrips;
use crate::progress::Progress;
use crate::result::{Bench, Document};
use crate::workloads::checked_output;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One child run: a label and its arguments.
struct Step {
    label: &'static str,
    args: Vec<String>,
}

fn step(label: &'static str, args: &str) -> Step {
    Step { label, args: args.split_whitespace().map(String::from).collect() }
}

fn steps(quick: bool, scale: f64) -> Vec<Step> {
    let t = |full: f64, q: f64| format!("{:.3}", if quick { q } else { full } * scale);
    let n = |full: usize, q: usize| (((if quick { q } else { full }) as f64 * scale).ceil() as usize).max(1);
    let r = |full: usize| if quick { 2 } else { full };
    let sweep = if quick { "auto,2,64,2048,large" } else { "auto,2,8,32,128,512,2048,large" };
    let (lock_threads, lock_cs) = if quick { ("1,8", "5,50,1us") } else { ("1,2,8", "5,10,20,50,1us") };
    // Issue 14: the C ABI beside the Rust path, where the report judges it.
    let with_c = with_c_abi();
    let mut steps = vec![
        step("fast paths", &format!("fastpath --impl {with_c} --reps {} --runtime {}", r(7), t(0.1, 0.03))),
        // Issue 14: the same loops in instructions per call (valgrind; skipped without it).
        step("fast paths, instructions", &format!("instructions --impl {with_c} --reps 1")),
        step("hash", &format!("hash --reps {} --runtime {}", r(5), t(0.5, 0.1))),
        // Judged against parking_lot_core (issue 14). Every call of both moves a bucket line
        // between the CPUs, whose cost (the header's line round trip) flips between ~90 and
        // ~370 ns on the forty-ninth session's host, often within a second: a repetition reads
        // ~12 M or ~27 M ops/s for either. More and shorter repetitions (the same time) give
        // each competitor's median more samples of that coin; the row stays a tie within the
        // noise (BENCHMARKS.md).
        step("hash --contend", &format!("hash --contend --reps {} --runtime {}", r(15), t(0.15, 0.1))),
        step(
            "hash, u8 words",
            &format!("hash --size 8 --impl ufutex,kernel,parking_lot_core --reps {} --runtime {}", r(3), t(0.3, 0.05)),
        ),
        step("hash slots sweep", &format!("hash --slots {sweep} --reps {} --runtime {}", r(3), t(0.2, 0.05))),
        step(
            "hash --contend slots sweep",
            &format!("hash --contend --slots {sweep} --reps {} --runtime {}", r(3), t(0.2, 0.05)),
        ),
        // Waking many (and requeue-then-wake, below): one repetition takes 0.2–6 ms for any
        // competitor (the scheduler decides), so these judged rows take many repetitions (each
        // is cheap) for a steadier median: one build's wake of 128 read 0.70× the kernel in a
        // report at 25, and 0.92×–1.13× in three runs of 100 (BENCHMARKS.md, twenty-seventh
        // session).
        step("wake 128", &format!("wake -n 128 --reps {}", r(100))),
        step("wake 128, one per call", &format!("wake -n 128 --nwake 1 --reps {}", r(9))),
        step("wake-parallel", &format!("wake-parallel -n 128 -w 2 --reps {}", r(100))),
        step("requeue 128", &format!("requeue -n 128 --reps {}", r(100))),
        step(
            "waitv failing",
            &format!(
                "waitv --impl {with_c} --modes first,last --entries 1,8,32,128,1024 --reps {} --runtime {}",
                r(5),
                t(0.05, 0.02)
            ),
        ),
        step(
            "waitv failing, 8, 16 and 64-bit words",
            &format!(
                "waitv --impl ufutex,{} --modes last8,last16,last64 --entries 128 --reps {} --runtime {}",
                UfutexC::NAME,
                r(5),
                t(0.05, 0.02)
            ),
        ),
        step("waitv latency", &format!("waitv --modes latency --entries 1,128,1024 --reps {}", r(7))),
        step("ping-pong pinned", &format!("ping-pong -p 1 --iters {} --reps {}", n(20_000, 2_000), r(5))),
        step("ping-pong 4 pairs", &format!("ping-pong -p 4 --iters {} --reps {}", n(5_000, 500), r(5))),
        step("schbench", &format!("schbench -m 2 -w 8 --no-resize --reps {} --runtime {}", r(7), t(0.7, 0.1))),
        // Issue 4's band (resized within 3% of fixed) against repetitions that swing 10–40%
        // here: the two domains alone beside the kernel, and twice the repetitions. At 7 in
        // the step above the judged median read 0.83×–1.08× across reports (BENCHMARKS.md).
        step(
            "schbench, resized vs fixed",
            &format!("schbench -m 2 -w 8 --impl kernel --reps {} --runtime {}", r(15), t(0.7, 0.1)),
        ),
        step(
            "lock",
            &format!("lock --threads {lock_threads} --cs {lock_cs} --reps {} --runtime {}", r(5), t(0.2, 0.05)),
        ),
        // ~8 s a repetition (perf's own runs, kernel and preload library). A quick report
        // takes one: two made this its longest step and left it within 10 s of its minute.
        step("perf bench futex", &format!("perf-bench --reps {}", if quick { 1 } else { 5 })),
        // A new process a sample (no goal): what a program's first call costs once it has a
        // second thread (BENCHMARKS.md, seventy-first session: it cost milliseconds then).
        step("first call of a process", &format!("first-call --reps {}", r(15))),
        // Process-shared futexes (issue #12): words in a MAP_SHARED memfd, against kernel-shared.
        step("fast paths, shared", &format!("fastpath --shared --reps {} --runtime {}", r(7), t(0.1, 0.03))),
        step("fast paths, shared, instructions", "instructions --shared --reps 1"),
        step("hash, shared", &format!("hash --shared --reps {} --runtime {}", r(5), t(0.5, 0.1))),
        // Pinned: the waker on one CPU, the waiter on the other, for every competitor alike.
        step("wake 1 waiter, shared", &format!("wake -n 1 --shared --pin --reps {}", r(15))),
        step("wake 1 waiter, shared, registered", &format!("wake -n 1 --shared --pin --register --reps {}", r(15))),
        // Waking many across the shared table (no goal): one call for all, which rings the
        // bucket's bell for the threads asleep on it.
        step("wake 128, shared", &format!("wake -n 128 --shared --reps {}", r(9))),
        // A requeue of 128 shared waiters, then the wake of the target (no goal): the moved
        // threads sleep on the bell of the bucket they came from, which the wake rings.
        step("requeue 128, shared", &format!("requeue -n 128 --shared --reps {}", r(15))),
        step(
            "ping-pong pinned, shared",
            &format!("ping-pong -p 1 --shared --iters {} --reps {}", n(20_000, 2_000), r(5)),
        ),
        step(
            "ping-pong 4 pairs, shared",
            &format!("ping-pong -p 4 --shared --iters {} --reps {}", n(5_000, 500), r(5)),
        ),
        step("recovery, shared", &format!("recovery --reps {}", r(7))),
        // Named semaphores between two processes (issue #15), against semop and POSIX sem_t.
        step("sem ping-pong pinned", &format!("sem-pingpong --iters {} --reps {}", n(20_000, 2_000), r(5))),
        step(
            "keyed (semget's table)",
            &if quick {
                format!("keyed --keys 1,100,1000 --threads 1,2 --runtime {} --reps 2 --processes 50", t(0.2, 0.05))
            } else {
                format!(
                    "keyed --keys 1,10,32,100,1000,10000,31900 --threads 1,2,4 --runtime {} --reps 3 --processes 100",
                    t(0.2, 0.05)
                )
            },
        ),
    ];
    if !quick {
        // perf's -S through the preload library's table mode (no goal; ~5 s a repetition).
        steps.push(step("perf bench futex, shared (table mode)", "perf-bench --shared --reps 5"));
        // Past semget's 32,000 sets: ufutex alone, for the flat goal (~20 s).
        steps.push(step(
            "keyed, 10⁶ keys",
            "keyed --impl ufutex-keyed --keys 1000000 --threads 1 --runtime 0.1 --reps 2 --processes 0",
        ));
    }
    steps
}

/// Every default competitor, and the C ABI's right after ufutex.
fn with_c_abi() -> String {
    let mut names: Vec<&str> = NAMES.to_vec();
    names.insert(1, UfutexC::NAME);
    names.join(",")
}

/// Run one child and read back its JSON.
fn run_child(exe: &Path, s: &Step, tmp: &Path, warmup: bool) -> io::Result<Vec<Bench>> {
    let mut cmd = Command::new(exe);
    cmd.args(&s.args).arg("--quiet").arg("--json").arg(tmp).stdout(Stdio::null()).stderr(Stdio::piped());
    if !warmup {
        cmd.arg("--no-warmup");
    }
    checked_output(&mut cmd, || s.args.join(" "))?;
    let doc: Document = serde_json::from_slice(&std::fs::read(tmp)?).map_err(io::Error::other)?;
    Ok(doc.benches)
}

pub fn run(
    out_dir: &Path,
    quick: bool,
    scale: f64,
    quiet: bool,
    warmup: bool,
    json: Option<&Path>,
) -> io::Result<Document> {
    std::fs::create_dir_all(out_dir)?;
    let exe = std::env::current_exe()?;
    let progress = Progress::new(quiet);
    let plan = steps(quick, scale);
    let tmp = out_dir.join(".step.json");
    let mut benches = Vec::new();
    let mut failures = Vec::new();
    let mut times = Vec::new();
    let started = Instant::now();
    let mut trips = LineTrips::default();
    for (i, s) in plan.iter().enumerate() {
        progress.show(s.label, i, plan.len());
        trips.sample();
        let t = Instant::now();
        match run_child(&exe, s, &tmp, warmup) {
            Ok(b) => benches.extend(b),
            Err(e) => failures.push(format!("step {:?} failed: {e}", s.label)),
        }
        times.push((s.label, t.elapsed()));
    }
    progress.clear();
    benches.push(step_times(&times, started.elapsed()));
    let _ = std::fs::remove_file(&tmp);
    trips.sample();
    let mut doc = Document::new(benches);
    doc.machine.line_trips = trips;
    doc.machine.pause_loops = crate::pause_exits::measure();
    doc.goals = crate::goals::judge(&doc.benches);
    if !failures.is_empty() {
        doc.benches.push(Bench::notes_only("report", "failed steps", failures.clone()));
    }
    let title = if quick { "ufutex-bench report (quick scale)" } else { "ufutex-bench report" };
    let exporters: Vec<Box<dyn Exporter>> = vec![
        Box::new(Markdown { name: "report.md".into(), title: Some(title.into()) }),
        Box::new(Json { name: "report.json".into() }),
        Box::new(Plots),
    ];
    for e in exporters {
        for o in e.export(&doc)? {
            std::fs::write(out_dir.join(&o.name), o.contents)?;
        }
    }
    if let Some(j) = json {
        Json::write(&doc, j)?;
    }
    if !failures.is_empty() {
        return Err(io::Error::other(format!(
            "the report is written, but {} step(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        )));
    }
    Ok(doc)
}

/// Where the report's time went: each step's wall time (the child process whole: start-up,
/// warm-up and repetitions), longest first, and the total.
fn step_times(times: &[(&str, Duration)], total: Duration) -> Bench {
    let mut sorted = times.to_vec();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut notes = vec![format!("{} steps in {:.1} s, longest first", times.len(), total.as_secs_f64())];
    notes.extend(sorted.iter().map(|(label, d)| format!("{label}: {:.1} s", d.as_secs_f64())));
    Bench::notes_only("report", "wall time per step", notes)
}

pub fn headline(doc: &Document) -> String {
    let mut s = String::from("| goal | ratio (per repetition) | target | status |\n|---|---:|---:|---|\n");
    for g in &doc.goals {
        let status = crate::export::goal_status(g, "met", "NOT met");
        s.push_str(&format!("| {} | {} | {} | {} |\n", g.goal, crate::export::goal_ratio(g), g.target, status));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_times_list_the_longest_first_after_the_total() {
        let ms = Duration::from_millis;
        let b = step_times(&[("hash", ms(1200)), ("lock", ms(9000)), ("fast paths", ms(300))], ms(10_600));
        assert_eq!(b.workload, "report");
        assert_eq!(b.notes, ["3 steps in 10.6 s, longest first", "lock: 9.0 s", "hash: 1.2 s", "fast paths: 0.3 s"]);
    }
}
