//! `keyed`: named cross-process objects created, looked up and removed by key, reproducing the
//! table of the kernel commit "ipc: optimize semget/shmget/msgget for lots of keys"
//! (0cfb6aee70bd), whose loop is `for (i = 0, k = BASE; i < KEYS; ++i) semget(k++, 1,
//! IPC_CREAT | 0600)`.
//!
//! Per KEYS value, competitor and repetition, six phases on one population of KEYS objects:
//! create (keys absent), lookup (the same loop again), lookup in random order, miss (keys known
//! absent: ENOENT), exclusive create of an existing key (EEXIST), remove. Each repetition runs
//! the six phases twice, each time on a fresh population: once with one clock read around each
//! loop (the total and ns per key; the four phases that can run again repeat a loop of fewer
//! than 1000 keys up to 1000 calls and take the mean per loop), once reading the clock after
//! every call (chained `Instant`s, one read per call) for each call's time (p99 and the slowest
//! call). Per KEYS value too, the seed's "in a new process per key" ([`process`]): a population,
//! then for up to `--processes` of its keys a new process (this binary executed again) that
//! reaches the object. Then concurrent lookups: with the largest KEYS present, T threads open
//! random keys for `--runtime`; at T > 1 one thread too, the two in turn in quarter slices,
//! and T threads' rate over one's is the phase's scaling, paired in time.
//!
//! Keys: `[base, base + KEYS)` hold the objects; `[base + max, base + max + KEYS)` (max = the
//! largest KEYS) are the misses. The whole `[base, base + 2 max)` must be empty when the run
//! starts, or it refuses to run; every population checks its own range again before it
//! creates. Objects are removed on every exit path: a `Drop` guard ([`Population`]) for errors
//! and panics, the competitor's signal cleanup for SIGINT/SIGTERM/SIGHUP. Nothing survives
//! SIGKILL; the next run then refuses and names the keys. The new processes create nothing.

mod process;

use super::{Common, Gate, STACK};
use crate::keyed_competitor::{dispatch_keyed, AnyKeyed, Get, Keyed};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::stats;
use crate::sysv::errno_name;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const BASELINE: &str = crate::keyed_competitor::KernelSemget::NAME;

#[derive(Debug, Clone)]
pub struct Params {
    /// KEYS values, in the order given.
    pub keys: Vec<usize>,
    /// Thread counts of the concurrent-lookup phase.
    pub threads: Vec<usize>,
    pub base: u64,
    /// New processes per KEYS value at most (keys sampled evenly); 0: no per-process phase.
    pub processes: usize,
}

impl Params {
    fn max_keys(&self) -> usize {
        self.keys.iter().copied().max().unwrap_or(0)
    }
}

/// One phase of a repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Create,
    Lookup,
    LookupRandom,
    Miss,
    Exclusive,
    Remove,
}

pub const PHASES: [Phase; 6] =
    [Phase::Create, Phase::Lookup, Phase::LookupRandom, Phase::Miss, Phase::Exclusive, Phase::Remove];

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Create => "create (keys absent, IPC_CREAT)",
            Phase::Lookup => "lookup (the same loop again, IPC_CREAT)",
            Phase::LookupRandom => "lookup, random order (IPC_CREAT)",
            Phase::Miss => "miss (keys absent, no IPC_CREAT → ENOENT)",
            Phase::Exclusive => "exclusive on an existing key (IPC_CREAT|IPC_EXCL → EEXIST)",
            Phase::Remove => "remove (IPC_RMID)",
        }
    }
}

/// The metrics of every phase bench.
fn phase_metrics() -> Vec<Metric> {
    vec![
        Metric::lower("total", "µs"),
        Metric::lower("per key", "ns"),
        Metric::lower("p99 call", "ns"),
        Metric::lower("max call", "µs"),
    ]
}

const TIMING: &str = "total and per key: the loop timed as a whole, less the time of an empty loop \
                      as long (two clock reads: most of a pass over one key otherwise); p99 and max \
                      call: a second population, each call timed with Instant";

/// A small xorshift generator: random keys without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    #[inline]
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// 0..n shuffled (Fisher–Yates).
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut rng = Rng::new(seed);
    for i in (1..n).rev() {
        v.swap(i, rng.below(i + 1));
    }
    v
}

