//! `ufutex::sync::Condvar`: broadcast wakes every waiter (through the requeue onto the mutex),
//! signal wakes one, timed waits time out, a producer/consumer loses no notification, and a
//! condvar used with two mutexes still wakes everyone.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ufutex::sync::{Condvar, Mutex};

/// Wait until `n` threads are inside `cv.wait` (they registered under the mutex; the count is
/// bumped right before waiting, so a short settle follows — correctness does not depend on it).
fn await_count(count: &AtomicUsize, n: usize) {
    while count.load(Ordering::SeqCst) < n {
        std::thread::yield_now();
    }
}

/// A flag under a mutex, and `n` threads that each count themselves in and wait on the
/// condvar until the flag is set.
type FlagState = Arc<(Mutex<bool>, Condvar, AtomicUsize)>;

fn flag_waiters(n: usize) -> (FlagState, Vec<std::thread::JoinHandle<()>>) {
    let state: FlagState = Arc::new((Mutex::new(false), Condvar::new(), AtomicUsize::new(0)));
    let hs = (0..n)
        .map(|_| {
            let s = state.clone();
            std::thread::spawn(move || {
                let (m, cv, waiting) = &*s;
                let mut g = m.lock();
                waiting.fetch_add(1, Ordering::SeqCst);
                while !*g {
                    cv.wait(&mut g);
                }
            })
        })
        .collect();
    (state, hs)
}

#[test]
fn broadcast_wakes_all() {
    const N: usize = 8;
    let (state, hs) = flag_waiters(N);
    let (m, cv, waiting) = &*state;
    await_count(waiting, N);
    // Every waiter has the mutex released inside `wait` once we can take it N times over;
    // set the flag under the lock and broadcast while holding it (the requeue case).
    {
        let mut g = m.lock();
        *g = true;
        cv.notify_all();
    }
    for h in hs {
        h.join().unwrap();
    }
    assert!(!m.is_locked());
}

/// Broadcast without holding the mutex, many rounds: nobody is left behind.
#[test]
fn broadcast_rounds_without_the_lock() {
    const N: usize = 6;
    const ROUNDS: u64 = 200;
    let state = Arc::new((Mutex::new(0u64), Condvar::new()));
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let s = state.clone();
            std::thread::spawn(move || {
                let (m, cv) = &*s;
                let mut seen = 0;
                while seen < ROUNDS {
                    let mut g = m.lock();
                    while *g == seen {
                        cv.wait(&mut g);
                    }
                    seen = *g;
                }
            })
        })
        .collect();
    let (m, cv) = &*state;
    for _ in 0..ROUNDS {
        *m.lock() += 1;
        cv.notify_all();
        std::thread::yield_now();
    }
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn notify_all_requeues_onto_the_mutex() {
    const N: usize = 4;
    let (state, hs) = flag_waiters(N);
    let (m, cv, waiting) = &*state;
    await_count(waiting, N);
    // All N are past their unlock in `wait` once we hold the lock. Let them reach the queue (a
    // waiter between unlock and enqueue is woken by the sequence change instead: still
    // correct, just not counted below).
    let mut g = m.lock();
    std::thread::sleep(Duration::from_millis(50));
    *g = true;
    let n = cv.notify_all();
    assert!(n <= N);
    drop(g);
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn signal_wakes_one_at_a_time() {
    const N: usize = 4;
    let state = Arc::new((Mutex::new(0usize), Condvar::new(), AtomicUsize::new(0)));
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let s = state.clone();
            std::thread::spawn(move || {
                let (m, cv, done) = &*s;
                let mut g = m.lock();
                while *g == 0 {
                    cv.wait(&mut g);
                }
                *g -= 1; // consume one token
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let (m, cv, done) = &*state;
    for i in 0..N {
        *m.lock() += 1;
        cv.notify_one();
        // Each token is consumed by exactly one waiter; spurious wakeups find no token.
        while done.load(Ordering::SeqCst) <= i {
            cv.notify_one();
            std::thread::yield_now();
        }
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), 0);
}

#[test]
fn timed_waits_time_out() {
    let m = Mutex::new(());
    let cv = Condvar::new();
    let mut g = m.lock();
    let before = Instant::now();
    assert!(cv.wait_for(&mut g, Duration::from_millis(10)).timed_out());
    assert!(before.elapsed() >= Duration::from_millis(10));
    assert!(cv.wait_until(&mut g, Instant::now()).timed_out());
    drop(g);
    assert!(!m.is_locked());
    assert!(!cv.notify_one());
    assert_eq!(cv.notify_all(), 0);
}

/// A bounded queue with two condvars: producers and consumers lose no notification.
#[test]
fn producer_consumer() {
    const ITEMS: u64 = 20_000;
    const CAP: usize = 4;
    let q = Arc::new((Mutex::new(std::collections::VecDeque::new()), Condvar::new(), Condvar::new()));
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            std::thread::spawn(move || {
                let (m, not_empty, not_full) = &*q;
                for i in 0..ITEMS {
                    let mut g = m.lock();
                    while g.len() >= CAP {
                        not_full.wait(&mut g);
                    }
                    g.push_back(i);
                    drop(g);
                    not_empty.notify_one();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            std::thread::spawn(move || {
                let (m, not_empty, not_full) = &*q;
                let mut sum = 0u64;
                for _ in 0..ITEMS {
                    let mut g = m.lock();
                    while g.is_empty() {
                        not_empty.wait(&mut g);
                    }
                    sum += g.pop_front().unwrap();
                    drop(g);
                    not_full.notify_all();
                }
                sum
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let total: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(total, 2 * (ITEMS * (ITEMS - 1) / 2));
}

/// Used with two mutexes, the condvar stops requeueing and wakes everyone: nobody hangs on
/// a mutex it does not use.
#[test]
fn two_mutexes_still_wake_everyone() {
    let state = Arc::new((Mutex::new(false), Mutex::new(false), Condvar::new(), AtomicUsize::new(0)));
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let s = state.clone();
            std::thread::spawn(move || {
                let (a, b, cv, waiting) = &*s;
                let m = if i % 2 == 0 { a } else { b };
                let mut g = m.lock();
                waiting.fetch_add(1, Ordering::SeqCst);
                while !*g {
                    cv.wait(&mut g);
                }
            })
        })
        .collect();
    let (a, b, cv, waiting) = &*state;
    await_count(waiting, 4);
    *a.lock() = true;
    *b.lock() = true;
    cv.notify_all();
    for h in hs {
        h.join().unwrap();
    }
}
