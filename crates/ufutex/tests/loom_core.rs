//! loom models of the core protocol. Run with
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --test loom_core`.
//!
//! A waiter left parked forever shows up as a loom deadlock: that is a lost wakeup. Every model
//! also checks its counts (a wait that returns Ok was counted by exactly one waker) and that
//! nothing is left queued.
#![cfg(ufutex_loom)]

use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;
use ufutex::{Deadline, Domain, DomainConfig, Slots, WaitEntry, WaitError};

/// The model's futex words, in one 64-byte-aligned block so that their buckets do not depend on
/// where the allocator put them (see `Key::hash` under loom): a (4 bytes in) and b (8 bytes in)
/// land in different buckets of a 2-slot table; c shares a's bucket.
#[repr(C, align(64))]
struct Words {
    a: AtomicU32,
    b: AtomicU32,
    c: AtomicU32,
    a8: AtomicU8,
    b64: AtomicU64,
}

fn words() -> Arc<Words> {
    Arc::new(Words {
        a: AtomicU32::new(0),
        b: AtomicU32::new(0),
        c: AtomicU32::new(0),
        a8: AtomicU8::new(0),
        b64: AtomicU64::new(0),
    })
}

/// loom's model with room for the longer paths of the three-thread models.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 20_000;
    b.check(f);
}

fn domain(slots: usize) -> Arc<Domain> {
    Arc::new(Domain::new(DomainConfig::new().slots(Slots::Fixed(slots))).unwrap())
}

fn soon() -> Option<Deadline> {
    // Under loom the deadline's value does not matter: a timed park may give up at any point.
    Some(Duration::from_secs(1).into())
}

/// A thread that waits on `a` until it changes; returns how many of its waits returned Ok.
fn wait_until_changed(d: &Arc<Domain>, w: &Arc<Words>) -> thread::JoinHandle<usize> {
    let (d, w) = (d.clone(), w.clone());
    thread::spawn(move || {
        let mut oks = 0;
        while w.a.load(Ordering::Acquire) == 0 {
            if d.wait(&w.a, 0, None).is_ok() {
                oks += 1;
            }
        }
        oks
    })
}

/// A timed wait ends Ok exactly when a waker counted it; a timeout (or a value already
/// changed) exactly when none did.
fn check_timed(r: Result<(), WaitError>, woken: usize) {
    match r {
        Ok(()) => assert_eq!(woken, 1),
        Err(WaitError::TimedOut) | Err(WaitError::WouldBlock) => assert_eq!(woken, 0),
        Err(e) => panic!("unexpected {e:?}"),
    }
}

/// How a model's waker wakes `a` once it changed it: a wake, or a requeue that wakes — a waker
/// of its source word too, which looks at its bucket as a wake does (fence-free where
/// `membarrier` works, `requeue.rs`).
#[derive(Clone, Copy)]
enum Waker {
    Wake,
    Requeue,
}

impl Waker {
    /// Change `a`, then wake one of its waiters: how many were woken.
    fn change_and_wake(self, d: &Domain, w: &Words) -> usize {
        w.a.store(1, Ordering::Release);
        match self {
            Waker::Wake => d.wake(&w.a, 1),
            Waker::Requeue => d.requeue(&w.a, 1, &w.b, 1, 0).unwrap(),
        }
    }
}

/// (A)/(B): a waiter that saw the old value is either woken or sees the new value.
fn no_lost_wakeup_by(waker: Waker) {
    model(move || {
        let d = domain(2);
        let w = words();
        let waiter = wait_until_changed(&d, &w);
        let woken = waker.change_and_wake(&d, &w);
        let oks = waiter.join().unwrap();
        assert_eq!(oks, woken, "a wait returns Ok exactly when the waker counted it");
        assert_eq!(d.queued_waiters(), 0);
    });
}

#[test]
fn no_lost_wakeup() {
    no_lost_wakeup_by(Waker::Wake);
}

#[test]
fn a_requeue_wakes_like_a_wake() {
    no_lost_wakeup_by(Waker::Requeue);
}

/// A thread that first waits on `c` (a's bucket) with a deadline — a sleeper there turns the
/// bucket FENCED — then on `a` until it changes; returns (1 if the wait on `c` ended Ok, how many
/// waits on `a` did).
fn wait_on_c_then_until_a_changed(d: &Arc<Domain>, w: &Arc<Words>) -> thread::JoinHandle<(usize, usize)> {
    let (d, w) = (d.clone(), w.clone());
    thread::spawn(move || {
        let first = usize::from(d.wait(&w.c, 0, soon()).is_ok());
        let mut oks = 0;
        while w.a.load(Ordering::Acquire) == 0 {
            oks += usize::from(d.wait(&w.a, 0, None).is_ok());
        }
        (first, oks)
    })
}

/// The bucket's payer switch (`membarrier::Fence`): the waiter's first wait, on `c` (a's
/// bucket), times out and turns the bucket FENCED; its wait on `a` then skips the barrier,
/// while the waker stores and wakes `a` having read the bucket's mode at any point of the
/// switch. Never lost, counted once.
fn the_bucket_turns_fenced_under(waker: Waker) {
    model(move || {
        let d = domain(2);
        let w = words();
        let waiter = wait_on_c_then_until_a_changed(&d, &w);
        let woken = waker.change_and_wake(&d, &w);
        assert_eq!(waiter.join().unwrap(), (0, woken));
        assert_eq!(d.queued_waiters(), 0);
    });
}

#[test]
fn the_bucket_turns_fenced_under_a_waker() {
    the_bucket_turns_fenced_under(Waker::Wake);
}

/// The same with a requeue as the waker.
#[test]
fn the_bucket_turns_fenced_under_a_requeue() {
    the_bucket_turns_fenced_under(Waker::Requeue);
}

/// A FENCED bucket going back to FREE (a wake of `c`, nobody waiting on it, under loom always
/// sampled and stale) while the waiter's wait on `a` reads the mode before or after the change,
/// and a waker of `a` too. (loom's preemption bound of 2 does not reach the schedule in which
/// the change's Release matters; `membarrier::Fence` argues it.)
#[test]
fn the_bucket_turns_free_under_a_waiter() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiter = wait_on_c_then_until_a_changed(&d, &w);
        let (d3, w3) = (d.clone(), w.clone());
        let decayer = thread::spawn(move || d3.wake(&w3.c, 1));
        w.a.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 1);
        let (first, oks) = waiter.join().unwrap();
        assert_eq!(decayer.join().unwrap(), first, "the wake of c counted the wait on c iff it ended Ok");
        assert_eq!(oks, woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A timeout racing a wake: the wait returns Ok iff the wake counted it, never both lost.
#[test]
fn timeout_races_wake() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || d2.wait(&w2.a, 0, soon()));
        w.a.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 1);
        check_timed(waiter.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A wait and a waitv whose deadline has already passed, racing a store and a wake: they end
/// without queueing (TimedOut, or WouldBlock if the store came first), so the wake counts
/// nobody and nothing is left queued.
#[test]
fn a_passed_deadline_races_a_wake() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || {
            let passed = Some(Duration::ZERO.into());
            let one = d2.wait(&w2.a, 0, passed);
            let many = d2.waitv(&[WaitEntry::new(&w2.b, 0), WaitEntry::new(&w2.a, 0)], passed).map(|_| ());
            [one, many]
        });
        w.a.store(1, Ordering::Release);
        assert_eq!(d.wake(&w.a, usize::MAX), 0, "nobody queued");
        for r in waiter.join().unwrap() {
            assert!(matches!(r, Err(WaitError::TimedOut | WaitError::WouldBlock)), "{r:?}");
        }
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A timeout racing a requeue: a requeued waiter that times out leaves its new queue; one that
/// is woken through the target was counted there.
#[test]
fn timeout_races_requeue() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || d2.wait(&w2.a, 0, soon()));
        let moved = d.requeue(&w.a, 0, &w.b, 0, 1).unwrap();
        let woken = d.wake(&w.b, 1);
        assert!(moved <= 1 && woken <= moved);
        check_timed(waiter.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// Oks among the results of timed waits (a timeout is the other legal answer).
fn oks(results: impl IntoIterator<Item = Result<(), WaitError>>) -> usize {
    results
        .into_iter()
        .map(|r| match r {
            Ok(()) => 1,
            Err(WaitError::TimedOut) => 0,
            other => panic!("unexpected {other:?}"),
        })
        .sum()
}

/// Two timed waiters on `a`, their results.
fn two_timed_waiters(d: &Arc<Domain>, w: &Arc<Words>) -> [thread::JoinHandle<Result<(), WaitError>>; 2] {
    [0, 1].map(|_| {
        let (d, w) = (d.clone(), w.clone());
        thread::spawn(move || d.wait(&w.a, 0, soon()))
    })
}

/// Two waiters of one word form one group, whose first node gave the group its record. A
/// wake of one racing both timeouts: whichever leaves first (woken or timed out, the debtor
/// or not), each wait is counted by at most the one wake, and the records come out even
/// (a debtor leaving hands its debt on; a second record would be needed otherwise).
#[test]
fn timeouts_race_a_wake_of_one_of_a_group() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiters = two_timed_waiters(&d, &w);
        let woken = d.wake(&w.a, 1);
        let ok = oks(waiters.map(|h| h.join().unwrap()));
        assert_eq!(ok, woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A requeue of one of two waiters of a group (the group does not move whole: a single node
/// does) racing the timeout of the one it moves: the timed waiter, queued first, is the one
/// moved, and it must find its node wherever the requeue put it (one that took its node in
/// flight for woken would wait for an unpark forever: a loom deadlock). The other waiter stays
/// until the end, so that the group has two nodes when the requeue comes. (That window takes
/// three preemptions to reach: CI runs this model with three.)
#[test]
fn a_timeout_races_a_requeue_of_part_of_a_group() {
    model(|| {
        let d = domain(2);
        let w = words();
        let other = wait_until_changed(&d, &w);
        let (d2, w2) = (d.clone(), w.clone());
        let requeuer = thread::spawn(move || match d2.requeue(&w2.a, 0, &w2.b, 0, 1) {
            Err(WaitError::WouldBlock) => 0, // after the change below
            r => r.unwrap(),
        });
        let mine = d.wait(&w.a, 0, soon());
        w.a.store(1, Ordering::Release);
        w.b.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 2) + d.wake(&w.b, 2);
        let moved = requeuer.join().unwrap();
        assert!(moved <= 1);
        assert_eq!(oks([mine]) + other.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A requeue of a word onto itself (one woken, the rest counted where they are, as the kernel
/// leaves them) racing two waiters that queue and wait until the word changes: each waiter is
/// counted once at most, the one it wakes returns Ok, the ones it counts stay queued for the
/// wake after the change, and nothing is left queued.
#[test]
fn a_requeue_of_a_word_onto_itself_counts_its_waiters_in_place() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiters = [wait_until_changed(&d, &w), wait_until_changed(&d, &w)];
        let counted = d.requeue(&w.a, 0, &w.a, 1, 2).unwrap();
        w.a.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 2);
        assert!(counted <= 2);
        let oks: usize = waiters.map(|h| h.join().unwrap()).into_iter().sum();
        assert_eq!(oks, usize::from(counted > 0) + woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// The same racing two timed waiters' timeouts (under loom a timed park may give up at once).
#[test]
fn timeouts_race_a_requeue_of_a_word_onto_itself() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiters = two_timed_waiters(&d, &w);
        let counted = d.requeue(&w.a, 0, &w.a, 1, 2).unwrap();
        let woken = d.wake(&w.a, 2);
        assert!(counted <= 2 && usize::from(counted > 0) + woken <= 2);
        let ok = oks(waiters.map(|h| h.join().unwrap()));
        assert_eq!(ok, usize::from(counted > 0) + woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A requeue of a whole group (both waiters of `a` to `b`, in another bucket) racing both
/// timeouts: a waiter whose group moved finds it through the group's new key and bucket.
#[test]
fn timeouts_race_a_requeue_of_a_whole_group() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiters = two_timed_waiters(&d, &w);
        let moved = d.requeue(&w.a, 0, &w.b, 0, 2).unwrap();
        let woken = d.wake(&w.b, 2);
        assert!(woken <= moved && moved <= 2);
        let ok = oks(waiters.map(|h| h.join().unwrap()));
        assert_eq!(ok, woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A waiter requeued from a word that changed waits for its new word's wake: the change makes
/// it return WouldBlock only if it saw the change before it queued, and then nothing moved it.
#[test]
fn requeued_waiter_waits_for_its_new_word() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || d2.wait(&w2.a, 0, None));
        w.a.store(1, Ordering::Release);
        let moved = d.requeue(&w.a, 1, &w.b, 0, 1).unwrap();
        let woken = d.wake(&w.b, 1);
        match waiter.join().unwrap() {
            Ok(()) => assert_eq!((moved, woken), (1, 1)),
            Err(WaitError::WouldBlock) => assert_eq!((moved, woken), (0, 0)),
            other => panic!("unexpected {other:?} (moved {moved}, woken {woken})"),
        }
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A waitv woken by two wakers at once: every wake is counted, the result is the highest woken
/// index, and no unpark leaks into the thread's next wait.
#[test]
fn waitv_two_wakers() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || {
            let entries = [WaitEntry::new(&w2.a8, 0), WaitEntry::new(&w2.b64, 0)];
            let r = d2.waitv(&entries, None);
            // A fresh episode on a word nobody wakes must time out: nothing leaked.
            assert_eq!(d2.wait(&w2.c, 0, soon()), Err(WaitError::TimedOut));
            r
        });
        let (d3, w3) = (d.clone(), w.clone());
        let waker_b = thread::spawn(move || {
            w3.b64.store(1, Ordering::Release);
            d3.wake(&w3.b64, 1)
        });
        w.a8.store(1, Ordering::Release);
        let na = d.wake(&w.a8, 1);
        let nb = waker_b.join().unwrap();
        match waiter.join().unwrap() {
            Ok(1) => assert_eq!(nb, 1),
            Ok(0) => assert_eq!((na, nb), (1, 0)),
            Err(WaitError::WouldBlock) => assert_eq!(na + nb, 0),
            other => panic!("unexpected {other:?} (na {na}, nb {nb})"),
        }
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// Table growth racing a wait and a wake: the waiter is migrated, not lost.
#[test]
fn resize_races_wait_and_wake() {
    model(|| {
        let d = domain(2);
        let w = words();
        let waiter = wait_until_changed(&d, &w);
        let d3 = d.clone();
        let resizer = thread::spawn(move || d3.set_slots(Slots::Fixed(4)).unwrap());
        w.a.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 1);
        resizer.join().unwrap();
        assert_eq!(waiter.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
        assert_eq!(d.slots(), 4);
    });
}

/// A resize back to a retired table (reuse) racing a timed wait and a wake: the waiter is
/// found wherever it was moved.
#[test]
fn resize_back_races_timeout() {
    model(|| {
        let d = domain(2);
        d.set_slots(Slots::Fixed(4)).unwrap(); // the 2-slot table is now retired
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || d2.wait(&w2.a, 0, soon()));
        d.set_slots(Slots::Fixed(2)).unwrap(); // reuse the retired table
        w.a.store(1, Ordering::Release);
        let woken = d.wake(&w.a, 1);
        check_timed(waiter.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A resize racing a requeue: the moved waiter is found in the new table.
#[test]
fn resize_races_requeue() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || d2.wait(&w2.a, 0, soon()));
        let d3 = d.clone();
        let resizer = thread::spawn(move || d3.set_slots(Slots::Fixed(4)).unwrap());
        let moved = d.requeue(&w.a, 0, &w.b, 0, 1).unwrap();
        let woken = d.wake(&w.b, 1);
        resizer.join().unwrap();
        assert!(moved <= 1 && woken <= moved);
        check_timed(waiter.join().unwrap(), woken);
        assert_eq!(d.queued_waiters(), 0);
    });
}

/// A resize racing a waitv being woken: every node is migrated or dequeued, none lost.
#[test]
fn resize_races_waitv() {
    model(|| {
        let d = domain(2);
        let w = words();
        let (d2, w2) = (d.clone(), w.clone());
        let waiter = thread::spawn(move || {
            let entries = [WaitEntry::new(&w2.a, 0), WaitEntry::new(&w2.b, 0)];
            d2.waitv(&entries, None)
        });
        let d3 = d.clone();
        let resizer = thread::spawn(move || d3.set_slots(Slots::Fixed(4)).unwrap());
        w.b.store(1, Ordering::Release);
        let woken = d.wake(&w.b, 1);
        resizer.join().unwrap();
        match waiter.join().unwrap() {
            Ok(i) => assert_eq!((i, woken), (1, 1)),
            Err(WaitError::WouldBlock) => assert_eq!(woken, 0),
            Err(e) => panic!("unexpected {e:?}"),
        }
        assert_eq!(d.queued_waiters(), 0);
    });
}