/// The keys in `[first, first + len)` that are taken (any answer to an open but ENOENT),
/// at most `limit` of them, and how many there are.
fn taken<K: Keyed>(k: &K, first: u64, len: usize, limit: usize) -> (Vec<(u64, String)>, usize) {
    let mut shown = Vec::new();
    let mut count = 0;
    for key in first..first + len as u64 {
        let what = match k.get(key, Get::Open) {
            Err(libc::ENOENT) => continue,
            Ok(h) => format!("exists ({h:?})"),
            Err(e) => errno_name(e),
        };
        count += 1;
        if shown.len() < limit {
            shown.push((key, what));
        }
    }
    (shown, count)
}

/// An error unless `[first, first + len)` is empty: the run must own every object it removes.
fn refuse_if_taken<K: Keyed>(k: &K, first: u64, len: usize) -> io::Result<()> {
    let (shown, count) = taken(k, first, len, 3);
    if count == 0 {
        return Ok(());
    }
    let list: Vec<String> = shown.iter().map(|(key, what)| format!("{key:#x}: {what}")).collect();
    Err(io::Error::other(format!(
        "{}: {count} key(s) in the range {first:#x}..{:#x} already taken ({}{}); refusing to run, since \
         the run removes what it finds there. They may belong to another program, or to a run that was \
         killed (SIGKILL) before it could clean up: see `ipcs -s`, remove yours with `ipcrm -S <key>`, or \
         choose another range with --base",
        k.name(),
        first + len as u64,
        list.join(", "),
        if count > shown.len() { ", …" } else { "" },
    )))
}

/// This run's objects in `[first, first + handles.len())`: whatever is still here is removed
/// when it drops (errors, panics); the claim covers fatal signals.
struct Population<'k, K: Keyed> {
    k: &'k K,
    first: u64,
    handles: Vec<Option<K::Handle>>,
    /// Objects an unexpected success created outside `handles`.
    extra: Vec<K::Handle>,
    _claim: K::Claim,
}

impl<'k, K: Keyed> Population<'k, K> {
    /// Check the range empty and claim it; no object yet.
    fn new(k: &'k K, first: u64, n: usize) -> io::Result<Self> {
        refuse_if_taken(k, first, n)?;
        let claim = k.claim(first, n)?;
        Ok(Population { k, first, handles: vec![None; n], extra: Vec::new(), _claim: claim })
    }

    fn key(&self, i: usize) -> u64 {
        self.first + i as u64
    }

    /// Create every key, the seed's loop (`Get::Create` on absent keys): the loop's total, and
    /// with `laps` each call's ns.
    fn create(&mut self, laps: Option<&mut Vec<u64>>) -> io::Result<Duration> {
        let (k, first, handles) = (self.k, self.first, &mut self.handles);
        let mut bad: Surprise<K::Handle> = None;
        let t = timed(handles.len(), laps, |i| match k.get(first + i as u64, Get::Create) {
            Ok(h) => handles[i] = Some(h),
            Err(e) => drop(bad.get_or_insert((i, Err(e)))),
        });
        check(k.name(), Phase::Create, |i| self.key(i), bad)?;
        Ok(t)
    }
}

impl<K: Keyed> Drop for Population<'_, K> {
    fn drop(&mut self) {
        for h in self.handles.iter().flatten().chain(&self.extra) {
            let _ = self.k.remove(*h);
        }
    }
}

/// `op(i)` for i in 0..n: the loop's total, and with `laps` each call's ns (chained clock reads).
/// The total has the cost of timing an empty loop of `n` taken off ([`clock_cost`]): at one key
/// the two clock reads would otherwise be most of it.
#[inline(always)]
fn timed(n: usize, laps: Option<&mut Vec<u64>>, mut op: impl FnMut(usize)) -> Duration {
    match laps {
        None => {
            let start = Instant::now();
            for i in 0..n {
                op(i);
            }
            start.elapsed().saturating_sub(clock_cost(n))
        }
        Some(laps) => {
            laps.clear();
            laps.reserve(n);
            let start = Instant::now();
            let mut prev = start;
            for i in 0..n {
                op(i);
                let now = Instant::now();
                laps.push((now - prev).as_nanos() as u64);
                prev = now;
            }
            prev - start
        }
    }
}

