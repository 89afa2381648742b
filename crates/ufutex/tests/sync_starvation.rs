//! Handoff bounds unfairness: a designated thread that sleeps on the lock keeps getting it
//! while other threads hammer it with short critical sections. Bounds are counts, generous by
//! orders of magnitude, never times.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use ufutex::sync::Mutex;

/// The designated thread's acquisitions.
const ROUNDS: u64 = 100;
/// Hammer acquisitions after which the hammers stop regardless (so a starving lock fails the
/// test instead of hanging it).
const CAP: u64 = 20_000_000;

/// Runs `hammers` threads that re-lock in a tight loop while the designated thread takes the
/// lock `ROUNDS` times; returns the most hammer acquisitions seen between two of its own, and
/// whether it finished before the hammers gave up.
fn designated_vs_hammers(hammers: usize) -> (u64, bool) {
    let m = Arc::new(Mutex::new(0u64));
    let total = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..hammers)
        .map(|_| {
            let (m, total, done) = (m.clone(), total.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) && total.load(Ordering::Relaxed) < CAP {
                    let mut g = m.lock();
                    *g += 1;
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    drop(g);
                    total.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    while total.load(Ordering::Relaxed) < 1_000 {
        std::thread::yield_now(); // let the hammers get going
    }
    let mut worst_gap = 0;
    let mut last = total.load(Ordering::Relaxed);
    for _ in 0..ROUNDS {
        let g = m.lock();
        let now = total.load(Ordering::Relaxed);
        drop(g);
        worst_gap = worst_gap.max(now - last);
        last = now;
        std::thread::yield_now();
    }
    let finished_before_cap = total.load(Ordering::Relaxed) < CAP;
    done.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), total.load(Ordering::Relaxed), "every increment counted");
    eprintln!("{hammers} hammer(s): worst gap {worst_gap}, total {}", total.load(Ordering::Relaxed));
    (worst_gap, finished_before_cap)
}

/// The classic starvation: the unlocker re-locks before the woken thread runs. With handoff
/// the woken thread asks once it has been parked for the threshold (1 ms) and gets the lock at
/// the next unlock. Measured worst gaps (2 CPUs, other jobs running): 5 900–7 400 with the
/// default policy; 42 000–615 000 with handoff disabled (`Starvation::Never`). How soon a
/// woken thread gets a CPU is not the lock's doing, so the bound leaves room for a loaded
/// machine.
#[test]
fn designated_thread_beats_a_relocking_hammer() {
    let (gap, finished) = designated_vs_hammers(1);
    assert!(finished, "the designated thread starved until the hammer gave up");
    assert!(gap <= 100_000, "{gap} hammer acquisitions between two of ours");
}

/// More hammers than CPUs: how soon a woken thread runs is up to the scheduler, so only
/// progress is asserted.
#[test]
fn designated_thread_progresses_among_many_hammers() {
    let (_, finished) = designated_vs_hammers(4);
    assert!(finished, "the designated thread starved until the hammers gave up");
}
