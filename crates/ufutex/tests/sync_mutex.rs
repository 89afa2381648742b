//! `ufutex::sync::Mutex`: mutual exclusion under contention (an exact counter), try_lock, and
//! timed locks that time out and that succeed.
#![cfg(not(ufutex_loom))]

use lock_api::RawMutex as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use ufutex::sync::{Mutex, RawMutex};

/// 8 threads × 10^5 increments of a non-atomic counter: every increment is counted.
#[test]
fn exact_counter_8_threads() {
    const THREADS: usize = 8;
    const ITERS: u64 = 100_000;
    let m = Arc::new(Mutex::new(0u64));
    let start = Arc::new(Barrier::new(THREADS));
    let hs: Vec<_> = (0..THREADS)
        .map(|_| {
            let (m, start) = (m.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..ITERS {
                    let mut g = m.lock();
                    // A read-modify-write in two steps, so a lost exclusion loses an increment.
                    let v = *g;
                    std::hint::black_box(&mut *g);
                    *g = v + 1;
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), THREADS as u64 * ITERS);
    assert!(!m.is_locked());
}

#[test]
fn two_bytes_and_const_init() {
    static M: Mutex<u8> = Mutex::const_new(RawMutex::INIT, 7);
    assert_eq!(std::mem::size_of::<RawMutex>(), 2);
    assert_eq!(std::mem::size_of::<Mutex<u8>>(), 4);
    assert_eq!(*M.lock(), 7);
}

#[test]
fn try_lock_fails_while_held_and_succeeds_after() {
    let m = Arc::new(Mutex::new(()));
    let g = m.lock();
    let m2 = m.clone();
    assert!(std::thread::spawn(move || m2.try_lock().is_none()).join().unwrap());
    drop(g);
    let m2 = m.clone();
    assert!(std::thread::spawn(move || m2.try_lock().is_some()).join().unwrap());
}

#[test]
fn timed_lock_times_out_while_held() {
    let m = Arc::new(Mutex::new(()));
    let _g = m.lock();
    let m2 = m.clone();
    let t = std::thread::spawn(move || {
        let before = Instant::now();
        let got = m2.try_lock_for(Duration::from_millis(20)).is_some();
        (got, before.elapsed())
    });
    let (got, waited) = t.join().unwrap();
    assert!(!got);
    // Not a timing assertion on speed: a timeout may not fire early.
    assert!(waited >= Duration::from_millis(20), "returned after {waited:?}");
    // A deadline in the past fails at once, but only if the lock is held.
    assert!(m.try_lock_until(Instant::now()).is_none() || !m.is_locked());
}

#[test]
fn timed_lock_succeeds_when_released() {
    let m = Arc::new(Mutex::new(0));
    let g = m.lock();
    let m2 = m.clone();
    let t = std::thread::spawn(move || {
        let mut g = m2.try_lock_for(Duration::from_secs(60)).expect("released long before the deadline");
        *g += 1;
    });
    std::thread::sleep(Duration::from_millis(10));
    drop(g);
    t.join().unwrap();
    assert_eq!(*m.lock(), 1);
    let free = Mutex::new(());
    assert!(free.try_lock_until(Instant::now()).is_some(), "a free lock is taken even past the deadline");
}

/// Timed lockers that give up must not strand the waiters queued behind them: everyone
/// still gets through, and the lock ends free.
#[test]
fn timeouts_do_not_strand_waiters() {
    let m = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let timed: Vec<_> = (0..3)
        .map(|_| {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut timeouts = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match m.try_lock_for(Duration::from_micros(50)) {
                        Some(mut g) => *g += 1,
                        None => timeouts += 1,
                    }
                }
                timeouts
            })
        })
        .collect();
    let plain: Vec<_> = (0..3)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    for h in plain {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in timed {
        h.join().unwrap();
    }
    assert!(*m.lock() >= 60_000);
    assert!(!m.is_locked());
}
