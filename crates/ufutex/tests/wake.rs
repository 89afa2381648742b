//! Wake: returns how many waiters it dequeued (at most `n`; `n == 0` wakes nobody and returns 0;
//! `usize::MAX` wakes all), wakes waiters of one key oldest first, and never disturbs waiters
//! of other keys — even when they share its bucket (a 2-bucket domain forces that).
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, await_until, default_domain_lock, fixed, wake_in_steps, watchdog};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use ufutex::{Domain, WaitError};

fn log_len<T>(log: &Mutex<Vec<T>>) -> usize {
    log.lock().unwrap().len()
}

#[test]
fn wake_without_waiters_returns_zero_at_every_size() {
    let d = fixed(2);
    let (w8, w16, w32, w64) = (AtomicU8::new(0), AtomicU16::new(0), AtomicU32::new(0), AtomicU64::new(0));
    for n in [0, 1, 7, usize::MAX] {
        assert_eq!(d.wake(&w8, n), 0);
        assert_eq!(d.wake(&w16, n), 0);
        assert_eq!(d.wake(&w32, n), 0);
        assert_eq!(d.wake(&w64, n), 0);
        assert_eq!(ufutex::wake(&w32, n), 0);
    }
}

#[test]
fn counts_n_zero_and_all() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..5).map(|_| s.spawn(|| d.wait(&w, 0, None))).collect();
        await_queued(&d, 5);
        assert_eq!(d.wake(&w, 0), 0, "n == 0 wakes nobody");
        assert_eq!(d.queued_waiters(), 5);
        assert_eq!(d.wake(&w, 2), 2);
        assert_eq!(d.queued_waiters(), 3, "a wake dequeues before it returns");
        assert_eq!(d.wake(&w, usize::MAX), 3);
        assert_eq!(d.wake(&w, usize::MAX), 0);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn wake_more_than_queued_returns_how_many_were_there() {
    watchdog();
    let d = fixed(8);
    let w = AtomicU8::new(0);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..3).map(|_| s.spawn(|| d.wait(&w, 0, None))).collect();
        await_queued(&d, 3);
        assert_eq!(d.wake(&w, 10), 3);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
}

#[test]
fn fifo_per_key() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU64::new(u64::MAX);
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for id in 0..6 {
            let (d, w, log) = (&d, &w, &log);
            s.spawn(move || {
                assert_eq!(d.wait(w, u64::MAX, None), Ok(()));
                log.lock().unwrap().push(id);
            });
            await_queued(d, id + 1); // queue them one at a time: the queue order is 0..6
        }
        for k in 1..=6 {
            assert_eq!(d.wake(&w, 1), 1);
            await_until("the woken waiter to log itself", || log_len(&log) == k);
        }
    });
    assert_eq!(*log.lock().unwrap(), (0..6).collect::<Vec<_>>(), "woken oldest first");
}

#[test]
fn other_keys_in_the_same_bucket_are_not_disturbed() {
    watchdog();
    // 2 buckets, 5 words: at least three words share a bucket. Waiters are queued interleaved
    // (w0, w1, .., w4, w0, w1, ..), so every bucket's queue mixes keys.
    let d = fixed(2);
    let words: Vec<AtomicU32> = (0..5).map(|_| AtomicU32::new(0)).collect();
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for round in 0..2 {
            for (i, w) in words.iter().enumerate() {
                let (d, log) = (&d, &log);
                s.spawn(move || {
                    assert_eq!(d.wait(w, 0, None), Ok(()));
                    log.lock().unwrap().push((i, round));
                });
                await_queued(d, round * 5 + i + 1);
            }
        }
        let mut expect = Vec::new();
        for i in [3, 0, 4, 1, 2] {
            assert_eq!(d.wake(&words[i], 1), 1, "word {i}: its oldest waiter");
            expect.push((i, 0));
            await_until("the woken waiter to log itself", || log_len(&log) == expect.len());
            assert_eq!(d.queued_waiters(), 10 - expect.len());
        }
        for i in [2, 4, 1, 3, 0] {
            assert_eq!(d.wake(&words[i], usize::MAX), 1, "word {i}: exactly its own last waiter");
            expect.push((i, 1));
            await_until("the woken waiter to log itself", || log_len(&log) == expect.len());
        }
        assert_eq!(*log.lock().unwrap(), expect, "each wake took its own key's oldest waiter");
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn neighbouring_words_are_distinct_keys() {
    watchdog();
    let d = fixed(2);
    let words: [AtomicU8; 4] = std::array::from_fn(|_| AtomicU8::new(0));
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&words[1], 0, None));
        await_queued(&d, 1);
        assert_eq!(d.wake(&words[0], usize::MAX), 0);
        assert_eq!(d.wake(&words[2], usize::MAX), 0);
        assert_eq!(d.queued_waiters(), 1);
        assert_eq!(d.wake(&words[1], usize::MAX), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn domains_do_not_wake_each_other() {
    watchdog();
    let (a, b) = (fixed(2), fixed(2));
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| a.wait(&w, 0, None));
        await_queued(&a, 1);
        assert_eq!(b.wake(&w, usize::MAX), 0, "a wake in another domain finds nobody");
        assert_eq!(a.wake(&w, usize::MAX), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn free_functions_count_and_wake_in_the_default_domain() {
    watchdog();
    let _g = default_domain_lock();
    let dd = Domain::default_domain();
    let w = AtomicU16::new(5);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..3).map(|_| s.spawn(|| ufutex::wait(&w, 5, None))).collect();
        await_queued(dd, 3);
        assert_eq!(dd.wake(&w, 1), 1, "the method on the default domain and the free function meet");
        assert_eq!(ufutex::wake(&w, 0), 0);
        w.store(6, Ordering::SeqCst);
        assert_eq!(ufutex::wake(&w, usize::MAX), 2);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
        assert_eq!(ufutex::wait(&w, 5, None), Err(WaitError::WouldBlock));
    });
    assert_eq!(dd.queued_waiters(), 0);
}

#[test]
fn wakes_from_many_threads_each_count_distinct_waiters() {
    watchdog();
    // 32 waiters, 4 wakers of one each, repeatedly: the counts sum to exactly 32.
    let d = fixed(2);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let ws: Vec<_> = (0..32).map(|_| s.spawn(|| d.wait(&w, 0, None))).collect();
        await_queued(&d, 32);
        let wakers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0;
                    while d.queued_waiters() > 0 {
                        n += d.wake(&w, 1);
                    }
                    n
                })
            })
            .collect();
        let total: usize = wakers.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 32);
        for t in ws {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
}

#[test]
fn a_partial_wake_that_rings_the_bell_returns_only_the_waiters_it_took() {
    watchdog();
    // Eight sleepers of one word share its bucket's bell. A wake of 4 leaves 4 queued, so it
    // rings: all eight are woken in the kernel, and the four it did not take must go back to
    // sleep, still queued, until later wakes take them (3 of them, then the last).
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let returned = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let r = d.wait(&w, 0, None);
                    returned.fetch_add(1, Ordering::SeqCst);
                    r
                })
            })
            .collect();
        await_queued(&d, 8);
        wake_in_steps(&d, &w, &returned, 8, &[(4, 4), (3, 1), (1, 0)]);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.queued_waiters(), 0);
}
