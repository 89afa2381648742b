//! The workloads. Each one is generic over [`Competitor`] (so each competitor's loop is
//! compiled on its own) and returns one [`crate::result::Bench`] per parameter set.

pub mod fastpath;
pub mod firstcall;
pub mod hash;
pub mod keyed;
pub mod lock;
pub mod perfbench;
pub mod pingpong;
pub mod recovery;
pub mod schbench;
pub mod sempingpong;
pub mod waitv;
pub mod wake;

use crate::competitor::{AnyCompetitor, Competitor, Op, Word, SHARED_BASELINE};
use crate::progress::Progress;
use crate::result::Skip;
use crate::sched::Scheduler;
use crate::shm::Words;
use crate::sys;
use std::io;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ufutex::Slots;

/// Options every workload takes (already validated).
#[derive(Debug, Clone)]
pub struct Common {
    pub repetitions: usize,
    /// How long one timed repetition runs (throughput workloads).
    pub runtime: Duration,
    /// Competitor names, in the order given.
    pub impls: Vec<String>,
    /// Table size of the `ufutex-domain` competitor.
    pub domain_slots: Slots,
    pub quiet: bool,
    /// One unmeasured run per competitor before the timed ones.
    pub warmup: bool,
    /// Process-shared futexes (`--shared`): shared competitors, words in a shared memfd.
    pub shared: bool,
    /// Competitors of `--impl` a `--shared` run leaves out, and why.
    pub left_out: Vec<(String, String)>,
}

impl Common {
    pub fn scheduler(&self) -> Scheduler {
        let left_out = self.left_out.iter().map(|(c, r)| Skip { competitor: c.clone(), reason: r.clone() }).collect();
        Scheduler { repetitions: self.repetitions, warmup: self.warmup, progress: Progress::new(self.quiet), left_out }
    }

    /// The competitor ratios are taken against: the kernel, private or shared like the run.
    pub fn baseline(&self) -> &'static str {
        if self.shared {
            SHARED_BASELINE
        } else {
            "kernel"
        }
    }

    /// A bench's case label: `case`, with ", shared" for a `--shared` run.
    pub fn case(&self, case: String) -> String {
        if self.shared {
            format!("{case}{SHARED_SUFFIX}")
        } else {
            case
        }
    }

    pub fn competitors(&self) -> io::Result<Vec<AnyCompetitor>> {
        self.impls.iter().map(|n| AnyCompetitor::by_name(n, self.domain_slots)).collect()
    }
}

/// `cmd` run to its end (`Command::output`: stdin closed, stdout and stderr captured unless
/// `cmd` says otherwise): its output if it succeeded, else an error naming `what()`, how the
/// process ended and its stderr. For the programs the benchmarks start: perf, and new processes
/// of this executable (the report's steps and the workloads' children).
pub fn checked_output(cmd: &mut Command, what: impl FnOnce() -> String) -> io::Result<Output> {
    let out = cmd.output()?;
    if out.status.success() {
        return Ok(out);
    }
    Err(io::Error::other(format!("{}: {}: {}", what(), out.status, String::from_utf8_lossy(&out.stderr).trim())))
}

/// Why `c` cannot run a workload that needs `ops`, if it cannot.
pub fn skip_reason(c: &AnyCompetitor, ops: &[Op]) -> Option<String> {
    ops.iter().find_map(|&op| c.unsupported(op))
}

/// A value alone on its cache line, so that neighbouring words do not share one.
#[repr(align(128))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A thread stack big enough for the workloads, small enough for hundreds of threads.
pub const STACK: usize = 256 * 1024;

/// Bookkeeping for a group of waiter threads: who arrived, their kernel ids, and when each one
/// returned (ns since `base`).
pub struct Waiters {
    pub base: Instant,
    arrived: AtomicUsize,
    tids: Mutex<Vec<i32>>,
    done_ns: Vec<std::sync::atomic::AtomicU64>,
    /// How many waiters have returned.
    finished: AtomicUsize,
    /// The thread that made the group and waits for it to finish (`wait_finished`).
    watcher: std::thread::Thread,
}

impl Waiters {
    pub fn new(n: usize) -> Self {
        Waiters {
            base: Instant::now(),
            arrived: AtomicUsize::new(0),
            tids: Mutex::new(Vec::with_capacity(n)),
            done_ns: (0..n).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            finished: AtomicUsize::new(0),
            watcher: std::thread::current(),
        }
    }

    /// Called by waiter `i` right before it waits.
    pub fn arrive(&self) {
        self.tids.lock().unwrap_or_else(|e| e.into_inner()).push(sys::gettid());
        self.arrived.fetch_add(1, Ordering::SeqCst);
    }

    /// Called by waiter `i` right after its wait returned for good (a second call changes
    /// nothing). The last one to return wakes the watcher, after taking its time, so that wake
    /// is not in the measurement.
    pub fn done(&self, i: usize) {
        // At least 1: 0 means "not yet".
        let t = (self.base.elapsed().as_nanos() as u64).max(1);
        if self.done_ns[i].compare_exchange(0, t, Ordering::SeqCst, Ordering::SeqCst).is_ok()
            && self.finished.fetch_add(1, Ordering::SeqCst) + 1 == self.done_ns.len()
        {
            self.watcher.unpark();
        }
    }

