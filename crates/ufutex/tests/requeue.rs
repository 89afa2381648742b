//! Requeue: with the source holding `expected`, wakes up to `nr_wake` of its waiters (oldest
//! first) and moves up to `nr_requeue` more behind the target's existing waiters, returning
//! woken + moved; a value mismatch returns `WouldBlock` and changes nothing; requeueing to the
//! same word counts the waiters it would move and leaves them in their places (as the kernel
//! does); moved waiters keep their deadlines.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, await_until, default_domain_lock, fixed, watchdog};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8};
use std::sync::Mutex;
use std::time::Duration;
use ufutex::{Domain, WaitError};

fn len<T>(log: &Mutex<Vec<T>>) -> usize {
    log.lock().unwrap().len()
}

#[test]
fn counts_woken_plus_moved() {
    watchdog();
    let d = fixed(2);
    let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..5).map(|_| s.spawn(|| d.wait(&from, 0, None))).collect();
        await_queued(&d, 5);
        assert_eq!(d.requeue(&from, 0, &to, 2, 2), Ok(4));
        assert_eq!(d.queued_waiters(), 3, "two woken, two moved, one left");
        assert_eq!(d.wake(&from, usize::MAX), 1);
        assert_eq!(d.wake(&to, usize::MAX), 2);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn zero_counts_and_no_waiters() {
    watchdog();
    let d = fixed(2);
    let (from, to) = (AtomicU8::new(0xFF), AtomicU8::new(0));
    assert_eq!(d.requeue(&from, 0xFF, &to, 5, 5), Ok(0), "nobody to wake or move");
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&from, 0xFF, None));
        await_queued(&d, 1);
        assert_eq!(d.requeue(&from, 0xFF, &to, 0, 0), Ok(0), "0 and 0 touch nobody");
        assert_eq!(d.wake(&to, 1), 0);
        assert_eq!(d.requeue(&from, 0xFF, &to, 0, usize::MAX), Ok(1), "nr_wake 0 only moves");
        assert_eq!(d.wake(&from, 1), 0);
        assert_eq!(d.requeue(&to, 0, &from, usize::MAX, 0), Ok(1), "nr_requeue 0 only wakes");
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn mismatch_is_wouldblock_and_changes_nothing() {
    watchdog();
    let d = fixed(2);
    let (from, to) = (AtomicU64::new(1 << 40), AtomicU64::new(0));
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&from, 1 << 40, None));
        await_queued(&d, 1);
        assert_eq!(d.requeue(&from, 0, &to, 1, 1), Err(WaitError::WouldBlock), "low 32 bits equal is not equal");
        assert_eq!(d.requeue(&from, (1 << 40) + 1, &to, usize::MAX, usize::MAX), Err(WaitError::WouldBlock));
        assert_eq!(d.queued_waiters(), 1);
        assert_eq!(d.wake(&to, usize::MAX), 0, "nothing was moved");
        assert_eq!(d.wake(&from, usize::MAX), 1, "nothing was woken");
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

