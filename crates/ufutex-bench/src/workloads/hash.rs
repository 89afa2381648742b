//! `hash`: perf bench futex-hash — T threads × F futexes each, every thread waits on its own
//! futexes with a value that never matches; ops/s per thread. `--contend` makes the bucket
//! locks real: sleepers wait on their own words with mask 1 while T threads wake those words
//! with mask 2, so every wake finds a bucket with sleepers, takes its lock, walks the chain
//! and wakes nobody. `--slots` sweeps the table size of a ufutex domain and of the kernel's
//! private hash (PR_FUTEX_HASH) side by side. `--shared` (perf's `-S`): the process-shared
//! competitors, every word in a `MAP_SHARED` memfd mapping.

use super::{skip_reason, Common, Gate, Padded, Waiters, STACK};
use crate::competitor::{dispatch, AnyCompetitor, Competitor, Kernel, Op, Ufutex, Word, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::shm::Words;
use crate::sys;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use ufutex::Slots;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub threads: usize,
    pub futexes: usize,
    /// `Some(sleepers)`: the bucket-lock mode with that many sleeping waiters.
    pub contend: Option<usize>,
    /// Word size in bits: 8, 16, 32 or 64.
    pub size: u32,
}

impl Params {
    fn case(&self) -> String {
        let mode = match self.contend {
            Some(s) => format!("contend, {s} sleepers"),
            None => "wait mismatch".into(),
        };
        format!("{mode}, threads={} futexes={} u{}", self.threads, self.futexes, self.size)
    }
}

/// One point of a table-size sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotPoint {
    Auto,
    Fixed(usize),
    Large,
}

impl SlotPoint {
    pub fn parse(s: &str) -> Result<SlotPoint, String> {
        match s.trim() {
            "auto" => Ok(SlotPoint::Auto),
            "large" => Ok(SlotPoint::Large),
            n => match n.parse::<usize>() {
                Ok(v) if v >= 2 && v.is_power_of_two() => Ok(SlotPoint::Fixed(v)),
                _ => Err(format!("slots {n:?}: expected a power of two ≥ 2, \"auto\" or \"large\"")),
            },
        }
    }

    pub fn label(self) -> String {
        match self {
            SlotPoint::Auto => "auto".into(),
            SlotPoint::Large => "large".into(),
            SlotPoint::Fixed(n) => n.to_string(),
        }
    }

    /// Sweep order: the kernel cannot go back to automatic sizing once set, and its global
    /// hash is final, so auto first and large last.
    fn order(self) -> (u8, usize) {
        match self {
            SlotPoint::Auto => (0, 0),
            SlotPoint::Fixed(n) => (1, n),
            SlotPoint::Large => (2, 0),
        }
    }
}

/// One repetition: ops/s per thread.
pub fn once<C: Competitor>(c: &C, p: Params, runtime: Duration, shared: bool) -> io::Result<f64> {
    match p.size {
        8 => once_sized::<C, AtomicU8>(c, p, runtime, shared),
        16 => once_sized::<C, AtomicU16>(c, p, runtime, shared),
        32 => once_sized::<C, AtomicU32>(c, p, runtime, shared),
        64 => once_sized::<C, AtomicU64>(c, p, runtime, shared),
        s => Err(io::Error::other(format!("word size {s} is not 8, 16, 32 or 64"))),
    }
}

fn once_sized<C: Competitor, W: Word>(c: &C, p: Params, runtime: Duration, shared: bool) -> io::Result<f64> {
    match p.contend {
        None => eagain::<C, W>(c, p, runtime, shared),
        Some(sleepers) => contend::<C, W>(c, p, sleepers, runtime, shared),
    }
}

fn eagain<C: Competitor, W: Word>(c: &C, p: Params, runtime: Duration, shared: bool) -> io::Result<f64> {
    let gate = Gate::default();
    let total = AtomicU64::new(0);
    let failed = Mutex::new(None);
    let elapsed = std::thread::scope(|s| -> io::Result<Duration> {
        for _ in 0..p.threads {
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, || {
                // Each thread's own words, made by that thread (as perf does).
                let words = match Words::<W>::new(p.futexes, shared) {
                    Ok(w) => w,
                    Err(e) => {
                        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        gate.enter();
                        return;
                    }
                };
                gate.enter();
                let mut ops = 0u64;
                while !gate.stopped() {
                    for w in words.iter() {
                        black_box(c.wait(black_box(w), 1, ANY));
                    }
                    ops += words.len() as u64;
                }
                total.fetch_add(ops, Ordering::Relaxed);
            })?;
        }
        Ok(gate.run_for(p.threads, runtime))
    })?;
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(total.load(Ordering::Relaxed) as f64 / p.threads as f64 / elapsed.as_secs_f64())
}

