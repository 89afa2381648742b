//! Fast paths: a wake with no waiters and a wait whose value mismatches, in ns per call, over
//! 256 distinct words (each on its own cache line) so that no competitor profits from one
//! hot address; `black_box` keeps every call and its result alive. `--shared`: the words are
//! in a `MAP_SHARED` memfd mapping and the competitors are the process-shared ones.
//!
//! The wake is also timed the way programs make it, right after a store to the word
//! (`AfterStore`): there a waker's fence waits for the store to drain, which the bare case
//! hides. That case also times, in the same repetition, a plain store followed by a load of
//! another word (`store+load`): what a wake costs beyond it is the waker's own work.

use super::{padded_words, skip_reason, Common, Padded};
use crate::competitor::{c_failure, dispatch, Competitor, Op, UfutexC, Wait, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const WORDS: usize = 256;

/// Which fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    WakeNoWaiters,
    WaitMismatch,
    /// A store to the word, then a wake with no waiters.
    AfterStore,
}

impl Path {
    /// Every path, in the order `fastpath` runs them.
    pub const ALL: [Path; 3] = [Path::WakeNoWaiters, Path::AfterStore, Path::WaitMismatch];

    pub fn label(self) -> &'static str {
        match self {
            Path::WakeNoWaiters => "wake, no waiters",
            Path::WaitMismatch => "wait, value mismatch",
            Path::AfterStore => "wake right after a store, no waiters",
        }
    }
}

/// `body` with `$p` bound to `path` as a constant, so that each path's loop is compiled on its
/// own: a loop that matched on the path at every call (as `one` does when the path is not
/// known) ran 5–6 instructions of dispatch that the `store+load` loop it is set against does
/// not, and counted them as the call's.
macro_rules! with_path {
    ($path:expr, $p:ident => $body:expr) => {
        match $path {
            Path::WakeNoWaiters => {
                const $p: Path = Path::WakeNoWaiters;
                $body
            }
            Path::WaitMismatch => {
                const $p: Path = Path::WaitMismatch;
                $body
            }
            Path::AfterStore => {
                const $p: Path = Path::AfterStore;
                $body
            }
        }
    };
}

/// One repetition: ns per call, for at least `runtime` (with `AfterStore`, also of a store and
/// a load, batches of the two taken in turn for twice that: see [`per_call_beside`]).
pub fn once<C: Competitor>(c: &C, path: Path, runtime: Duration, shared: bool) -> io::Result<Vec<f64>> {
    let words = padded_words(WORDS, shared)?;
    let words: &[Padded<AtomicU32>] = &words;
    check(c, path, &words[0])?;
    if path != Path::AfterStore {
        return Ok(vec![with_path!(path, P => per_call(runtime, |i| one(c, P, black_box(&*words[i % WORDS]), i)))]);
    }
    let other = AtomicU32::new(0);
    let (call, plain) = per_call_beside(
        2 * runtime,
        |i| one(c, Path::AfterStore, black_box(&*words[i % WORDS]), i),
        |i| store_load(black_box(&*words[i % WORDS]), &other, i),
    );
    Ok(vec![call, plain])
}

/// Check the competitor does what we time: a mismatch really is one, nobody is woken.
fn check<C: Competitor>(c: &C, path: Path, w: &AtomicU32) -> io::Result<()> {
    match path {
        Path::WakeNoWaiters | Path::AfterStore if c.wake(w, 1, ANY) != 0 => Err(io::Error::other("woke a ghost")),
        Path::WaitMismatch if c.wait(w, 1, ANY) != crate::competitor::Wait::Mismatch => {
            Err(io::Error::other(format!("{}: mismatching wait did not fail", c.name())))
        }
        _ => Ok(()),
    }
}

/// The `i`-th call of `path` on `w`: the body that is timed here and counted by `instructions`.
#[inline(always)]
fn one<C: Competitor>(c: &C, path: Path, w: &AtomicU32, i: usize) {
    match path {
        Path::WakeNoWaiters => {
            black_box(c.wake(w, black_box(1), ANY));
        }
        Path::WaitMismatch => {
            black_box(c.wait(w, black_box(1), ANY));
        }
        Path::AfterStore => {
            w.store(i as u32, Ordering::Relaxed);
            black_box(c.wake(w, black_box(1), ANY));
        }
    }
}

