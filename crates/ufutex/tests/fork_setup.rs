//! A fork while another thread makes the process's first calls — the library's first-use
//! set-ups: the fork handlers' registration, the default domain's thread counter, the NUMA
//! topology, the shared table's segment and process slot, a namespace's mapping — does not
//! leave the child waiting for that thread. Each trial runs in a fresh process (forked from
//! this test process, which makes no ufutex call of its own: neither test here does) whose
//! second thread makes those first calls while its main thread forks 0-600 µs after they
//! began; the grandchild makes the same calls and must exit within a deadline. With std's
//! `OnceLock`, `Once` and `Mutex` there (before `once.rs`), 31 grandchildren of 300 hung. The
//! second test forks without the handlers, from a process that never waited, while another
//! thread holds the tables' gate.

#![cfg(not(ufutex_loom))]

mod common;

use common::{child, raw_child, reap, reap_within, Rng};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use ufutex::{Deadline, Domain, NumaFutex};

/// What a grandchild is given to exit before it counts as hung.
const WITHIN: Duration = Duration::from_secs(10);
/// 77: the grandchild did not exit within [`WITHIN`] (it is killed).
const HUNG: i32 = 77;

/// The first calls: a wake on a NUMA word, a wake on a process-shared word, a namespace's
/// open, a wake and a timed wait on a private word (the set-ups, in the order they come). 0 if
/// each answered as it should.
fn first_calls(shared: &AtomicU32) -> i32 {
    if Domain::default_domain().wake_numa(&NumaFutex::<AtomicU32>::new(0), 1) != Ok(0) {
        return 1;
    }
    if ufutex::shared::wake(shared, 1) != Ok(0) {
        return 2;
    }
    // A namespace of named objects, this test's own (in its shared table's directory).
    if ufutex::named::Namespace::open("fork-setup").is_err() {
        return 5;
    }
    let w = AtomicU32::new(0);
    if ufutex::wake(&w, 1) != 0 {
        return 3;
    }
    let soon = Deadline::Monotonic(Instant::now() + Duration::from_micros(100));
    if ufutex::wait(&w, 0, Some(soon)) != Err(ufutex::WaitError::TimedOut) {
        return 4;
    }
    0
}

/// One trial, in a fresh process: its first calls on a thread, a fork `delay` after that thread
/// began them, the grandchild's own first calls. 0, or what went wrong.
fn trial(shared: &'static AtomicU32, delay: Duration) -> i32 {
    static BEGUN: AtomicBool = AtomicBool::new(false);
    let first = std::thread::spawn(move || {
        BEGUN.store(true, Ordering::Release);
        first_calls(shared)
    });
    while !BEGUN.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let start = Instant::now();
    while start.elapsed() < delay {
        std::hint::spin_loop();
    }
    // The grandchild calls only the library (its allocations are safe after a plain fork, which
    // glibc's handlers make so).
    let grandchild = child(move || first_calls(shared));
    let status = reap_within(grandchild, WITHIN).unwrap_or(HUNG);
    match first.join() {
        Ok(0) => status,
        Ok(e) => 10 + e,
        Err(_) => 99,
    }
}

#[test]
fn a_fork_during_the_first_calls_leaves_the_child_nothing_to_wait_for() {
    let _table = common::isolated_shared_table();
    let p = common::shared_anon(4096);
    // SAFETY: a live shared mapping, never unmapped; offset 0 is aligned.
    let shared: &'static AtomicU32 = unsafe { common::at(p, 0) };
    let mut rng = Rng::new(0x5e7_0b5e);
    let trials = 100 * common::stress_secs().max(1);
    let mut failed = Vec::new();
    for i in 0..trials {
        // The first calls take 0.2-0.6 ms here.
        let delay = Duration::from_micros(rng.below(600));
        let status = reap(child(move || trial(shared, delay)));
        if status != 0 {
            failed.push((i, delay, status));
        }
    }
    assert!(failed.is_empty(), "trials (number, delay, status; {HUNG}: a hung grandchild): {failed:?}");
}

/// A child made without our fork handlers (`_Fork`) by a process that never waited, while
/// another of its threads held the tables' gate (querying the default domain): the child's own
/// query takes the gate over and goes on. It is told it is a child by the fork mark, which the
/// library makes when it is loaded (`load.rs`); when the mark was made at the first wait, such
/// a process had none, and the child waited for the lost thread for ever.
#[test]
fn a_child_made_without_the_handlers_before_any_wait_goes_on() {
    /// One trial, in a fresh process that never waits: 0, or what went wrong.
    fn trial(forks: u64) -> i32 {
        static STOP: AtomicBool = AtomicBool::new(false);
        let querier = std::thread::spawn(|| {
            let mut n = 0u64;
            while !STOP.load(Ordering::Relaxed) {
                std::hint::black_box(Domain::default_domain().policy());
                n += 1;
            }
            n
        });
        let mut rng = Rng::new(0x0f_0ea6);
        let mut status = 0;
        for _ in 0..forks {
            let start = Instant::now();
            let delay = Duration::from_micros(rng.below(100));
            while start.elapsed() < delay {
                std::hint::spin_loop();
            }
            // The grandchild makes no allocation (the querier's allocator locks may be held):
            // a query takes the gate (the default domain may be lost in the grandchild, its
            // state held by the querier at the fork; then it reads `Fixed` at its size).
            let grandchild = raw_child(|| {
                std::hint::black_box(Domain::default_domain().policy());
                0
            });
            status = reap_within(grandchild, WITHIN).unwrap_or(HUNG);
            if status != 0 {
                break;
            }
        }
        STOP.store(true, Ordering::Relaxed);
        match querier.join() {
            Ok(n) if n > 0 => status,
            _ => 99,
        }
    }
    let forks = 100 * common::stress_secs().max(1);
    let status = reap(child(move || trial(forks)));
    assert_eq!(status, 0, "status {status} ({HUNG}: a grandchild hung)");
}