fn contend<C: Competitor, W: Word>(
    c: &C,
    p: Params,
    sleepers: usize,
    runtime: Duration,
    shared: bool,
) -> io::Result<f64> {
    let words = Words::<Padded<W>>::new(sleepers.max(1), shared)?;
    let waiters = Waiters::new(words.len());
    let gate = Gate::default();
    let total = AtomicU64::new(0);
    let woken = AtomicU64::new(0);
    let result = std::thread::scope(|s| -> io::Result<Duration> {
        for (i, w) in words.iter().enumerate() {
            let waiters = &waiters;
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                waiters.arrive();
                super::wait_while(c, &w.0, 0, 1);
                waiters.done(i);
            })?;
        }
        let settled = waiters.settle(c, words.len());
        let elapsed = settled.and_then(|()| {
            for _ in 0..p.threads {
                std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, || {
                    gate.enter();
                    let (mut ops, mut extra) = (0u64, 0u64);
                    while !gate.stopped() {
                        for w in words.iter() {
                            extra += c.wake(black_box(&w.0), 1, 2) as u64;
                        }
                        ops += words.len() as u64;
                    }
                    total.fetch_add(ops, Ordering::Relaxed);
                    woken.fetch_add(extra, Ordering::Relaxed);
                })?;
            }
            Ok(gate.run_for(p.threads, runtime))
        });
        // Always release the sleepers, even when something above failed.
        gate.run_for(0, Duration::ZERO);
        for w in words.iter() {
            w.0.set(1);
            c.wake(&w.0, usize::MAX, ANY);
        }
        elapsed
    })?;
    if woken.load(Ordering::Relaxed) != 0 {
        return Err(io::Error::other(format!("{}: a wake with a non-matching mask woke a sleeper", c.name())));
    }
    Ok(total.load(Ordering::Relaxed) as f64 / p.threads as f64 / result.as_secs_f64())
}

fn ops_for(p: &Params) -> Vec<Op> {
    let mut ops = vec![Op::WaitWake];
    if p.contend.is_some() {
        ops.push(Op::Mask);
    }
    if p.size != 32 {
        ops.push(Op::Sizes);
    }
    ops
}

fn metric() -> Metric {
    Metric::higher("ops/s/thread", "ops/s")
}

/// Every competitor of `--impl` at the table sizes they have.
pub fn run(common: &Common, p: Params) -> io::Result<Bench> {
    let comps = common.competitors()?;
    let plan =
        Plan { workload: "hash", case: common.case(p.case()), metrics: vec![metric()], baseline: common.baseline() };
    let ops = ops_for(&p);
    let (runtime, shared) = (common.runtime, common.shared);
    common.scheduler().run(
        plan,
        &comps,
        |c| c.name(),
        |c| skip_reason(c, &ops),
        |c| dispatch!(c, c => once(c, p, runtime, shared)).map(|v| vec![v]),
    )
}