/// What `AfterStore` is set against: the store alone, then a load of another word.
#[inline(always)]
fn store_load(w: &AtomicU32, other: &AtomicU32, i: usize) {
    w.store(i as u32, Ordering::Relaxed);
    black_box(black_box(other).load(Ordering::Relaxed));
}

/// A loop whose instructions `instructions` counts: a fast path, a failing waitv (one of the
/// cases `waitv` times), or the store and load a wake right after a store is set against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    Call(Path),
    Waitv(Waitv),
    StoreLoad,
}

/// A failing waitv that `instructions` counts, on 32-bit words holding 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waitv {
    /// One entry, whose value does not match (`waitv --entries 1 --modes first`).
    One,
    /// 128 entries, only the last not matching (`waitv --entries 128 --modes last`).
    Last128,
}

impl Waitv {
    pub const ALL: [Waitv; 2] = [Waitv::One, Waitv::Last128];

    /// Its column in the instructions bench.
    pub fn label(self) -> &'static str {
        match self {
            Waitv::One => "waitv of one entry, value mismatch",
            Waitv::Last128 => "waitv of 128 entries failing on the last",
        }
    }

    fn entries(self) -> usize {
        match self {
            Waitv::One => 1,
            Waitv::Last128 => 128,
        }
    }
}

impl Body {
    pub const ALL: [Body; 6] = [
        Body::Call(Path::WakeNoWaiters),
        Body::Call(Path::AfterStore),
        Body::Call(Path::WaitMismatch),
        Body::Waitv(Waitv::One),
        Body::Waitv(Waitv::Last128),
        Body::StoreLoad,
    ];

    /// Its name on the command line of `count-calls`.
    pub fn key(self) -> &'static str {
        match self {
            Body::Call(Path::WakeNoWaiters) => "wake",
            Body::Call(Path::AfterStore) => "after-store",
            Body::Call(Path::WaitMismatch) => "wait-mismatch",
            Body::Waitv(Waitv::One) => "waitv-one",
            Body::Waitv(Waitv::Last128) => "waitv-last128",
            Body::StoreLoad => "store-load",
        }
    }

    /// What a competitor must do to run it.
    pub fn ops(self) -> &'static [Op] {
        match self {
            Body::Waitv(_) => &[Op::Waitv],
            _ => &[Op::WaitWake],
        }
    }

    pub fn by_key(key: &str) -> Option<Body> {
        Body::ALL.into_iter().find(|b| b.key() == key)
    }
}

/// Exactly `n` iterations of each `(body, n)`, in order, over the same words as [`once`]; no
/// clock is read (what runs must not depend on the host's speed).
pub fn exact<C: Competitor>(c: &C, counts: &[(Body, usize)], shared: bool) -> io::Result<()> {
    let words = padded_words(WORDS, shared)?;
    let words: &[Padded<AtomicU32>] = &words;
    let other = AtomicU32::new(0);
    for &(body, n) in counts {
        match body {
            Body::Call(path) => {
                check(c, path, &words[0])?;
                with_path!(path, P => {
                    for i in 0..n {
                        one(c, P, black_box(&*words[i % WORDS]), i);
                    }
                });
            }
            Body::Waitv(case) => {
                // Words of its own, each holding 0 (the wakes after a store change theirs): the
                // entries expect 0 but the last, which expects 1.
                let n_entries = case.entries();
                let vwords = padded_words(n_entries, shared)?;
                let entries: Vec<(&AtomicU32, u32)> =
                    vwords.iter().enumerate().map(|(i, w)| (&**w, u32::from(i + 1 == n_entries))).collect();
                let v = c.prepare_waitv(&entries);
                if c.waitv(&v) != Err(Wait::Mismatch) {
                    return Err(io::Error::other(format!("{}: a mismatching waitv did not fail", c.name())));
                }
                for _ in 0..n {
                    let _ = black_box(c.waitv(black_box(&v)));
                }
            }
            Body::StoreLoad => {
                for i in 0..n {
                    store_load(black_box(&*words[i % WORDS]), &other, i);
                }
            }
        }
    }
    Ok(())
}

/// Calls per timed batch: long enough that reading the clock is lost in it.
const BATCH: usize = 4096;

/// One batch of `f(0)` .. `f(BATCH - 1)`, inlined into the caller's timing loop.
#[inline(always)]
fn batch(f: &mut impl FnMut(usize)) {
    for i in 0..BATCH {
        f(i);
    }
}

