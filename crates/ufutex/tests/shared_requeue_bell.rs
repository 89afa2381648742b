//! Requeued shared waiters and the bell (`park.rs`): a waiter sleeps on the bell of the bucket
//! its record was in when it slept, and a requeue moves the record to another bucket without
//! waking it. A waker of the target then finds threads that sleep on another bucket's bell, and
//! rings that bell: after the unlock for those of its own process (`park::Later`), under the
//! lock for another process's (`park::Ring`, with `ringing` naming the other bucket). Rounds, for `UFUTEX_STRESS_SECS` (2 s when unset): 12 threads wait
//! on `a` (12 threads of the waking process in even rounds, 2 processes × 6 in odd ones); a
//! requeue wakes one and moves 8 to `b` (one of several words, so that most rounds move them to
//! another bucket); then wakes of `b` and of `a` in partial steps. After every step no more
//! waiters have returned than were taken (a thread that a ring woke without a wake of its own
//! would return too early), each step takes as many as it asked (nobody a ring woke left its
//! queue), and at the end every waiter returned exactly once (none timed out: no lost wakeup)
//! and nobody is queued.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, reap, shared_anon};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared;

const LONG: Duration = Duration::from_secs(20);
/// Waiters per round, all on `a`.
const WAITERS: u32 = 12;
/// The requeue: woken, then moved to `b`.
const REQUEUE: (usize, usize) = (1, 8);
/// The wakes after it, in order: (`b`: 0, `a`: 1; how many). The first takes 5 of the 8 moved
/// (a ring for our own threads), the rest one or a few each.
const STEPS: [(usize, u32); 4] = [(0, 5), (1, 2), (0, 3), (1, 1)];
/// How many words `b` rotates over.
const TARGETS: usize = 6;

/// A process of waiters: `n` threads wait on `a`, each adding 1 to `returned` when woken
/// (`common::shared_waiters`).
fn waiters(a: &'static AtomicU32, returned: &'static AtomicU32, n: u32) -> i32 {
    common::shared_waiters((0..n).map(|_| (a, returned)).collect(), LONG)
}

#[test]
fn requeued_waiters_are_woken_only_when_taken() {
    let _table = common::isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned, inside the page.
    let (a, returned): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 0), at(p, 64)) };
    // SAFETY: as above.
    let targets: Vec<&AtomicU32> = (0..TARGETS).map(|i| unsafe { at(p, 128 + 64 * i) }).collect();
    assert_eq!(shared::wake(a, 1), Ok(0)); // map the table before forking
    let start = Instant::now();
    let mut rounds = 0;
    while rounds == 0 || start.elapsed() < Duration::from_secs(common::stress_secs()) {
        returned.store(0, Ordering::Relaxed);
        let b = targets[rounds % TARGETS];
        let ours = rounds % 2 == 0;
        let pids =
            if ours { Vec::new() } else { [0, 1].map(|_| child(move || waiters(a, returned, WAITERS / 2))).to_vec() };
        let own = ours.then(|| std::thread::spawn(move || waiters(a, returned, WAITERS)));
        let what = || format!("round {rounds}: the waiters never all queued");
        common::await_shared_queued(a, WAITERS as usize, Instant::now() + LONG, what);
        // Let them fall asleep (on the bell of `a`'s bucket); not relied on.
        std::thread::sleep(Duration::from_millis(2));
        let (woken, moved) = REQUEUE;
        assert_eq!(shared::requeue(a, 0, b, woken, moved), Ok(woken + moved), "round {rounds}: the requeue");
        let mut taken = woken as u32;
        let mut queued = [moved as u32, WAITERS - (woken + moved) as u32];
        for (i, n) in STEPS {
            std::thread::sleep(Duration::from_millis(2));
            let word = [b, a][i];
            assert_eq!(shared::wake(word, n as usize), Ok(n as usize), "round {rounds}: waiters left their queue");
            taken += n;
            queued[i] -= n;
            let r = returned.load(Ordering::Relaxed);
            assert!(r <= taken, "round {rounds}: {r} waiters returned, {taken} taken");
        }
        assert_eq!(shared::wake(b, usize::MAX), Ok(queued[0] as usize), "round {rounds}: left on b");
        assert_eq!(shared::wake(a, usize::MAX), Ok(queued[1] as usize), "round {rounds}: left on a");
        for pid in pids {
            assert_eq!(reap(pid), 0, "round {rounds}: a waiter timed out or failed");
        }
        if let Some(own) = own {
            assert_eq!(own.join().unwrap(), 0, "round {rounds}: a waiter of ours timed out or failed");
        }
        assert_eq!(returned.load(Ordering::Relaxed), WAITERS);
        for w in targets.iter().copied().chain([a]) {
            assert_eq!(shared::wake(w, usize::MAX), Ok(0), "a waiter left queued");
        }
        rounds += 1;
    }
    eprintln!("{rounds} rounds");
}
