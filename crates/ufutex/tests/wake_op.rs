//! The wake-op against a waiter arriving while it runs: the race between its two looks.
//!
//! A wake-op that finds nobody waiting on either word at its first look makes its operation
//! without the bucket locks and looks at the second word again; a waiter of that word that
//! queued in between must be woken (`wake_op_looking`, `src/wake_op.rs`; the loom models prove
//! it on the model, this test runs it on the hardware). In rounds, a waiter waits on the second
//! word for the value it had before the round, while a waker adds 1 to the word and wakes its
//! waiter. The waker starts once the waiter is about to wait, and each side first pauses a
//! random time, so that the waiter arrives before, during and after the waker's looks. Every
//! round must end one of two ways: the waiter was woken and the wake-op counted it, or the
//! waiter saw the new value (`WouldBlock`) and the wake-op counted nobody. A lost wakeup
//! leaves the waiter asleep to its 10 s deadline; a wake counted for nobody, or a waiter woken
//! without a count, breaks the pairing. Private words, then process-shared ones,
//! for `UFUTEX_STRESS_SECS` each (2 s when unset; CI's stress step runs longer).
//!
//! The window is a few ns wide (a waiter must count itself and compare between the waker's first
//! look and its operation), so only a long run is likely to hit it: with the second look
//! removed, a 2 s run passed, and 15 s runs failed 5 times in 5 with private words and 4 in 5
//! with shared ones (a waiter timed out).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, futex_op, shared_anon, stress_secs, watchdog, Rng, StopOnDrop, CMP_GE, OP_ADD};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitError;

/// How a waiter's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Woken,
    SawTheChange,
}

/// No waiter of a round may sleep this long: its waker runs at most a few µs after it.
const LONG: Duration = Duration::from_secs(10);

/// ADD 1 to the second word; its old value is always ≥ 0, so its waiters are always woken too.
const ADD_ONE_AND_WAKE: u32 = futex_op(OP_ADD, 1, CMP_GE, 0);

/// Spin a random 0–`max` spin hints (a hint is 10–70 ns on the project's hosts).
fn pause(rng: &mut Rng, max: u64) {
    for _ in 0..rng.below(max + 1) {
        std::hint::spin_loop();
    }
}

/// Rounds on `first` and `second` (nobody waits on `first`; `second` starts at 0), for `secs`
/// seconds: `wait` waits on `second` for a value; `wake_op` adds 1 to `second`, wakes one waiter
/// of each word and returns how many it woke. Returns (rounds whose waiter was woken, rounds
/// whose waiter saw the change).
fn rounds(
    first: &AtomicU32,
    second: &AtomicU32,
    wait: impl Fn(&AtomicU32, u32) -> Ended + Sync,
    wake_op: impl Fn(&AtomicU32, &AtomicU32) -> usize,
    secs: u64,
) -> (u64, u64) {
    let seed = std::env::var("UFUTEX_STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    // `go`: the round the waiter may start (1-based), STOP to stop; `ready`: the round whose
    // wait the waiter is about to make; `done`: the last round it finished; `ended`: how (0
    // woken, 1 saw the change).
    let (go, ready, done) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
    let ended = AtomicU32::new(u32::MAX);
    // Set when the waiter's thread ends, even by a panic: then the waker stops waiting for it.
    let waiter_gone = AtomicBool::new(false);
    const STOP: u32 = u32::MAX;
    let await_value = |w: &AtomicU32, v: u32| {
        while w.load(Ordering::SeqCst) != v {
            assert!(!waiter_gone.load(Ordering::SeqCst), "the waiter failed (above)");
            std::thread::yield_now();
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let _gone = StopOnDrop(&waiter_gone);
            let mut rng = Rng::new(seed ^ 1);
            let mut round = 1;
            loop {
                let g = loop {
                    match go.load(Ordering::SeqCst) {
                        g if g == round || g == STOP => break g,
                        _ => std::thread::yield_now(),
                    }
                };
                if g == STOP {
                    return;
                }
                ready.store(round, Ordering::SeqCst);
                pause(&mut rng, 4);
                // The value before this round's operation (each adds 1 to a word that starts
                // at 0), whether or not the operation has come yet.
                let how = wait(second, round - 1);
                ended.store(if how == Ended::Woken { 0 } else { 1 }, Ordering::SeqCst);
                done.store(round, Ordering::SeqCst);
                round += 1;
            }
        });
        let mut rng = Rng::new(seed);
        let (mut woken, mut saw) = (0, 0);
        let end = Instant::now() + Duration::from_secs(secs);
        let mut round = 1;
        while Instant::now() < end {
            go.store(round, Ordering::SeqCst);
            await_value(&ready, round);
            let max = [2, 8, 32, 128][rng.below(4) as usize];
            pause(&mut rng, max);
            let n = wake_op(first, second);
            await_value(&done, round);
            match (ended.load(Ordering::SeqCst), n) {
                (0, 1) => woken += 1,
                (1, 0) => saw += 1,
                (e, n) => panic!(
                    "round {round} (seed {seed}): the waiter {} and the wake-op counted {n}",
                    if e == 0 { "was woken" } else { "saw the change" }
                ),
            }
            round += 1;
        }
        go.store(STOP, Ordering::SeqCst);
        (woken, saw)
    })
}

#[test]
fn a_private_wake_op_wakes_the_waiter_or_the_waiter_saw_its_change() {
    watchdog();
    let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
    let wait = |w: &AtomicU32, v: u32| match ufutex::wait(w, v, Some(LONG.into())) {
        Ok(()) => Ended::Woken,
        Err(WaitError::WouldBlock) => Ended::SawTheChange,
        Err(e) => panic!("a private wait ended with {e:?}: a lost wakeup if TimedOut"),
    };
    let wake_op = |a: &AtomicU32, b: &AtomicU32| {
        common::private_wake_op(a, b, 1, 1, ADD_ONE_AND_WAKE).unwrap_or_else(|e| panic!("wake-op: errno {e}"))
    };
    let (woken, saw) = rounds(&a, &b, wait, wake_op, stress_secs());
    eprintln!("private: {woken} rounds woken, {saw} saw the change");
    assert_eq!(ufutex::wake(&b, usize::MAX), 0, "a waiter left queued");
}

#[test]
fn a_shared_wake_op_wakes_the_waiter_or_the_waiter_saw_its_change() {
    watchdog();
    let _table = common::isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: two aligned words of a fresh shared mapping, never unmapped.
    let (a, b): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 0), at(p, 64)) };
    let wait = |w: &AtomicU32, v: u32| match shared::wait(w, v, Some(LONG.into())) {
        Ok(()) => Ended::Woken,
        Err(SharedError::WouldBlock) => Ended::SawTheChange,
        Err(e) => panic!("a shared wait ended with {e:?}: a lost wakeup if TimedOut"),
    };
    let wake_op = |a: &AtomicU32, b: &AtomicU32| {
        common::shared_wake_op(a, b, 1, 1, ADD_ONE_AND_WAKE).unwrap_or_else(|e| panic!("wake-op: errno {e}"))
    };
    let (woken, saw) = rounds(a, b, wait, wake_op, stress_secs());
    eprintln!("shared: {woken} rounds woken, {saw} saw the change");
    assert_eq!(shared::wake(b, usize::MAX), Ok(0), "a waiter left queued");
}
