//! Wakes of many, round after round: `N` threads wait on one word, more than one ring word's
//! 32 slots hold, so their sleeps span several ring words and a waker of all of them leaves
//! some of its kernel wakes owed, made by whichever thread claims them first
//! (`parker/rings.rs`, "Owed wakes"). Each round is woken one of three ways: one waker takes
//! all; two wakers at once take half each (their owed wakes meet on the same ring words); or
//! wakes of a few at a time. For `UFUTEX_STRESS_SECS` (2 s when unset; CI runs longer).
//!
//! Every round, the wakes' counts add up to `N` and every thread returns exactly once (a
//! double wake would count a thread twice, in its round or the next); a lost wakeup leaves a
//! thread asleep, which hangs the round until the watchdog fails the test. At the end nothing
//! is left queued.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, await_until, fixed, stress_secs, watchdog, Rng};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ufutex::Domain;

/// Sleepers: two ring words' worth and a half.
const N: usize = 80;

/// Wake all `N` queued waiters of `word` one of three ways (by `way`); how many the wakes took.
fn wake_round(d: &Domain, word: &AtomicU32, way: u64, rng: &mut Rng) -> usize {
    match way {
        0 => d.wake(word, usize::MAX),
        1 => std::thread::scope(|s| {
            let halves: Vec<_> = (0..2).map(|_| s.spawn(|| d.wake(word, N / 2))).collect();
            halves.into_iter().map(|h| h.join().unwrap()).sum()
        }),
        _ => {
            let mut took = 0;
            while took < N {
                let n = 1 + rng.below(24) as usize;
                let k = d.wake(word, n);
                assert_eq!(k, n.min(N - took), "a wake takes what it asks while enough are queued");
                took += k;
            }
            took
        }
    }
}

#[test]
fn every_sleeper_of_a_wake_of_many_returns_once_per_round() {
    watchdog();
    let d = fixed(64);
    let word = AtomicU32::new(0);
    let returned = AtomicUsize::new(0);
    // Rounds over: every sleeper of each woken and returned.
    let ended = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    let end = Instant::now() + Duration::from_secs(stress_secs());
    let mut rng = Rng::new(0x5eed_0f77);
    let rounds = std::thread::scope(|s| {
        let sleepers: Vec<_> = (0..N)
            .map(|_| {
                s.spawn(|| {
                    let mut woken = 0usize;
                    loop {
                        if stop.load(Ordering::SeqCst) {
                            return woken;
                        }
                        // Round `round`'s value: it moves on only once every sleeper is
                        // queued, so the wait returns only when a wake took this thread.
                        let round = word.load(Ordering::SeqCst);
                        d.wait(&word, round, None).expect("woken by a wake of this round");
                        woken += 1;
                        returned.fetch_add(1, Ordering::SeqCst);
                        // Not queued again before the round is over: a wake of a few in this
                        // round would take this thread twice.
                        await_until("the round to end", || ended.load(Ordering::SeqCst) > round);
                    }
                })
            })
            .collect();
        let mut rounds = 0;
        while rounds == 0 || Instant::now() < end {
            await_queued(&d, N);
            word.fetch_add(1, Ordering::SeqCst);
            let took = wake_round(&d, &word, rounds as u64 % 3, &mut rng);
            assert_eq!(took, N, "round {rounds}: the wakes took every sleeper once");
            rounds += 1;
            await_until("every sleeper woken this round returns", || returned.load(Ordering::SeqCst) == N * rounds);
            ended.store(rounds as u32, Ordering::SeqCst);
        }
        await_queued(&d, N);
        stop.store(true, Ordering::SeqCst);
        word.fetch_add(1, Ordering::SeqCst);
        assert_eq!(d.wake(&word, usize::MAX), N);
        await_until("every sleeper returns", || returned.load(Ordering::SeqCst) == N * (rounds + 1));
        ended.store(rounds as u32 + 1, Ordering::SeqCst);
        for (i, h) in sleepers.into_iter().enumerate() {
            // The last wake counts too.
            assert_eq!(h.join().unwrap(), rounds + 1, "sleeper {i} returned once per round");
        }
        rounds
    });
    assert_eq!(returned.load(Ordering::SeqCst), N * (rounds + 1));
    assert_eq!(d.queued_waiters(), 0, "nothing left queued");
}
