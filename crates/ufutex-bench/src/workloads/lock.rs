//! `lock`: mutex throughput and fairness (the lock-handoff seed's tables). T threads take one
//! lock in a loop; the critical section does K increments of a shared counter (or ~1 µs of
//! them; K = 0 is lock and unlock alone). Total lock acquisitions/s, and per thread:
//! slowest/fastest ratio and relative standard deviation; at one thread also the time per
//! operation, the uncontended lock + unlock. The locks, and the ufutex variants under other
//! spin and handoff policies, are in `lock_competitor.rs`.

use super::{Common, Gate, STACK};
use crate::lock_competitor::{BenchLock, LockEntry, LockKind, ParkingLotMutex, PthreadMutex, StdMutex, UfutexMutex};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::stats;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One repetition of `lock` under its policies (each lock's loop instantiated on its own).
fn run_once(lock: &LockEntry, p: Params, runtime: Duration) -> io::Result<Sample> {
    let _knobs = lock.knobs();
    match lock.kind {
        LockKind::Ufutex => once::<UfutexMutex>(p, runtime),
        LockKind::Pthread => once::<PthreadMutex>(p, runtime),
        LockKind::Std => once::<StdMutex>(p, runtime),
        LockKind::ParkingLot => once::<ParkingLotMutex>(p, runtime),
    }
}

/// The critical section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Increments(usize),
    /// About one microsecond of increments (calibrated once per process).
    Micro,
}

impl Section {
    pub fn parse(s: &str) -> Result<Section, String> {
        match s.trim() {
            "1us" | "1µs" => Ok(Section::Micro),
            n => n.parse().map(Section::Increments).map_err(|_| format!("critical section {n:?}: a number or \"1us\"")),
        }
    }

    pub fn label(self) -> String {
        match self {
            Section::Increments(k) => k.to_string(),
            Section::Micro => "1us".into(),
        }
    }

    fn increments(self) -> usize {
        match self {
            Section::Increments(k) => k,
            Section::Micro => increments_per_us(),
        }
    }
}

/// The critical section's body: `k` increments the optimiser cannot fold into one add. Not
/// inlined, so the calibration times exactly the code the lock holders run.
///
/// Volatile reads and writes of the counter, and nothing else. The body before stored the
/// pointer to the stack and loaded it back on every increment (`black_box(&mut *d)`): with this
/// very function unchanged, two builds ran ufutex's one-thread cells up to 15% apart, the time
/// piling up on the increment (`perf annotate`), so a cell's verdict depended on the build.
#[inline(never)]
fn critical(d: &mut u64, k: usize) {
    let p: *mut u64 = d;
    for _ in 0..k {
        // SAFETY: `p` comes from `d`, a live, aligned, exclusive reference for the whole call.
        unsafe { p.write_volatile(p.read_volatile() + 1) };
    }
}

/// How many increments take one microsecond here (best of a few timings of [`critical`]).
fn increments_per_us() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        let mut x = 0u64;
        let n = 200_000;
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                critical(&mut x, n);
                t.elapsed().as_nanos() as f64
            })
            .fold(f64::INFINITY, f64::min);
        ((n as f64 / (best / 1e3)) as usize).max(1)
    })
}

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub threads: usize,
    pub section: Section,
    /// One contended episode on the lock before the timed loop ([`contend_once`]).
    pub after_contention: bool,
}

/// One repetition's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub per_thread: Vec<f64>,
    pub total: f64,
}

impl Sample {
    /// One value per metric of [`metrics`] at this sample's thread count.
    fn values(&self) -> Vec<f64> {
        let (lo, hi) = (stats::min(&self.per_thread), stats::max(&self.per_thread));
        let mut v = vec![self.total, lo, if hi > 0.0 { lo / hi } else { 0.0 }, stats::rel_stddev_pct(&self.per_thread)];
        if self.per_thread.len() == 1 {
            v.push(if self.total > 0.0 { 1e9 / self.total } else { f64::NAN });
        }
        v
    }
}

/// A value aligned to (and so alone on) a pair of cache lines.
#[repr(align(128))]
struct Alone<T>(T);

/// One repetition: per-thread and total acquisitions/s; checks the counter is exact.
pub fn once<L: BenchLock>(p: Params, runtime: Duration) -> io::Result<Sample> {
    // On lines of its own, the same for every lock: not on this thread's stack among the
    // gate and the counts, at offsets that differ with each lock type's size.
    let lock = Box::new(Alone(L::default()));
    let lock = &lock.0;
    if p.after_contention {
        contend_once(lock)?;
    }
    let gate = Gate::default();
    let k = p.section.increments();
    let counts: Vec<AtomicU64> = (0..p.threads).map(|_| AtomicU64::new(0)).collect();
    let elapsed = std::thread::scope(|s| -> io::Result<Duration> {
        for count in &counts {
            let (lock, gate) = (&lock, &gate);
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                gate.enter();
                let mut n = 0u64;
                while !gate.stopped() {
                    lock.with(|d| critical(d, k));
                    n += 1;
                }
                count.store(n, Ordering::Relaxed);
            })?;
        }
        Ok(gate.run_for(p.threads, runtime))
    })?;
    let ops: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let mut counter = 0;
    lock.with(|d| counter = *d);
    let expected = ops.iter().sum::<u64>() * k as u64 + u64::from(p.after_contention);
    if counter != expected {
        return Err(io::Error::other(format!("lock lost updates: counter {counter}, expected {expected}")));
    }
    let secs = elapsed.as_secs_f64();
    let per_thread: Vec<f64> = ops.iter().map(|&n| n as f64 / secs).collect();
    Ok(Sample { total: per_thread.iter().sum(), per_thread })
}

