//! Stress of a mutex's first contention, and of its contention again after the mode decayed:
//! a quiet mutex's owner unlocks with a plain store until a thread announces that it will park,
//! and the mode decays back to quiet when nobody is registered to park (`raw_mutex.rs`, "The
//! mode byte"). Each round holds a mutex while two threads arrive and park at once (no
//! spinning), and unlocks; the threads then take it in turns, and the mode decays whenever
//! neither is registered. Half the time each round has a fresh mutex, then one mutex serves
//! every round (its mode decayed at the end of the last). Every other round the contenders ask
//! for a handoff as soon as they have announced (a zero starvation threshold), so requests race
//! the quiet store too ("Requests and the quiet store"). Invariants: every round finishes (a
//! lost wakeup would leave a thread parked: the watchdog aborts the run), the count under the
//! lock is exact, the lock ends free and nobody is left queued. `UFUTEX_STRESS_SECS` lengthens
//! the run. (Its own test binary: the spin policy is process-wide.)
#![cfg(not(ufutex_loom))]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ufutex::sync::{set_spin_policy, set_starvation_policy, RawMutex, SpinPolicy, Starvation};
use ufutex::{Domain, DomainConfig};

/// Critical sections per contender and round.
const ITERS: u64 = 20;

struct Counted {
    m: RawMutex,
    n: UnsafeCell<u64>,
}

// SAFETY: `n` is only touched with `m` held.
unsafe impl Sync for Counted {}

impl Counted {
    fn bump(&self) {
        // SAFETY: called with `m` held (see the callers), so the access is exclusive; a second
        // owner would make the increments race and the final count come out short.
        unsafe { *self.n.get() += 1 };
    }
}

/// Busy-wait about `d`, holding the lock, so the contenders arrive while it is held.
fn hold(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

#[test]
fn a_parker_or_a_requester_is_never_lost_on_a_fresh_or_a_decayed_mutex() {
    // Park at once: the contenders announce and mark the word right away, racing the unlock.
    set_spin_policy(Some(SpinPolicy { first_shift: 0, busy_rounds: 0, yield_rounds: 0, crowded_rounds: 0 }));
    let secs: f64 = std::env::var("UFUTEX_STRESS_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(0.5);
    let d = Domain::new(DomainConfig::new()).expect("domain");
    let rounds = AtomicU64::new(0);
    std::thread::scope(|s| {
        // The hang guard: no round for 60 s means a thread was left parked. Not a speed check.
        let watchdog = s.spawn(|| {
            let (mut seen, mut since) = (u64::MAX, Instant::now());
            loop {
                let r = rounds.load(Ordering::Relaxed);
                if r == u64::MAX {
                    return;
                }
                if r != seen {
                    (seen, since) = (r, Instant::now());
                } else if since.elapsed() > Duration::from_secs(60) {
                    eprintln!("no round finished for 60 s after round {r}: a parked thread was never woken");
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let start = Instant::now();
        let (half, end) = (start + Duration::from_secs_f64(secs / 2.0), start + Duration::from_secs_f64(secs));
        let mut round = 0u64;
        let reused = Counted { m: RawMutex::new(), n: UnsafeCell::new(0) };
        while round < 400 || Instant::now() < end {
            let fresh = Counted { m: RawMutex::new(), n: UnsafeCell::new(0) };
            let c = if round < 200 || Instant::now() < half { &fresh } else { &reused };
            set_starvation_policy(if round % 2 == 1 { Some(Starvation::After(Duration::ZERO)) } else { None });
            // SAFETY: no thread of the last round is left (the scope joined them).
            let before = unsafe { *c.n.get() };
            c.m.lock_in(&d);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..ITERS {
                            c.m.lock_in(&d);
                            c.bump();
                            c.m.unlock_in(&d);
                        }
                    });
                }
                // From 0 to 24 µs: the unlock lands before, during and after the announcements.
                hold(Duration::from_micros(round % 25));
                c.bump();
                c.m.unlock_in(&d);
            });
            // SAFETY: as above.
            let after = unsafe { *c.n.get() };
            assert_eq!(after - before, 2 * ITERS + 1, "round {round}: a critical section was lost");
            assert!(!c.m.is_locked_in(), "round {round}: the lock ends held");
            assert_eq!(d.queued_waiters(), 0, "round {round}: a waiter is left queued");
            round += 1;
            rounds.store(round, Ordering::Relaxed);
        }
        rounds.store(u64::MAX, Ordering::Relaxed);
        watchdog.join().unwrap();
    });
    set_spin_policy(None);
    set_starvation_policy(None);
}
