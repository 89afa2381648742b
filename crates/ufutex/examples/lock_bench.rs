//! A small harness for the handoff mutex, side by side with pthread_mutex, parking_lot and
//! std in one process run, interleaved over repetitions (medians reported). It backs the
//! choices documented in `src/sync/raw_mutex.rs`; `ufutex-bench lock` is the full tool.
//!
//! `cargo run --release -p ufutex --example lock_bench -- [uncontended|spin|fairness|all] [secs]`
//!
//! - uncontended: one thread, lock + unlock, ns per pair;
//! - spin: 2 and 8 threads, critical sections of 5 and 50 work units, total Mops/s, for the
//!   default spin policy, others, and the peers;
//! - fairness: 8 threads, a ~1 µs critical section: total ops/s and per-thread min/max, for
//!   the lock with handoff, without it (`Starvation::Never`), other thresholds, and the peers.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use ufutex::sync::{set_spin_policy, set_starvation_policy, SpinPolicy, Starvation};

/// A lock under test: run `f` with the lock held.
trait Lock: Send + Sync + 'static {
    fn with(&self, f: &mut dyn FnMut());
}

struct Ufutex(ufutex::sync::Mutex<()>);
impl Lock for Ufutex {
    #[inline]
    fn with(&self, f: &mut dyn FnMut()) {
        let _g = self.0.lock();
        f();
    }
}

struct ParkingLot(parking_lot::Mutex<()>);
impl Lock for ParkingLot {
    #[inline]
    fn with(&self, f: &mut dyn FnMut()) {
        let _g = self.0.lock();
        f();
    }
}

struct Std(std::sync::Mutex<()>);
impl Lock for Std {
    #[inline]
    fn with(&self, f: &mut dyn FnMut()) {
        let _g = self.0.lock().unwrap();
        f();
    }
}