/// A contended episode: this thread holds `lock` while another asks for it, long enough for
/// that one to give up spinning and sleep (every lock here sleeps within a few hundred µs),
/// then lets it in. The lock ends free, with whatever the episode left in it.
fn contend_once<L: BenchLock>(lock: &L) -> io::Result<()> {
    std::thread::scope(|s| {
        let contender = lock.with_result(|_| -> io::Result<_> {
            let h = std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, || lock.with(|d| *d += 1))?;
            std::thread::sleep(Duration::from_millis(20));
            Ok(h)
        })?;
        contender.join().map_err(|_| io::Error::other("the contender panicked"))
    })
}

/// The metrics at `threads` threads. One thread adds the time per operation: one uncontended
/// lock + unlock with the critical section (`--cs 0`: the pair alone).
pub fn metrics(threads: usize) -> Vec<Metric> {
    let mut m = vec![
        Metric::higher("throughput", "ops/s"),
        Metric::higher("slowest thread", "ops/s"),
        Metric::higher("min/max", "ratio"),
        Metric::lower("rel stddev", "%"),
    ];
    if threads == 1 {
        m.push(Metric::lower("time per op", "ns"));
    }
    m
}

/// Every lock of `common.impls` at every thread count × critical section; ratios against
/// `baseline`.
pub fn run(
    common: &Common,
    threads: &[usize],
    sections: &[Section],
    baseline: &str,
    after_contention: bool,
) -> io::Result<Vec<Bench>> {
    let locks: Vec<LockEntry> =
        common.impls.iter().map(|i| LockEntry::by_name(i)).collect::<Result<_, _>>().map_err(io::Error::other)?;
    let described: Vec<String> =
        locks.iter().filter_map(|l| l.describe().map(|d| format!("{}: {d}", l.name))).collect();
    let sched = common.scheduler();
    let runtime = common.runtime;
    let mut out = Vec::new();
    for &t in threads {
        for &section in sections {
            let p = Params { threads: t, section, after_contention };
            let after = if after_contention { ", after contention" } else { "" };
            let plan = Plan {
                workload: "lock",
                case: format!("threads={t} cs={}{after}", section.label()),
                metrics: metrics(t),
                baseline,
            };
            let mut bench = sched.run(
                plan,
                &locks,
                |l| l.name.clone(),
                |_| None,
                |l| run_once(l, p, runtime).map(|s| s.values()),
            )?;
            bench.notes.extend(described.iter().cloned());
            if t == 1 {
                bench.notes.push("time per op: one uncontended lock + unlock and the critical section".into());
            }
            if section == Section::Micro {
                bench.notes.push(format!("1us = {} increments on this machine", increments_per_us()));
            }
            out.push(bench);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::some_repetition_counts;

    #[test]
    fn every_lock_keeps_the_counter_exact() {
        let variants = ["ufutex-nohandoff", "ufutex-handoff-50us", "ufutex-handoff-1wakeup", "ufutex-spin-6x1-0y"];
        let names = LockKind::ALL.iter().map(|k| k.name()).chain(variants);
        for l in names.map(|n| LockEntry::by_name(n).unwrap()) {
            let p = Params { threads: 3, section: Section::Increments(5), after_contention: true };
            let s = run_once(&l, p, Duration::from_millis(20)).unwrap();
            assert_eq!(s.per_thread.len(), 3, "{}", l.name);
            assert!(s.total > 0.0, "{}", l.name);
        }
    }

    #[test]
    fn sections_parse() {
        assert_eq!(Section::parse("20"), Ok(Section::Increments(20)));
        assert_eq!(Section::parse("1us"), Ok(Section::Micro));
        assert!(Section::parse("x").is_err());
        assert!(Section::Micro.increments() >= 1);
    }

    #[test]
    fn one_thread_adds_the_time_per_op() {
        assert_eq!(metrics(1).len(), metrics(2).len() + 1);
        assert_eq!(metrics(1).last().unwrap().name, "time per op");
        let v = Sample { per_thread: vec![4e6], total: 4e6 }.values();
        assert_eq!(v.len(), metrics(1).len());
        assert_eq!(v.last(), Some(&250.0));
        assert_eq!(Sample { per_thread: vec![1.0, 2.0], total: 3.0 }.values().len(), metrics(2).len());
    }

    #[test]
    fn an_empty_section_runs_lock_and_unlock_alone() {
        assert_eq!(Section::parse("0"), Ok(Section::Increments(0)));
        let l = LockEntry::by_name("ufutex").unwrap();
        let p = Params { threads: 1, section: Section::Increments(0), after_contention: false };
        let ran = some_repetition_counts(20, || run_once(&l, p, Duration::from_millis(5)).unwrap().total);
        assert!(ran, "none of 20 repetitions ran a lock and unlock");
    }

    #[test]
    fn fairness_values_come_from_the_per_thread_rates() {
        let s = Sample { per_thread: vec![1.0, 2.0, 4.0], total: 7.0 };
        let v = s.values();
        assert_eq!(&v[..3], &[7.0, 1.0, 0.25]);
    }
}