/// What timing an empty loop of `n` costs here (two clock reads and the loop): the least of
/// five, measured next to each phase.
#[inline(never)]
fn clock_cost(n: usize) -> Duration {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for i in 0..n {
                std::hint::black_box(i);
            }
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// The first surprise of a phase: (index, what came back).
type Surprise<H> = Option<(usize, Result<H, i32>)>;

fn check<H: std::fmt::Debug>(name: &str, phase: Phase, key: impl Fn(usize) -> u64, s: Surprise<H>) -> io::Result<()> {
    match s {
        None => Ok(()),
        Some((i, r)) => {
            let got = match r {
                Ok(h) => format!("success ({h:?})"),
                Err(e) => errno_name(e),
            };
            Err(io::Error::other(format!("{name}: {}: key {:#x}: unexpected {got}", phase.label(), key(i))))
        }
    }
}

/// Where a repetition's keys are.
#[derive(Debug, Clone, Copy)]
struct Range {
    first: u64,
    miss_first: u64,
    n: usize,
}

/// Phase `p`'s laps, when each call is timed.
fn lap<'a>(laps: &'a mut Option<&mut [Vec<u64>]>, p: usize) -> Option<&'a mut Vec<u64>> {
    laps.as_deref_mut().map(|l| &mut l[p])
}

/// The fewest calls a phase that can run again (a lookup, a miss, an exclusive create that
/// fails) times in one piece: a loop over fewer keys runs that many times over, and counts as
/// its mean. One lookup of one key (a few ns) is otherwise below what the clock resolves.
const MIN_CALLS: usize = 1000;

/// [`timed`] for a phase that can run again: the loop over `n` keys, repeated up to
/// [`MIN_CALLS`] calls when the whole loop is timed; the mean per loop, in ns (a fraction: a
/// loop over one key takes a few).
fn timed_again(n: usize, laps: Option<&mut Vec<u64>>, mut op: impl FnMut(usize)) -> f64 {
    let rounds = if laps.is_some() || n == 0 { 1 } else { MIN_CALLS.div_ceil(n) };
    timed(n * rounds, laps, |j| op(j % n)).as_nanos() as f64 / rounds as f64
}

/// The six phases on a fresh population: each phase's total in ns, and with `laps` each call's
/// ns.
fn cycle<K: Keyed>(k: &K, r: Range, order: &[usize], mut laps: Option<&mut [Vec<u64>]>) -> io::Result<[f64; 6]> {
    let (name, n) = (k.name(), r.n);
    let mut pop = Population::new(k, r.first, n)?;
    let mut t = [0.0; 6];
    let key = |i: usize| r.first + i as u64;

    t[0] = pop.create(lap(&mut laps, 0))?.as_nanos() as f64;

    let expect: Vec<K::Handle> = pop.handles.iter().flatten().copied().collect();
    for (p, phase, order) in [(1, Phase::Lookup, None), (2, Phase::LookupRandom, Some(order))] {
        let mut bad = None;
        t[p] = timed_again(n, lap(&mut laps, p), |i| {
            let i = order.map_or(i, |o| o[i]);
            let r = k.get(key(i), Get::Create);
            if r != Ok(expect[i]) {
                bad.get_or_insert((i, r));
            }
        });
        check(name, phase, key, bad)?;
    }

    let mut bad = None;
    t[3] = timed_again(n, lap(&mut laps, 3), |i| {
        let r = k.get(r.miss_first + i as u64, Get::Open);
        if r != Err(libc::ENOENT) {
            bad.get_or_insert((i, r));
        }
    });
    // Not ours if it exists: never removed.
    check(name, Phase::Miss, |i| r.miss_first + i as u64, bad)?;

    let mut bad = None;
    let extra = &mut pop.extra;
    t[4] = timed_again(n, lap(&mut laps, 4), |i| {
        let r = k.get(key(i), Get::Exclusive);
        if r != Err(libc::EEXIST) {
            if let Ok(h) = r {
                extra.push(h);
            }
            bad.get_or_insert((i, r));
        }
    });
    check(name, Phase::Exclusive, key, bad)?;

    let mut bad: Surprise<K::Handle> = None;
    let handles = &mut pop.handles;
    t[5] = timed(n, lap(&mut laps, 5), |i| {
        if let Some(h) = handles[i] {
            match k.remove(h) {
                Ok(()) => handles[i] = None,
                Err(e) => drop(bad.get_or_insert((i, Err(e)))),
            }
        }
    })
    .as_nanos() as f64;
    check(name, Phase::Remove, |i| pop.key(i), bad)?;
    Ok(t)
}