/// The table-size sweep: a ufutex domain of each size against the kernel's private hash set to
/// the same size with PR_FUTEX_HASH, one bench per point. Changes this process's futex hash.
pub fn sweep(common: &Common, p: Params, points: &[SlotPoint]) -> io::Result<Vec<Bench>> {
    let mut points = points.to_vec();
    points.sort_by_key(|s| s.order());
    points.dedup();
    let want = |n: &str| common.impls.iter().any(|i| i == n || (n == "ufutex" && i == "ufutex-domain"));
    let ops = ops_for(&p);
    let mut kernel_was_set = false;
    let mut out = Vec::new();
    for point in points {
        let mut comps = Vec::new();
        let mut notes = Vec::new();
        let mut kernel_skip = None;
        if want("ufutex") {
            let slots = match point {
                SlotPoint::Auto => Slots::Auto,
                SlotPoint::Fixed(n) => Slots::Fixed(n),
                SlotPoint::Large => Slots::Large,
            };
            comps.push(AnyCompetitor::Ufutex(Ufutex::with_slots(slots)?.labelled("ufutex")));
        }
        if want("kernel") {
            kernel_skip = kernel_point(point, &mut kernel_was_set);
            if kernel_skip.is_none() {
                comps.push(AnyCompetitor::Kernel(Kernel::default()));
            }
        }
        let plan = Plan {
            workload: "hash-slots",
            case: format!("slots={}, {}", point.label(), p.case()),
            metrics: vec![metric()],
            baseline: "kernel",
        };
        let runtime = common.runtime;
        let mut bench = common.scheduler().run(
            plan,
            &comps,
            |c| c.name(),
            |c| skip_reason(c, &ops),
            |c| dispatch!(c, c => once(c, p, runtime, false)).map(|v| vec![v]),
        )?;
        let kernel_ran = kernel_skip.is_none();
        if let Some(reason) = kernel_skip {
            bench.skipped.push(crate::result::Skip { competitor: "kernel".into(), reason });
        }
        if kernel_ran && want("kernel") {
            if let Ok(n) = sys::futex_hash_get_slots() {
                let size = if n == 0 { "global hash".into() } else { format!("{n} slots") };
                notes.push(format!("kernel private hash after the runs: {size}"));
            }
        }
        for c in &comps {
            let domain = match c {
                AnyCompetitor::Ufutex(u) => u.domain(),
                AnyCompetitor::UfutexDefault(u) => u.domain(),
                _ => continue,
            };
            notes.push(format!("ufutex domain: {} slots after the runs", domain.slots()));
        }
        bench.notes = notes;
        out.push(bench);
    }
    Ok(out)
}

/// Set the kernel's private hash for `point`; `Some(reason)` when the kernel cannot run it.
fn kernel_point(point: SlotPoint, was_set: &mut bool) -> Option<String> {
    if let Some(r) = sys::kernel_support().futex2.clone().or_else(|| sys::kernel_support().futex_hash.clone()) {
        return Some(r);
    }
    let r = match point {
        SlotPoint::Auto if *was_set => {
            return Some("the kernel cannot return to automatic sizing once PR_FUTEX_HASH set a size".into())
        }
        SlotPoint::Auto => return None,
        SlotPoint::Fixed(n) => sys::futex_hash_set_slots(n),
        SlotPoint::Large => sys::futex_hash_set_slots(0),
    };
    *was_set = true;
    r.err().map(|e| format!("PR_FUTEX_HASH SET_SLOTS {}: {e}", point.label()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;
    use crate::workloads::some_repetition_counts;

    #[test]
    fn slot_points_parse_and_order() {
        assert_eq!(SlotPoint::parse("64"), Ok(SlotPoint::Fixed(64)));
        assert_eq!(SlotPoint::parse("large"), Ok(SlotPoint::Large));
        assert!(SlotPoint::parse("3").is_err());
        assert!(SlotPoint::parse("1").is_err());
        let mut v = [SlotPoint::Large, SlotPoint::Fixed(8), SlotPoint::Auto, SlotPoint::Fixed(2)];
        v.sort_by_key(|s| s.order());
        assert_eq!(v, [SlotPoint::Auto, SlotPoint::Fixed(2), SlotPoint::Fixed(8), SlotPoint::Large]);
    }

    #[test]
    fn eagain_loop_counts_mismatches_at_every_size() {
        let m = Mock::default();
        for size in [8, 16, 32, 64] {
            let p = Params { threads: 2, futexes: 4, contend: None, size };
            for shared in [false, true] {
                let counted = some_repetition_counts(10, || once(&m, p, Duration::from_millis(20), shared).unwrap());
                assert!(counted, "u{size} shared={shared}: no repetition counted a wait");
            }
        }
        assert!(m.waits() > 0);
        assert_eq!(m.queued(), Some(0));
    }

    #[test]
    fn contend_mode_wakes_nobody_and_releases_the_sleepers() {
        let m = Mock::default();
        let p = Params { threads: 2, futexes: 1, contend: Some(4), size: 32 };
        for shared in [false, true] {
            let counted = some_repetition_counts(10, || once(&m, p, Duration::from_millis(20), shared).unwrap());
            assert!(counted, "shared={shared}: no repetition counted a wake");
        }
        assert_eq!(m.queued(), Some(0));
    }
}