struct Pthread(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared between threads; it is never moved after use
// starts (it lives in an Arc).
unsafe impl Sync for Pthread {}
// SAFETY: as above.
unsafe impl Send for Pthread {}
impl Lock for Pthread {
    #[inline]
    fn with(&self, f: &mut dyn FnMut()) {
        // SAFETY: an initialised, pinned (Arc'd) default mutex, locked and unlocked in pairs.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
        f();
        // SAFETY: as above; this thread holds it.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

#[derive(Clone, Copy)]
enum Impl {
    /// `None`s: the defaults.
    Ufutex(Option<Starvation>, Option<SpinPolicy>),
    ParkingLot,
    Std,
    Pthread,
}

impl Impl {
    fn name(self) -> String {
        match self {
            Impl::Ufutex(starve, spin) => {
                let starve = match starve {
                    None => "default".to_string(),
                    Some(Starvation::Never) => "no handoff".into(),
                    Some(Starvation::Wakeups(n)) => format!("handoff {n} wakeups"),
                    Some(Starvation::After(d)) => format!("handoff {d:?}"),
                };
                match spin {
                    None => format!("ufutex ({starve})"),
                    Some(p) => {
                        format!("ufutex ({starve}; spin 2^{}x{}+{}y)", p.first_shift, p.busy_rounds, p.yield_rounds)
                    }
                }
            }
            Impl::ParkingLot => "parking_lot".into(),
            Impl::Std => "std".into(),
            Impl::Pthread => "pthread".into(),
        }
    }

    fn make(self) -> Arc<dyn Lock> {
        if let Impl::Ufutex(starve, spin) = self {
            set_starvation_policy(starve);
            set_spin_policy(spin);
        }
        match self {
            Impl::Ufutex(..) => Arc::new(Ufutex(ufutex::sync::Mutex::new(()))),
            Impl::ParkingLot => Arc::new(ParkingLot(parking_lot::Mutex::new(()))),
            Impl::Std => Arc::new(Std(std::sync::Mutex::new(()))),
            Impl::Pthread => Arc::new(Pthread(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER))),
        }
    }
}

/// `units` of work: a dependent chain the compiler cannot drop (~1 ns each).
#[inline]
fn work(units: u32) {
    let mut x = 1u64;
    for _ in 0..units {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    black_box(x);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn uncontended(imp: Impl) -> f64 {
    let lock = imp.make();
    const N: u32 = 20_000_000;
    let t = Instant::now();
    for _ in 0..N {
        lock.with(&mut || {});
    }
    t.elapsed().as_nanos() as f64 / f64::from(N)
}

/// Run `threads` threads hammering `imp` with `cs` work units inside for `secs`; per-thread
/// operation counts.
fn hammer(imp: Impl, threads: usize, cs: u32, secs: f64) -> Vec<u64> {
    let lock = imp.make();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (lock, stop, start) = (lock.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let shared = AtomicU64::new(0);
                start.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    lock.with(&mut || {
                        shared.fetch_add(1, Ordering::Relaxed);
                        work(cs);
                    });
                    n += 1;
                }
                n
            })
        })
        .collect();
    start.wait();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Work units that take about `target` on this machine.
fn calibrate(target: Duration) -> u32 {
    let units = 100_000;
    let t = Instant::now();
    for _ in 0..20 {
        work(units);
    }
    let per_unit = t.elapsed().as_secs_f64() / f64::from(units * 20);
    (target.as_secs_f64() / per_unit).round().max(1.0) as u32
}

const PEERS: [Impl; 3] = [Impl::ParkingLot, Impl::Std, Impl::Pthread];
const REPS: usize = 5;

fn run_uncontended() {
    let imps = [Impl::Ufutex(None, None), Impl::ParkingLot, Impl::Std, Impl::Pthread];
    let mut res = vec![Vec::new(); imps.len()];
    for rep in 0..REPS {
        // Rotate the order each repetition, so no lock always runs first (or warm).
        for k in 0..imps.len() {
            let i = (k + rep) % imps.len();
            res[i].push(uncontended(imps[i]));
        }
    }
    let base = median(res[3].clone());
    println!("## uncontended lock+unlock (ns/op, median of {REPS}; ratio vs pthread)");
    for (imp, r) in imps.iter().zip(res) {
        let m = median(r);
        println!("{:<44} {:>7.2} ns  {:>5.2}x", imp.name(), m, m / base);
    }
}

/// `LOCK_BENCH_ONLY=0,5,8` picks entries of `all` (for quick experiments).
fn pick(all: &[Impl]) -> Vec<Impl> {
    match std::env::var("LOCK_BENCH_ONLY") {
        Ok(v) => {
            v.split(',').filter_map(|i| i.trim().parse::<usize>().ok()).filter_map(|i| all.get(i).copied()).collect()
        }
        Err(_) => all.to_vec(),
    }
}

/// Run every lock `REPS` times in rotating order; per lock, the per-thread counts of each run.
fn interleaved(imps: &[Impl], threads: usize, cs: u32, secs: f64) -> Vec<Vec<Vec<u64>>> {
    let mut res = vec![Vec::new(); imps.len()];
    for rep in 0..REPS {
        for k in 0..imps.len() {
            let i = (k + rep) % imps.len();
            res[i].push(hammer(imps[i], threads, cs, secs));
        }
    }
    res
}

/// Contended throughput of spin policies against the peers: 2 and 8 threads × 5 and 50 work
/// units, with each lock's ratio to the best peer of the same repetition round.
fn run_spin(secs: f64) {
    let policy = |first_shift, busy_rounds, yield_rounds| SpinPolicy { first_shift, busy_rounds, yield_rounds };
    let mut all = vec![
        Impl::Ufutex(None, None),
        Impl::Ufutex(None, Some(policy(0, 6, 0))),
        Impl::Ufutex(None, Some(policy(1, 3, 7))),
        Impl::Ufutex(None, Some(policy(4, 4, 0))),
        Impl::Ufutex(None, Some(policy(5, 1, 7))),
    ];
    all.extend(PEERS);
    let imps = pick(&all);
    println!("## contended throughput (Mops/s, median of {REPS} runs of {secs}s; x = ratio to the best peer)");
    for threads in [2, 8] {
        for cs in [5, 50] {
            let res = interleaved(&imps, threads, cs, secs);
            let mops: Vec<Vec<f64>> = res
                .iter()
                .map(|runs| runs.iter().map(|r| r.iter().sum::<u64>() as f64 / secs / 1e6).collect())
                .collect();
            let peers: Vec<usize> = (0..imps.len()).filter(|&i| !matches!(imps[i], Impl::Ufutex(..))).collect();
            let best = (!peers.is_empty()).then(|| peers.iter().map(|&i| median(mops[i].clone())).fold(0.0, f64::max));
            println!("threads={threads} cs={cs}");
            for (imp, m) in imps.iter().zip(&mops) {
                let x = best.map_or(String::new(), |b| format!("{:>6.2}x", median(m.clone()) / b));
                println!("  {:<44} {:>7.2} {x}", imp.name(), median(m.clone()));
            }
        }
    }
}

fn run_fairness(secs: f64) {
    // LOCK_BENCH_UNITS fixes the critical section's length (comparable runs on a noisy machine).
    let cs = match std::env::var("LOCK_BENCH_UNITS") {
        Ok(v) => v.parse().expect("LOCK_BENCH_UNITS: a number of work units"),
        Err(_) => calibrate(Duration::from_micros(1)),
    };
    let all = [
        Impl::Ufutex(Some(Starvation::Wakeups(1)), None),
        Impl::Ufutex(Some(Starvation::After(Duration::from_micros(50))), None),
        Impl::Ufutex(Some(Starvation::After(Duration::from_micros(200))), None),
        Impl::Ufutex(Some(Starvation::After(Duration::from_millis(1))), None),
        Impl::Ufutex(Some(Starvation::Never), None),
        Impl::ParkingLot,
        Impl::Std,
        Impl::Pthread,
    ];
    let imps = pick(&all);
    let res = interleaved(&imps, 8, cs, secs);
    println!(
        "## fairness: 8 threads, ~1 us critical section ({cs} units), median [min..max] of {REPS} runs of {secs}s"
    );
    println!("{:<44} {:>9} {:>20}", "impl", "Mops/s", "min/max");
    for (imp, runs) in imps.iter().zip(res) {
        let tot: Vec<f64> = runs.iter().map(|r| r.iter().sum::<u64>() as f64 / secs / 1e6).collect();
        let fair: Vec<f64> =
            runs.iter().map(|r| *r.iter().min().unwrap() as f64 / (*r.iter().max().unwrap()).max(1) as f64).collect();
        let (lo, hi) = (fair.iter().copied().fold(f64::INFINITY, f64::min), fair.iter().copied().fold(0.0, f64::max));
        println!("{:<44} {:>9.3} {:>8.3} [{lo:.2}..{hi:.2}]", imp.name(), median(tot), median(fair));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map_or("all", String::as_str);
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    if matches!(what, "uncontended" | "all") {
        run_uncontended();
    }
    if matches!(what, "spin" | "all") {
        run_spin(secs);
    }
    if matches!(what, "fairness" | "all") {
        run_fairness(secs);
    }
}