/// One repetition: per phase, total µs and ns per key (whole loops), p99 ns and max µs (each
/// call timed), phase after phase.
fn once<K: Keyed>(k: &K, r: Range, order: &[usize]) -> io::Result<Vec<f64>> {
    let whole = cycle(k, r, order, None)?;
    let mut laps = vec![Vec::new(); PHASES.len()];
    cycle(k, r, order, Some(&mut laps))?;
    let mut v = Vec::with_capacity(4 * PHASES.len());
    for (total, laps) in whole.iter().zip(&laps) {
        let laps: Vec<f64> = laps.iter().map(|&ns| ns as f64).collect();
        v.push(total / 1e3);
        v.push(total / r.n as f64);
        v.push(stats::percentile(&laps, 99.0));
        v.push(stats::max(&laps) / 1e3);
    }
    Ok(v)
}

/// The bench of all six phases (4 metrics each, in phase order) as one bench per phase; the
/// notes go with the first.
fn split(all: Bench, keys: usize) -> Vec<Bench> {
    let per = phase_metrics().len();
    PHASES
        .iter()
        .enumerate()
        .map(|(p, phase)| Bench {
            workload: "keyed".into(),
            case: format!("keys={keys}, {}", phase.label()),
            repetitions: all.repetitions,
            metrics: all.metrics.get(p * per..(p + 1) * per).map(<[_]>::to_vec).unwrap_or_default(),
            skipped: all.skipped.clone(),
            // Once per KEYS value, under its first phase.
            notes: if p == 0 { all.notes.clone() } else { Vec::new() },
        })
        .collect()
}

/// T threads opening random keys of a population of `n` for `runtime`: total lookups/s and
/// lookups/s per thread (for T > 1 over the runtime's T-thread slices); for T > 1 also the total
/// against one thread's, both in this repetition on this population ([`SCALING`]).
fn lookups_once<K: Keyed>(k: &K, first: u64, n: usize, threads: usize, runtime: Duration) -> io::Result<Vec<f64>> {
    let mut pop = Population::new(k, first, n)?;
    pop.create(None)?;
    let expect: Vec<K::Handle> = pop.handles.iter().flatten().copied().collect();
    let rate = |t: usize, d: Duration| lookup_rate(k, first, &expect, t, d);
    if threads == 1 {
        let total = rate(1, runtime)?;
        return Ok(vec![total, total]);
    }
    // One thread and T threads in turn, in slices of a quarter of the runtime, one-T-T-one
    // twice: a host whose speed drifts during the repetition moves both sides alike.
    let slice = runtime / 4;
    let (mut one, mut many) = (0.0, 0.0);
    for _ in 0..2 {
        one += rate(1, slice)?;
        many += rate(threads, slice)? + rate(threads, slice)?;
        one += rate(1, slice)?;
    }
    let total = many / 4.0;
    Ok(vec![total, total / threads as f64, many / one])
}

/// What the concurrent phase at T > 1 threads adds to its two metrics: its total lookups/s over
/// one thread's on the same population, the two timed in turn within the repetition (one, T,
/// T, one, twice, a quarter of the runtime each). Paired in time: on the project's hosts the
/// L3 the process gets comes and goes within tenths of a second, and one thread's lookups over
/// a few MiB of slots moved 3× with it, so medians of separate repetitions, one thread's against
/// two's, read 0.94× in one report and 1.99× on the same build alone (BENCHMARKS.md,
/// twenty-second session).
pub const SCALING: &str = "vs 1 thread";

/// `threads` threads opening random keys among `expect`'s for `runtime`: lookups/s in all.
/// Every lookup must return the object's handle.
fn lookup_rate<K: Keyed>(
    k: &K,
    first: u64,
    expect: &[K::Handle],
    threads: usize,
    runtime: Duration,
) -> io::Result<f64> {
    let n = expect.len();
    let (gate, done, wrong) = (Gate::default(), AtomicU64::new(0), AtomicU64::new(0));
    let elapsed = std::thread::scope(|s| {
        let spawned = (0..threads).try_for_each(|t| {
            let (gate, done, wrong) = (&gate, &done, &wrong);
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                let mut rng = Rng::new(t as u64 + 1);
                let (mut ops, mut errs) = (0u64, 0u64);
                gate.enter();
                // At least one batch each: a thread the scheduler starts late still counts.
                loop {
                    for _ in 0..64 {
                        let i = rng.below(n);
                        errs += u64::from(k.get(first + i as u64, Get::Open) != Ok(expect[i]));
                    }
                    ops += 64;
                    if gate.stopped() {
                        break;
                    }
                }
                done.fetch_add(ops, Ordering::Relaxed);
                wrong.fetch_add(errs, Ordering::Relaxed);
            })?;
            io::Result::Ok(())
        });
        let elapsed = spawned.map(|()| gate.run_for(threads, runtime));
        // Always release the threads, even when a spawn failed.
        gate.run_for(0, Duration::ZERO);
        elapsed
    })?;
    if wrong.load(Ordering::Relaxed) != 0 {
        return Err(io::Error::other(format!(
            "{}: {} concurrent lookups did not return the object's handle",
            k.name(),
            wrong.load(Ordering::Relaxed)
        )));
    }
    Ok(done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64())
}

