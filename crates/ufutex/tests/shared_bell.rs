//! The shared table's bell (`park.rs`, "The bell"): a waker that takes several threads asleep
//! on their bucket's bell wakes them all with one ring, which also wakes every other thread
//! asleep on that bell; those must sleep again, still queued. Rounds, for `UFUTEX_STRESS_SECS`
//! (2 s when unset): 10 threads wait on two words of a one-bucket table (6 on `a`, 4 on `b`, so
//! every ring also wakes the other word's sleepers), and the test wakes them in partial steps.
//! The waiters are 2 processes × 5 threads in even rounds, and 10 threads of the waking process
//! itself in odd ones (whose kicks and rings come after the waker lets the lock go:
//! `park::Later`). After every step no more waiters have returned than wakes counted (a thread
//! a ring woke without a wake of its own would return too early), each step's wake takes as
//! many as it asked while enough are queued (nobody a ring woke left its queue), and at the end
//! every waiter returned exactly once (none timed out: no lost wakeup) and nobody is queued.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, reap, shared_anon};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared;

const LONG: Duration = Duration::from_secs(20);
/// Waiters per round on each word: (on `a`, on `b`), over two processes.
const ON: [u32; 2] = [6, 4];
/// Each round's wakes, in order: (word, how many). A waker rings when it takes at least half
/// the bell's sleepers (`park::Ring`): the first two steps ring (5 of 10, then 3 of 5), waking
/// 5 and then 2 threads they did not take; the last two wake one thread each on its own word.
const STEPS: [(usize, u32); 4] = [(0, 5), (1, 3), (0, 1), (1, 1)];

/// A process of waiters: `n[i]` threads wait on `words[i]`, each adding 1 to `returned[i]` when
/// woken (`common::shared_waiters`).
fn waiters(words: [&'static AtomicU32; 2], returned: [&'static AtomicU32; 2], n: [u32; 2]) -> i32 {
    let pairs = (0..2).flat_map(|i| (0..n[i]).map(move |_| (words[i], returned[i])));
    common::shared_waiters(pairs.collect(), LONG)
}

#[test]
fn a_ring_wakes_only_the_waiters_taken() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_SHARED_BUCKETS", "1");
    let p = shared_anon(4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned.
    let (words, returned): ([&AtomicU32; 2], [&AtomicU32; 2]) =
        unsafe { ([at(p, 64), at(p, 128)], [at(p, 192), at(p, 256)]) };
    assert_eq!(shared::wake(words[0], 1), Ok(0)); // map the table before forking
    let start = Instant::now();
    let mut rounds = 0;
    while rounds == 0 || start.elapsed() < Duration::from_secs(common::stress_secs()) {
        returned.iter().for_each(|r| r.store(0, Ordering::Relaxed));
        let ours = rounds % 2 == 1;
        let pids = if ours {
            Vec::new()
        } else {
            [0, 1].map(|k| child(move || waiters(words, returned, ON.map(|n| n / 2 + (n % 2) * (1 - k))))).to_vec()
        };
        let own = ours.then(|| std::thread::spawn(move || waiters(words, returned, ON)));
        let until = Instant::now() + LONG;
        for (i, w) in words.into_iter().enumerate() {
            let r = || returned.map(|r| r.load(Ordering::Relaxed));
            let what = || format!("round {rounds}: the waiters never all queued on word {i} ({:?} returned)", r());
            common::await_shared_queued(w, ON[i] as usize, until, what);
        }
        let mut taken = [0u32; 2];
        for (i, n) in STEPS {
            // A moment for the woken to return and the others to sleep again (not relied on).
            std::thread::sleep(Duration::from_millis(2));
            assert_eq!(shared::wake(words[i], n as usize), Ok(n as usize), "round {rounds}: waiters left their queue");
            taken[i] += n;
            for j in 0..2 {
                let r = returned[j].load(Ordering::Relaxed);
                assert!(r <= taken[j], "round {rounds}: {r} waiters on word {j} returned, {} taken", taken[j]);
            }
        }
        assert_eq!(taken, ON);
        for pid in pids {
            assert_eq!(reap(pid), 0, "round {rounds}: a waiter timed out or failed");
        }
        if let Some(own) = own {
            assert_eq!(own.join().unwrap(), 0, "round {rounds}: a waiter of ours timed out or failed");
        }
        assert_eq!(returned.map(|r| r.load(Ordering::Relaxed)), ON);
        for w in words {
            assert_eq!(shared::wake(w, usize::MAX), Ok(0), "a waiter left queued");
        }
        rounds += 1;
    }
    eprintln!("{rounds} rounds");
}