/// Queue `ids` on `w` one at a time (so their order is known), each logging its id on return.
fn queue_in_order<'s, 'e>(
    s: &'s std::thread::Scope<'s, 'e>,
    d: &'e Domain,
    w: &'e AtomicU32,
    ids: &[&'static str],
    log: &'e Mutex<Vec<&'static str>>,
) {
    for &id in ids {
        let before = d.queued_waiters();
        s.spawn(move || {
            assert_eq!(d.wait(w, 0, None), Ok(()));
            log.lock().unwrap().push(id);
        });
        await_queued(d, before + 1);
    }
}

/// Wake `w` one waiter at a time and return the order they left in.
fn drain_one_by_one(d: &Domain, w: &AtomicU32, n: usize, log: &Mutex<Vec<&'static str>>) {
    let base = len(log);
    for k in 1..=n {
        assert_eq!(d.wake(w, 1), 1);
        await_until("the woken waiter to log itself", || len(log) == base + k);
    }
}

#[test]
fn requeued_waiters_go_behind_the_targets_waiters() {
    watchdog();
    // With 2 buckets, some of the 4 targets share the source's bucket and some do not: both
    // locking paths are exercised.
    let d = fixed(2);
    let from = AtomicU32::new(0);
    let targets: [AtomicU32; 4] = std::array::from_fn(|_| AtomicU32::new(0));
    for to in &targets {
        let log = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            queue_in_order(s, &d, to, &["t0", "t1"], &log);
            queue_in_order(s, &d, &from, &["f0", "f1", "f2", "f3"], &log);
            assert_eq!(d.requeue(&from, 0, to, 1, 2), Ok(3));
            await_until("f0 to be woken", || len(&log) == 1);
            assert_eq!(d.wake(&from, usize::MAX), 1, "f3 stayed on the source");
            await_until("f3 to leave", || len(&log) == 2);
            drain_one_by_one(&d, to, 4, &log);
        });
        assert_eq!(*log.lock().unwrap(), ["f0", "f3", "t0", "t1", "f1", "f2"]);
        assert_eq!(d.queued_waiters(), 0);
    }
}