/// The `keyed-child` process of the per-process phase.
pub use process::child;

/// Every KEYS value (six benches each, and one of new processes unless `--processes 0`), then
/// one bench per thread count.
pub fn run(common: &Common, p: &Params) -> io::Result<Vec<Bench>> {
    let comps =
        common.impls.iter().map(|n| AnyKeyed::by_name(n).map_err(io::Error::other)).collect::<io::Result<Vec<_>>>()?;
    let max = p.max_keys();
    for c in &comps {
        if c.unsupported().is_none() {
            dispatch_keyed!(c, k => refuse_if_taken(k, p.base, 2 * max))?;
        }
    }
    let sched = common.scheduler();
    let exe = if p.processes > 0 { Some(std::env::current_exe()?) } else { None };
    let mut out = Vec::new();
    for &n in &p.keys {
        let r = Range { first: p.base, miss_first: p.base + max as u64, n };
        let order = permutation(n, n as u64);
        let plan = Plan { workload: "keyed", case: format!("keys={n}"), metrics: all_metrics(), baseline: BASELINE };
        let mut bench = sched.run(
            plan,
            &comps,
            |c| c.name().to_string(),
            |c| c.skip_reason(n),
            |c| dispatch_keyed!(c, k => once(k, r, &order)),
        )?;
        bench.notes.push(TIMING.into());
        bench.notes.extend(context(&comps, p, n));
        out.extend(split(bench, n));
        if let Some(exe) = &exe {
            let sample = process::sample(n, p.processes);
            let plan =
                Plan { workload: "keyed", case: process::case(n), metrics: process::metrics(), baseline: BASELINE };
            let mut bench = sched.run(
                plan,
                &comps,
                |c| c.name().to_string(),
                |c| c.skip_reason(n),
                |c| dispatch_keyed!(c, k => process::once(k, exe, r, &sample)),
            )?;
            bench.notes.extend(process::notes(n, sample.len()));
            out.push(bench);
        }
    }
    // The largest KEYS every runnable competitor has room for.
    let fits = |n: usize| comps.iter().all(|c| c.unsupported().is_some() || c.skip_reason(n).is_none());
    let present = p.keys.iter().copied().filter(|&n| fits(n)).max().unwrap_or(max);
    for &threads in &p.threads {
        let plan = Plan {
            workload: "keyed",
            case: format!(
                "concurrent lookups: keys={present} present, threads={threads}, random keys opened (no IPC_CREAT) \
                 for {:.2} s",
                common.runtime.as_secs_f64()
            ),
            metrics: concurrent_metrics(threads),
            baseline: BASELINE,
        };
        let runtime = common.runtime;
        out.push(sched.run(
            plan,
            &comps,
            |c| c.name().to_string(),
            |c| c.skip_reason(present),
            |c| dispatch_keyed!(c, k => lookups_once(k, p.base, present, threads, runtime)),
        )?);
    }
    Ok(out)
}

/// The concurrent phase's metrics at `threads` threads (see [`lookups_once`]).
fn concurrent_metrics(threads: usize) -> Vec<Metric> {
    let mut m = vec![Metric::higher("lookups", "lookups/s"), Metric::higher("per thread", "lookups/s")];
    if threads > 1 {
        m.push(Metric::own_ratio(SCALING));
    }
    m
}

fn all_metrics() -> Vec<Metric> {
    PHASES.iter().flat_map(|_| phase_metrics()).collect()
}

