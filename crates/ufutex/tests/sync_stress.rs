//! Bounded stress of the mutex and condvar with every path mixed: plain, try and timed locks,
//! handoff requests that time out, condvar waits (timed and not) with signal and broadcast.
//! (Timed ones of 0 µs among them: a deadline already passed when the call starts.)
//! Invariants: an exact count of critical sections, the lock free and no waiter queued at the
//! end, and the run finishes (a lost wakeup would hang it; the harness timeout catches that).
//! `UFUTEX_STRESS_SECS` lengthens the run.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ufutex::sync::{set_starvation_policy, Condvar, Mutex, Starvation};

struct Shared {
    m: Mutex<u64>,
    cv: Condvar,
    stop: AtomicBool,
    entered: AtomicU64,
}

fn worker(s: &Shared, kind: usize) {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ kind as u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while !s.stop.load(Ordering::Relaxed) {
        let r = next();
        let guard = match r % 4 {
            0 => Some(s.m.lock()),
            1 => s.m.try_lock(),
            _ => s.m.try_lock_for(Duration::from_micros(r % 200)),
        };
        let Some(mut g) = guard else { continue };
        *g += 1;
        s.entered.fetch_add(1, Ordering::Relaxed);
        match (kind, r % 8) {
            (0, _) if r % 3 == 0 => {
                s.cv.notify_all();
            }
            (0, _) => {
                s.cv.notify_one();
            }
            (_, 0) => {
                let _ = s.cv.wait_for(&mut g, Duration::from_micros(r % 300));
            }
            (_, 1) if !s.stop.load(Ordering::Relaxed) => {
                // Untimed: the notifier (kind 0) keeps notifying until every worker is out.
                s.cv.wait(&mut g);
            }
            _ => {}
        }
    }
}

/// Each starvation policy in turn: the default, a handoff on every contended wait (the most
/// handoffs, many racing their timeouts), and none.
#[test]
fn mixed_paths_keep_invariants() {
    let secs: f64 = std::env::var("UFUTEX_STRESS_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(0.3);
    for policy in [None, Some(Starvation::Wakeups(0)), Some(Starvation::Never)] {
        set_starvation_policy(policy);
        run(secs);
    }
    set_starvation_policy(None);
}

fn run(secs: f64) {
    let s = Arc::new(Shared {
        m: Mutex::new(0),
        cv: Condvar::new(),
        stop: AtomicBool::new(false),
        entered: AtomicU64::new(0),
    });
    let workers: Vec<_> = (1..6)
        .map(|k| {
            let s = s.clone();
            std::thread::spawn(move || worker(&s, k))
        })
        .collect();
    let notifier = {
        let s = s.clone();
        std::thread::spawn(move || worker(&s, 0))
    };
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    s.stop.store(true, Ordering::Relaxed);
    // Wake anyone still in an untimed wait until every worker has left. A worker that is
    // still there long after (a lost wakeup, or one that panicked holding the lock) fails the
    // test instead of hanging it; the bound is a hang guard, not a speed check.
    let guard = Instant::now() + Duration::from_secs(120);
    while workers.iter().any(|w| !w.is_finished()) {
        assert!(Instant::now() < guard, "workers still running 120 s after stop: lost wakeup or a dead worker");
        s.cv.notify_all();
        std::thread::yield_now();
    }
    for w in workers {
        w.join().unwrap();
    }
    notifier.join().unwrap();
    assert_eq!(*s.m.lock(), s.entered.load(Ordering::Relaxed));
    assert!(!s.m.is_locked());
    // Every waiter of this run has returned (this test is alone in its process): none is left
    // queued on the mutex or the condvar.
    assert_eq!(ufutex::Domain::default_domain().queued_waiters(), 0);
    assert!(s.entered.load(Ordering::Relaxed) > 0);
}