#[test]
fn requeue_to_the_same_word_counts_its_waiters_in_place() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        queue_in_order(s, &d, &w, &["a", "b", "c"], &log);
        assert_eq!(d.requeue(&w, 0, &w, 0, 1), Ok(1), "a counted, and left first");
        assert_eq!(d.requeue(&w, 0, &w, 0, 5), Ok(3), "all three counted");
        assert_eq!(d.queued_waiters(), 3);
        drain_one_by_one(&d, &w, 3, &log);
    });
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c"]);
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        queue_in_order(s, &d, &w, &["a", "b", "c"], &log);
        assert_eq!(d.requeue(&w, 0, &w, 1, usize::MAX), Ok(3), "a woken, b and c counted");
        await_until("a to leave", || len(&log) == 1);
        drain_one_by_one(&d, &w, 2, &log);
    });
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c"]);
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn requeued_waiters_keep_their_deadlines() {
    watchdog();
    let d = fixed(2);
    let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|s| {
        let short = s.spawn(|| d.wait(&from, 0, Some(Duration::from_millis(100).into())));
        await_queued(&d, 1);
        let long = s.spawn(|| d.wait(&from, 0, Some(Duration::from_secs(600).into())));
        await_queued(&d, 2);
        assert_eq!(d.requeue(&from, 0, &to, 0, usize::MAX), Ok(2));
        // The short one times out from the target's queue and leaves it; the long one is
        // still there, and is woken through the target.
        assert_eq!(short.join().unwrap(), Err(WaitError::TimedOut));
        await_queued(&d, 1);
        assert_eq!(d.wake(&from, usize::MAX), 0);
        assert_eq!(d.wake(&to, usize::MAX), 1);
        assert_eq!(long.join().unwrap(), Ok(()));
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn requeue_racing_timeouts_is_accounted() {
    watchdog();
    // Waiters with tiny deadlines are requeued back and forth and woken: every wake or requeue
    // count that woke someone is exactly one Ok, and every timed-out waiter left its queue.
    let d = fixed(2);
    let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
    let done = std::sync::atomic::AtomicBool::new(false);
    let (oks, woken) = std::thread::scope(|s| {
        let _stop = common::StopOnDrop(&done);
        let waiters: Vec<_> = (0..3u64)
            .map(|t| {
                let (d, a) = (&d, &a);
                s.spawn(move || {
                    (0..1500u64)
                        .filter(|i| {
                            let dl = Duration::from_micros((i * 13 + t * 7) % 80).into();
                            match d.wait(a, 0, Some(dl)) {
                                Ok(()) => true,
                                Err(WaitError::TimedOut) => false,
                                Err(e) => panic!("unexpected {e:?}"),
                            }
                        })
                        .count()
                })
            })
            .collect();
        let waker = s.spawn(|| {
            let mut woken = 0;
            let mut i = 0u32;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                i = i.wrapping_add(1);
                match i % 3 {
                    0 => woken += d.requeue(&a, 0, &b, 1, 0).unwrap(), // nr_requeue 0: all woken
                    1 => {
                        let _moved = d.requeue(&a, 0, &b, 0, 2).unwrap();
                    }
                    _ => woken += d.wake(&b, 1),
                }
            }
            woken + d.wake(&b, usize::MAX) + d.wake(&a, usize::MAX)
        });
        let oks: usize = waiters.into_iter().map(|t| t.join().unwrap()).sum();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (oks, waker.join().unwrap())
    });
    assert_eq!(oks, woken, "every counted wake is exactly one Ok");
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn free_function_requeue_in_the_default_domain() {
    watchdog();
    let _g = default_domain_lock();
    let dd = Domain::default_domain();
    let (from, to) = (AtomicU8::new(1), AtomicU8::new(2));
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..3).map(|_| s.spawn(|| ufutex::wait(&from, 1, None))).collect();
        await_queued(dd, 3);
        assert_eq!(ufutex::requeue(&from, 2, &to, 1, 1), Err(WaitError::WouldBlock));
        assert_eq!(ufutex::requeue(&from, 1, &to, 1, 1), Ok(2));
        assert_eq!(ufutex::wake(&to, usize::MAX), 1);
        assert_eq!(ufutex::wake(&from, usize::MAX), 1);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(dd.queued_waiters(), 0);
}

/// A requeue that wakes, racing a waiter on its way to the queue: a requeue looks at the source
/// bucket as a wake does, with no fence where `membarrier` works (`requeue.rs`). Each round the
/// waiter either sees the change or is woken by the requeue and counted once; one left asleep
/// (a lost wakeup) would time out. Varying spins before the change move the race over the
/// waiter's whole path (its spin, its count, its barrier, its compare, its sleep).
#[test]
fn a_waking_requeue_racing_a_waiter_loses_no_wakeup() {
    use std::sync::atomic::Ordering::{Acquire, Release};
    watchdog();
    let d = fixed(4);
    let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
    // `go`: the round the waiter may start; `done`: 1 + the rounds it finished, with its Oks.
    let (go, done) = (AtomicU32::new(0), AtomicU64::new(0));
    let end = std::time::Instant::now() + Duration::from_secs(common::stress_secs().div_ceil(2));
    let quit = AtomicBool::new(false);
    let (mut rounds, mut woken_rounds) = (0u32, 0u64);
    std::thread::scope(|s| {
        let _quit = common::StopOnDrop(&quit); // also if an assertion below fails
        s.spawn(|| {
            for round in 0.. {
                while go.load(Acquire) < round + 1 {
                    if quit.load(Acquire) {
                        return;
                    }
                    std::hint::spin_loop();
                }
                let mut oks = 0u64;
                while from.load(Acquire) == round {
                    match d.wait(&from, round, Some(Duration::from_secs(30).into())) {
                        Ok(()) => oks += 1,
                        Err(WaitError::WouldBlock) => {}
                        Err(e) => panic!("round {round}: the wait ended {e:?}: a lost wakeup"),
                    }
                }
                done.store((u64::from(round) + 1) << 8 | oks, Release);
            }
        });
        while std::time::Instant::now() < end || rounds < 2000 {
            let round = rounds;
            go.store(round + 1, Release);
            for _ in 0..(round % 128) * 8 {
                std::hint::spin_loop();
            }
            from.store(round + 1, Release);
            let woken = d.requeue(&from, round + 1, &to, 1, 0).expect("the source holds the new value");
            let report = loop {
                let r = done.load(Acquire);
                if r >> 8 == u64::from(round) + 1 {
                    break r;
                }
                std::hint::spin_loop();
            };
            assert_eq!(report & 0xff, woken as u64, "round {round}: a wait is Ok exactly when the requeue counted it");
            woken_rounds += report & 0xff;
            rounds += 1;
        }
    });
    assert_eq!(d.queued_waiters(), 0);
    eprintln!("{rounds} rounds, {woken_rounds} of them woken by the requeue");
}