    /// When the last waiter returned, in ns since `base`.
    pub fn last_done_ns(&self) -> u64 {
        self.done_ns.iter().map(|d| d.load(Ordering::SeqCst)).max().unwrap_or(0)
    }

    /// Block until every waiter arrived and sleeps in the kernel (state 'S' in /proc), and,
    /// when the competitor can count its queue, until exactly `expect_queued` are queued.
    pub fn settle<C: Competitor>(&self, c: &C, expect_queued: usize) -> io::Result<()> {
        let n = self.done_ns.len();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let arrived = self.arrived.load(Ordering::SeqCst) == n;
            let asleep = arrived
                && self
                    .tids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .all(|&t| sys::thread_state(t) == Some('S'));
            let queued_ok = c.queued().is_none_or(|q| q == expect_queued);
            if asleep && queued_ok {
                // States are read one by one: read again after a short settle to be sure.
                std::thread::sleep(Duration::from_micros(500));
                let again = self
                    .tids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .all(|&t| sys::thread_state(t) == Some('S'));
                if again && c.queued().is_none_or(|q| q == expect_queued) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{}: {} waiters did not all fall asleep within 20 s (arrived {}, queued {:?})",
                    c.name(),
                    n,
                    self.arrived.load(Ordering::SeqCst),
                    c.queued()
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Wait on `word` until it no longer holds `value` (tolerates spurious returns).
#[inline]
pub fn wait_while<C: Competitor, W: Word>(c: &C, word: &W, value: u64, mask: u64) {
    while word.get() == value {
        c.wait(word, value, mask);
    }
}

/// A stop flag plus a start gate shared by timed worker threads.
#[derive(Default)]
pub struct Gate {
    started: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
}

impl Gate {
    /// Worker side: announce, then spin until the gate opens.
    pub fn enter(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
        while !self.go.load(Ordering::Acquire) {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
    }

    /// Controller side: wait for `n` workers, open the gate, sleep `runtime`, raise stop;
    /// returns the measured interval.
    pub fn run_for(&self, n: usize, runtime: Duration) -> Duration {
        while self.started.load(Ordering::SeqCst) < n {
            std::thread::yield_now();
        }
        let start = Instant::now();
        self.go.store(true, Ordering::Release);
        std::thread::sleep(runtime);
        self.stop.store(true, Ordering::Release);
        start.elapsed()
    }

    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The suffix of a `--shared` run's case labels.
pub const SHARED_SUFFIX: &str = ", shared";

/// Words spread over distinct addresses (each its own cache line), all 0: on the heap, or in a
/// `MAP_SHARED` memfd mapping if `shared`.
pub fn padded_words(n: usize, shared: bool) -> io::Result<Words<Padded<AtomicU32>>> {
    Words::new(n, shared)
}

/// Parse a comma-separated list of numbers (used by the CLI for sweeps).
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',').map(|x| x.trim().parse::<usize>().map_err(|_| format!("{x:?} is not a number"))).collect()
}

impl Waiters {
    /// How many waiters recorded their return.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    /// Block (the group's creator only) until every waiter has returned. Asleep, not polling:
    /// a poller would take CPU time from the very threads whose return it times.
    pub fn wait_finished(&self) {
        debug_assert_eq!(std::thread::current().id(), self.watcher.id(), "only the creator waits");
        while self.finished() < self.done_ns.len() {
            std::thread::park();
        }
    }
}

/// For tests of timed workloads: whether some of `tries` repetitions counted anything. A short
/// repetition whose workers the scheduler does not run between the gate's opening and the stop
/// counts nothing, and on a loaded machine (CI runs valgrind beside these tests) a few ms can
/// pass so; one repetition of several must count.
#[cfg(test)]
pub(crate) fn some_repetition_counts(tries: usize, mut once: impl FnMut() -> f64) -> bool {
    (0..tries).any(|_| once() > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The creator sleeps until the last waiter returns, and a waiter that reports twice is
    /// counted once (its first time stands).
    #[test]
    fn the_last_waiter_to_return_wakes_the_creator() {
        let waiters = Waiters::new(3);
        std::thread::scope(|s| {
            for i in 0..3 {
                let waiters = &waiters;
                s.spawn(move || {
                    std::thread::sleep(Duration::from_millis(5 * i as u64));
                    waiters.done(i);
                    if i == 0 {
                        let first = waiters.done_ns[0].load(Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(1));
                        waiters.done(0);
                        assert_eq!(waiters.done_ns[0].load(Ordering::SeqCst), first);
                    }
                });
            }
            waiters.wait_finished();
            assert_eq!(waiters.finished(), 3);
        });
        assert!(waiters.done_ns.iter().all(|d| d.load(Ordering::SeqCst) > 0));
        assert_eq!(waiters.finished(), 3);
    }
}