/// ns per `f(i)`, over batches of [`BATCH`] calls for at least `runtime`.
fn per_call(runtime: Duration, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    loop {
        batch(&mut f);
        calls += BATCH as u64;
        if start.elapsed() >= runtime {
            break;
        }
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// [`per_call`] of `f` and of `g`, a batch of each in turn, each batch timed on its own: ns per
/// call of each, for at least `runtime` in all. Taken in turn because this host's speed changes
/// from one second to the next, and not for every loop alike: in the slow spells a loop bound
/// by how many instructions it runs (a wake) takes up to 2× as long, one bound by a chain of
/// dependent instructions (a store and a load) hardly longer (BENCHMARKS.md, twenty-fourth
/// session: what a busy other hardware thread of the host's core would do). Run one after the
/// other, the two would meet different hosts.
fn per_call_beside(runtime: Duration, mut f: impl FnMut(usize), mut g: impl FnMut(usize)) -> (f64, f64) {
    let start = Instant::now();
    let (mut in_f, mut in_g) = (Duration::ZERO, Duration::ZERO);
    let mut batches = 0u64;
    while start.elapsed() < runtime {
        let t = Instant::now();
        batch(&mut f);
        let u = Instant::now();
        batch(&mut g);
        in_g += u.elapsed();
        in_f += u - t;
        batches += 1;
    }
    let calls = (batches * BATCH as u64) as f64;
    (in_f.as_nanos() as f64 / calls, in_g.as_nanos() as f64 / calls)
}

pub fn run(common: &Common, paths: &[Path]) -> io::Result<Vec<Bench>> {
    let comps = common.competitors()?;
    let sched = common.scheduler();
    let (runtime, shared) = (common.runtime, common.shared);
    paths
        .iter()
        .map(|&path| {
            let plan = Plan {
                workload: "fastpath",
                case: common.case(path.label().into()),
                metrics: match path {
                    Path::AfterStore => vec![Metric::lower("call", "ns"), Metric::lower("store+load", "ns")],
                    _ => vec![Metric::lower("call", "ns")],
                },
                baseline: common.baseline(),
            };
            let mut bench = sched.run(
                plan,
                &comps,
                |c| c.name(),
                |c| skip_reason(c, &[Op::WaitWake]),
                |c| dispatch!(c, c => once(c, path, runtime, shared)),
            )?;
            if comps.iter().any(|c| c.name() == UfutexC::NAME) {
                bench.notes.push(c_floor_note(path, runtime));
            }
            Ok(bench)
        })
        .collect()
}

/// The floor under `ufutex-c`'s figures on this host: an empty C function called as the
/// competitor calls the C ABI (through a pointer the optimiser cannot see through), failing
/// as a mismatching wait does (`errno` set through libc, -1, and the caller reads `errno` as
/// the competitor does, `c_failure`) or returning 0 as an empty wake does. A note, measured
/// once after the repetitions.
fn c_floor_note(path: Path, runtime: Duration) -> String {
    let words = [const { AtomicU32::new(0) }; 4];
    let ns = per_call(runtime, |i| {
        let w = black_box(&words[i % 4]);
        match path {
            Path::WaitMismatch => {
                let f: CFloor = black_box(empty_failing_call);
                black_box(f(w.as_ptr().cast(), 1) == -1 && c_failure() == Wait::Mismatch);
            }
            Path::WakeNoWaiters | Path::AfterStore => {
                if path == Path::AfterStore {
                    w.store(i as u32, Ordering::Relaxed);
                }
                let f: CFloor = black_box(empty_call);
                black_box(f(w.as_ptr().cast(), 1));
            }
        }
    });
    let what = match path {
        Path::WaitMismatch => "that sets errno through libc and returns -1, the caller then reading errno",
        _ => "that returns 0",
    };
    format!(
        "the C call's floor here: an empty C function {what}, called through a pointer as ufutex-c is, \
         {ns:.2} ns a call (measured once, after the repetitions)"
    )
}

type CFloor = extern "C" fn(*mut std::ffi::c_void, std::ffi::c_ulong) -> std::ffi::c_long;

#[inline(never)]
extern "C" fn empty_call(_: *mut std::ffi::c_void, _: std::ffi::c_ulong) -> std::ffi::c_long {
    0
}

#[inline(never)]
extern "C" fn empty_failing_call(_: *mut std::ffi::c_void, _: std::ffi::c_ulong) -> std::ffi::c_long {
    // SAFETY: `__errno_location` returns this thread's errno, valid to write.
    unsafe { *libc::__errno_location() = libc::EAGAIN };
    -1
}