/// What a reader needs to judge a KEYS bench: the key ranges, the limits, the cold start.
fn context(comps: &[AnyKeyed], p: &Params, n: usize) -> Vec<String> {
    let mut notes = vec![format!(
        "keys {:#x}..{:#x}, misses {:#x}..{:#x}; the first population of the run (the warm-up, unless \
         --no-warmup) meets the tables cold; the seed measured right after a reboot",
        p.base,
        p.base + n as u64,
        p.base + p.max_keys() as u64,
        p.base + (p.max_keys() + n) as u64
    )];
    for c in comps {
        if let AnyKeyed::KernelSemget(k) = c {
            if let Some(l) = k.limits() {
                notes.push(format!(
                    "{}: SEMMNI {}, {} sets in use when the run started (/proc/sysvipc/sem)",
                    c.name(),
                    l.semmni,
                    l.sets_in_use
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyed_competitor::KernelSemget;

    #[test]
    fn permutations_are_permutations() {
        let mut v = permutation(1000, 7);
        assert_ne!(v, (0..1000).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
        assert_eq!(permutation(1, 1), [0]);
    }

    #[test]
    fn timed_loops_call_every_index_once() {
        let mut seen = Vec::new();
        let mut laps = Vec::new();
        let t = timed(5, Some(&mut laps), |i| seen.push(i));
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        assert_eq!(laps.len(), 5);
        assert_eq!(laps.iter().sum::<u64>(), t.as_nanos() as u64);
    }

    /// A base of this test's own, apart from other tests' and from the default.
    fn base(slot: u64) -> u64 {
        0x6000_0000 + u64::from(std::process::id() & 0xfff) * 0x1000 + slot * 0x100
    }

    fn sets_with_keys(first: u64, len: usize) -> usize {
        let text = std::fs::read_to_string("/proc/sysvipc/sem").unwrap_or_default();
        text.lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next()?.parse::<i64>().ok())
            .filter(|&key| (first as i64..(first + len as u64) as i64).contains(&key))
            .count()
    }

    #[test]
    fn a_repetition_reports_every_phase_and_leaves_nothing() {
        let k = KernelSemget::new();
        if k.unsupported().is_some() || k.short_of(8).is_some() {
            return;
        }
        let r = Range { first: base(0), miss_first: base(0) + 16, n: 8 };
        let v = once(&k, r, &permutation(8, 1)).unwrap();
        assert_eq!(v.len(), 24);
        assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{v:?}");
        assert_eq!(sets_with_keys(base(0), 32), 0);
        let l = lookups_once(&k, base(0), 8, 2, Duration::from_millis(5)).unwrap();
        assert!(l[0] > 0.0 && (l[1] - l[0] / 2.0).abs() < 1e-6 * l[0], "{l:?}");
        assert_eq!(sets_with_keys(base(0), 32), 0);
    }

    #[test]
    fn a_taken_key_is_refused_and_left_alone() {
        let k = KernelSemget::new();
        if k.unsupported().is_some() || k.short_of(4).is_some() {
            return;
        }
        let first = base(1);
        let stranger = k.get(first + 2, Get::Create).unwrap();
        let refused = Population::new(&k, first, 4).err();
        let in_cycle = cycle(&k, Range { first, miss_first: first + 2, n: 2 }, &[1, 0], None).err();
        let after = k.get(first + 2, Get::Open);
        k.remove(stranger).unwrap();
        let e = refused.expect("refused").to_string();
        assert!(e.contains("1 key(s)") && e.contains(&format!("{:#x}: exists", first + 2)), "{e}");
        // The stranger is a miss key here: the cycle stops there, and never removes it.
        let e = in_cycle.expect("a miss that exists").to_string();
        assert!(e.contains("miss") && e.contains("unexpected success"), "{e}");
        assert_eq!(after, Ok(stranger));
        assert_eq!(sets_with_keys(first, 16), 0);
    }

    #[test]
    fn split_gives_one_bench_per_phase() {
        use crate::result::MetricResult;
        let metrics = all_metrics()
            .into_iter()
            .enumerate()
            .map(|(i, m)| MetricResult::new(m, BASELINE, vec![(BASELINE.into(), vec![i as f64])]))
            .collect();
        let all = Bench {
            workload: "keyed".into(),
            case: "keys=3".into(),
            repetitions: 1,
            metrics,
            skipped: Vec::new(),
            notes: vec!["n".into()],
        };
        let b = split(all, 3);
        assert_eq!(b.len(), 6);
        assert_eq!(b[5].case, "keys=3, remove (IPC_RMID)");
        assert_eq!(b[5].metrics[3].rows[0].median, 23.0);
        assert_eq!(b[1].metrics[0].metric.name, "total");
    }
}
